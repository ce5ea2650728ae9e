// comm_bottleneck: the job spends too much of each step in collectives (spec
// sections 12, 36, 58: communication_ratio = communication_time / step_time).
//
// The step's communication time is the least any rank spends in collectives
// (min over ranks of comm_ms / step_ms): ranks that wait for a straggler or a
// data-starved rank spend that wait inside the collective, so their comm_ms
// measures the other rank, not the network; the rank the others wait for
// measures the collective itself. A run raises `comm_bottleneck` when that
// ratio is at or above `ratio_threshold` in `persist_k` of its last
// `persist_n` steps, once per incident (re-armed after `persist_n` steps
// without). `collective` events, where present, add the mean collective
// latency of the step to the alert.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct CommBottleneckOptions {
  double ratio_threshold = 0.25;
  int64_t persist_k = 3;
  int64_t persist_n = 5;
};

void RegisterCommBottleneck(Registry& registry);
std::unique_ptr<OperatorDef> MakeCommBottleneck(const CommBottleneckOptions& options);

}  // namespace runlens::ops
