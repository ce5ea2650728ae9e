// host_bottleneck: a node's host is saturated (spec section 59, "CPU wait ↑ →
// host bottleneck"): its cpu_pct is at or above `cpu_threshold` while its
// ranks wait for data (the mean data_wait_ms / step_ms of the node's ranks of
// a run is at or above `data_wait_ratio`: data loader workers starved of CPU),
// in `persist_k` of the last `persist_n` steps of the run. One alert per node,
// run and incident, naming the node, its most data-starved rank and that
// rank's GPU; re-armed after `persist_n` steps without.
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
  int64_t max_sample_age_ns = 60'000'000'000;
  int64_t persist_k = 3;
  int64_t persist_n = 5;
};

void RegisterHostBottleneck(Registry& registry);
std::unique_ptr<OperatorDef> MakeHostBottleneck(const HostBottleneckOptions& options);

}  // namespace runlens::ops
