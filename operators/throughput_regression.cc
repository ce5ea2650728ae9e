#include "operators/throughput_regression.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <unordered_map>

#include "operators/median.h"
#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {
namespace {

struct Point {
  int64_t step;
  double num, den;  // the windowed value is sum(num) / sum(den)
  double value() const { return num / den; }
  template <class Io>
  void fields(Io& io) {
    io(step, num, den);
  }
};

struct Series {
  std::deque<Point> recent, baseline;
  int64_t persist = 0;  // steps in a row with the windowed drop
  bool raised = false;
  std::shared_ptr<const Alert> alert;  // raised: closed when the series recovers
  template <class Io>
  void fields(Io& io) {
    io(recent, baseline, persist, raised, alert);
  }
};

struct Judgement {
  double current = 0, baseline = 0, drop = 0;
  int64_t onset = -1;
};

struct RunState {
  int64_t steps = 0;  // step_stats seen since the start or a restart
  Series tokens, mfu;
  int64_t config_step = -1;  // latest config_change with a step
  std::string config_key;
  double last_mfu = NAN;
  int32_t reported = 0;
  template <class Io>
  void fields(Io& io) {
    io(steps, tokens, mfu, config_step, config_key, last_mfu, reported);
  }
};

double ratio_of(const std::deque<Point>& pts) {  // sum(num) / sum(den)
  double n = 0, d = 0;
  for (const Point& p : pts) n += p.num, d += p.den;
  return d > 0 ? n / d : NAN;
}

class ThroughputRegression final : public PerRunOperator<ThroughputRegression, RunState> {
 public:
  // Version 2: an open incident keeps the alert it raised, for its closing revision (ends_ns).
  static constexpr runtime::state::StateType kState{"throughput_regression", 2};
  explicit ThroughputRegression(const ThroughputRegressionOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  // A restart forgets the run (a restart without a run_id restarts nothing).
  void on_restart(Symbol run, const Record&, Emitter&) {
    if (!run.empty()) runs_.reset(run);
  }

  void handle(const Record& r, Emitter& out) {
    static const Symbol kConfig = Symbol::intern(event_kind::kConfigChange);
    switch (r.kind()) {
      case Kind::kStepStats:
        on_stats(r, out);
        break;
      case Kind::kEvent: {
        const Occurrence& e = r.as<Occurrence>();
        if (e.run_id.empty()) break;
        if (e.kind == kConfig) {
          RunState& st = runs_[e.run_id];
          if (!e.has(Occurrence::F::step)) break;
          st.config_step = e.step;
          st.config_key = e.key.string();
        }
        break;
      }
      case Kind::kRunEnd:
        // The run's open incidents close with it.
        if (auto it = runs_.find(r.as<RunEnd>().run_id); it != runs_.end()) {
          for (Series* se : {&it->second.tokens, &it->second.mfu}) {
            se->raised = false;
            close_recovered(*se, r.time_ns, out);
          }
        }
        runs_.erase(r.as<RunEnd>().run_id);
        break;
      default:
        break;
    }
  }

 private:
  void on_stats(const Record& r, Emitter& out) {
    const StepStats& s = r.step_stats();
    // Incomplete by shedding: its tokens lack the shed ranks', not a drop.
    if (s.shed) return;
    RunState& st = runs_[s.run_id];
    if (++st.steps <= o_.skip_steps) return;
    st.reported = s.reported;
    if (s.tokens_per_s && s.step_ms > 0 && s.tokens > 0) {
      Judgement j;
      if (update(st.tokens, Point{s.step, static_cast<double>(s.tokens), s.step_ms / 1000.0}, o_.throughput_drop, &j)) {
        publish(st.tokens, throughput_alert(r, s, st, j), out);
      }
      close_recovered(st.tokens, r.time_ns, out);
    }
    if (s.mfu && std::isfinite(*s.mfu) && s.work_p50 > 0 && s.step_ms > 0) {
      st.last_mfu = *s.mfu;
      Judgement j;
      if (update(st.mfu, Point{s.step, *s.mfu * s.step_ms / s.work_p50, 1.0}, o_.mfu_drop, &j)) {
        publish(st.mfu, mfu_alert(r, s, st, j), out);
      }
      close_recovered(st.mfu, r.time_ns, out);
    }
  }

  static void publish(Series& se, Alert a, Emitter& out) {
    se.alert = std::make_shared<const Alert>(std::move(a));
    out.emit(alert_record(*se.alert));
  }
  // A series that recovered (no longer raised) closes the alert it raised.
  static void close_recovered(Series& se, int64_t at, Emitter& out) {
    if (se.raised || !se.alert) return;
    out.emit(closing_record(*se.alert, at));
    se.alert.reset();
  }

  // Adds a step to a series; true when it opens an incident.
  bool update(Series& se, Point p, double threshold, Judgement* j) {
    if (!(p.den > 0) || !std::isfinite(p.num)) return false;
    // `recent` holds two windows: the current one, and the one before it, which
    // joins the baseline only once it is clearly not the start of a drop.
    se.recent.push_back(p);
    if (static_cast<int64_t>(se.recent.size()) > 2 * o_.window) {
      if (!se.raised) se.baseline.push_back(se.recent.front());
      se.recent.pop_front();
      while (static_cast<int64_t>(se.baseline.size()) > o_.baseline_steps) se.baseline.pop_front();
    }
    if (static_cast<int64_t>(se.baseline.size()) < o_.min_baseline ||
        static_cast<int64_t>(se.recent.size()) < o_.window) {
      return false;
    }
    auto window_begin = se.recent.end() - o_.window;
    double n = 0, d = 0;
    for (auto it = window_begin; it != se.recent.end(); ++it) n += it->num, d += it->den;
    j->baseline = ratio_of(se.baseline);
    j->current = n / d;
    if (!(j->baseline > 0)) return false;
    j->drop = 1 - j->current / j->baseline;
    if (se.raised) {
      if (j->drop < threshold / 2) {
        // Recovered: what the window held is not the baseline's business.
        se.raised = false, se.persist = 0;
        se.recent.clear();
      }
      return false;
    }
    // Most steps of the window must be low themselves: one long stall moves the
    // mean, not the majority.
    scratch_.clear();
    for (const Point& b : se.baseline) scratch_.push_back(b.value());
    auto mid = scratch_.begin() + static_cast<std::ptrdiff_t>(scratch_.size() / 2);
    select_nth(scratch_.begin(), mid, scratch_.end());
    double low = (1 - threshold / 2) * *mid;
    int64_t lows = 0;
    for (auto it = window_begin; it != se.recent.end(); ++it) lows += it->value() < low;
    se.persist = j->drop > threshold && 2 * lows >= o_.window ? se.persist + 1 : 0;
    if (se.persist < o_.persist_k) return false;
    se.raised = true;
    se.persist = 0;
    // Onset: the run of individually low steps that ends now.
    j->onset = p.step;
    for (auto it = se.recent.rbegin(); it != se.recent.rend() && it->value() < low; ++it) j->onset = it->step;
    return true;
  }

  Alert base(const Record& r, const StepStats& s, std::string_view kind, int64_t onset) {
    Alert a;
    a.kind = kind;
    a.severity = Severity::kWarning;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = s.run_id;
    a.step = s.step;
    a.alert_id = make_alert_id(a, onset);
    return a;
  }

  void add_config(Alert& a, const RunState& st, const Series& se) {
    // A config change since the baseline's first step may explain the regression.
    int64_t since = se.baseline.empty() ? INT64_MIN : se.baseline.front().step;
    if (st.config_step < 0 || st.config_step < since) return;
    a.attrs.push_back({"config_change_step", static_cast<double>(st.config_step)});
    a.summary += "; config changed" + (st.config_key.empty() ? std::string() : " (" + st.config_key + ")") +
                 " at step " + std::to_string(st.config_step);
  }

  Alert throughput_alert(const Record& r, const StepStats& s, const RunState& st, const Judgement& j) {
    Alert a = base(r, s, alert_kind::kThroughputDrop, j.onset);
    a.value = j.current;
    a.threshold = (1 - o_.throughput_drop) * j.baseline;
    double per_gpu = st.reported > 0 ? j.current / st.reported : NAN;
    a.summary = "THROUGHPUT DROP: " + fmt_num(j.current) + " tokens/s over the last " + std::to_string(o_.window) +
                " steps against a baseline of " + fmt_num(j.baseline) + " (-" + fmt_num(100 * j.drop) +
                " %), since step " + std::to_string(j.onset);
    a.attrs = {{"tokens_per_s", j.current}, {"baseline_tokens_per_s", j.baseline}, {"drop", j.drop}};
    if (std::isfinite(per_gpu)) a.attrs.push_back({"tokens_per_s_per_gpu", per_gpu});
    a.attrs.push_back({"onset_step", static_cast<double>(j.onset)});
    add_config(a, st, st.tokens);
    return a;
  }

  Alert mfu_alert(const Record& r, const StepStats& s, const RunState& st, const Judgement& j) {
    Alert a = base(r, s, alert_kind::kMfuDrop, j.onset);
    a.value = j.current;
    a.threshold = (1 - o_.mfu_drop) * j.baseline;
    a.summary = "MFU DROP: MFU of compute (median rank's work time) " + fmt_num(100 * j.current, "%.1f") +
                " % over the last " + std::to_string(o_.window) + " steps against a baseline of " +
                fmt_num(100 * j.baseline, "%.1f") + " % (-" + fmt_num(100 * j.drop) + " %), since step " +
                std::to_string(j.onset) + "; wall-clock MFU " + fmt_num(100 * st.last_mfu, "%.1f") + " %";
    a.attrs = {{"compute_mfu", j.current},
               {"baseline_compute_mfu", j.baseline},
               {"mfu", st.last_mfu},
               {"drop", j.drop},
               {"onset_step", static_cast<double>(j.onset)}};
    add_config(a, st, st.mfu);
    return a;
  }

  ThroughputRegressionOptions o_;
  std::vector<double> scratch_;
};

std::string describe_options(const ThroughputRegressionOptions& o) {
  return "throughput_drop=" + fmt_num(o.throughput_drop, "%g") + " mfu_drop=" + fmt_num(o.mfu_drop, "%g") +
         " window=" + std::to_string(o.window) + " persist_k=" + std::to_string(o.persist_k);
}

}  // namespace

std::unique_ptr<OperatorDef> MakeThroughputRegression(const ThroughputRegressionOptions& options) {
  return std::make_unique<PerRunDef<ThroughputRegression, ThroughputRegressionOptions>>(options, &describe_options);
}

void RegisterThroughputRegression(Registry& registry) {
  ComponentInfo info;
  info.type = "throughput_regression";
  info.role = Role::kOperator;
  info.doc =
      "From step_stats, against the run's own baseline: raises `throughput_drop` when tokens/s over the last "
      "`window` steps is more than `throughput_drop` below the baseline, and `mfu_drop` when the MFU of compute "
      "(MFU scaled to the median rank's work time, so stalls that have their own alerts do not count) is more "
      "than `mfu_drop` below it, each for `persist_k` steps in a row.";
  const ThroughputRegressionOptions defaults;  // each default is written once, in ThroughputRegressionOptions
  info.params = {
      {.name = "throughput_drop",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.throughput_drop),
       .doc = "Fraction below the baseline tokens/s that counts as a throughput drop.",
       .min = 0.01,
       .max = 0.99},
      {.name = "mfu_drop",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.mfu_drop),
       .doc = "Fraction below the baseline MFU of compute that counts as an MFU drop.",
       .min = 0.01,
       .max = 0.99},
      {.name = "window",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.window),
       .doc = "Steps averaged for the current value.",
       .min = 1,
       .max = 1e5},
      {.name = "baseline_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.baseline_steps),
       .doc = "Most steps in the baseline (those before the window, outside incidents).",
       .min = 1,
       .max = 1e6},
      {.name = "min_baseline",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.min_baseline),
       .doc = "Baseline steps needed before drops are judged.",
       .min = 1,
       .max = 1e6},
      {.name = "skip_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.skip_steps),
       .doc = "First steps of a run (and after a restart) left out (compilation, warm-up).",
       .min = 0,
       .max = 1e6},
      {.name = "persist_k",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_k),
       .doc = "Steps in a row the windowed drop must hold.",
       .min = 1,
       .max = 1e6},
  };
  info.accepts = mask(Kind::kStepStats) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    ThroughputRegressionOptions o;
    o.throughput_drop = ctx.params->get_double("throughput_drop");
    o.mfu_drop = ctx.params->get_double("mfu_drop");
    o.window = ctx.params->get_int("window");
    o.baseline_steps = ctx.params->get_int("baseline_steps");
    o.min_baseline = ctx.params->get_int("min_baseline");
    o.skip_steps = ctx.params->get_int("skip_steps");
    o.persist_k = ctx.params->get_int("persist_k");
    if (o.min_baseline > o.baseline_steps) {
      ctx.fail("min_baseline", "min_baseline (" + std::to_string(o.min_baseline) +
                                   ") must not exceed baseline_steps (" + std::to_string(o.baseline_steps) + ")");
    }
    return MakeThroughputRegression(o);
  });
}

}  // namespace runlens::ops
