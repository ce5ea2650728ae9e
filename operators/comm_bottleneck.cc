#include "operators/comm_bottleneck.h"

#include <cmath>
#include <map>
#include <unordered_map>

#include "operators/persistence.h"
#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {
namespace {

constexpr size_t kCollectiveSteps = 8;  // steps of collective latencies kept per run

struct Latency {
  double sum = 0;
  int64_t n = 0;
  template <class Io>
  void fields(Io& io) {
    io(sum, n);
  }
};

struct RunState {
  Incident incident;
  std::map<int64_t, Latency> collectives;  // by step
  template <class Io>
  void fields(Io& io) {
    io(incident, collectives);
  }
};

// A restart forgets the run (the binding's default).
class CommBottleneck final : public PerRunOperator<CommBottleneck, RunState> {
 public:
  // Version 2: an open incident keeps the alert it raised, for its closing revision (ends_ns).
  static constexpr runtime::state::StateType kState{"comm_bottleneck", 2};
  explicit CommBottleneck(const CommBottleneckOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  void handle(const Record& r, Emitter& out) {
    switch (r.kind()) {
      case Kind::kStepRecord:
        on_step(r, out);
        break;
      case Kind::kCollective: {
        const Collective& c = r.as<Collective>();
        if (!c.has(Collective::F::step) || !std::isfinite(c.latency_ms)) break;
        RunState& st = state(c.run_id);
        Latency& l = st.collectives[c.step];
        l.sum += c.latency_ms, ++l.n;
        while (st.collectives.size() > kCollectiveSteps) st.collectives.erase(st.collectives.begin());
        break;
      }
      case Kind::kRunEnd: {
        // The run's open incident closes with it.
        Symbol run = r.as<RunEnd>().run_id;
        if (auto it = runs_.find(run); it != runs_.end()) it->second.incident.close(r.time_ns, out);
        runs_.erase(run);
        break;
      }
      default:
        break;
    }
  }

 private:
  RunState& state(Symbol run) {
    auto [it, fresh] = runs_.try_emplace(run);
    if (fresh) it->second.incident = Incident(o_.persist_k, o_.persist_n);
    return it->second;
  }

  void on_step(const Record& r, Emitter& out) {
    const StepRecord& rec = r.step_record();
    if (rec.shed) return;  // incomplete by shedding: not judged
    RunState& st = state(rec.run_id);
    const Step* least = nullptr;
    double least_ratio = INFINITY, sum = 0;
    int n = 0;
    for (const Step& s : rec.ranks) {
      if (!s.has(Step::F::comm_ms) || !(s.step_ms > 0) || !std::isfinite(s.comm_ms)) continue;
      double ratio = s.comm_ms / s.step_ms;
      sum += ratio, ++n;
      if (ratio < least_ratio) least_ratio = ratio, least = &s;
    }
    bool hit = least && least_ratio >= o_.ratio_threshold;
    Incident::Change change = st.incident.observe(rec.step, hit);
    if (change == Incident::Change::kClosed) st.incident.close(r.time_ns, out);
    if (change != Incident::Change::kOpened) return;
    int64_t onset = st.incident.onset();
    Alert a;
    a.kind = alert_kind::kCommBottleneck;
    a.severity = Severity::kWarning;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = rec.run_id;
    a.step = rec.step;
    a.value = least_ratio;
    a.threshold = o_.ratio_threshold;
    a.summary = "COMMUNICATION BOTTLENECK: every rank spends at least " + fmt_num(100 * least_ratio) +
                " % of its step in collectives (" + fmt_num(least->comm_ms) + " ms of " + fmt_num(least->step_ms) +
                " ms on rank " + std::to_string(least->rank) + ", the least of " + std::to_string(n) +
                " ranks) since step " + std::to_string(onset);
    a.attrs = {{"comm_ms", least->comm_ms},
               {"step_ms", least->step_ms},
               {"mean_communication_ratio", sum / n},
               {"onset_step", static_cast<double>(onset)}};
    if (auto it = st.collectives.find(rec.step); it != st.collectives.end() && it->second.n > 0) {
      double mean = it->second.sum / static_cast<double>(it->second.n);
      a.attrs.push_back({"collective_latency_ms", mean});
      a.summary += "; mean collective latency " + fmt_num(mean) + " ms";
    }
    a.alert_id = make_alert_id(a, onset);
    st.incident.raise(std::move(a), out);
  }

  CommBottleneckOptions o_;
};

std::string describe_options(const CommBottleneckOptions& o) {
  return "ratio_threshold=" + fmt_num(o.ratio_threshold, "%g") + " persist=" + std::to_string(o.persist_k) + "/" +
         std::to_string(o.persist_n);
}

}  // namespace

std::unique_ptr<OperatorDef> MakeCommBottleneck(const CommBottleneckOptions& options) {
  return std::make_unique<PerRunDef<CommBottleneck, CommBottleneckOptions>>(options, &describe_options);
}

void RegisterCommBottleneck(Registry& registry) {
  ComponentInfo info;
  info.type = "comm_bottleneck";
  info.role = Role::kOperator;
  info.doc =
      "Per joined step, communication_ratio = comm_ms / step_ms of the rank that spends the least in collectives "
      "(the others' comm_ms includes waiting for slow ranks); raises `comm_bottleneck` when it is at or above "
      "`ratio_threshold` in `persist_k` of the last `persist_n` steps, with the mean collective latency from "
      "`collective` events where present.";
  const CommBottleneckOptions defaults;  // each default is written once, in CommBottleneckOptions
  info.params = {
      {.name = "ratio_threshold",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.ratio_threshold),
       .doc = "Least communication_ratio over ranks at or above which a step counts as communication-bound.",
       .min = 0,
       .max = 1},
      {.name = "persist_k",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_k),
       .doc = "Communication-bound steps needed within the window.",
       .min = 1,
       .max = 1e6},
      {.name = "persist_n",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_n),
       .doc = "Window length in steps; also the steps without that re-arm the run.",
       .min = 1,
       .max = 1e6},
  };
  info.accepts = mask(Kind::kStepRecord) | mask(Kind::kCollective) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    CommBottleneckOptions o;
    o.ratio_threshold = ctx.params->get_double("ratio_threshold");
    o.persist_k = ctx.params->get_int("persist_k");
    o.persist_n = ctx.params->get_int("persist_n");
    if (o.persist_k > o.persist_n) {
      ctx.fail("persist_k", "persist_k (" + std::to_string(o.persist_k) + ") must not exceed persist_n (" +
                                std::to_string(o.persist_n) + ")");
    }
    return MakeCommBottleneck(o);
  });
}

}  // namespace runlens::ops
