// straggler: per joined step, straggler_ratio = slowest rank / median rank
// (spec sections 11, 53).
//
// In synchronous training every rank's wall step time equalizes at the
// collective (the fast ranks wait for the slow one), so each rank is scored
// on its own work time: step_ms minus comm_ms and data_wait_ms where present
// (the rank the others wait for has the least collective wait), falling back
// to step_ms where nothing else is known. A rank is flagged only when it is
// slow (work / median > ratio_threshold) in at least `persist_k` of the last
// `persist_n` steps, so one slow step (a GC pause) does not alert. One alert
// per incident: the rank is re-armed after `persist_n` steps without a slow one.
//
// Many ranks with frequent one-step pauses line `persist_k` of them up by
// chance, more often the more ranks there are. So the operator measures the
// run's rate of isolated slow rank-steps (those of ranks not in a slow streak,
// decayed over about `noise_window` steps) and, when persist_k of persist_n
// would let more than `false_alarm_rate` chance alerts per step through across
// the run's ranks (a binomial tail), requires more slow steps of the window,
// up to all persist_n. A clean run is judged at persist_k; a noisy fleet waits
// a step or two longer instead of alerting on noise.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct StragglerOptions {
  double ratio_threshold = 1.5;
  int64_t persist_k = 3;
  int64_t persist_n = 5;
  int64_t min_ranks = 2;
  double min_median_ms = 1.0;      // ignore steps too short to judge
  double false_alarm_rate = 1e-4;  // chance alerts per step allowed (0: always persist_k)
  int64_t noise_window = 200;      // steps over which the slow-step rate is measured
};

// The slow steps of the last `n` a rank needs to be flagged, for `ranks` ranks
// whose steps are slow by chance with probability `p`: the least k >=
// persist_k with ranks * P(Binomial(n, p) >= k) <= false_alarm_rate, or n.
int64_t straggler_required_hits(int64_t persist_k, int64_t n, int64_t ranks, double p, double false_alarm_rate);

// The work time a rank is scored on (exposed for tests and the reference check).
double straggler_work_ms(const Step& s);

void RegisterStraggler(Registry& registry);
std::unique_ptr<OperatorDef> MakeStraggler(const StragglerOptions& options);

}  // namespace runlens::ops
