#include "operators/nan_detect.h"

#include <cmath>
#include <unordered_map>

#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {

std::string nan_reason(const Train& t) {
  std::string why;
  auto add = [&](const std::string& s) { why += (why.empty() ? "" : ", ") + s; };
  if (t.has(Train::F::loss) && !std::isfinite(t.loss)) add("loss=" + fmt_num(t.loss, NumberStyle::kSignificant6));
  if (t.has(Train::F::grad_norm) && !std::isfinite(t.grad_norm))
    add("grad_norm=" + fmt_num(t.grad_norm, NumberStyle::kSignificant6));
  if (t.has(Train::F::nan_count) && t.nan_count > 0) add("nan_count=" + std::to_string(t.nan_count));
  if (t.has(Train::F::inf_count) && t.inf_count > 0) add("inf_count=" + std::to_string(t.inf_count));
  return why;
}

namespace {

struct RunState {
  std::shared_ptr<const RunInfo> info;
  bool raised = false;
  int64_t last_bad_step = INT64_MIN / 2;  // latest step with non-finite values
  template <class Io>
  void fields(Io& io) {
    io(info, raised, last_bad_step);
  }
};

class NanDetect final : public PerRunOperator<NanDetect, RunState> {
 public:
  // Version 3: rank entries (run_start, rank maps) carry gpu_model and node_type.
  static constexpr runtime::state::StateType kState{"nan_detect", 3};
  explicit NanDetect(const NanDetectOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  // A restart only re-arms: the incident's last bad step and the rank map stay.
  void on_restart(Symbol run, const Record&, Emitter&) { runs_[run].raised = false; }

  void handle(const Record& r, Emitter& out) {
    switch (r.kind()) {
      case Kind::kRunStart:
        runs_[r.run_start().run_id].info = RunInfo::from(r.run_start());
        return;
      case Kind::kRunEnd:
        // Keep the incident state: other ranks' last train events may still
        // follow rank 0's run_end, and must not raise the same incident again.
        runs_[r.as<RunEnd>().run_id].info.reset();
        return;
      case Kind::kTrain:
        break;
      default:
        return;
    }
    const Train& t = r.as<Train>();
    RunState& st = runs_[t.run_id];
    std::string why = nan_reason(t);
    // Re-arm by steps, not by events: every rank may report each step.
    if (why.empty()) {
      if (st.raised && t.step >= st.last_bad_step + o_.rearm_steps) st.raised = false;
      return;
    }
    st.last_bad_step = std::max(st.last_bad_step, t.step);
    if (st.raised) return;
    st.raised = true;
    out.emit(alert_record(make_alert(r, t, st, why)));
  }

 private:
  Alert make_alert(const Record& r, const Train& t, const RunState& st, const std::string& why) {
    Alert a;
    a.kind = alert_kind::kNanLoss;
    a.severity = Severity::kCritical;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = t.run_id;
    a.step = t.step;
    int32_t rank = t.has(Train::F::rank) ? t.rank : 0;
    locate_rank(a, st.info.get(), rank);
    if (t.has(Train::F::loss))
      a.value = t.loss;
    else if (t.has(Train::F::grad_norm))
      a.value = t.grad_norm;
    a.summary = "non-finite training values at step " + std::to_string(t.step) + " (" + why + ")";
    if (t.has(Train::F::loss)) a.attrs.push_back({"loss", t.loss});
    if (t.has(Train::F::grad_norm)) a.attrs.push_back({"grad_norm", t.grad_norm});
    if (t.has(Train::F::lr)) a.attrs.push_back({"lr", t.lr});
    if (t.has(Train::F::nan_count)) a.attrs.push_back({"nan_count", static_cast<double>(t.nan_count)});
    if (t.has(Train::F::inf_count)) a.attrs.push_back({"inf_count", static_cast<double>(t.inf_count)});
    a.alert_id = make_alert_id(a, t.step);
    return a;
  }

  NanDetectOptions o_;
};

std::string describe_options(const NanDetectOptions& o) { return "rearm_steps=" + std::to_string(o.rearm_steps); }

}  // namespace

std::unique_ptr<OperatorDef> MakeNanDetect(const NanDetectOptions& options) {
  return std::make_unique<PerRunDef<NanDetect, NanDetectOptions>>(options, &describe_options);
}

void RegisterNanDetect(Registry& registry) {
  ComponentInfo info;
  info.type = "nan_detect";
  info.role = Role::kOperator;
  info.doc =
      "Raises `nan_loss` (critical) at the step of a train event whose loss or grad_norm is NaN or Inf, or whose "
      "nan_count or inf_count is above 0; once per incident and run.";
  const NanDetectOptions defaults;  // each default is written once, in NanDetectOptions
  info.params = {
      {.name = "rearm_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.rearm_steps),
       .doc = "Steps without non-finite values after which a run can raise nan_loss again.",
       .min = 1},
  };
  info.accepts = mask(Kind::kRunStart) | mask(Kind::kTrain) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    NanDetectOptions o;
    o.rearm_steps = ctx.params->get_int("rearm_steps");
    return MakeNanDetect(o);
  });
}

}  // namespace runlens::ops
