// host_bottleneck: a node's host is saturated (spec section 59, "CPU wait ↑ →
// host bottleneck"): its cpu_pct is at or above `cpu_threshold` while its
// ranks of a run show it, in one of two readings, in `persist_k` of the last
// `persist_n` steps of the run:
//
//   data wait: the mean data_wait_ms / step_ms of the node's ranks is at or
//     above `data_wait_ratio` (data loader workers starved of CPU);
//   compute: the mean over the node's ranks of their work time
//     (straggler_work_ms) / the run's median rank's is at or above
//     1 + `work_excess`, with at least two of them (its only one, on a node of
//     one rank) over that bar. In a DDP job a contended host shows as compute
//     time, not data wait: its ranks launch their kernels late and work
//     slower than the run's other ranks, in bursts. Several of the node's
//     ranks at once, because one slow rank alone is a GPU straggler.
//
// One alert per node, run and incident, naming the node, its most
// data-starved rank (the data reading) or its slowest (the compute reading)
// and that rank's GPU, with attrs saying which reading fired
// (`data_wait_ratio` or `work_ratio`, or both) and the CPU split of the
// node's sample (cpu_user_pct, cpu_system_pct, cpu_iowait_pct, cpu_steal_pct)
// where it has one; re-armed after `persist_n` steps without. A job whose
// hosts send no node samples gets no host_bottleneck: without the node's CPU
// nothing says the host is the cause (docs/alerts.md).
//
// Node samples carry no run_id: the operator is partitioned by node, and every
// partition sees every run_start, run_end and step record (key() is nullopt
// for them), reading only the ranks placed on the nodes it owns.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct HostBottleneckOptions {
  double cpu_threshold_pct = 90;
  double data_wait_ratio = 0.1;
  double work_excess = 0.1;    // the compute reading: mean work / run median >= 1 + this
  double min_median_ms = 1.0;  // steps whose median rank works less are not judged for it
  int64_t max_sample_age_ns = 60'000'000'000;
  int64_t persist_k = 3;
  int64_t persist_n = 5;
};

void RegisterHostBottleneck(Registry& registry);
std::unique_ptr<OperatorDef> MakeHostBottleneck(const HostBottleneckOptions& options);

}  // namespace runlens::ops
