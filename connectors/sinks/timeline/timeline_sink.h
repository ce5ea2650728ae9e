// timeline: the sink that keeps the correlated run graph (store/store.h).
//
// Per run it writes the run and its entities (experiment, model version,
// dataset, config, code commit, rank -> node -> GPU allocation), checkpoints
// and their artifacts, alerts grouped into incidents, the per-step aggregates
// of step_stats, and a timeline ordered by step and time: LR and config
// changes, loss and gradient-norm jumps, non-finite values, alerts and
// diagnoses, XID/OOM/NCCL/exception events, checkpoints, restarts and the end
// of the run (also to `timeline_path`, one JSON object per line).
//
// Retention is tiered (spec sections 28-34): every step's aggregates; per
// rank, one summary per `rank_window` steps; full-resolution rank rows only
// from `failure_window_steps` before an alert to as many after, and for the
// last window of each run; GPU rows likewise within `failure_window_time` of
// an alert; GPU and node samples rolled up per tier with a retention each.
// So the store grows with steps and alerts, not with ranks x steps.
//
// Writes are batched: one transaction per `commit_interval` of wall time (or
// `commit_rows` rows), so live readers see a run within about that delay and
// a replay pays for few commits. The rows written are a function of the input
// alone (the sink sees rows in canonical order), whatever the commit cadence.
#pragma once

#include <string>
#include <vector>

#include "schema/row.h"
#include "store/store.h"

namespace runlens::connectors {

struct TimelineSinkOptions {
  std::string store_url;      // store/store.h: open_store()
  std::string timeline_path;  // empty: no JSONL copy
  int64_t failure_window_steps = 50;
  int64_t failure_window_ns = 600'000'000'000;  // 10 minutes
  int64_t rank_window = 100;                    // steps per per-rank summary
  std::vector<store::RollupTier> rollups;       // GPU and node rollup tiers
  double lr_change_ratio = 1.5;                 // LR step-to-step factor that is a change, not a schedule
  double jump_ratio = 4.0;                      // loss / grad-norm step-to-step factor marked as a jump
  int64_t commit_interval_ns = 1'000'000'000;   // wall time between commits
  int64_t commit_rows = 10'000;                 // pending rows that force a commit
};

// Parses a rollup tier "RESOLUTION:RETENTION", e.g. "10s:1d", "1m:30d", "1h:365d".
bool parse_rollup_tier(const std::string& text, store::RollupTier* out, std::string* why);

void RegisterTimelineSink(Registry& registry);
std::unique_ptr<OperatorDef> MakeTimelineSink(TimelineSinkOptions options);

}  // namespace runlens::connectors
