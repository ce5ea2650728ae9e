// The run-graph builder: pure code from pipeline rows to the store's batches
// (store/store.h). The `timeline` sink (connectors/sinks/timeline/) feeds it
// rows and hands its batches to the store; tests feed it rows and read the
// batches (tests/timeline/).
//
// Per run it builds the run and its entities (experiment, model version,
// dataset, config, code commit, rank -> node -> GPU allocation), checkpoints
// and their artifacts, alerts grouped into incidents, the per-step aggregates
// of step_stats, and a timeline ordered by step and time: LR and config
// changes, loss and gradient-norm jumps (train_marks rows), non-finite
// values, alerts and diagnoses, XID/OOM/NCCL/exception events, checkpoints,
// restarts and the end of the run.
//
// Retention is tiered (spec sections 28-34): every step's aggregates; per
// rank, one summary per `rank_window` steps; full-resolution rank rows only
// from `failure_window_steps` before an alert to as many after, and for the
// last window of each run; GPU rows likewise within `failure_window_time` of
// an alert; GPU and node samples rolled up per tier with a retention each.
// So the store grows with steps and alerts, not with ranks x steps.
//
// What it infers is the store's own bookkeeping: windows, incidents, which
// rows a failure keeps. What the rows mean is the operators': step records
// come measured (ratio to the median, the slowest rank: rank_join), LR changes
// and jumps come as train_marks rows. The one judgement left here is the
// timeline's: an LR change is one entry, whether the run reported it
// (config_change) or its series showed it.
//
// Batches. A commit is one batch: every `commit_interval` of wall time (at a
// watermark) or `commit_rows` rows, before a run stored earlier is looked up,
// and at the end. Between commits, a watermark hands over what is pending as
// a deferred batch, to be written once the interval is up unless the next
// commit joins it (merge_batches), so a pipeline that goes quiet is seen by
// live readers within about the interval. The rows stored are a function of
// the input alone (the builder sees rows in canonical order), whatever the
// commit cadence: rows that are re-sent (a run row, an open window, an open
// rollup bucket) are upserts whose last value is the final one.
//
// Threading: none. One builder per sink partition, called from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "schema/alert.h"
#include "schema/record.h"
#include "store/store.h"

namespace runlens::timeline {

struct Options {
  int64_t failure_window_steps = 50;
  int64_t failure_window_ns = 600'000'000'000;  // 10 minutes
  int64_t rank_window = 100;                    // steps per per-rank summary
  std::vector<store::RollupTier> rollups;       // GPU and node rollup tiers
  int64_t commit_interval_ns = 1'000'000'000;   // wall time between commits
  int64_t commit_rows = 10'000;                 // pending rows that force a commit
};

// Window summaries and rollup buckets still filling, as of a cut: shown to
// live readers (upserts; the final rows come when they close).
struct OpenState {
  std::vector<store::RankWindowRow> rank_windows;
  std::vector<store::GpuRollupRow> gpu_rollups;
  std::vector<store::NodeRollupRow> node_rollups;
};

// What one commit writes: one transaction of each store interface, the graph
// first; the open state after the other metric rows (fold_open).
struct Batch {
  store::GraphBatch graph;
  store::MetricBatch metrics;
  std::optional<OpenState> open;
  bool deferred = false;  // handed over early (Output::write_deferred)
};

// Moves a batch's open state to the end of its metric rows, to be written.
void fold_open(Batch& b);

// Appends `next` to `into`, as if the builder had cut them as one (a later
// open state replaces an earlier one); false (and nothing moved) when they
// must be written apart: `next` replaces runs, or `into` prunes.
bool merge_batches(Batch& into, Batch& next);

// The line of timeline.jsonl for an entry (no newline).
void entry_json(const store::TimelineEntry& e, std::string* line);

// Where a builder's batches go, and how it learns of runs stored before.
class Output {
 public:
  virtual ~Output() = default;
  // A commit: write it after everything handed over before.
  virtual void write(Batch batch) = 0;
  // The start of the next commit, handed over early: write it by `deadline`
  // unless the next batch comes first (merge it into that one, merge_batches).
  virtual void write_deferred(Batch batch, std::chrono::steady_clock::time_point deadline) = 0;
  // The stored row of a run, once everything handed over is written; nullopt when none.
  virtual std::optional<store::RunRow> stored_run(const std::string& run_id) = 0;
};

class RunGraphBuilder {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `out` must outlive the builder. `clock` paces commits (wall time, never event time).
  RunGraphBuilder(Options options, Output* out, Clock clock = &std::chrono::steady_clock::now);
  ~RunGraphBuilder();
  RunGraphBuilder(const RunGraphBuilder&) = delete;
  RunGraphBuilder& operator=(const RunGraphBuilder&) = delete;

  // One row, in canonical order: run_start, train, train_marks, step_record,
  // step_stats, checkpoint, event, gpu, node, alert and run_end rows are
  // used, others ignored. May hand over a commit (commit_rows; before a
  // stored run is looked up).
  void add(const Record& r);
  // After the rows a watermark released: a commit once the interval is up,
  // else a deferred batch of what is pending.
  void on_watermark();
  // At the end of input: keeps each open run's last window, closes every
  // window and rollup bucket, and hands over the last commit (with retention).
  void finish();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace runlens::timeline
