// A synthetic fleet: telemetry of one training run with realistic noise and
// injectable faults, for tests, demos and benchmarks (`runlens synth`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "schema/record.h"

namespace runlens::synth {

struct Fault {
  std::string kind;  // straggler | nan | missing_rank | gc_pause | lr_change
  int32_t rank = -1;
  int64_t from_step = 0;
  int64_t to_step = INT64_MAX;
  double factor = 2.0;  // straggler: work time multiplier; lr_change: LR multiplier
};

// Parses "straggler:rank=13,from=100[,to=200][,factor=2]", "nan:step=300",
// "missing_rank:rank=5,from=50", "gc_pause:rank=3,step=40", "lr_change:step=290,factor=20".
bool parse_fault(const std::string& text, Fault* out, std::string* error);

struct Options {
  std::string run_id = "synth-run";
  int32_t ranks = 64;
  int64_t steps = 200;
  int32_t gpus_per_node = 8;
  uint64_t seed = 1;
  double step_ms = 1900;         // median work per step
  double jitter = 0.03;          // relative per-rank noise
  double gc_pause_rate = 0.002;  // chance per rank and step of a one-step pause (healthy noise)
  int64_t gpu_every = 10;        // steps between GPU and node samples
  int64_t start_ns = 1767225600000000000;  // 2026-01-01T00:00:00Z
  std::vector<Fault> faults;
};

// Calls `sink` with the events of each step, in event-time order.
void generate(const Options& options, const std::function<void(std::vector<Record>&)>& sink);

}  // namespace runlens::synth
