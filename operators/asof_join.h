// asof_join: attaches to each per-rank alert the GPU and node samples of
// where that rank runs, nearest in event time (spec sections 11 and 53:
// "then automatically correlate GPU, CPU, memory, NVLink, NIC, temperature"),
// as `attrs` entries (docs/alerts.md, "Context attrs"): the GPU's
// temperature, SM clock, utilization, power, throttle reasons and memory, the
// median temperature and clock of the node's other GPUs, and the node's CPU,
// network throughput and TCP retransmit and RDMA error rates.
//
// The alert's node and GPU are its own locators, or those of its rank in the
// run_start rank map. Alert now, refine later (docs/alerts.md, "Revisions"):
// the alert is published at once with the latest sample at or before its
// event time, no older than `tolerance`: that is all canonical order has
// delivered when the alert arrives, so it is deterministic. With `lookahead`,
// a later sample may be nearer: when event time passes the alert plus
// min(`lookahead`, age of the as-of sample), the only later samples that
// could be nearer, the alert is looked at again, and published again (same
// alert_id, revision + 1, its own time_ns) when a nearer sample changes its
// attrs. Those second looks happen in event-time order, interleaved with
// rows; a run_end or a failure event of the alert's run (stops_run) takes
// them at once. Existing attrs are never overwritten; alerts of other kinds
// (see `kinds`) and alerts whose place is unknown pass through unchanged.
//
// gpu and node samples carry no run_id, so the operator is partitioned by
// node: samples go to the partition of their node, alerts to the partition of
// theirs (an alert that names only a rank goes to every partition, and the one
// that owns the rank's node emits it), run_start, run_end and events to every
// partition. Memory is bounded: per GPU and per node a ring of the samples of
// the last `history` of event time (at most 64).
#pragma once

#include <string>
#include <vector>

#include "operators/operator.h"

namespace runlens::ops {

struct AsofJoinOptions {
  int64_t tolerance_ns = 60'000'000'000;
  int64_t lookahead_ns = 0;
  int64_t history_ns = 300'000'000'000;
  std::vector<std::string> kinds;  // alert kinds to enrich; empty: all but diagnosis
};

void RegisterAsofJoin(Registry& registry);
std::unique_ptr<OperatorDef> MakeAsofJoin(const AsofJoinOptions& options);

}  // namespace runlens::ops
