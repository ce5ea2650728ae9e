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
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct StragglerOptions {
  double ratio_threshold = 1.5;
  int64_t persist_k = 3;
  int64_t persist_n = 5;
  int64_t min_ranks = 2;
  double min_median_ms = 1.0;  // ignore steps too short to judge
};

// The work time a rank is scored on (exposed for tests and the reference check).
double straggler_work_ms(const Step& s);

void RegisterStraggler(Registry& registry);
std::unique_ptr<OperatorDef> MakeStraggler(const StragglerOptions& options);

}  // namespace runlens::ops
