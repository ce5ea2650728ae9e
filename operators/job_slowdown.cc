#include "operators/job_slowdown.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "operators/median.h"
#include "operators/placement.h"
#include "operators/ring.h"
#include "operators/run_state.h"
#include "operators/straggler.h"

namespace runlens::ops {
namespace {

// Fewest steps of a rank's own baseline (before the change point) and of its
// level after it for the rank to be judged.
constexpr size_t kMinRankBaseline = 10;
constexpr size_t kMinRankAfter = 3;
// The noise floor of a rank's own log work time (0.1 %): a perfectly steady
// rank is not "changed" by a rounding error.
constexpr double kMinSigma = 1e-3;

struct Point {
  int64_t step = 0;
  double v = 0;  // log ms
  template <class Io>
  void fields(Io& io) {
    io(step, v);
  }
};

// Each rank's last rank_history log work times. A step record's thousand
// ranks find theirs by index (`slot_` by rank, into `rings_`), not by walking
// a map of ranks: that walk was 40 % of this operator's samples (perf, g.rlrec).
class RankRings {
 public:
  // The ring of an indexable_rank, made empty at its first report.
  Ring<Point>& at(int32_t rank) {
    const auto r = static_cast<size_t>(rank);
    if (r >= slot_.size()) slot_.resize(r + 1, -1);
    if (slot_[r] < 0) {
      slot_[r] = static_cast<int32_t>(rings_.size());
      rings_.emplace_back();
    }
    return rings_[static_cast<size_t>(slot_[r])];
  }
  // The rank's ring, or null before its first report.
  const Ring<Point>* find(int32_t rank) const {
    const auto r = static_cast<size_t>(rank);
    return rank >= 0 && r < slot_.size() && slot_[r] >= 0 ? &rings_[static_cast<size_t>(slot_[r])] : nullptr;
  }
  // Snapshots keep the rings as a map by rank, as they were before the index.
  std::map<int32_t, Ring<Point>> by_rank() const {
    std::map<int32_t, Ring<Point>> m;
    for (size_t r = 0; r < slot_.size(); ++r) {
      if (slot_[r] >= 0) m.emplace(static_cast<int32_t>(r), rings_[static_cast<size_t>(slot_[r])]);
    }
    return m;
  }
  template <class Io>
  void assign(std::map<int32_t, Ring<Point>>&& m, Io& io) {
    slot_.clear();
    rings_.clear();
    for (auto& [rank, ring] : m) {
      if (!indexable_rank(rank)) io.fail("a rank of " + std::to_string(rank) + " has a ring of work times");
      at(rank) = std::move(ring);
    }
  }

 private:
  std::vector<int32_t> slot_;  // by rank: the ring's index, -1 before the rank's first report
  std::vector<Ring<Point>> rings_;
};

struct RunState {
  int64_t steps = 0;                   // steps judged since the start (or a restart)
  std::deque<Point> pending;           // the job's last baseline_gap steps: log step ms
  std::deque<double> baseline;         // older steps, outside incidents
  int64_t streak = 0;                  // steps in a row with the job's level risen
  int64_t calm = 0;                    // steps in a row back down, while an incident is open
  bool wide = false;                   // this episode was judged job-wide: not judged again
  std::shared_ptr<const Alert> alert;  // the open incident's alert: closed when the level returns
  RankRings ranks;                     // each rank's last rank_history log work times
  template <class Io>
  void fields(Io& io) {
    if constexpr (runtime::state::kReading<Io>) {
      std::map<int32_t, Ring<Point>> by_rank;
      io(steps, pending, baseline, streak, calm, wide, alert, by_rank);
      ranks.assign(std::move(by_rank), io);
    } else {
      const std::map<int32_t, Ring<Point>> by_rank = ranks.by_rank();
      io(steps, pending, baseline, streak, calm, wide, alert, by_rank);
    }
  }
};

// One rank's own levels around a change point (log work time).
struct Own {
  int32_t rank = 0;
  double before = 0, after = 0, se = 0;
  bool may_have_risen = true;  // false: its baseline is certainly above after - min_rank_change (before not found)
};

// The change point of `xs` (ascending steps, 0 before the change) rising
// to about the level of its last `recent` values: the step t that maximizes
// the sum over steps >= t of (x - h), h half that level (at least `min_h`),
// each term clipped to [-2h, h/2] so that a one-step pause before the change
// gains less than the step before it loses: a pause just before the onset
// does not pull it early unless two of every three steps before it paused.
// Ties go to the later step.
int64_t change_point(const std::vector<Point>& xs, size_t recent, double min_h) {
  std::vector<double> last;
  for (size_t i = xs.size() > recent ? xs.size() - recent : 0; i < xs.size(); ++i) last.push_back(xs[i].v);
  const double h = std::max(min_h, last.empty() ? 0.0 : median_in_place(last) / 2);
  double sum = 0, best = -INFINITY;
  int64_t at = xs.empty() ? 0 : xs.back().step;
  for (auto it = xs.rbegin(); it != xs.rend(); ++it) {
    sum += std::clamp(it->v - h, -2 * h, h / 2);
    if (sum > best) best = sum, at = it->step;
  }
  return at;
}

class JobSlowdown final : public PerRunOperator<JobSlowdown, RunState> {
 public:
  static constexpr runtime::state::StateType kState{"job_slowdown", 1};
  explicit JobSlowdown(const JobSlowdownOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  // A restart forgets the run; its open incident closes first.
  void on_restart(Symbol run, const Record& r, Emitter& out) {
    if (run.empty()) return;
    if (auto it = runs_.find(run); it != runs_.end() && it->second.alert)
      out.emit(closing_record(*it->second.alert, r.time_ns));
    runs_.reset(run);
  }

  void handle(const Record& r, Emitter& out) {
    if (r.kind() == Kind::kRunEnd) {
      // The run's open incident closes with it (a run_end among its inputs: the source).
      Symbol run = r.as<RunEnd>().run_id;
      if (auto it = runs_.find(run); it != runs_.end()) {
        if (it->second.alert) out.emit(closing_record(*it->second.alert, r.time_ns));
        runs_.erase(run);
      }
      return;
    }
    if (r.kind() == Kind::kStepRecord) on_step(r, out);
  }

 private:
  void on_step(const Record& r, Emitter& out) {
    const StepRecord& rec = r.step_record();
    // Incomplete by shedding: its median may lack the shed ranks'.
    if (rec.shed || static_cast<int64_t>(rec.ranks.size()) < o_.min_ranks) return;
    scratch_.clear();
    for (const Step& s : rec.ranks) {
      if (std::isfinite(s.step_ms) && s.step_ms > 0) scratch_.push_back(s.step_ms);
    }
    if (static_cast<int64_t>(scratch_.size()) < o_.min_ranks) return;
    RunState& st = runs_[rec.run_id];
    if (!st.pending.empty() && st.pending.back().step >= rec.step) return;  // a step seen already
    if (++st.steps <= o_.skip_steps) return;
    for (const Step& s : rec.ranks) {
      double w = std::isfinite(s.step_ms) ? straggler_work_ms(s) : NAN;
      if (!(w > 0) || !std::isfinite(w) || !indexable_rank(s.rank)) continue;
      auto& ring = st.ranks.at(s.rank);
      ring.push_back({rec.step, std::log(w)});
      while (static_cast<int64_t>(ring.size()) > o_.rank_history) ring.pop_front();
    }

    // The job's step: the median rank's wall time.
    st.pending.push_back({rec.step, std::log(median_in_place(scratch_))});
    while (static_cast<int64_t>(st.pending.size()) > o_.baseline_gap) {
      // A step joins the baseline baseline_gap steps late, and not during an incident.
      if (!st.alert) st.baseline.push_back(st.pending.front().v);
      st.pending.pop_front();
      while (static_cast<int64_t>(st.baseline.size()) > o_.baseline_steps) st.baseline.pop_front();
    }
    if (static_cast<int64_t>(st.baseline.size()) < o_.min_baseline ||
        static_cast<int64_t>(st.pending.size()) < o_.current_steps)
      return;
    scratch_.assign(st.baseline.begin(), st.baseline.end());
    const double base = median_in_place(scratch_);
    scratch_.clear();
    for (auto it = st.pending.end() - o_.current_steps; it != st.pending.end(); ++it) scratch_.push_back(it->v);
    const double rise = std::exp(median_in_place(scratch_) - base) - 1;

    if (st.alert) {
      // Back under half the rise for persist_k steps: the incident closes, and
      // the steps since join the baseline again.
      st.calm = rise < o_.min_rise / 2 ? st.calm + 1 : 0;
      if (st.calm >= o_.persist_k) {
        out.emit(closing_record(*st.alert, r.time_ns));
        st.alert.reset();
        st.calm = st.streak = 0;
        st.wide = false;
        st.pending.clear();
      }
      return;
    }
    if (rise < o_.min_rise) {
      st.streak = 0;
      st.wide = false;
      return;
    }
    if (++st.streak < o_.persist_k || st.wide) return;
    judge(r, rec, st, base, out);
  }

  // The job rose: find its change point and the ranks that changed at it.
  void judge(const Record& r, const StepRecord& rec, RunState& st, double base, Emitter& out) {
    std::vector<Point> job;
    for (const Point& p : st.pending) job.push_back({p.step, p.v - base});
    int64_t onset = change_point(job, static_cast<size_t>(o_.current_steps), std::log1p(o_.min_rise) / 2);
    if (rec.step - onset + 1 < o_.min_after_steps) return;  // too few steps since: wait
    std::vector<Own> changed = changed_ranks(rec, st, onset);
    if (!changed.empty()) {
      // Refine the change point on the changed ranks' own series, and judge them there.
      std::vector<Point> pooled;
      std::vector<double> z;
      for (const Point& at : st.pending) {
        const int64_t step = at.step;
        z.clear();
        for (const Own& o : changed) {
          const auto& ring = *st.ranks.find(o.rank);  // a changed rank has one
          auto it =
              std::lower_bound(ring.begin(), ring.end(), step, [](const Point& p, int64_t s) { return p.step < s; });
          if (it != ring.end() && it->step == step) z.push_back(it->v - o.before);
        }
        if (z.empty()) continue;
        // The lower median: one paused rank of two does not lift it.
        pooled.push_back({step, lower_median_in_place(z)});
      }
      int64_t refined = change_point(pooled, static_cast<size_t>(o_.current_steps), std::log1p(o_.min_rank_change) / 2);
      if (refined != onset) {
        if (rec.step - refined + 1 < o_.min_after_steps) return;  // too few steps since: wait
        onset = refined;
        changed = changed_ranks(rec, st, onset);
      }
    }
    if (changed.empty()) return;  // nothing of its own (or only stragglers): not this operator's
    if (static_cast<double>(changed.size()) > o_.max_rank_fraction * static_cast<double>(rec.ranks.size())) {
      st.wide = true;  // job-wide: a config, LR or batch change (mfu_drop's); judged again after it
      return;
    }
    scratch_.clear();
    for (const Point& p : st.pending) {
      if (p.step >= onset) scratch_.push_back(p.v);
    }
    const double after = median_in_place(scratch_);
    const double ratio = std::exp(after - base);
    if (ratio < 1 + o_.min_rise) return;  // the rise was the last steps' only, not since the change
    std::stable_sort(changed.begin(), changed.end(),
                     [](const Own& a, const Own& b) { return a.after - a.before > b.after - b.before; });
    st.alert = std::make_shared<const Alert>(make_alert(r, rec, std::exp(base), std::exp(after), onset, changed));
    out.emit(alert_record(*st.alert));
    st.streak = 0;
  }

  // The ranks reporting this step whose own level after `onset` rose past
  // their own baseline before it, leaving out those at straggler_ratio x the
  // median rank's level.
  std::vector<Own> changed_ranks(const StepRecord& rec, const RunState& st, int64_t onset) {
    own_.clear();
    const double min_change = std::log1p(o_.min_rank_change);
    for (const Step& s : rec.ranks) {
      const Ring<Point>* ring = st.ranks.find(s.rank);
      if (!ring || ring->empty() || ring->back().step != rec.step) continue;
      if (!split_at(*ring, onset)) continue;
      Own o;
      o.rank = s.rank;
      o.after = median_in_place(post_);
      // Most ranks did not change at all: their baseline's median lies above
      // after - min_change, so d < min_change below, and a count shows it
      // without selecting the median. The margin keeps the skip to ranks that
      // the subtraction below would skip too, whatever its rounding.
      const double certainly_not = o.after - min_change + 1e-9 * (1 + std::abs(o.after));
      if (median_certainly_above(pre_, certainly_not))
        o.may_have_risen = false;
      else
        o.before = median_in_place(pre_);
      own_.push_back(o);
    }
    std::vector<Own> changed;
    if (static_cast<int64_t>(own_.size()) < o_.min_ranks) return changed;
    levels_.clear();
    for (const Own& o : own_) levels_.push_back(o.after);
    const double median_level = median_in_place(levels_);
    const double straggler = std::log(o_.straggler_ratio);
    for (Own& o : own_) {
      if (o.after - median_level >= straggler) continue;  // the straggler operator's
      if (!o.may_have_risen) continue;
      double d = o.after - o.before;
      if (d < min_change) continue;
      // Its noise, only for a rank that rose enough to need it (most do not):
      // the baseline's median absolute deviation.
      split_at(*st.ranks.find(o.rank), onset);
      for (double& x : pre_) x = std::abs(x - o.before);
      double sigma = std::max(kMinSigma, 1.4826 * median_in_place(pre_));
      // The standard error of a difference of two medians (1.2533 sigma / sqrt(n) each).
      o.se = 1.2533 * sigma * std::sqrt(1.0 / double(post_.size()) + 1.0 / double(pre_.size()));
      if (d >= o_.rank_sigmas * o.se) changed.push_back(o);
    }
    return changed;
  }

  // A rank's ring split at `onset` into pre_ (its own baseline: at most the
  // last baseline_steps before the change point) and post_; false when
  // either is too short to judge the rank.
  bool split_at(const Ring<Point>& ring, int64_t onset) {
    pre_.clear();
    post_.clear();
    for (const Point& p : ring) (p.step >= onset ? post_ : pre_).push_back(p.v);
    if (static_cast<int64_t>(pre_.size()) > o_.baseline_steps) pre_.erase(pre_.begin(), pre_.end() - o_.baseline_steps);
    return pre_.size() >= kMinRankBaseline && post_.size() >= kMinRankAfter;
  }

  // The node every changed rank runs on, when the run spans several nodes; else empty.
  static Symbol shared_node(const RunInfo* run, const std::vector<Own>& changed) {
    if (!run) return {};
    Symbol node;
    for (const Own& o : changed) {
      const RankPlacement* p = run->place(o.rank);
      if (!p || p->node.empty() || (!node.empty() && p->node != node)) return {};
      node = p->node;
    }
    for (const RankPlacement& p : run->placement) {
      if (!p.node.empty() && p.node != node) return node;
    }
    return {};
  }

  Alert make_alert(const Record& r, const StepRecord& rec, double before_ms, double after_ms, int64_t onset,
                   const std::vector<Own>& changed) {
    Alert a;
    a.kind = alert_kind::kJobSlowdown;
    a.severity = Severity::kWarning;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = rec.run_id;
    a.step = rec.step;
    const double ratio = after_ms / before_ms;
    a.value = ratio;
    a.threshold = 1 + o_.min_rise;
    auto pct = [](double x) { return fmt_num(100 * (x - 1)) + " %"; };
    a.summary = "JOB SLOWDOWN: step time " + fmt_num(before_ms) + " -> " + fmt_num(after_ms) + " ms (+" + pct(ratio) +
                ") since step " + std::to_string(onset) + "; ";
    a.attrs = {{"before_ms", before_ms},
               {"after_ms", after_ms},
               {"ranks", static_cast<double>(changed.size())},
               {"onset_step", static_cast<double>(onset)}};
    if (changed.size() == 1) {
      const Own& o = changed.front();
      std::string where = locate_rank(a, rec.run.get(), o.rank);
      double own = std::exp(o.after - o.before);
      a.attrs.push_back({"rank_" + std::to_string(o.rank), own});
      a.summary += where + " works " + fmt_num(100 * (own - 1)) + " % slower than its own baseline";
    } else {
      std::string names;
      size_t named = std::min<size_t>(changed.size(), kJobSlowdownNamedRanks);
      for (size_t i = 0; i < named; ++i) {
        const Own& o = changed[i];
        double own = std::exp(o.after - o.before);
        a.attrs.push_back({"rank_" + std::to_string(o.rank), own});
        names += (i == 0                                      ? ""
                  : i + 1 == named && named == changed.size() ? " and "
                                                              : ", ") +
                 std::to_string(o.rank) + " (+" + pct(own) + ")";
      }
      if (named < changed.size()) names += " and " + std::to_string(changed.size() - named) + " more";
      // All on one node of several: a host's symptom, named by its node.
      Symbol node = shared_node(rec.run.get(), changed);
      if (!node.empty()) {
        a.node = node;
        names += ", all on node " + node.string() + ",";
      }
      a.summary += "ranks " + names + " work slower than their own baselines";
    }
    a.alert_id = make_alert_id(a, onset);
    return a;
  }

  JobSlowdownOptions o_;
  std::vector<double> scratch_, pre_, post_, levels_;  // scratch
  std::vector<Own> own_;
};

std::string describe_options(const JobSlowdownOptions& o) {
  return "min_rise=" + fmt_num(o.min_rise, "%g") + " min_rank_change=" + fmt_num(o.min_rank_change, "%g") +
         " max_rank_fraction=" + fmt_num(o.max_rank_fraction, "%g") + " baseline=" + std::to_string(o.baseline_steps) +
         " steps, " + std::to_string(o.baseline_gap) + " back";
}

}  // namespace

std::unique_ptr<OperatorDef> MakeJobSlowdown(const JobSlowdownOptions& options) {
  return std::make_unique<PerRunDef<JobSlowdown, JobSlowdownOptions>>(options, &describe_options);
}

void RegisterJobSlowdown(Registry& registry) {
  ComponentInfo info;
  info.type = "job_slowdown";
  info.role = Role::kOperator;
  info.doc =
      "Per joined step, compares the job's step time (the median rank's wall step) over the last `current_steps` "
      "steps with its baseline (up to `baseline_steps` steps ending `baseline_gap` back, outside incidents); when it "
      "is at least `min_rise` higher for `persist_k` steps in a row, finds the change point (a clipped CUSUM) and "
      "compares each rank's own work time after it with the rank's own history before it. Raises `job_slowdown` "
      "(warning) when at least one rank rose by `min_rank_change` and `rank_sigmas` standard errors of its own noise, "
      "and at most `max_rank_fraction` of the ranks did (more: job-wide, mfu_drop's); ranks at `straggler_ratio` x "
      "the median rank are the straggler operator's and left out. Run-level when several ranks changed, naming the "
      "rank when one did; closed when the job's level returns.";
  const JobSlowdownOptions defaults;  // each default is written once, in JobSlowdownOptions
  info.params = {
      {.name = "min_rise",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.min_rise),
       .doc = "Rise of the job's step time over its baseline that counts (0.1: 10 %); the alert's threshold is 1 + it.",
       .min = 0.01,
       .max = 10},
      {.name = "min_rank_change",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.min_rank_change),
       .doc = "Rise of a rank's own work time over its own baseline for it to count as changed.",
       .min = 0.001,
       .max = 10},
      {.name = "max_rank_fraction",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.max_rank_fraction),
       .doc = "Most changed ranks, as a share of the ranks that reported, for the slowdown to be localized (more: "
              "job-wide, not raised).",
       .min = 0,
       .max = 1},
      {.name = "straggler_ratio",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.straggler_ratio),
       .doc = "A rank whose own level is at least this times the median rank's is a straggler (the straggler "
              "operator's) and left out; keep it at the straggler's ratio_threshold.",
       .min = 1},
      {.name = "rank_sigmas",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.rank_sigmas),
       .doc = "Standard errors (from the rank's own noise: 1.4826 MAD of its baseline) a rank's rise must also reach.",
       .min = 0,
       .max = 100},
      {.name = "current_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.current_steps),
       .doc = "Steps whose median is the job's current level.",
       .min = 1,
       .max = 1e4},
      {.name = "persist_k",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_k),
       .doc = "Steps in a row the rise must hold (and the return, to close).",
       .min = 1,
       .max = 1e4},
      {.name = "baseline_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.baseline_steps),
       .doc = "Most steps in the job's baseline, and in each rank's own baseline before the change point.",
       .min = 1,
       .max = 1e5},
      {.name = "baseline_gap",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.baseline_gap),
       .doc = "Steps after which a step joins the baseline: the change point is searched within them, so a slowdown "
              "must be judged within this many steps of its start.",
       .min = 1,
       .max = 1e4},
      {.name = "min_baseline",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.min_baseline),
       .doc = "Baseline steps needed before the job is judged.",
       .min = 1,
       .max = 1e5},
      {.name = "min_after_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.min_after_steps),
       .doc = "Steps since the change point (itself included) needed before the ranks are judged.",
       .min = 3,
       .max = 1e4},
      {.name = "rank_history",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.rank_history),
       .doc = "Steps of each rank's own work time kept (its ring).",
       .min = 16,
       .max = 1e5},
      {.name = "skip_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.skip_steps),
       .doc = "First steps of a run (and after a restart) left out (compilation, warm-up).",
       .min = 0,
       .max = 1e6},
      {.name = "min_ranks",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.min_ranks),
       .doc = "Fewest reporting ranks for a step to be judged.",
       .min = 2},
  };
  info.accepts = mask(Kind::kStepRecord) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    JobSlowdownOptions o;
    o.min_rise = ctx.params->get_double("min_rise");
    o.min_rank_change = ctx.params->get_double("min_rank_change");
    o.max_rank_fraction = ctx.params->get_double("max_rank_fraction");
    o.straggler_ratio = ctx.params->get_double("straggler_ratio");
    o.rank_sigmas = ctx.params->get_double("rank_sigmas");
    o.current_steps = ctx.params->get_int("current_steps");
    o.persist_k = ctx.params->get_int("persist_k");
    o.baseline_steps = ctx.params->get_int("baseline_steps");
    o.baseline_gap = ctx.params->get_int("baseline_gap");
    o.min_baseline = ctx.params->get_int("min_baseline");
    o.min_after_steps = ctx.params->get_int("min_after_steps");
    o.rank_history = ctx.params->get_int("rank_history");
    o.skip_steps = ctx.params->get_int("skip_steps");
    o.min_ranks = ctx.params->get_int("min_ranks");
    if (o.current_steps > o.baseline_gap)
      ctx.fail("current_steps", "current_steps (" + std::to_string(o.current_steps) +
                                    ") must not exceed baseline_gap (" + std::to_string(o.baseline_gap) + ")");
    if (o.min_after_steps > o.baseline_gap)
      ctx.fail("min_after_steps", "min_after_steps (" + std::to_string(o.min_after_steps) +
                                      ") must not exceed baseline_gap (" + std::to_string(o.baseline_gap) + ")");
    if (o.min_baseline > o.baseline_steps)
      ctx.fail("min_baseline", "min_baseline (" + std::to_string(o.min_baseline) +
                                   ") must not exceed baseline_steps (" + std::to_string(o.baseline_steps) + ")");
    if (o.rank_history < o.baseline_gap + static_cast<int64_t>(kMinRankBaseline))
      ctx.fail("rank_history", "rank_history (" + std::to_string(o.rank_history) +
                                   ") must hold baseline_gap + 10 steps (" + std::to_string(o.baseline_gap + 10) + ")");
    return MakeJobSlowdown(o);
  });
}

}  // namespace runlens::ops
