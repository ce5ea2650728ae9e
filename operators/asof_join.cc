#include "operators/asof_join.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <unordered_map>

#include "operators/placement.h"
#include "operators/ring.h"
#include "operators/rules/rule_tree.h"
#include "operators/run_state.h"
#include "schema/symbol_index.h"

namespace runlens::ops {

namespace {

constexpr size_t kMaxSamples = 64;
constexpr int32_t kMaxGpusPerNode = 1024;

struct GpuPoint {
  int64_t time = 0;
  double temp_c = NAN, sm_clock_mhz = NAN, util_pct = NAN, power_w = NAN, power_limit_w = NAN;
  double throttle_reasons = NAN, mem_used_bytes = NAN, mem_total_bytes = NAN;
  template <class Io>
  void fields(Io& io) {
    io(time, temp_c, sm_clock_mhz, util_pct, power_w, power_limit_w, throttle_reasons, mem_used_bytes, mem_total_bytes);
  }
};

struct NodePoint {
  int64_t time = 0;
  double cpu_pct = NAN, net_rx_bps = NAN, net_tx_bps = NAN;
  int64_t tcp_retransmits_total = -1, rdma_errors_total = -1;
  template <class Io>
  void fields(Io& io) {
    io(time, cpu_pct, net_rx_bps, net_tx_bps, tcp_retransmits_total, rdma_errors_total);
  }
};

struct NodeState {
  std::vector<Ring<GpuPoint>> gpus;  // by GPU index
  Ring<NodePoint> samples;
  // By GPU index, at most the time of that ring's first sample (its oldest):
  // a ring is trimmed by time only when this bound says it may need it, so
  // a sample does not read the ring's far end, a cache miss, every time.
  // Not state: unknown (the lowest time) after a restore.
  std::vector<int64_t> oldest;
  template <class Io>
  void fields(Io& io) {
    io(gpus, samples);
  }
};

// An alert published with its as-of context, waiting while a later sample
// could still be nearer.
struct Held {
  int64_t deadline;
  uint64_t seq;
  std::shared_ptr<const Alert> alert;      // as it came in
  std::shared_ptr<const Alert> published;  // as published (its as-of context)
  Symbol node;
  std::optional<int32_t> gpu;
  template <class Io>
  void fields(Io& io) {
    io(deadline, seq, alert, published, node, gpu);
  }
};
struct HeldAfter {
  bool operator()(const Held& a, const Held& b) const {
    return a.deadline != b.deadline ? a.deadline > b.deadline : a.seq > b.seq;
  }
};

template <class Window>
void trim(Window& ring, int64_t now, int64_t history) {
  while (!ring.empty() && (ring.front().time < now - history || ring.size() > kMaxSamples)) ring.pop_front();
}

// As trim(), for a GPU's ring: the same samples are kept, and the ring's
// first sample is read only when `oldest` (a bound on its time that only
// rises) is older than the history kept.
void trim_gpu(Ring<GpuPoint>& ring, int64_t& oldest, int64_t now, int64_t history) {
  while (ring.size() > kMaxSamples) ring.pop_front();
  while (!ring.empty() && oldest < now - history) {
    oldest = ring.front().time;
    if (oldest >= now - history) break;
    ring.pop_front();
  }
}

// A counter's increase (a decrease is a reset: the increase is the new total).
int64_t increase(int64_t previous, int64_t current) { return current >= previous ? current - previous : current; }

bool enriches(const AsofJoinOptions& o, const Alert& a) {
  if (a.kind == alert_kind::kDiagnosis) return false;
  return o.kinds.empty() || std::find(o.kinds.begin(), o.kinds.end(), a.kind) != o.kinds.end();
}

class AsofJoin final : public runtime::state::Snapshottable<Record, AsofJoin> {
 public:
  // Version 3: a held alert was published already, and keeps what was published.
  // Version 4: the last publication of each enriched alert (for its closing
  // revision); alerts keep their revision and ends_ns.
  // Version 5: rank entries (run_start, rank maps) carry gpu_model and node_type.
  static constexpr runtime::state::StateType kState{"asof_join", 5};
  AsofJoin(const AsofJoinOptions& o, const runtime::OperatorContext& ctx) : o_(o), ctx_(ctx) {}
  // The held alerts are state: a restored instance releases them at their deadlines.
  template <class Io>
  void state_fields(Io& io) {
    io(nodes_, runs_, held_, seq_, published_, ended_);
    if constexpr (runtime::state::kReading<Io>) {
      index_.clear();
      if (!std::is_heap(held_.begin(), held_.end(), HeldAfter())) io.fail("the held alerts are not a heap");
      for (const Held& h : held_) {
        if (!h.alert || !h.published) io.fail("a held alert is null");
      }
    }
  }

  void process(const Record& r, Emitter& out) override {
    release_until(r.time_ns, out);
    switch (r.kind()) {
      case Kind::kGpu:
        on_gpu(r);
        break;
      case Kind::kNode:
        on_node(r);
        break;
      case Kind::kRunStart:
        runs_[r.run_start().run_id] = RunInfo::from(r.run_start());
        break;
      case Kind::kRunEnd:
        release_run(r.as<RunEnd>().run_id, r.time_ns, out);
        runs_.erase(r.as<RunEnd>().run_id);
        // Its alerts' closing revisions (the detectors close at the run's end)
        // may still come at this event time: forgotten once the watermark passes it.
        ended_[r.as<RunEnd>().run_id] = r.time_ns;
        break;
      case Kind::kEvent:
        // A job that stops closes its windows: its held alerts are refined now.
        if (stops_run(r.as<Occurrence>())) release_run(r.as<Occurrence>().run_id, r.time_ns, out);
        break;
      case Kind::kAlert:
        on_alert(r, out);
        break;
      default:
        break;
    }
  }
  void on_watermark(int64_t wm, Emitter& out) override {
    release_until(wm, out);
    forget_ended(wm);
  }
  void finish(Emitter& out) override { release_until(runtime::kEndOfTime, out); }

 private:
  bool owns(Symbol node) const {
    return ctx_.partitions <= 1 ||
           node_key(node) % static_cast<uint64_t>(ctx_.partitions) == static_cast<uint64_t>(ctx_.partition);
  }

  void on_gpu(const Record& r) {
    const Gpu& g = r.as<Gpu>();
    if (g.gpu < 0 || g.gpu >= kMaxGpusPerNode) return;
    NodeState& ns = node_state(g.node);
    if (ns.gpus.size() <= static_cast<size_t>(g.gpu)) ns.gpus.resize(static_cast<size_t>(g.gpu) + 1);
    if (ns.oldest.size() < ns.gpus.size()) ns.oldest.resize(ns.gpus.size(), std::numeric_limits<int64_t>::min());
    GpuPoint p;
    p.time = r.time_ns;
    auto f = [&](Gpu::F field, double v, double* dst) {
      if (g.has(field)) *dst = v;
    };
    f(Gpu::F::temp_c, g.temp_c, &p.temp_c);
    f(Gpu::F::sm_clock_mhz, g.sm_clock_mhz, &p.sm_clock_mhz);
    f(Gpu::F::util_pct, g.util_pct, &p.util_pct);
    f(Gpu::F::power_w, g.power_w, &p.power_w);
    f(Gpu::F::power_limit_w, g.power_limit_w, &p.power_limit_w);
    f(Gpu::F::throttle_reasons, static_cast<double>(g.throttle_reasons), &p.throttle_reasons);
    f(Gpu::F::mem_used_bytes, static_cast<double>(g.mem_used_bytes), &p.mem_used_bytes);
    f(Gpu::F::mem_total_bytes, static_cast<double>(g.mem_total_bytes), &p.mem_total_bytes);
    auto& ring = ns.gpus[static_cast<size_t>(g.gpu)];
    // The oldest leaves before the new sample joins (trim_gpu would drop it
    // after): a full ring keeps kMaxSamples slots, not twice as many.
    if (ring.size() >= kMaxSamples) ring.pop_front();
    ring.push_back(p);
    trim_gpu(ring, ns.oldest[static_cast<size_t>(g.gpu)], r.time_ns, o_.history_ns);
  }

  // A node's state, through an index by its symbol id (every sample looks one
  // up). nodes_ never erases and its elements never move; the index is
  // dropped when a snapshot is restored.
  NodeState& node_state(Symbol node) {
    return remembered(index_.slot(node), [&]() -> NodeState& { return nodes_[node]; });
  }

  void on_node(const Record& r) {
    const NodeSample& n = r.as<NodeSample>();
    NodeState& ns = node_state(n.node);
    NodePoint p;
    p.time = r.time_ns;
    if (n.has(NodeSample::F::cpu_pct)) p.cpu_pct = n.cpu_pct;
    if (n.has(NodeSample::F::net_rx_bps)) p.net_rx_bps = n.net_rx_bps;
    if (n.has(NodeSample::F::net_tx_bps)) p.net_tx_bps = n.net_tx_bps;
    if (n.has(NodeSample::F::tcp_retransmits_total)) p.tcp_retransmits_total = n.tcp_retransmits_total;
    if (n.has(NodeSample::F::rdma_errors_total)) p.rdma_errors_total = n.rdma_errors_total;
    if (ns.samples.size() >= kMaxSamples) ns.samples.pop_front();  // as for a GPU's ring
    ns.samples.push_back(p);
    trim(ns.samples, r.time_ns, o_.history_ns);
  }

  void on_alert(const Record& r, Emitter& out) {
    auto alert = std::get<std::shared_ptr<const Alert>>(r.body);
    const Alert& a = *alert;
    if (a.ends_ns && on_close(r, a, out)) return;
    Symbol node = a.node;
    std::optional<int32_t> gpu = a.gpu;
    if (node.empty() && a.rank && enriches(o_, a)) {
      // Sent to every partition: the one that owns the rank's node answers.
      if (auto run = runs_.find(a.run_id); run != runs_.end()) {
        if (const RankPlacement* p = run->second->place(*a.rank); p && !p->node.empty()) {
          node = p->node;
          if (p->gpu >= 0) gpu = p->gpu;
        }
      }
      if (node.empty() ? ctx_.partition != 0 : !owns(node)) return;
    }
    if (node.empty() || !enriches(o_, a) || a.ends_ns) {  // a closing revision not enriched here passes as it is
      out.emit(r);
      return;
    }
    // Alert now: published at once with the context delivered so far (the
    // as-of samples); refine later: held while a later sample could still be
    // nearer than the as-of one.
    Record now = enrich(r, alert, node, gpu);
    if (auto prev = published_.find(a.alert_id); a.revision > 0 && prev != published_.end()) {
      // A detector's own revision of an alert published here (a straggler that
      // escalated): it supersedes the held one and follows what was published.
      drop_held(a.alert_id);
      if (prev->second->revision >= a.revision) {
        auto next = std::make_shared<Alert>(now.alert());
        next->revision = prev->second->revision + 1;
        now.body = std::shared_ptr<const Alert>(std::move(next));
      }
    }
    int64_t t = a.time_ns;
    int64_t age = -1;
    if (gpu) {
      if (const GpuPoint* g = as_of(gpu_ring(node, *gpu), t)) age = std::max(age, t - g->time);
    }
    if (const NodePoint* n = as_of(node_ring(node), t)) age = std::max(age, t - n->time);
    int64_t wait = age < 0 ? o_.lookahead_ns : std::min(o_.lookahead_ns, age);
    auto published = std::get<std::shared_ptr<const Alert>>(now.body);
    published_[a.alert_id] = published;
    out.emit(std::move(now));
    if (wait <= 0) return;
    held_.push_back(Held{r.time_ns + wait, seq_++, alert, std::move(published), node, gpu});
    std::push_heap(held_.begin(), held_.end(), HeldAfter());
  }

  // Forgets the held (not yet refined) publication of `alert_id`, if any.
  void drop_held(const std::string& alert_id) {
    auto it = std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.alert->alert_id == alert_id; });
    if (it == held_.end()) return;
    *it = std::move(held_.back());
    held_.pop_back();
    std::make_heap(held_.begin(), held_.end(), HeldAfter());
  }

  // The closing revision of an alert this partition enriched: refined now if
  // it is still held, then published as the closing revision of what was
  // published last (its context kept, revision + 1). True when it was one.
  bool on_close(const Record& r, const Alert& a, Emitter& out) {
    auto it = published_.find(a.alert_id);
    if (it == published_.end()) return false;
    for (size_t i = 0; i < held_.size(); ++i) {
      if (held_[i].alert->alert_id != a.alert_id) continue;
      Held h = std::move(held_[i]);
      held_[i] = std::move(held_.back());
      held_.pop_back();
      std::make_heap(held_.begin(), held_.end(), HeldAfter());
      refine(h, r.time_ns, out);
      break;
    }
    Record close = closing_record(*it->second, *a.ends_ns);
    published_.erase(a.alert_id);
    out.emit(std::move(close));
    return true;
  }

  void release_until(int64_t t, Emitter& out) {
    while (!held_.empty() && held_.front().deadline <= t) {
      std::pop_heap(held_.begin(), held_.end(), HeldAfter());
      Held h = std::move(held_.back());
      held_.pop_back();
      refine(h, h.deadline, out);
    }
  }

  // The run stopped (run_end, a failure): its held alerts are refined now, in
  // the order of their deadlines, with the samples delivered by `at`.
  void release_run(Symbol run, int64_t at, Emitter& out) {
    std::vector<Held> due;
    for (size_t i = 0; i < held_.size();) {
      if (held_[i].alert->run_id == run) {
        due.push_back(std::move(held_[i]));
        held_[i] = std::move(held_.back());
        held_.pop_back();
      } else {
        ++i;
      }
    }
    if (due.empty()) return;
    std::make_heap(held_.begin(), held_.end(), HeldAfter());
    std::sort(due.begin(), due.end(), [](const Held& a, const Held& b) { return HeldAfter()(b, a); });
    for (Held& h : due) refine(h, at, out);
  }

  // Publishes the alert again (same alert_id, revision + 1, its own time_ns)
  // when the nearest samples now change its attrs.
  void refine(const Held& h, int64_t at, Emitter& out) {
    Record r;
    r.time_ns = at;
    r.tenant = h.alert->tenant;
    r.body = h.alert;
    Record refined = enrich(r, h.alert, h.node, h.gpu);
    const Alert& a = refined.alert();
    if (a.attrs == h.published->attrs) return;
    auto next = std::make_shared<Alert>(a);
    next->revision = h.published->revision + 1;
    std::shared_ptr<const Alert> p = std::move(next);
    if (auto it = published_.find(p->alert_id); it != published_.end()) it->second = p;
    refined.body = p;
    out.emit(std::move(refined));
  }

  // Runs that ended before the watermark: their alerts' closing revisions
  // (if any still come) pass through as they are.
  void forget_ended(int64_t wm) {
    for (auto e = ended_.begin(); e != ended_.end();) {
      if (e->second >= wm) {
        ++e;
        continue;
      }
      for (auto it = published_.begin(); it != published_.end();) {
        it = it->second->run_id == e->first ? published_.erase(it) : std::next(it);
      }
      e = ended_.erase(e);
    }
  }

  const Ring<GpuPoint>* gpu_ring(Symbol node, int32_t gpu) const {
    auto it = nodes_.find(node);
    if (it == nodes_.end() || gpu < 0 || static_cast<size_t>(gpu) >= it->second.gpus.size()) return nullptr;
    return &it->second.gpus[static_cast<size_t>(gpu)];
  }
  const Ring<NodePoint>* node_ring(Symbol node) const {
    auto it = nodes_.find(node);
    return it == nodes_.end() ? nullptr : &it->second.samples;
  }

  // The latest sample at or before t within the tolerance.
  template <class P>
  const P* as_of(const Ring<P>* ring, int64_t t) const {
    if (!ring) return nullptr;
    for (auto it = ring->rbegin(); it != ring->rend(); ++it) {
      if (it->time <= t) return t - it->time <= o_.tolerance_ns ? &*it : nullptr;
    }
    return nullptr;
  }
  // The sample nearest to t: the as-of one, or the first after t within the
  // lookahead when it is nearer (a tie goes to the earlier).
  template <class P>
  const P* nearest(const Ring<P>* ring, int64_t t) const {
    const P* before = as_of(ring, t);
    if (!ring || o_.lookahead_ns <= 0) return before;
    for (const P& p : *ring) {
      if (p.time <= t) continue;
      if (p.time - t > o_.lookahead_ns) break;
      if (!before || p.time - t < t - before->time) return &p;
      break;
    }
    return before;
  }

  Record enrich(const Record& r, const std::shared_ptr<const Alert>& alert, Symbol node, std::optional<int32_t> gpu) {
    auto a = std::make_shared<Alert>(*alert);
    int64_t t = alert->time_ns;
    auto add = [&](const char* key, double v) {
      if (std::isnan(v)) return;
      for (const auto& [k, x] : a->attrs) {
        if (k == key) return;
      }
      a->attrs.emplace_back(key, v);
    };
    auto it = nodes_.find(node);
    if (it != nodes_.end()) {
      const NodeState& ns = it->second;
      if (gpu) {
        if (const GpuPoint* g = nearest(gpu_ring(node, *gpu), t)) {
          add("gpu_temp_c", g->temp_c);
          add("gpu_sm_clock_mhz", g->sm_clock_mhz);
          add("gpu_util_pct", g->util_pct);
          add("gpu_power_w", g->power_w);
          add("gpu_power_limit_w", g->power_limit_w);
          add("gpu_throttle_reasons", g->throttle_reasons);
          add("gpu_mem_used_bytes", g->mem_used_bytes);
          add("gpu_mem_total_bytes", g->mem_total_bytes);
          add("gpu_sample_offset_s", static_cast<double>(g->time - t) / 1e9);
        }
        // The node's other GPUs at the same time: what this one should look like.
        std::vector<double> temps, clocks;
        for (size_t i = 0; i < ns.gpus.size(); ++i) {
          if (static_cast<int32_t>(i) == *gpu) continue;
          if (const GpuPoint* g = nearest(&ns.gpus[i], t)) {
            if (!std::isnan(g->temp_c)) temps.push_back(g->temp_c);
            if (!std::isnan(g->sm_clock_mhz)) clocks.push_back(g->sm_clock_mhz);
          }
        }
        add("gpu_peer_temp_c", median(temps));
        add("gpu_peer_sm_clock_mhz", median(clocks));
      }
      if (const NodePoint* n = nearest(&ns.samples, t)) {
        add("node_cpu_pct", n->cpu_pct);
        add("node_net_rx_bps", n->net_rx_bps);
        add("node_net_tx_bps", n->net_tx_bps);
        // Counter rates from the sample before it.
        const NodePoint* prev = nullptr;
        for (const NodePoint& p : ns.samples) {
          if (&p == n) break;
          prev = &p;
        }
        if (prev && n->time > prev->time) {
          double dt = static_cast<double>(n->time - prev->time) / 1e9;
          if (n->tcp_retransmits_total >= 0 && prev->tcp_retransmits_total >= 0) {
            add("node_tcp_retransmits_per_s",
                static_cast<double>(increase(prev->tcp_retransmits_total, n->tcp_retransmits_total)) / dt);
          }
          if (n->rdma_errors_total >= 0 && prev->rdma_errors_total >= 0) {
            add("node_rdma_errors_per_s",
                static_cast<double>(increase(prev->rdma_errors_total, n->rdma_errors_total)) / dt);
          }
        }
        add("node_sample_offset_s", static_cast<double>(n->time - t) / 1e9);
      }
    }
    Record out;
    out.time_ns = r.time_ns;
    out.tenant = r.tenant;
    out.body = std::shared_ptr<const Alert>(std::move(a));
    return out;
  }

  static double median(std::vector<double>& v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }

  AsofJoinOptions o_;
  runtime::OperatorContext ctx_;
  runtime::state::KeyedState<Symbol, NodeState> nodes_;
  SymbolIndex<NodeState*> index_;  // node_state()
  runtime::state::KeyedState<Symbol, std::shared_ptr<const RunInfo>> runs_;
  std::vector<Held> held_;  // a heap by HeldAfter
  uint64_t seq_ = 0;
  // The last publication of each enriched alert not yet closed, by alert_id.
  runtime::state::KeyedState<std::string, std::shared_ptr<const Alert>> published_;
  runtime::state::KeyedState<Symbol, int64_t> ended_;  // runs that ended, and when (event time)
};

class AsofJoinDef final : public OperatorDef {
 public:
  explicit AsofJoinDef(AsofJoinOptions o) : o_(std::move(o)) {}
  bool partitioned() const override { return true; }
  std::optional<uint64_t> key(const Record& r) const override {
    switch (r.kind()) {
      case Kind::kGpu:
        return node_key(r.as<Gpu>().node);
      case Kind::kNode:
        return node_key(r.as<NodeSample>().node);
      case Kind::kAlert: {
        const Alert& a = r.alert();
        if (!enriches(o_, a)) return 0;
        if (!a.node.empty()) return node_key(a.node);
        if (a.rank) return std::nullopt;
        return 0;
      }
      default:
        return std::nullopt;  // run_start, run_end: every partition keeps the rank maps
    }
  }
  std::unique_ptr<Operator> open(const runtime::OperatorContext& ctx) const override {
    return std::make_unique<AsofJoin>(o_, ctx);
  }
  std::string describe() const override {
    std::string k;
    for (const auto& s : o_.kinds) k += (k.empty() ? "" : ",") + s;
    return "tolerance=" + runtime::format_duration(o_.tolerance_ns) +
           " lookahead=" + runtime::format_duration(o_.lookahead_ns) + (k.empty() ? "" : " kinds=" + k);
  }

 private:
  AsofJoinOptions o_;
};

}  // namespace

std::unique_ptr<OperatorDef> MakeAsofJoin(const AsofJoinOptions& options) {
  return std::make_unique<AsofJoinDef>(options);
}

void RegisterAsofJoin(Registry& registry) {
  ComponentInfo info;
  info.type = "asof_join";
  info.role = Role::kOperator;
  info.doc =
      "Attaches to each per-rank alert the sample of its GPU and node (from its locators or the run_start rank map) "
      "nearest in event time, as attrs (gpu_temp_c, gpu_sm_clock_mhz, gpu_util_pct, gpu_throttle_reasons, "
      "gpu_peer_sm_clock_mhz, node_cpu_pct, node_tcp_retransmits_per_s, ...; docs/alerts.md): published at once "
      "with the latest at or before the alert within `tolerance`, and again (same alert_id, revision + 1) when a "
      "later one within `lookahead` is nearer and changes the attrs. Other rows pass through unchanged.";
  const AsofJoinOptions defaults;  // each default is written once, in AsofJoinOptions
  info.params = {
      {.name = "tolerance",
       .type = ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.tolerance_ns),
       .doc = "Oldest sample (before the alert) that may be attached.",
       .min = 0.001},
      {.name = "lookahead",
       .type = ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.lookahead_ns),
       .doc = "How long after the alert (event time) a nearer sample may still refine it (a revision); 0: as-of only.",
       .min = 0},
      {.name = "history",
       .type = ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.history_ns),
       .doc = "Event time of samples kept per GPU and node (at most 64 samples).",
       .min = 1},
      {.name = "kinds",
       .type = ParamType::kStringList,
       .default_value = runtime::list_text(defaults.kinds),
       .doc = "Alert kinds to enrich; empty: every kind but diagnosis."},
  };
  info.accepts = mask(Kind::kRunStart) | mask(Kind::kRunEnd) | mask(Kind::kGpu) | mask(Kind::kNode) |
                 mask(Kind::kAlert) | mask(Kind::kEvent);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    AsofJoinOptions o;
    o.tolerance_ns = ctx.params->get_duration_ns("tolerance");
    o.lookahead_ns = ctx.params->get_duration_ns("lookahead");
    o.history_ns = ctx.params->get_duration_ns("history");
    o.kinds = ctx.params->get_list("kinds");
    if (o.history_ns < o.tolerance_ns + o.lookahead_ns) {
      ctx.fail("history", "history (" + runtime::format_duration(o.history_ns) +
                              ") must cover tolerance + lookahead (" +
                              runtime::format_duration(o.tolerance_ns + o.lookahead_ns) + ")");
    }
    for (const auto& k : o.kinds) {
      const auto& kKinds = rules::alert_kinds();
      if (std::find(kKinds.begin(), kKinds.end(), k) == kKinds.end()) {
        std::string hint = runtime::closest_match(k, kKinds);
        ctx.fail("kinds",
                 "unknown alert kind '" + k + "' in kinds" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
      }
    }
    return MakeAsofJoin(o);
  });
}

}  // namespace runlens::ops
