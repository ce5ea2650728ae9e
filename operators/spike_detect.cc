#include "operators/spike_detect.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <unordered_map>

#include "operators/median.h"
#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {

RobustStats robust_stats(std::vector<double>& v) {
  RobustStats s;
  if (v.empty()) return s;
  s.median = median_in_place(v);
  for (double& x : v) x = std::fabs(x - s.median);
  s.mad = median_in_place(v);
  return s;
}

double lr_discontinuity(double lr0, int64_t s0, double lr1, int64_t s1, double lr, int64_t s) {
  if (s1 <= s0 || s <= s1 || lr1 == 0) return 0;
  double slope = (lr1 - lr0) / static_cast<double>(s1 - s0);
  double predicted = lr1 + slope * static_cast<double>(s - s1);
  return std::fabs(lr - predicted) / std::fabs(lr1);
}

namespace {

constexpr double kMadToSigma = 1.4826;    // MAD of a normal distribution x this = its standard deviation
constexpr int64_t kExplicitLrMemory = 3;  // train events an explicit lr config_change suppresses inference for

struct Series {
  std::deque<double> values;
  bool raised = false;
  int64_t quiet = 0;  // train events without a spike since the alert
  template <class Io>
  void fields(Io& io) {
    io(values, raised, quiet);
  }
};

struct LrPoint {
  double lr;
  int64_t step;
  template <class Io>
  void fields(Io& io) {
    io(lr, step);
  }
};

struct RunState {
  std::shared_ptr<const RunInfo> info;
  int32_t lead_rank = INT32_MAX;  // the lowest rank whose train events are read
  int64_t last_step = INT64_MIN;
  Series loss, grad;
  std::deque<LrPoint> lr;              // the last two LR values
  int64_t explicit_lr_at = INT64_MIN;  // train events seen when the last explicit lr change came
  int64_t train_events = 0;
  int64_t lr_change_step = -1;  // latest LR change (explicit or inferred)
  template <class Io>
  void fields(Io& io) {
    io(info, lead_rank, last_step, loss, grad, lr, explicit_lr_at, train_events, lr_change_step);
  }
};

class SpikeDetect final : public PerRunOperator<SpikeDetect, RunState> {
 public:
  // Version 3: rank entries (run_start, rank maps) carry gpu_model and node_type.
  static constexpr runtime::state::StateType kState{"spike_detect", 3};
  explicit SpikeDetect(const SpikeDetectOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  // A restart starts the series again; the rank map stays.
  void on_restart(Symbol run, const Record&, Emitter&) {
    if (run.empty()) return;
    auto info = runs_[run].info;
    runs_[run] = RunState();
    runs_[run].info = std::move(info);
  }

  void handle(const Record& r, Emitter& out) {
    static const Symbol kConfig = Symbol::intern(event_kind::kConfigChange), kLr = Symbol::intern("lr"),
                        kLearningRate = Symbol::intern("learning_rate");
    switch (r.kind()) {
      case Kind::kRunStart: {
        RunState& st = runs_[r.run_start().run_id];
        st = RunState();
        st.info = RunInfo::from(r.run_start());
        break;
      }
      case Kind::kRunEnd:
        runs_.erase(r.as<RunEnd>().run_id);
        break;
      case Kind::kEvent: {
        const Occurrence& e = r.as<Occurrence>();
        if (e.run_id.empty()) break;
        if (e.kind == kConfig && (e.key == kLr || e.key == kLearningRate)) {
          RunState& st = runs_[e.run_id];
          st.explicit_lr_at = st.train_events;
          if (e.has(Occurrence::F::step))
            st.lr_change_step = e.step;
          else if (st.last_step != INT64_MIN)
            st.lr_change_step = st.last_step + 1;
        }
        break;
      }
      case Kind::kTrain:
        on_train(r, out);
        break;
      default:
        break;
    }
  }

 private:
  void on_train(const Record& r, Emitter& out) {
    const Train& t = r.as<Train>();
    RunState& st = runs_[t.run_id];
    int32_t rank = t.has(Train::F::rank) ? t.rank : 0;
    if (rank > st.lead_rank) return;
    st.lead_rank = rank;
    if (t.step <= st.last_step) return;  // a repeat, or out of order across ranks
    st.last_step = t.step;
    ++st.train_events;
    if (t.has(Train::F::lr) && std::isfinite(t.lr)) on_lr(r, t, st, out);
    if (t.has(Train::F::grad_norm)) judge(r, t, st, st.grad, t.grad_norm, false, out);
    if (t.has(Train::F::loss)) judge(r, t, st, st.loss, t.loss, true, out);
  }

  void on_lr(const Record& r, const Train& t, RunState& st, Emitter& out) {
    if (st.lr.size() == 2) {
      const LrPoint& p0 = st.lr[0];
      const LrPoint& p1 = st.lr[1];
      double jump = lr_discontinuity(p0.lr, p0.step, p1.lr, p1.step, t.lr, t.step);
      bool explained = st.explicit_lr_at != INT64_MIN && st.train_events - st.explicit_lr_at <= kExplicitLrMemory;
      if (jump > o_.lr_jump && !explained) {
        st.lr_change_step = t.step;
        Occurrence e;
        e.kind = Symbol::intern(event_kind::kConfigChange);
        e.run_id = t.run_id;
        e.step = t.step;
        e.key = Symbol::intern("lr");
        e.old = Value::of(p1.lr);
        e.new_ = Value::of(t.lr);
        e.message = "inferred from the lr series: " + fmt_num(p1.lr, "%.4g") + " at step " + std::to_string(p1.step) +
                    " -> " + fmt_num(t.lr, "%.4g") + " at step " + std::to_string(t.step) +
                    ", a jump a smooth schedule does not make (" + fmt_num(100 * jump) + " % off its trend)";
        for (auto f : {Occurrence::F::kind, Occurrence::F::run_id, Occurrence::F::step, Occurrence::F::key,
                       Occurrence::F::old, Occurrence::F::new_, Occurrence::F::message}) {
          e.set_present(f);
        }
        Record rec;
        rec.time_ns = r.time_ns;
        rec.tenant = r.tenant;
        rec.body = std::move(e);
        out.emit(std::move(rec));
      }
      // A new level: the trend before the jump does not predict the steps after it.
      if (jump > o_.lr_jump) st.lr.clear();
    }
    st.lr.push_back({t.lr, t.step});
    if (st.lr.size() > 2) st.lr.pop_front();
  }

  void judge(const Record& r, const Train& t, RunState& st, Series& s, double v, bool is_loss, Emitter& out) {
    if (!std::isfinite(v)) return;  // nan_detect's
    bool spike = false;
    RobustStats rs;
    double limit = 0;
    if (static_cast<int64_t>(s.values.size()) >= o_.min_points) {
      scratch_.assign(s.values.begin(), s.values.end());
      rs = robust_stats(scratch_);
      double min_ratio = is_loss ? o_.loss_min_ratio : o_.grad_min_ratio;
      limit = std::max(rs.median + o_.z_threshold * kMadToSigma * rs.mad, rs.median * min_ratio);
      spike = v > limit && rs.median > 0;
    }
    s.values.push_back(v);
    while (static_cast<int64_t>(s.values.size()) > o_.window) s.values.pop_front();
    if (!spike) {
      if (s.raised && ++s.quiet >= o_.rearm_steps) s.raised = false;
      return;
    }
    s.quiet = 0;
    if (s.raised) return;
    s.raised = true;

    Alert a;
    a.kind = is_loss ? alert_kind::kLossSpike : alert_kind::kGradSpike;
    a.severity = Severity::kWarning;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = t.run_id;
    a.step = t.step;
    locate_rank(a, st.info.get(), t.has(Train::F::rank) ? t.rank : 0);
    a.value = v;
    a.threshold = limit;
    double sigma = kMadToSigma * rs.mad;
    const char* name = is_loss ? "loss" : "gradient norm";
    a.summary = std::string(is_loss ? "LOSS SPIKE: " : "GRADIENT SPIKE: ") + name + " " + fmt_num(v, "%.4g") +
                " at step " + std::to_string(t.step) + " against a rolling median of " + fmt_num(rs.median, "%.4g") +
                " (" + fmt_num(v / rs.median, "%.1f") + "x" +
                (sigma > 0 ? ", " + fmt_num((v - rs.median) / sigma, "%.0f") + " robust sigmas" : std::string()) + ")";
    a.attrs = {{"median", rs.median}, {"mad", rs.mad}};
    if (t.has(Train::F::loss)) a.attrs.push_back({"loss", t.loss});
    if (t.has(Train::F::grad_norm)) a.attrs.push_back({"grad_norm", t.grad_norm});
    if (t.has(Train::F::lr)) a.attrs.push_back({"lr", t.lr});
    if (st.lr_change_step >= 0 && t.step - st.lr_change_step <= o_.window) {
      a.attrs.push_back({"lr_change_step", static_cast<double>(st.lr_change_step)});
      a.summary += "; the learning rate changed at step " + std::to_string(st.lr_change_step);
    }
    a.alert_id = make_alert_id(a, t.step);
    out.emit(alert_record(std::move(a)));
  }

  SpikeDetectOptions o_;
  std::vector<double> scratch_;
};

std::string describe_options(const SpikeDetectOptions& o) {
  return "window=" + std::to_string(o.window) + " z_threshold=" + fmt_num(o.z_threshold, "%g") +
         " lr_jump=" + fmt_num(o.lr_jump, "%g");
}

}  // namespace

std::unique_ptr<OperatorDef> MakeSpikeDetect(const SpikeDetectOptions& options) {
  return std::make_unique<PerRunDef<SpikeDetect, SpikeDetectOptions>>(options, &describe_options);
}

void RegisterSpikeDetect(Registry& registry) {
  ComponentInfo info;
  info.type = "spike_detect";
  info.role = Role::kOperator;
  info.doc =
      "Raises `loss_spike` and `grad_spike` for a loss or grad_norm above a robust rolling baseline (median + "
      "z x 1.4826 x MAD, and a minimum ratio to the median), once per incident; emits an `event` row of kind "
      "config_change (key lr, old, new, message 'inferred ...') for a jump in the lr series that a smooth "
      "warm-up or cosine schedule does not make, unless the run reported that LR change itself.";
  const SpikeDetectOptions defaults;  // each default is written once, in SpikeDetectOptions
  info.params = {
      {.name = "window",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.window),
       .doc = "Train events in the rolling baseline.",
       .min = 5,
       .max = 1e6},
      {.name = "min_points",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.min_points),
       .doc = "Values needed in the baseline before spikes are judged.",
       .min = 3,
       .max = 1e6},
      {.name = "z_threshold",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.z_threshold),
       .doc = "Robust z-score (in MAD-estimated standard deviations) above the median that counts as a spike.",
       .min = 1},
      {.name = "loss_min_ratio",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.loss_min_ratio),
       .doc = "A loss spike must also be at least this many times the median loss.",
       .min = 1},
      {.name = "grad_min_ratio",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.grad_min_ratio),
       .doc = "A gradient-norm spike must also be at least this many times the median.",
       .min = 1},
      {.name = "rearm_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.rearm_steps),
       .doc = "Train events without a spike after which a series can alert again.",
       .min = 1},
      {.name = "lr_jump",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.lr_jump),
       .doc = "Relative distance of an LR value from its linear trend above which it is an LR change.",
       .min = 0.001},
  };
  info.accepts = mask(Kind::kRunStart) | mask(Kind::kTrain) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert) | mask(Kind::kEvent);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    SpikeDetectOptions o;
    o.window = ctx.params->get_int("window");
    o.min_points = ctx.params->get_int("min_points");
    o.z_threshold = ctx.params->get_double("z_threshold");
    o.loss_min_ratio = ctx.params->get_double("loss_min_ratio");
    o.grad_min_ratio = ctx.params->get_double("grad_min_ratio");
    o.rearm_steps = ctx.params->get_int("rearm_steps");
    o.lr_jump = ctx.params->get_double("lr_jump");
    if (o.min_points > o.window) {
      ctx.fail("min_points", "min_points (" + std::to_string(o.min_points) + ") must not exceed window (" +
                                 std::to_string(o.window) + ")");
    }
    return MakeSpikeDetect(o);
  });
}

}  // namespace runlens::ops
