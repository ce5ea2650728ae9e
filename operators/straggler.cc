#include "operators/straggler.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "operators/median.h"
#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {

double straggler_work_ms(const Step& s) {
  double w = s.step_ms;
  if (s.has(Step::F::comm_ms) && std::isfinite(s.comm_ms)) w -= s.comm_ms;
  if (s.has(Step::F::data_wait_ms) && std::isfinite(s.data_wait_ms)) w -= s.data_wait_ms;
  return std::max(0.0, w);
}

namespace {
// lgamma() writes the global `signgam`, a data race when partitions on two
// threads call it (TSan found it); lgamma_r returns the same value and keeps
// the sign to itself.
double log_gamma(double x) {
  int sign = 0;
  return ::lgamma_r(x, &sign);
}
}  // namespace

int64_t straggler_required_hits(int64_t persist_k, int64_t n, int64_t ranks, double p, double false_alarm_rate) {
  if (false_alarm_rate <= 0 || n <= 0) return persist_k;
  p = std::clamp(p, 0.0, 1.0);
  // P(X = j) for X ~ Binomial(n, p), j = 0..n, then tails from the top.
  std::vector<double> pmf(static_cast<size_t>(n) + 1);
  for (int64_t j = 0; j <= n; ++j) {
    double c = std::exp(log_gamma(double(n) + 1) - log_gamma(double(j) + 1) - log_gamma(double(n - j) + 1));
    pmf[static_cast<size_t>(j)] = c * std::pow(p, double(j)) * std::pow(1 - p, double(n - j));
  }
  double tail = 0;
  std::vector<double> tail_at(static_cast<size_t>(n) + 2, 0.0);
  for (int64_t j = n; j >= 0; --j) tail_at[static_cast<size_t>(j)] = tail += pmf[static_cast<size_t>(j)];
  for (int64_t k = std::max<int64_t>(persist_k, 1); k < n; ++k) {
    if (double(ranks) * tail_at[static_cast<size_t>(k)] <= false_alarm_rate) return k;
  }
  return std::max(persist_k, n);
}

namespace {

struct RankHistory {
  std::deque<int64_t> slow_steps;  // steps in the window where the rank was slow
  bool flagged = false;
  std::shared_ptr<const Alert> alert;  // raised while flagged: closed when the rank re-arms
  template <class Io>
  void fields(Io& io) {
    io(slow_steps, flagged, alert);
  }
};

struct RunState {
  std::map<int32_t, RankHistory> ranks;  // only ranks slow recently
  // Isolated slow rank-steps and judged rank-steps, decayed by step: the
  // run's rate of chance slowness (a prior of 1 in 1000 rank-steps first).
  double slow_ew = 1, judged_ew = 1000;
  template <class Io>
  void fields(Io& io) {
    io(ranks, slow_ew, judged_ew);
  }
};

class Straggler final : public PerRunOperator<Straggler, RunState> {
 public:
  // Version 2: an open incident keeps the alert it raised, for its closing revision (ends_ns).
  static constexpr runtime::state::StateType kState{"straggler", 2};
  explicit Straggler(const StragglerOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  void handle(const Record& r, Emitter& out) {
    if (r.kind() == Kind::kRunEnd) {
      // The run's flagged ranks close with it (a run_end among its inputs: the source).
      Symbol run = r.as<RunEnd>().run_id;
      if (auto it = runs_.find(run); it != runs_.end()) {
        for (auto& [rank, h] : it->second.ranks) {
          if (h.alert) out.emit(closing_record(*h.alert, r.time_ns));
        }
        runs_.erase(run);
      }
      return;
    }
    if (r.kind() != Kind::kStepRecord) return;
    const StepRecord& rec = r.step_record();
    // Incomplete by shedding: the ranks it lacks may have been the fast ones.
    if (rec.shed || static_cast<int64_t>(rec.ranks.size()) < o_.min_ranks) return;
    work_.clear();
    for (const Step& s : rec.ranks) {
      if (std::isfinite(s.step_ms)) work_.push_back(straggler_work_ms(s));
    }
    if (static_cast<int64_t>(work_.size()) < o_.min_ranks) return;
    const size_t judged = work_.size();
    double median = median_in_place(work_);
    RunState& st = runs_[rec.run_id];
    if (median >= o_.min_median_ms) {
      // Judged against the rate measured before this step.
      int64_t need = straggler_required_hits(o_.persist_k, o_.persist_n, static_cast<int64_t>(judged),
                                             st.slow_ew / st.judged_ew, o_.false_alarm_rate);
      int64_t isolated = 0;
      for (const Step& s : rec.ranks) {
        if (!std::isfinite(s.step_ms)) continue;
        double w = straggler_work_ms(s);
        double ratio = w / median;
        if (ratio <= o_.ratio_threshold) continue;
        RankHistory& h = st.ranks[s.rank];
        h.slow_steps.push_back(rec.step);
        trim(h, rec.step);
        int64_t hits = static_cast<int64_t>(h.slow_steps.size());
        if (!h.flagged && hits < o_.persist_k) ++isolated;
        if (!h.flagged && hits >= need) {
          h.flagged = true;
          h.alert = std::make_shared<const Alert>(make_alert(r, rec, s, w, median, ratio, h.slow_steps.front(), hits));
          out.emit(alert_record(*h.alert));
        }
      }
      double keep = 1.0 - 1.0 / static_cast<double>(std::max<int64_t>(o_.noise_window, 1));
      st.slow_ew = keep * st.slow_ew + static_cast<double>(isolated);
      st.judged_ew = keep * st.judged_ew + static_cast<double>(judged);
    }
    // Forget ranks with no slow step in the window; re-arm flagged ones,
    // closing their alert (its closing revision, at this step's time).
    for (auto it = st.ranks.begin(); it != st.ranks.end();) {
      trim(it->second, rec.step);
      if (!it->second.slow_steps.empty()) {
        ++it;
        continue;
      }
      if (it->second.alert) out.emit(closing_record(*it->second.alert, r.time_ns));
      it = st.ranks.erase(it);
    }
  }

 private:
  void trim(RankHistory& h, int64_t step) {
    while (!h.slow_steps.empty() && h.slow_steps.front() <= step - o_.persist_n) h.slow_steps.pop_front();
  }

  Alert make_alert(const Record& r, const StepRecord& rec, const Step& s, double work, double median, double ratio,
                   int64_t onset, int64_t hits) {
    Alert a;
    a.kind = alert_kind::kStraggler;
    a.severity = Severity::kWarning;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = rec.run_id;
    a.step = rec.step;
    std::string where = locate_rank(a, rec.run.get(), s.rank);
    a.value = ratio;
    a.threshold = o_.ratio_threshold;
    a.summary = "STRAGGLER DETECTED: " + where + " works " + fmt_num(work) + " ms per step against a median of " +
                fmt_num(median) + " ms (" + fmt_num(ratio, "%.2f") + "x) in " + std::to_string(hits) + " of the last " +
                std::to_string(o_.persist_n) + " steps, since step " + std::to_string(onset);
    a.attrs = {
        {"work_ms", work}, {"median_ms", median}, {"step_ms", s.step_ms}, {"onset_step", static_cast<double>(onset)}};
    a.alert_id = make_alert_id(a, onset);
    return a;
  }

  StragglerOptions o_;
  std::vector<double> work_;  // scratch
};

std::string describe_options(const StragglerOptions& o) {
  return "ratio_threshold=" + fmt_num(o.ratio_threshold, "%g") + " persist=" + std::to_string(o.persist_k) + "/" +
         std::to_string(o.persist_n) + " false_alarm_rate=" + fmt_num(o.false_alarm_rate, "%g");
}

}  // namespace

std::unique_ptr<OperatorDef> MakeStraggler(const StragglerOptions& options) {
  return std::make_unique<PerRunDef<Straggler, StragglerOptions>>(options, &describe_options);
}

void RegisterStraggler(Registry& registry) {
  ComponentInfo info;
  info.type = "straggler";
  info.role = Role::kOperator;
  info.doc =
      "Per joined step, scores each rank on its own work time (step_ms minus comm_ms and data_wait_ms where "
      "present) against the median rank, and raises `straggler` for a rank slower than `ratio_threshold` x the "
      "median in at least `persist_k` of the last `persist_n` steps, naming its rank, node and GPU. When the run's "
      "measured rate of isolated slow rank-steps would let more than `false_alarm_rate` chance alerts per step "
      "through at persist_k, it requires more slow steps of the window (up to all persist_n).";
  const StragglerOptions defaults;  // each default is written once, in StragglerOptions
  info.params = {
      {.name = "ratio_threshold",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.ratio_threshold),
       .doc = "Slowest-rank / median-rank work time above which a step counts as slow for that rank.",
       .min = 1.0},
      {.name = "persist_k",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_k),
       .doc = "Slow steps needed within the window to flag a rank.",
       .min = 1,
       .max = 1e6},
      {.name = "persist_n",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_n),
       .doc = "Window length in steps.",
       .min = 1,
       .max = 1e6},
      {.name = "min_ranks",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.min_ranks),
       .doc = "Fewest reporting ranks for a step to be judged.",
       .min = 2},
      {.name = "min_median_ms",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.min_median_ms),
       .doc = "Steps whose median work time is below this are not judged.",
       .min = 0},
      {.name = "false_alarm_rate",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.false_alarm_rate),
       .doc = "Chance alerts per step the persistence rule may let through across the run's ranks, given the run's "
              "measured rate of isolated slow rank-steps; above it, more of the last persist_n steps must be slow (0: "
              "always persist_k).",
       .min = 0,
       .max = 1},
      {.name = "noise_window",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.noise_window),
       .doc = "Steps over which the rate of isolated slow rank-steps is measured (decayed).",
       .min = 1,
       .max = 1e9},
  };
  info.accepts = mask(Kind::kStepRecord) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    StragglerOptions o;
    o.ratio_threshold = ctx.params->get_double("ratio_threshold");
    o.persist_k = ctx.params->get_int("persist_k");
    o.persist_n = ctx.params->get_int("persist_n");
    o.min_ranks = ctx.params->get_int("min_ranks");
    o.min_median_ms = ctx.params->get_double("min_median_ms");
    o.false_alarm_rate = ctx.params->get_double("false_alarm_rate");
    o.noise_window = ctx.params->get_int("noise_window");
    if (o.persist_k > o.persist_n)
      ctx.fail("persist_k", "persist_k (" + std::to_string(o.persist_k) + ") must not exceed persist_n (" +
                                std::to_string(o.persist_n) + ")");
    return MakeStraggler(o);
  });
}

}  // namespace runlens::ops
