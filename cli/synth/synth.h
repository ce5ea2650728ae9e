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
  // straggler | nan | missing_rank | gc_pause | lr_change, and (with detail
  // telemetry, see Options::detail) thermal | power_cap | host_cpu |
  // slow_shard | network | oom | xid | ecc | config_slowdown |
  // slow_checkpoint | checkpoint_failure | clock_low | nvlink | pcie_replay |
  // host_contention, and the fleet shapes speed_groups | slowdown
  std::string kind;
  int32_t rank = -1;
  int64_t from_step = 0;
  int64_t to_step = INT64_MAX;
  double factor = 2.0;  // straggler: work time multiplier; lr_change: LR multiplier; others: see fault_help()
  int64_t code = 0;     // xid: the XID code (default 79, fallen off the bus)
  int32_t shard = -1;   // slow_shard: the dataset shard (default: the one `rank` reads)
  int32_t count = 4;    // slowdown: how many ranks slow down
  bool label = false;   // speed_groups: the rank map names each group's GPU model
};

// Parses "straggler:rank=13,from=100[,to=200][,factor=2]", "nan:step=300",
// "missing_rank:rank=5,from=50", "gc_pause:rank=3,step=40", "lr_change:step=290,factor=20",
// and the faults listed by fault_help().
bool parse_fault(const std::string& text, Fault* out, std::string* error);

// One line per fault kind: its syntax and what it injects (for --fault help).
std::string fault_help();

struct Options {
  std::string run_id = "synth-run";
  int32_t ranks = 64;
  int64_t steps = 200;
  int32_t gpus_per_node = 8;
  uint64_t seed = 1;
  double step_ms = 1900;                   // median work per step
  double jitter = 0.03;                    // relative per-rank noise
  double gc_pause_rate = 0.002;            // chance per rank and step of a one-step pause (healthy noise)
  int64_t gpu_every = 10;                  // steps between GPU and node samples
  int64_t start_ns = 1767225600000000000;  // 2026-01-01T00:00:00Z
  std::string node_prefix = "gpu-node-";   // node names: PREFIX0, PREFIX1, ... (runs at once on a fleet)
  std::vector<Fault> faults = {};
  // Detail telemetry: data, collective and checkpoint events, step memory and
  // dataset shards, GPU error counters and throttle reasons, node network
  // counters, with healthy noise (normal checkpoints, slowly rising counters,
  // occasional counter resets). Off by default so that existing outputs stay
  // byte-identical; any fault after lr_change in the list above turns it on.
  // It draws from its own random stream: a run with detail has the same step
  // and train values as without, except where a fault changes them.
  bool detail = false;
  // Every N steps (0: never), a DataSample (the data loader's batch_load_ms,
  // storage reads, ...) and a Collective (an all_reduce: latency_ms, bytes) for
  // every rank, as a fleet with data-loader and NCCL instrumentation reports
  // them, consistent with the step's data_wait_ms and comm_ms, without the
  // rest of detail telemetry (with detail they come every step anyway). They
  // draw from detail's random stream, so every other record is the same as
  // without them.
  int64_t detail_every = 0;
  int64_t checkpoint_every = 50;  // steps between checkpoints (detail; 0: none)
  int32_t shards = 0;             // dataset shards (0: one per two ranks); rank r reads shard r % shards
};

// Run-graph identity of a synthetic run, stamped on its run_start and run_end
// as they pass through apply_identity (`runlens synth --experiment-id E
// --model-version V --config lr=6e-4 --end-status failed`), so that runs can
// differ in what the store correlates without changing what generate() draws.
struct Identity {
  std::string experiment_id, job_id, model_id, model_version, dataset_version, code_commit;
  ConfigMap config;        // replaces or adds run_start config keys
  std::string end_status;  // replaces run_end's status (completed | failed | aborted)
  std::string end_reason;
  bool empty() const {
    return experiment_id.empty() && job_id.empty() && model_id.empty() && model_version.empty() &&
           dataset_version.empty() && code_commit.empty() && config.empty() && end_status.empty() && end_reason.empty();
  }
};
void apply_identity(const Identity& identity, std::vector<Record>& rows);

// Parses "key=value" for --config: a number when the value reads as one, else text.
bool parse_config_value(const std::string& text, std::pair<std::string, Value>* out, std::string* error);

// Calls `sink` with the events of each step, in event-time order.
void generate(const Options& options, const std::function<void(std::vector<Record>&)>& sink);

}  // namespace runlens::synth
