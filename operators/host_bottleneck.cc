#include "operators/host_bottleneck.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "operators/persistence.h"
#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {
namespace {

struct NodeCpu {
  double cpu_pct = NAN;
  int64_t time_ns = 0;
  template <class Io>
  void fields(Io& io) {
    io(cpu_pct, time_ns);
  }
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
        if (n.has(NodeSample::F::cpu_pct) && std::isfinite(n.cpu_pct)) cpu_[n.node] = NodeCpu{n.cpu_pct, r.time_ns};
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
  void on_step(const Record& r, Emitter& out) {
    const StepRecord& rec = r.step_record();
    const auto* nodes = placement_.nodes_of(rec.run_id);
    if (!nodes) return;
    for (Symbol node : *nodes) {
      auto c = cpu_.find(node);
      bool cpu_high = c != cpu_.end() && r.time_ns - c->second.time_ns <= o_.max_sample_age_ns &&
                      c->second.cpu_pct >= o_.cpu_threshold_pct;
      double sum = 0, worst = -1;
      int n = 0;
      int32_t worst_rank = -1;
      if (cpu_high) {
        for (int32_t rank : *placement_.ranks_on(rec.run_id, node)) {
          const Step* s = rank_report(rec, rank);
          if (!s || !s->has(Step::F::data_wait_ms) || !(s->step_ms > 0) || !std::isfinite(s->data_wait_ms)) continue;
          double ratio = s->data_wait_ms / s->step_ms;
          sum += ratio, ++n;
          if (ratio > worst) worst = ratio, worst_rank = rank;
        }
      }
      double mean = n ? sum / n : 0;
      bool hit = cpu_high && n > 0 && mean >= o_.data_wait_ratio;
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
      Alert a;
      a.kind = alert_kind::kHostBottleneck;
      a.severity = Severity::kWarning;
      a.time_ns = r.time_ns;
      a.tenant = r.tenant;
      a.run_id = rec.run_id;
      a.step = rec.step;
      std::string where = locate_rank(a, placement_.run(rec.run_id), worst_rank);
      a.node = node;
      a.value = c->second.cpu_pct;
      a.threshold = o_.cpu_threshold_pct;
      int64_t onset = it->second.onset();
      a.summary = "HOST BOTTLENECK: node " + node.string() + " CPU at " + fmt_num(c->second.cpu_pct) + " % while its " +
                  std::to_string(n) + " ranks wait for data " + fmt_num(100 * mean, "%.0f") +
                  " % of each step (worst: " + where + ", " + fmt_num(100 * worst, "%.0f") + " %), since step " +
                  std::to_string(onset);
      a.attrs = {{"cpu_pct", c->second.cpu_pct},
                 {"data_wait_ratio", mean},
                 {"worst_data_wait_ratio", worst},
                 {"node_ranks", static_cast<double>(n)},
                 {"onset_step", static_cast<double>(onset)}};
      a.alert_id = make_alert_id(a, onset);
      it->second.raise(std::move(a), out);
    }
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
           " data_wait_ratio=" + fmt_num(o_.data_wait_ratio, "%g") + " persist=" + std::to_string(o_.persist_k) + "/" +
           std::to_string(o_.persist_n);
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
      "wait for data (mean data_wait_ms / step_ms at or above `data_wait_ratio`) in `persist_k` of the last "
      "`persist_n` steps, naming the node and its most data-starved rank. Partitioned by node.";
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
