// oom_detect: an `event` of kind oom becomes an `oom` alert (critical) that
// says what ran out of memory, not just "CUDA OOM" (spec section 6: "memory
// spike, step 48,210, sequence length 32K, dataset shard 31"): the rank (and
// its node and GPU, from run_start), the step (the event's, or the step after
// the rank's last report: an OOM step never completes, so it sends no step
// event), the dataset shard of that step (from the rank's `data` event for it,
// or its last step), and from the rank's last `history_steps` joined steps its
// latest sequence length and peak memory against their medians. One alert per
// rank and step.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct OomDetectOptions {
  int64_t history_steps = 16;
};

void RegisterOomDetect(Registry& registry);
std::unique_ptr<OperatorDef> MakeOomDetect(const OomDetectOptions& options);

}  // namespace runlens::ops
