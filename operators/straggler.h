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
//
// Peer groups. Real fleets are not uniform: GPU models, node types or
// placement make groups of ranks that work at stably different speeds from the
// first step, and a median between the groups would flag the slow group for
// ever. So the first `group_steps` judged steps of a run are a warm-up that
// raises nothing: each rank's level (the median of its log work times) is
// measured, and the ranks are split into groups, by the run_start rank map
// where it names GPU models or node types that differ, else where the sorted
// levels have a gap of `group_gap` or more with at least `min_group_fraction`
// of the ranks (and 2) on each side. When the groups' levels differ by
// group_gap or more, that is one `rank_heterogeneity` (info) naming the
// groups and their ratio. From then on each rank is scored against the median
// of its own group in the same step.
//
// Escalation. An open incident whose rank's ratio reaches `escalation_factor`
// x the ratio it opened at (or last escalated to), in persist_k of the last
// persist_n steps, is published again: the same alert_id, revision + 1, the
// new ratio as its value and `escalation` = 1 in attrs.
//
// A host, not a GPU. A rank slow in bursts (not in every step of the window)
// is not flagged while at least `node_wide_fraction` of the ranks of
// its node (4 or more), and 3 or more, are slow too (the others in 2 or more
// steps of the window): contention that hits a whole host is the host's
// (host_bottleneck), not one GPU's.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct StragglerOptions {
  double ratio_threshold = 1.5;
  int64_t persist_k = 3;
  int64_t persist_n = 5;
  int64_t min_ranks = 2;
  double min_median_ms = 1.0;       // ignore steps too short to judge
  double false_alarm_rate = 1e-4;   // chance alerts per step allowed (0: always persist_k)
  int64_t noise_window = 200;       // steps over which the slow-step rate is measured
  int64_t group_steps = 8;          // warm-up steps that measure the ranks' levels for peer groups (0: no groups)
  double group_gap = 1.3;           // ratio between adjacent rank levels that separates two groups
  double min_group_fraction = 0.1;  // fewest ranks of a group, as a share of the run's ranks (and at least 2)
  double escalation_factor = 2;     // an open incident's ratio this many times its opening ratio: a revision
  double node_wide_fraction = 0.5;  // share of a node's ranks slow at once that makes it the host's (1: never)
};

// Peer groups from ranks' levels (log work times), sorted or not: the ranks
// split at every gap of log(gap) or more that leaves at least `min_group`
// ranks on both sides of it, largest gaps first. Returns the groups, fastest
// first, each sorted by rank; one group when no gap qualifies.
std::vector<std::vector<int32_t>> straggler_peer_groups(std::vector<std::pair<double, int32_t>> levels, double gap,
                                                        size_t min_group);

// The slow steps of the last `n` a rank needs to be flagged, for `ranks` ranks
// whose steps are slow by chance with probability `p`: the least k >=
// persist_k with ranks * P(Binomial(n, p) >= k) <= false_alarm_rate, or n.
int64_t straggler_required_hits(int64_t persist_k, int64_t n, int64_t ranks, double p, double false_alarm_rate);

// The work time a rank is scored on (exposed for tests and the reference check).
double straggler_work_ms(const Step& s);

void RegisterStraggler(Registry& registry);
std::unique_ptr<OperatorDef> MakeStraggler(const StragglerOptions& options);

}  // namespace runlens::ops
