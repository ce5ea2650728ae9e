// rank_join: joins one step's `step` events from all ranks of a run.
//
// World size and the rank map come from run_start. A step record is emitted
// when every rank has reported, or when event time passes the step's first
// report plus `timeout`, naming the missing ranks. A rank missing past the
// timeout raises `rank_missing` (critical: a hang or a dead GPU), once per
// rank until it reports again. Storms are one alert: when more than
// `stall_fraction` of the ranks miss a step, one run-level `job_stalled`;
// when all the ranks of a node (two or more) go missing at one step, one
// `node_unreachable` naming the node. A report whose step jumps more than
// `max_step_jump` past the run's current step (the lower median of the
// ranks' latest steps) is a `step_anomaly` (once, until that rank reports a
// plausible step again): it is dead-lettered and opens no step, so it starts
// no deadline for the other ranks. State is bounded: a step lives at most
// `timeout` of event time (and at most `max_pending_steps` per run), and a
// restart or run_end drops what can no longer complete.
//
// A job that stops closes its windows: a run_end, or a failure event of the
// run (stops_run: oom, xid, exception, nccl_timeout, abort), emits the run's
// pending steps at once with the ranks that arrived, raising no rank_missing,
// node_unreachable or job_stalled for them (the failure is the alert).
//
// Shedding (overflow: shed) never looks like a hung rank: the runtime's
// reports of step reports shed on the way (on_shed) mark every step with a
// report shed within its time span (from `timeout` before its first report
// to its deadline) as incomplete by shedding: emitted with StepRecord::shed,
// raising no rank_missing, job_stalled or node_unreachable. What was shed is
// counted per run and minute of event time, and raised as one
// `telemetry_shed` info alert when event time passes the minute's end.
//
// Timers fire in event-time order interleaved with the rows (a deadline
// fires before any row at or after it), so what is "missing" does not depend
// on how the input was batched.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct RankJoinOptions {
  int64_t timeout_ns = 30'000'000'000;
  int64_t max_pending_steps = 4096;
  bool alert_missing = true;
  // More than this share of a run's ranks missing one step is one job_stalled.
  double stall_fraction = 0.5;
  // A synchronous job's ranks stay within a step or two of each other, and a
  // run that reports its steps every Nth step moves the median by N: 1000
  // leaves room for both, while a corrupted counter (10^6 at step 100, a
  // garbage 32-bit value) lies far beyond it. A smaller jump still opens a
  // step of its own, judged by the timeout as before: the smaller the
  // default, the fewer such jumps pass.
  int64_t max_step_jump = 1000;
};

// Fills a step record's per-rank measures (StepRecord::work_ms,
// ratio_to_median, slowest_rank) from its ranks; rank_join does it for every
// record it emits. A rank's own work time keeps the wall step when its waits
// cover it all (unlike straggler_work_ms, which may give 0), so a stored
// ratio is never 0 for a rank that reported; the two agree on every
// consistent step.
void measure_ranks(StepRecord& rec);

void RegisterRankJoin(Registry& registry);
std::unique_ptr<OperatorDef> MakeRankJoin(const RankJoinOptions& options);

}  // namespace runlens::ops
