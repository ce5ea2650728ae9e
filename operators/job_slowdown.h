// job_slowdown: the job's step time rose and stayed up, localized to the
// ranks whose own work time changed at that step (issue 14: "own baselines",
// "job slowdown localized"; spec sections 11 and 53).
//
// The job's step time is the median over a step's ranks of their wall step
// (in synchronous training every rank's wall time equalizes). Its current
// level (the median of the last `current_steps` steps) is compared with a
// baseline: the median of up to `baseline_steps` earlier steps, which a step
// joins `baseline_gap` steps after it came and not while an incident is open,
// so a slowdown is judged before it becomes its own baseline. The job "rose"
// when the current level is at least `min_rise` above the baseline for
// `persist_k` steps in a row; no judgement before `min_baseline` baseline
// steps (and the first `skip_steps` of a run are left out: warm-up).
//
// Own baselines. Each rank keeps a ring of its last `rank_history` log work
// times (straggler_work_ms). When the job rose, the change point is found by
// a CUSUM of the job's log step time against its baseline, summed back from
// now with per-step increments clipped (so one paused step moves it by at
// most one clip); each rank's own level after it (the median of its log work
// since) is compared with its own baseline before it (the median of the ring
// before it). A rank "changed at that step" when its level rose by at least
// `min_rank_change` and by at least `rank_sigmas` standard errors of that
// difference, from its own noise (1.4826 MAD of its baseline). The change
// point is then refined by the same CUSUM on the changed ranks' median log
// ratio to their own baselines (cleaner than the job's step, which one-step
// pauses of any rank lift), and the ranks judged again at it. The judgement
// waits until the change point is `min_after_steps` steps back.
//
// Localized: an alert only when at least one rank changed and the changed
// ranks are at most `max_rank_fraction` of the ranks that reported (when most
// changed it is job-wide: throughput_regression's mfu_drop owns it; the
// episode is not judged again until the job's level falls back under the
// threshold). Ranks whose level is at least `straggler_ratio` x the median
// rank's are the straggler operator's and left out; with none other changed,
// nothing is raised.
//
// One `job_slowdown` warning per incident: run-level when several ranks
// changed, naming the rank (rank, node, GPU) when exactly one did, and the
// node (no rank) when several did and all run on one node of a run that
// spans several (contention on one host is a host's symptom). value is
// the job's step time after / before, threshold 1 + min_rise; attrs
// before_ms, after_ms, ranks (how many changed), onset_step and, for up to 8
// of them (the most changed first), rank_N = rank N's own after / before.
// The incident closes (its closing revision) when the job's current level is
// back under half the rise for persist_k steps in a row, at the run's end,
// or at a restart (which forgets the run).
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct JobSlowdownOptions {
  double min_rise = 0.10;
  double min_rank_change = 0.05;
  double max_rank_fraction = 0.5;
  double straggler_ratio = 1.5;
  double rank_sigmas = 3.5;
  int64_t current_steps = 5;
  int64_t persist_k = 2;
  int64_t baseline_steps = 40;
  int64_t baseline_gap = 10;
  int64_t min_baseline = 20;
  int64_t min_after_steps = 8;
  int64_t rank_history = 50;
  int64_t skip_steps = 3;
  int64_t min_ranks = 2;
};

// The most ranks an alert names in its attrs and summary.
constexpr int kJobSlowdownNamedRanks = 8;

void RegisterJobSlowdown(Registry& registry);
std::unique_ptr<OperatorDef> MakeJobSlowdown(const JobSlowdownOptions& options);

}  // namespace runlens::ops
