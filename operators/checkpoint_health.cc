#include "operators/checkpoint_health.h"

#include <cmath>
#include <unordered_map>

#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {
namespace {

struct RunState {
  int64_t window_start = INT64_MIN;  // previous checkpoint, run_start or restart (event time)
  int64_t last_ok_time = INT64_MIN;
  int64_t last_ok_step = -1;
  int64_t failures = 0;  // in a row
  bool failure_raised = false;
  int64_t slow = 0;  // slow checkpoints in a row
  int64_t slow_onset_step = -1;
  bool overhead_raised = false;
  template <class Io>
  void fields(Io& io) {
    io(window_start, last_ok_time, last_ok_step, failures, failure_raised, slow, slow_onset_step, overhead_raised);
  }
};

class CheckpointHealth final : public PerRunOperator<CheckpointHealth, RunState> {
 public:
  static constexpr runtime::state::StateType kState{"checkpoint_health", 1};
  explicit CheckpointHealth(const CheckpointHealthOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  // A restart starts a new training window; the failure and overhead streaks stay.
  void on_restart(Symbol run, const Record& r, Emitter&) { runs_[run].window_start = r.time_ns; }

  void handle(const Record& r, Emitter& out) {
    switch (r.kind()) {
      case Kind::kRunStart: {
        RunState& st = runs_[r.run_start().run_id];
        st = RunState();
        st.window_start = r.time_ns;
        break;
      }
      case Kind::kRunEnd:
        runs_.erase(r.as<RunEnd>().run_id);
        break;
      case Kind::kCheckpoint:
        on_checkpoint(r, out);
        break;
      default:
        break;
    }
  }

 private:
  void on_checkpoint(const Record& r, Emitter& out) {
    const Checkpoint& c = r.as<Checkpoint>();
    RunState& st = runs_[c.run_id];
    int64_t step = c.has(Checkpoint::F::step) ? c.step : -1;
    int64_t window = st.window_start == INT64_MIN ? 0 : r.time_ns - st.window_start;
    st.window_start = r.time_ns;
    if (c.has(Checkpoint::F::ok) && !c.ok) {
      ++st.failures;
      if (!st.failure_raised) {
        st.failure_raised = true;
        out.emit(alert_record(failure_alert(r, c, st, step)));
      }
      return;  // a failed checkpoint's duration is not judged as overhead
    }
    st.failures = 0;
    st.failure_raised = false;
    st.last_ok_time = r.time_ns;
    st.last_ok_step = step;

    if (!c.has(Checkpoint::F::duration_ms) || !std::isfinite(c.duration_ms) || window <= 0) return;
    double overhead = c.duration_ms / (static_cast<double>(window) / 1e6);
    if (overhead < o_.overhead_threshold) {
      st.slow = 0;
      st.overhead_raised = false;
      return;
    }
    if (st.slow++ == 0) st.slow_onset_step = step;
    if (st.slow < o_.persist_k || st.overhead_raised) return;
    st.overhead_raised = true;
    Alert a = base(r, c, alert_kind::kCheckpointOverhead, Severity::kWarning, step);
    a.value = overhead;
    a.threshold = o_.overhead_threshold;
    a.summary = "CHECKPOINT OVERHEAD: checkpoint " + c.checkpoint_id.string() + " took " +
                fmt_num(c.duration_ms / 1000, "%.1f") + " s of a " + fmt_num(window / 1e9, "%.1f") +
                " s training window (" + fmt_num(100 * overhead) + " %), " + std::to_string(st.slow) +
                " checkpoints in a row at or above " + fmt_num(100 * o_.overhead_threshold) + " %";
    a.attrs = {
        {"duration_ms", c.duration_ms}, {"window_s", window / 1e9}, {"slow_checkpoints", static_cast<double>(st.slow)}};
    if (c.has(Checkpoint::F::size_bytes)) a.attrs.push_back({"size_bytes", static_cast<double>(c.size_bytes)});
    if (c.has(Checkpoint::F::upload_ms)) a.attrs.push_back({"upload_ms", c.upload_ms});
    a.attrs.push_back({"onset_step", static_cast<double>(st.slow_onset_step)});
    a.alert_id = make_alert_id(a, st.slow_onset_step);
    out.emit(alert_record(std::move(a)));
  }

  Alert failure_alert(const Record& r, const Checkpoint& c, const RunState& st, int64_t step) {
    Alert a = base(r, c, alert_kind::kCheckpointFailure, Severity::kWarning, step);
    a.summary = "CHECKPOINT FAILED: checkpoint " + c.checkpoint_id.string() +
                (step >= 0 ? " at step " + std::to_string(step) : std::string()) + " did not complete";
    if (!c.uri.empty()) a.summary += " (" + c.uri + ")";
    if (st.last_ok_time != INT64_MIN) {
      double age_s = (r.time_ns - st.last_ok_time) / 1e9;
      a.summary += "; the last successful checkpoint is " + fmt_num(age_s) + " s old" +
                   (st.last_ok_step >= 0 ? " (step " + std::to_string(st.last_ok_step) + ")" : std::string());
      a.attrs.push_back({"last_ok_age_s", age_s});
      if (st.last_ok_step >= 0) a.attrs.push_back({"last_ok_step", static_cast<double>(st.last_ok_step)});
    } else {
      a.summary += "; the run has no successful checkpoint yet";
    }
    a.attrs.push_back({"failures_in_a_row", static_cast<double>(st.failures)});
    a.alert_id = make_alert_id(a, step >= 0 ? step : r.time_ns);
    return a;
  }

  static Alert base(const Record& r, const Checkpoint& c, std::string_view kind, Severity sev, int64_t step) {
    Alert a;
    a.kind = kind;
    a.severity = sev;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = c.run_id;
    if (step >= 0) a.step = step;
    return a;
  }

  CheckpointHealthOptions o_;
};

std::string describe_options(const CheckpointHealthOptions& o) {
  return "overhead_threshold=" + fmt_num(o.overhead_threshold, "%g") + " persist_k=" + std::to_string(o.persist_k);
}

}  // namespace

std::unique_ptr<OperatorDef> MakeCheckpointHealth(const CheckpointHealthOptions& options) {
  return std::make_unique<PerRunDef<CheckpointHealth, CheckpointHealthOptions>>(options, &describe_options);
}

void RegisterCheckpointHealth(Registry& registry) {
  ComponentInfo info;
  info.type = "checkpoint_health";
  info.role = Role::kOperator;
  info.doc =
      "Raises `checkpoint_failure` for a checkpoint with ok = false (with the last successful checkpoint's step "
      "and age), and `checkpoint_overhead` when checkpoint_overhead = duration_ms / the time since the previous "
      "checkpoint is at or above `overhead_threshold` for `persist_k` checkpoints in a row.";
  const CheckpointHealthOptions defaults;  // each default is written once, in CheckpointHealthOptions
  info.params = {
      {.name = "overhead_threshold",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.overhead_threshold),
       .doc = "Checkpoint time / training window at or above which a checkpoint counts as slow.",
       .min = 0,
       .max = 1},
      {.name = "persist_k",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_k),
       .doc = "Slow checkpoints in a row needed to raise checkpoint_overhead.",
       .min = 1,
       .max = 1e6},
  };
  info.accepts = mask(Kind::kRunStart) | mask(Kind::kCheckpoint) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    CheckpointHealthOptions o;
    o.overhead_threshold = ctx.params->get_double("overhead_threshold");
    o.persist_k = ctx.params->get_int("persist_k");
    return MakeCheckpointHealth(o);
  });
}

}  // namespace runlens::ops
