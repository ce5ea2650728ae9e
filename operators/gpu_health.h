// gpu_health: GPU hardware health from gpu samples and xid events (spec
// sections 5-7 and 36), per GPU:
//  - thermal_throttle: DCGM throttle_reasons sw_thermal (0x20) or hw_thermal
//    (0x40), or temp_c at or above `temp_threshold`;
//  - power_throttle: hw_power_brake (0x80); hw_slowdown (0x8) without a thermal
//    reason; or power_cap (0x4) while the clock is `clock_drop` below the GPU's
//    own recent clock (a GPU at its power limit with full clocks is normal
//    under load, so the power_cap bit alone does not count);
//  - clock_low: sm_clock_mhz `clock_drop` below the median of the GPU's own
//    last `clock_window` unthrottled samples while busy, with no throttle
//    reason that explains it ("GPU clock unexpectedly low");
//  - memory_pressure: memory_headroom = 1 - mem_used_bytes / mem_total_bytes
//    below `min_headroom`; where a sample has no mem_used_bytes, the latest
//    step's mem_reserved_bytes of the rank on the GPU stands in for it (and
//    the last total the GPU reported for a missing total).
//    These four need `persist_k` of the last `persist_n` samples of the GPU
//    and re-arm after `persist_n` samples without.
//  - xid_error (critical): an `event` of kind xid, or a sample whose xid field
//    changes to a non-zero code; the same code on the same GPU within
//    `xid_dedupe` is the same incident.
//  - ecc_uncorrected (critical), nvlink_error, pcie_replay: an increase of
//    ecc_dbe_total, nvlink_errors_total or pcie_replay_total between two
//    samples of at least the `*_min_increase`. Totals are counters: a total
//    below the previous one is a reset, and the increase is then the new total
//    (errors since the reset), never negative. Re-armed after `rearm_samples`
//    samples without an increase.
//
// gpu samples carry no run_id, so the operator is partitioned by node; every
// partition sees every run_start, run_end and step record (key() is nullopt
// for them) to name the run, rank and current step of the GPU. An xid event
// that names a run and rank but no node is also sent to every partition and
// handled by the one that owns the rank's node.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct GpuHealthOptions {
  double temp_threshold_c = 88;
  double clock_drop = 0.15;
  int64_t clock_window = 10;
  double min_util_pct = 50;
  double min_headroom = 0.02;
  int64_t persist_k = 2;
  int64_t persist_n = 3;
  int64_t xid_dedupe_ns = 300'000'000'000;
  int64_t ecc_dbe_min_increase = 1;
  int64_t nvlink_min_increase = 1;
  int64_t pcie_replay_min_increase = 8;
  int64_t rearm_samples = 10;
};

// DCGM clock-event reasons (gpu.throttle_reasons).
constexpr int64_t kThrottlePowerCap = 0x4;
constexpr int64_t kThrottleHwSlowdown = 0x8;
constexpr int64_t kThrottleSwThermal = 0x20;
constexpr int64_t kThrottleHwThermal = 0x40;
constexpr int64_t kThrottleHwPowerBrake = 0x80;

// The increase of a counter from `previous` to `current`: a decrease is a
// reset, after which the increase is `current` itself.
inline int64_t counter_increase(int64_t previous, int64_t current) {
  return current >= previous ? current - previous : current;
}

void RegisterGpuHealth(Registry& registry);
std::unique_ptr<OperatorDef> MakeGpuHealth(const GpuHealthOptions& options);

}  // namespace runlens::ops
