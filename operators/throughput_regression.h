// throughput_regression: a run slower than itself (spec sections 8, 9, 36:
// "tokens/sec drops > 25 %", "MFU drops > 20 %"), from step_stats.
//  - throughput_drop: the run's tokens/s over its last `window` steps (tokens
//    over wall step time, summed) is more than `throughput_drop` below its
//    baseline: the same measure over up to `baseline_steps` earlier steps.
//  - mfu_drop: the same for the MFU of compute: MFU (step_stats: model FLOP/s
//    over peak FLOP/s of the ranks that reported) scaled from the job's wall
//    step time to the median rank's work time (step_ms - comm_ms -
//    data_wait_ms). Stalls (a straggler, data waits, slow collectives) lower
//    wall-clock MFU and throughput alike and have their own alerts; the MFU of
//    compute falls only when the computation itself is slower (a config
//    change, throttled clocks on every GPU, a bad kernel): "GPU util normal,
//    MFU down: inefficient compute" (spec section 59). Needs gpu_peak_flops
//    and model_flops_per_token in run_start.
// A step is "low" when its own value is below the baseline median by at least
// half the threshold. A drop counts when the window's value is below the
// baseline by more than the threshold and at least half the window's steps are
// low (one long stall moves the mean, not the majority), for `persist_k` steps
// in a row. Steps join the baseline one window after they leave the current
// window, and not during an incident, so a regression never becomes its own
// baseline. The first `skip_steps` steps of a run (and after a restart) are
// left out (compilation, warm-up). Onset: the first step of the run of low
// steps that ends at the alert. One alert per incident; re-armed when the
// windowed drop is back under half the threshold.
// Alerts carry the run's latest config_change (step) when one came after the
// baseline began.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct ThroughputRegressionOptions {
  double throughput_drop = 0.25;
  double mfu_drop = 0.2;
  int64_t window = 8;
  int64_t baseline_steps = 50;
  int64_t min_baseline = 10;
  int64_t skip_steps = 3;
  int64_t persist_k = 3;
};

void RegisterThroughputRegression(Registry& registry);
std::unique_ptr<OperatorDef> MakeThroughputRegression(const ThroughputRegressionOptions& options);

}  // namespace runlens::ops
