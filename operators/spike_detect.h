// spike_detect: training instability from the train series (spec sections 10,
// 24, 25).
//  - loss_spike / grad_spike: a finite loss (grad_norm) above a robust rolling
//    baseline of the run's last `window` finite values: above median +
//    `z_threshold` x 1.4826 x MAD and above `loss_min_ratio` (`grad_min_ratio`)
//    x median. Median and MAD, not mean and standard deviation, so that a
//    spike does not inflate its own baseline and a few outliers do not hide
//    the next one. Judged once `min_points` values are known; one alert per
//    incident, re-armed after `rearm_steps` train events without a spike.
//    Non-finite values are nan_detect's.
//  - LR changes: an explicit `config_change` event for key `lr` is noted; a
//    jump in the `lr` series that a smooth schedule does not produce (the new
//    value differs from the linear extrapolation of the two before it by more
//    than `lr_jump` of the previous value; linear warm-up and cosine decay
//    stay far below) is emitted as an `event` row of kind config_change with
//    key lr, old, new and a message saying it was inferred, at the train
//    event's time, unless an explicit lr config_change came within the last
//    three train events. The alert contract has no kind for an LR change: it
//    is a fact for the timeline and root-cause rules, not an alert. Spike
//    alerts carry the step of the latest LR change within the window
//    (`lr_change_step`).
// Only the train events of the run's lowest reporting rank are read (several
// ranks may report the same step).
#pragma once

#include <optional>

#include "operators/operator.h"

namespace runlens::ops {

struct SpikeDetectOptions {
  int64_t window = 100;
  int64_t min_points = 20;
  double z_threshold = 6;
  double loss_min_ratio = 1.3;
  double grad_min_ratio = 3;
  int64_t rearm_steps = 50;
  double lr_jump = 0.2;
};

// Median and MAD of `values` (reorders them); the reference for tests.
struct RobustStats {
  double median = 0;
  double mad = 0;
};
RobustStats robust_stats(std::vector<double>& values);

// The relative LR discontinuity at a step: |lr - (lr1 + (lr1 - lr0) (s - s1) / (s1 - s0))| / |lr1|,
// for the previous values lr1 at step s1 and lr0 at s0 (s0 < s1 < s).
double lr_discontinuity(double lr0, int64_t s0, double lr1, int64_t s1, double lr, int64_t s);

void RegisterSpikeDetect(Registry& registry);
std::unique_ptr<OperatorDef> MakeSpikeDetect(const SpikeDetectOptions& options);

}  // namespace runlens::ops
