// checkpoint_health: checkpoints of a run (spec sections 14 and 58).
//  - checkpoint_failure: a `checkpoint` event with ok = false. One alert per
//    incident, re-armed by the next successful checkpoint; attrs name the last
//    successful checkpoint's step and age, and the failures in a row.
//  - checkpoint_overhead = checkpoint time / training window: a checkpoint's
//    duration_ms over the event time since the run's previous checkpoint (or
//    its run_start, or its restart). Raised when `persist_k` checkpoints in a
//    row are at or above `overhead_threshold`, once per incident; re-armed by
//    a checkpoint below it.
// Checkpoint event time is taken as the checkpoint's end.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct CheckpointHealthOptions {
  double overhead_threshold = 0.1;
  int64_t persist_k = 2;
};

void RegisterCheckpointHealth(Registry& registry);
std::unique_ptr<OperatorDef> MakeCheckpointHealth(const CheckpointHealthOptions& options);

}  // namespace runlens::ops
