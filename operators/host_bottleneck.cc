#include "operators/host_bottleneck.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "operators/median.h"
#include "operators/persistence.h"
#include "operators/placement.h"
#include "operators/run_state.h"
#include "operators/straggler.h"

namespace runlens::ops {
namespace {

// A node's latest sample: its CPU utilization and, where the sender splits
// it (the SDK's /proc sampler, node_exporter), where the time goes.
struct NodeCpu {
  double cpu_pct = NAN;
  double user_pct = NAN, system_pct = NAN, iowait_pct = NAN, steal_pct = NAN;
  int64_t time_ns = 0;
  template <class Io>
  void fields(Io& io) {
    io(cpu_pct, user_pct, system_pct, iowait_pct, steal_pct, time_ns);
  }
};

double field_or_nan(const NodeSample& n, NodeSample::F f, double v) { return n.has(f) && std::isfinite(v) ? v : NAN; }

// One reading of a node's ranks at one step: the mean of a per-rank ratio,
// its worst rank, and how many ranks were read and were over the bar.
struct Reading {
  double sum = 0, worst = -1;
  int n = 0, over = 0;
  int32_t worst_rank = -1;
  void add(double ratio, int32_t rank, double bar) {
    sum += ratio, ++n;
    over += ratio >= bar;
    if (ratio > worst) worst = ratio, worst_rank = rank;
  }
  double mean() const { return n ? sum / n : 0; }
};

class HostBottleneck final : public runtime::state::Snapshottable<Record, HostBottleneck> {
 public:
  // Version 2: an open incident keeps the alert it raised, for its closing revision (ends_ns).
  // Version 3: rank entries (run_start, rank maps) carry gpu_model and node_type and the CPU split of its nodes' latest
  // samples.
  static constexpr runtime::state::StateType kState{"host_bottleneck", 3};
  HostBottleneck(const HostBottleneckOptions& o, const runtime::OperatorContext& ctx)
      : o_(o), placement_(ctx.partition, ctx.partitions) {}
  template <class Io>
  void state_fields(Io& io) {
    io(placement_, cpu_, incidents_);
  }

  void process(const Record& r, Emitter& out) override {
    switch (r.kind()) {
      case Kind::kRunStart:
        placement_.on_run_start(r.run_start());
        break;
      case Kind::kRunEnd: {
        Symbol run = r.as<RunEnd>().run_id;
        if (const auto* nodes = placement_.nodes_of(run)) {
          for (Symbol n : *nodes) {
            // The run's open incidents close with it.
            if (auto it = incidents_.find({run, n}); it != incidents_.end()) it->second.close(r.time_ns, out);
            incidents_.erase({run, n});
          }
        }
        placement_.on_run_end(run);
        break;
      }
      case Kind::kNode: {
        const NodeSample& n = r.as<NodeSample>();
        if (n.has(NodeSample::F::cpu_pct) && std::isfinite(n.cpu_pct)) {
          cpu_[n.node] = NodeCpu{n.cpu_pct,
                                 field_or_nan(n, NodeSample::F::cpu_user_pct, n.cpu_user_pct),
                                 field_or_nan(n, NodeSample::F::cpu_system_pct, n.cpu_system_pct),
                                 field_or_nan(n, NodeSample::F::cpu_iowait_pct, n.cpu_iowait_pct),
                                 field_or_nan(n, NodeSample::F::cpu_steal_pct, n.cpu_steal_pct),
                                 r.time_ns};
        }
        break;
      }
      case Kind::kStepRecord:
        on_step(r, out);
        break;
      default:
        break;
    }
  }

 private:
  // The run's median rank work time at this step (straggler_work_ms, as the
  // straggler detector scores ranks), or NaN when too few ranks report.
  static double median_work(const StepRecord& rec, std::vector<double>& scratch) {
    scratch.clear();
    for (const Step& s : rec.ranks) {
      if (std::isfinite(s.step_ms)) scratch.push_back(straggler_work_ms(s));
    }
    if (scratch.size() < 2) return NAN;
    return median_in_place(scratch);
  }

  void on_step(const Record& r, Emitter& out) {
    const StepRecord& rec = r.step_record();
    const auto* nodes = placement_.nodes_of(rec.run_id);
    if (!nodes) return;
    double median = NAN;  // computed once, for the first saturated node
    bool median_known = false;
    for (Symbol node : *nodes) {
      auto c = cpu_.find(node);
      bool cpu_high = c != cpu_.end() && r.time_ns - c->second.time_ns <= o_.max_sample_age_ns &&
                      c->second.cpu_pct >= o_.cpu_threshold_pct;
      // Two readings of a saturated host. Data wait: its ranks' loaders are
      // starved of CPU. Compute: in a DDP job the host's ranks launch their
      // kernels late, so they work slower than the run's median rank, in
      // bursts; several of them, or it is one slow GPU (a straggler).
      Reading wait, work;
      if (cpu_high) {
        if (!median_known && !rec.shed) median = median_work(rec, scratch_), median_known = true;
        bool judge_work = std::isfinite(median) && median >= o_.min_median_ms;
        for (int32_t rank : *placement_.ranks_on(rec.run_id, node)) {
          const Step* s = rank_report(rec, rank);
          if (!s || !(s->step_ms > 0) || !std::isfinite(s->step_ms)) continue;
          if (s->has(Step::F::data_wait_ms) && std::isfinite(s->data_wait_ms))
            wait.add(s->data_wait_ms / s->step_ms, rank, o_.data_wait_ratio);
          if (judge_work) work.add(straggler_work_ms(*s) / median, rank, 1 + o_.work_excess);
        }
      }
      bool wait_hit = cpu_high && wait.n > 0 && wait.mean() >= o_.data_wait_ratio;
      bool work_hit = cpu_high && work.n > 0 && work.mean() >= 1 + o_.work_excess && work.over >= std::min(2, work.n);
      bool hit = wait_hit || work_hit;
      // Most nodes, most of the time: nothing to observe and nothing to remember.
      auto it = incidents_.find({rec.run_id, node});
      if (it == incidents_.end()) {
        if (!hit) continue;
        it = incidents_.try_emplace({rec.run_id, node}, o_.persist_k, o_.persist_n).first;
      }
      Incident::Change change = it->second.observe(rec.step, hit);
      if (change == Incident::Change::kClosed) it->second.close(r.time_ns, out);
      if (!it->second.active() && it->second.hits() == 0) {
        incidents_.erase(it);
        continue;
      }
      if (change != Incident::Change::kOpened) continue;
      it->second.raise(make_alert(r, rec, node, c->second, wait_hit ? &wait : nullptr, work_hit ? &work : nullptr,
                                  it->second.onset()),
                       out);
    }
  }

  // The alert of a node that opened an incident at this step, with the
  // reading(s) that fired at it (at least one).
  Alert make_alert(const Record& r, const StepRecord& rec, Symbol node, const NodeCpu& cpu, const Reading* wait,
                   const Reading* work, int64_t onset) {
    Alert a;
    a.kind = alert_kind::kHostBottleneck;
    a.severity = Severity::kWarning;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = rec.run_id;
    a.step = rec.step;
    const Reading& lead = wait ? *wait : *work;  // names the most data-starved rank, else the slowest
    std::string where = locate_rank(a, placement_.run(rec.run_id), lead.worst_rank);
    a.node = node;
    a.value = cpu.cpu_pct;
    a.threshold = o_.cpu_threshold_pct;
    std::string split;
    auto part = [&](const char* name, double v) {
      if (std::isnan(v)) return;
      split += (split.empty() ? " (" : ", ") + fmt_num(v, "%.0f") + " % " + name;
    };
    part("user", cpu.user_pct);
    part("system", cpu.system_pct);
    part("iowait", cpu.iowait_pct);
    part("steal", cpu.steal_pct);
    if (!split.empty()) split += ")";
    std::string what;
    if (wait) {
      what = "its " + std::to_string(wait->n) + " ranks wait for data " + fmt_num(100 * wait->mean(), "%.0f") +
             " % of each step (worst: " + (wait == &lead ? where : "rank " + std::to_string(wait->worst_rank)) + ", " +
             fmt_num(100 * wait->worst, "%.0f") + " %)";
    }
    if (work) {
      std::string worst = work == &lead ? where : "rank " + std::to_string(work->worst_rank);
      what += std::string(what.empty() ? "its " : " and its ") + std::to_string(work->n) + " ranks work " +
              fmt_num(work->mean(), "%.2f") + "x the run's median rank (" + std::to_string(work->over) +
              " of them over " + fmt_num(1 + o_.work_excess, "%.2f") + "x; worst: " + worst + ", " +
              fmt_num(work->worst, "%.2f") + "x): kernels launch late";
    }
    a.summary = "HOST BOTTLENECK: node " + node.string() + " CPU at " + fmt_num(cpu.cpu_pct) + " %" + split +
                " while " + what + ", since step " + std::to_string(onset);
    a.attrs = {{"cpu_pct", cpu.cpu_pct}};
    auto attr = [&](const char* key, double v) {
      if (!std::isnan(v)) a.attrs.emplace_back(key, v);
    };
    attr("cpu_user_pct", cpu.user_pct);
    attr("cpu_system_pct", cpu.system_pct);
    attr("cpu_iowait_pct", cpu.iowait_pct);
    attr("cpu_steal_pct", cpu.steal_pct);
    if (wait) {
      attr("data_wait_ratio", wait->mean());
      attr("worst_data_wait_ratio", wait->worst);
    }
    if (work) {
      attr("work_ratio", work->mean());
      attr("worst_work_ratio", work->worst);
      attr("slow_ranks", work->over);
    }
    attr("node_ranks", static_cast<double>(lead.n));
    attr("onset_step", static_cast<double>(onset));
    a.alert_id = make_alert_id(a, onset);
    return a;
  }

  struct RunNode {
    Symbol run, node;
    bool operator==(const RunNode&) const = default;
    template <class Io>
    void fields(Io& io) {
      io(run, node);
    }
  };
  struct RunNodeHash {
    size_t operator()(const RunNode& k) const { return std::hash<Symbol>()(k.run) * 31 + std::hash<Symbol>()(k.node); }
  };

  HostBottleneckOptions o_;
  NodePlacement placement_;
  runtime::state::KeyedState<Symbol, NodeCpu> cpu_;  // owned nodes' latest sample
  runtime::state::KeyedState<RunNode, Incident, RunNodeHash> incidents_;
  std::vector<double> scratch_;  // not state: rebuilt for every step
};

class HostBottleneckDef final : public OperatorDef {
 public:
  explicit HostBottleneckDef(HostBottleneckOptions o) : o_(o) {}
  bool partitioned() const override { return true; }
  std::optional<uint64_t> key(const Record& r) const override {
    if (r.kind() == Kind::kNode) return node_key(r.as<NodeSample>().node);
    return std::nullopt;  // run_start, run_end, step records: every partition
  }
  std::unique_ptr<Operator> open(const runtime::OperatorContext& ctx) const override {
    return std::make_unique<HostBottleneck>(o_, ctx);
  }
  std::string describe() const override {
    return "cpu_threshold=" + fmt_num(o_.cpu_threshold_pct, "%g") +
           " data_wait_ratio=" + fmt_num(o_.data_wait_ratio, "%g") + " work_excess=" + fmt_num(o_.work_excess, "%g") +
           " persist=" + std::to_string(o_.persist_k) + "/" + std::to_string(o_.persist_n);
  }

 private:
  HostBottleneckOptions o_;
};

}  // namespace

std::unique_ptr<OperatorDef> MakeHostBottleneck(const HostBottleneckOptions& options) {
  return std::make_unique<HostBottleneckDef>(options);
}

void RegisterHostBottleneck(Registry& registry) {
  ComponentInfo info;
  info.type = "host_bottleneck";
  info.role = Role::kOperator;
  info.doc =
      "Raises `host_bottleneck` for a node whose cpu_pct is at or above `cpu_threshold` while its ranks of a run "
      "wait for data (mean data_wait_ms / step_ms at or above `data_wait_ratio`) or compute slower than the run's "
      "median rank (mean work / median at or above 1 + `work_excess`, two of them or more over it: a contended "
      "host in a DDP job launches its kernels late) in `persist_k` of the last `persist_n` steps, naming the node, "
      "its most data-starved (or slowest) rank, the reading that fired and the node's CPU split. Partitioned by "
      "node.";
  const HostBottleneckOptions defaults;  // each default is written once, in HostBottleneckOptions
  info.params = {
      {.name = "cpu_threshold",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.cpu_threshold_pct),
       .doc = "Node CPU utilization (%) at or above which the host counts as saturated.",
       .min = 0,
       .max = 100},
      {.name = "data_wait_ratio",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.data_wait_ratio),
       .doc = "Mean data_wait_ms / step_ms of the node's ranks at or above which they count as waiting for data.",
       .min = 0,
       .max = 1},
      {.name = "work_excess",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.work_excess),
       .doc = "The compute reading: the node's ranks count as computing slower when the mean of their work / the run's "
              "median rank's work is at or above 1 + this, with at least two of them (a one-rank node: its rank) over "
              "that bar.",
       .min = 0,
       .max = 10},
      {.name = "min_median_ms",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.min_median_ms),
       .doc = "Steps whose median rank works less than this (ms) are too short to judge the compute reading on.",
       .min = 0},
      {.name = "max_sample_age",
       .type = ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.max_sample_age_ns),
       .doc = "A node sample older than this (event time) no longer describes the node.",
       .min = 0},
      {.name = "persist_k",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_k),
       .doc = "Steps within the window that must be host-bound.",
       .min = 1,
       .max = 1e6},
      {.name = "persist_n",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_n),
       .doc = "Window length in steps; also the steps without that re-arm the node.",
       .min = 1,
       .max = 1e6},
  };
  info.accepts = mask(Kind::kRunStart) | mask(Kind::kNode) | mask(Kind::kRunEnd) | mask(Kind::kStepRecord);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    HostBottleneckOptions o;
    o.cpu_threshold_pct = ctx.params->get_double("cpu_threshold");
    o.data_wait_ratio = ctx.params->get_double("data_wait_ratio");
    o.work_excess = ctx.params->get_double("work_excess");
    o.min_median_ms = ctx.params->get_double("min_median_ms");
    o.max_sample_age_ns = ctx.params->get_duration_ns("max_sample_age");
    o.persist_k = ctx.params->get_int("persist_k");
    o.persist_n = ctx.params->get_int("persist_n");
    if (o.persist_k > o.persist_n) {
      ctx.fail("persist_k", "persist_k (" + std::to_string(o.persist_k) + ") must not exceed persist_n (" +
                                std::to_string(o.persist_n) + ")");
    }
    return MakeHostBottleneck(o);
  });
}

}  // namespace runlens::ops
