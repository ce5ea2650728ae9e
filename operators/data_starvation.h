// data_starvation: ranks waiting for their input (spec sections 13, 27, 58):
// per joined step and rank, data_wait_ratio = data_wait_ms / step_ms. A step
// is starved when some rank's ratio is at or above `ratio_threshold`; a run
// raises `data_starvation` when `persist_k` of its last `persist_n` steps are
// starved, once per incident (re-armed after `persist_n` steps without).
//
// The alert names the starved ranks (those starved in at least `persist_k`
// steps of the window; the worst one as rank/node/GPU) and, from the ranks'
// latest `data` events, the dataset shard the worst rank reads and its
// storage_read_ms against the median over the run's ranks: a shard read
// `slow_storage_factor` times slower than the median is named as the likely
// cause (a slow shard), otherwise storage reads are said to be normal (look at
// the host or the loader).
//
// Ranks are judged separately, not through the run's mean ratio: in
// synchronous training one starved rank stalls every rank, but moves the mean
// by only 1 / world size.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct DataStarvationOptions {
  double ratio_threshold = 0.1;
  int64_t persist_k = 3;
  int64_t persist_n = 5;
  double slow_storage_factor = 2.0;
};

void RegisterDataStarvation(Registry& registry);
std::unique_ptr<OperatorDef> MakeDataStarvation(const DataStarvationOptions& options);

}  // namespace runlens::ops
