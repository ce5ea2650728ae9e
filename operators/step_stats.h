// step_stats: per joined step, the aggregates of spec sections 11, 28 and 58:
// quantiles of the ranks' work time, the slowest rank and straggler_ratio,
// tokens/s, MFU (from run_start's gpu_peak_flops and model_flops_per_token),
// data_wait_ratio and communication_ratio, joined with the step's loss, LR and
// grad norm from its train event (waited for up to `train_wait` of event time).
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct StepStatsOptions {
  int64_t train_wait_ns = 10'000'000'000;
  int64_t max_pending = 4096;  // steps per run held waiting for a train event
};

// The aggregates of one step record, without train metrics (exposed for tests).
StepStats compute_step_stats(const StepRecord& rec);

void RegisterStepStats(Registry& registry);
std::unique_ptr<OperatorDef> MakeStepStats(const StepStatsOptions& options);

}  // namespace runlens::ops
