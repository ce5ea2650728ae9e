// The store: the correlated run graph (spec sections 22, 38, 51), each run's
// timeline, and the tiered rows of retention (sections 28-34). The `timeline`
// sink writes it; `runlens serve` and `runlens report` read it.
//
// Two interfaces, split by cardinality as section 28 splits storage:
//  - RunGraph: what grows with runs, steps and alerts: experiments, runs and
//    their config, datasets, models and model versions, checkpoints,
//    artifacts, rank allocations, alerts, incidents, the timeline and the
//    per-step aggregates.
//  - MetricRows: what grows with ranks and GPUs: per-rank summaries per
//    window of steps, full-resolution rank and GPU rows of failure windows,
//    and GPU/node rollups with retention per tier. An analytics store
//    (ClickHouse) can take these alone later: only open_store() changes.
// Writers hand over whole batches, one transaction each; readers return plain
// rows. No SQL and no database type appears outside the implementation.
//
// A store is named by a URL, SCHEME://LOCATION (docs/storage.md): the scheme
// picks the backend (store/open_store.cc lists them, one line each; today
// sqlite://, in store/sqlite/) and the backend reads the location.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "schema/alert.h"
#include "schema/record.h"

namespace runlens::store {

// A store that cannot be opened, migrated, read or written.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// --- the run graph -------------------------------------------------------------------

struct RunRow {
  std::string run_id, tenant, experiment_id, job_id, model_id, model_version, dataset_version, code_commit;
  int32_t world_size = 0;
  std::optional<double> gpu_peak_flops, model_flops_per_token;
  std::string status = "running";  // running | completed | failed | aborted (or what run_end said)
  std::string end_reason;
  int64_t started_ns = 0;
  std::optional<int64_t> ended_ns;
  int64_t last_time_ns = 0;
  std::optional<int64_t> step;  // the latest step seen
  int64_t tokens_processed = 0;
  int32_t restarts = 0;
  // Latest per-step values.
  std::optional<double> loss, val_loss, lr, grad_norm, mfu, tokens_per_s;
  ConfigMap config;                // at run_start
  std::string last_checkpoint_id;  // latest successful checkpoint: what model_version points at
};

struct RankAllocation {
  std::string run_id;
  int32_t rank = 0;
  std::string node;
  int32_t gpu = -1;
};

struct CheckpointRow {
  std::string run_id, checkpoint_id;
  std::optional<int64_t> step;
  int64_t time_ns = 0;
  std::optional<double> duration_ms, upload_ms;
  std::optional<int64_t> size_bytes;
  std::optional<bool> ok;
  std::string uri, sha256;
};

// Spec section 31: large objects live elsewhere; the store keeps the pointer.
struct ArtifactRow {
  std::string artifact_id;  // deterministic: a hash of run, type and URI
  std::string run_id, artifact_type, object_uri, checksum, checkpoint_id;
  int64_t created_at_ns = 0;
};

struct StoredAlert {
  Alert alert;
  std::string json;  // the alert contract line, as alerts.jsonl has it
  std::string incident_id;
};

// Alerts of one run close in steps (or time) form one incident.
struct IncidentRow {
  std::string incident_id;  // "inc-" + the first alert's id
  std::string run_id, kind, severity;
  int64_t opened_ns = 0, last_ns = 0;
  std::optional<int64_t> opened_step, last_step;
  int64_t alert_count = 0;
};

// One entry of a run's correlated timeline (docs/storage.md lists the kinds).
struct TimelineEntry {
  std::string run_id;
  std::optional<int64_t> step;  // the event's step, else the run's latest step at that time
  int64_t time_ns = 0;
  std::string kind;      // lr_change, config_change, loss_jump, grad_norm_jump, non_finite, alert, diagnosis, ...
  std::string severity;  // info | warning | critical
  std::string summary;
  std::string ref;          // alert_id, checkpoint_id, ... where there is one
  std::string detail_json;  // a JSON object, or empty
};

struct StepRow {
  int64_t time_ns = 0;
  StepStats stats;  // `run` is not stored
};

struct GraphBatch {
  std::vector<std::string> replace_runs;  // drop these runs' earlier rows first (the same run replayed again)
  std::vector<RunRow> runs;               // upserts, with their entities (experiment, model, dataset, ...)
  std::vector<RankAllocation> allocations;
  std::vector<CheckpointRow> checkpoints;
  std::vector<ArtifactRow> artifacts;
  std::vector<StoredAlert> alerts;
  std::vector<IncidentRow> incidents;  // upserts
  std::vector<TimelineEntry> timeline;
  std::vector<StepRow> steps;
  bool empty() const {
    return replace_runs.empty() && runs.empty() && allocations.empty() && checkpoints.empty() && artifacts.empty() &&
           alerts.empty() && incidents.empty() && timeline.empty() && steps.empty();
  }
};

// --- high-cardinality rows -------------------------------------------------------------

// One rank's step at full resolution, kept inside failure windows and for the
// most recent window of a run.
struct RankStepRow {
  std::string run_id;
  int64_t step = 0;
  int32_t rank = 0;
  std::string node;
  int32_t gpu = -1;
  int64_t time_ns = 0;
  double step_ms = 0, work_ms = 0;
  std::optional<double> comm_ms, data_wait_ms;
  double ratio_to_median = 0;  // work_ms / the step's median work
  std::string kept_for;        // "failure" | "recent"
};

// One rank over a window of steps [first_step, last_step].
struct RankWindowRow {
  std::string run_id;
  int64_t first_step = 0, last_step = 0;
  int32_t rank = 0;
  std::string node;
  int32_t gpu = -1;
  int64_t steps = 0;  // steps the rank reported in the window
  double work_ms_sum = 0, work_ms_max = 0, step_ms_sum = 0, ratio_sum = 0;
  double comm_ms_sum = 0, data_wait_ms_sum = 0;
  int64_t comm_n = 0, data_wait_n = 0;
  int64_t slowest_count = 0;  // steps in which it was the slowest rank
};

struct GpuSampleRow {
  int64_t time_ns = 0;
  Gpu sample;
  std::string kept_for;  // "failure" | "recent"
};

// Mean, min and max of one field over a bucket; n = 0 means never reported.
struct Agg {
  int64_t n = 0;
  double sum = 0, min = 0, max = 0;
  void add(double v) {
    if (n == 0 || v < min) min = v;
    if (n == 0 || v > max) max = v;
    sum += v;
    ++n;
  }
  std::optional<double> mean() const { return n ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt; }
};

// Stored with float precision (a summary), but for samples, counts and bits.
struct GpuRollupRow {
  std::string node;
  int32_t gpu = 0;
  int64_t resolution_ns = 0, bucket_ns = 0;
  int64_t samples = 0;
  Agg util_pct, temp_c, power_w, sm_clock_mhz, mem_used_bytes;
  int64_t throttle_reasons = 0;  // OR over the bucket
  int64_t xid = 0;               // the last non-zero XID
};

struct NodeRollupRow {
  std::string node;
  int64_t resolution_ns = 0, bucket_ns = 0;
  int64_t samples = 0;
  Agg cpu_pct, mem_used_bytes, net_tx_bps, net_rx_bps, disk_read_bps, disk_write_bps;
  int64_t tcp_retransmits_total = 0, rdma_errors_total = 0;  // the largest counter value seen
};

// A rollup tier: bucket width and how long its rows are kept (event time,
// measured back from the newest bucket in the store).
struct RollupTier {
  int64_t resolution_ns = 0;
  int64_t retention_ns = 0;
};

struct MetricBatch {
  std::vector<std::string> replace_runs;
  std::vector<RankStepRow> rank_steps;               // a step's ranks together; kept once (the first reason wins)
  std::vector<RankWindowRow> rank_windows;           // upserts (the whole window so far)
  std::vector<RankWindowRow> rank_window_additions;  // added to what is stored (steps that came late)
  std::vector<GpuSampleRow> gpu_samples;             // each sample once (the writer sees to it), in time order per node
  std::vector<GpuRollupRow> gpu_rollups;             // upserts
  std::vector<NodeRollupRow> node_rollups;           // upserts
  std::vector<RollupTier> prune;                     // apply these tiers' retention after writing
  bool empty() const {
    return replace_runs.empty() && rank_steps.empty() && rank_windows.empty() && rank_window_additions.empty() &&
           gpu_samples.empty() && gpu_rollups.empty() && node_rollups.empty() && prune.empty();
  }
};

// --- reading -------------------------------------------------------------------------

struct StepRange {
  std::optional<int64_t> from, to;  // inclusive
};

struct RunFilter {
  std::string experiment_id, model_id, status;  // empty: any
  int64_t limit = 100;
};

struct AlertFilter {
  std::string run_id, kind;  // empty: any
  std::optional<int64_t> since_ns;
  int64_t limit = 1000;
};

// Whole-run figures for comparisons and reports.
struct RunAggregates {
  int64_t steps = 0;
  std::optional<double> tokens_per_s_mean, mfu_mean, step_ms_median;
  std::optional<double> loss_last10;  // mean of the last 10 finite losses
  std::optional<double> val_loss_last, lr_max, lr_last;
  int64_t alerts = 0;
};

struct RankSummary {
  int32_t rank = 0;
  std::string node;
  int32_t gpu = -1;
  int64_t steps = 0;
  double work_ms_mean = 0, work_ms_max = 0, step_ms_mean = 0, ratio_mean = 0;
  std::optional<double> comm_ms_mean, data_wait_ms_mean;
  int64_t slowest_count = 0;
};

struct GpuSummary {
  int64_t gpus = 0, samples = 0;
  std::optional<double> util_mean, temp_max, power_max, sm_clock_min;
  int64_t throttle_reasons = 0;
  int64_t xid = 0;  // the last non-zero XID seen, 0 = none
};

// One entity of the run graph and what it leads to (GET /v1/lineage/{id}).
using AttrValue = std::variant<int64_t, double, std::string>;
struct LineageNode {
  std::string type;  // experiment, training_run, model, model_version, checkpoint, artifact, dataset_version,
                     // code_commit, config, job, cluster, node, gpu, alert, incident
  std::string id;
  std::vector<std::pair<std::string, AttrValue>> attrs;
  std::vector<LineageNode> children;
};

class RunGraph {
 public:
  virtual ~RunGraph() = default;
  virtual void write(const GraphBatch& batch) = 0;

  virtual std::vector<RunRow> runs(const RunFilter& filter) = 0;
  virtual std::optional<RunRow> run(const std::string& run_id) = 0;
  virtual RunAggregates aggregates(const std::string& run_id) = 0;
  virtual std::vector<RankAllocation> allocations(const std::string& run_id) = 0;
  virtual std::vector<CheckpointRow> checkpoints(const std::string& run_id) = 0;
  virtual std::vector<TimelineEntry> timeline(const std::string& run_id, StepRange range, int64_t limit) = 0;
  virtual std::vector<StepRow> steps(const std::string& run_id, StepRange range, int64_t limit) = 0;
  virtual std::vector<StoredAlert> alerts(const AlertFilter& filter) = 0;
  virtual std::vector<IncidentRow> incidents(const std::string& run_id) = 0;
  // Every entity the identifier names, each with what it leads to; empty when none.
  virtual std::vector<LineageNode> lineage(const std::string& id) = 0;
};

class MetricRows {
 public:
  virtual ~MetricRows() = default;
  virtual void write(const MetricBatch& batch) = 0;

  // Per rank over the windows that overlap `range` (the whole run when open).
  virtual std::vector<RankSummary> rank_summaries(const std::string& run_id, StepRange range) = 0;
  virtual std::vector<RankStepRow> rank_steps(const std::string& run_id, StepRange range, int64_t limit) = 0;
  // Full-resolution GPU rows of these nodes (all when empty) within [from_ns, to_ns].
  virtual std::vector<GpuSampleRow> gpu_samples(const std::vector<std::string>& nodes, int64_t from_ns,
                                                int64_t to_ns) = 0;
  // The rollup rows of one tier for these nodes (all when empty) with buckets in [from_ns, to_ns].
  virtual std::vector<GpuRollupRow> gpu_rollups(const std::vector<std::string>& nodes, int64_t resolution_ns,
                                                int64_t from_ns, int64_t to_ns) = 0;
  // Over the finest rollup tier, for these (node, gpu) pairs and event times.
  virtual GpuSummary gpu_summary(const std::vector<std::pair<std::string, int32_t>>& gpus, int64_t from_ns,
                                 int64_t to_ns) = 0;
};

struct Store {
  std::unique_ptr<RunGraph> graph;
  std::unique_ptr<MetricRows> metrics;
  int schema_version = 0;  // the backend's schema version of this store, as opened (GET /v1/health)
};

enum class OpenMode { kReadWrite, kReadOnly };

struct OpenOptions {
  OpenMode mode = OpenMode::kReadWrite;
};

// --- choosing a store by URL (store/open_store.cc) ------------------------------------

// Opens the store `url` names: read-write creates and migrates it when needed,
// read-only refuses a missing or unmigrated one. Throws StoreError, whose
// message names the URL when the URL itself is wrong.
Store open_store(const std::string& url, const OpenOptions& options = {});

// Why `url` does not name a store this build can open (no scheme, an unknown
// scheme, no path, ...), naming the URL; nullopt when it is well formed. Says
// nothing of whether the store exists.
std::optional<std::string> store_url_error(const std::string& url);

// Whether the store `url` names exists (so a read-only open can find it).
// Throws StoreError for a malformed URL.
bool store_exists(const std::string& url);

// The URL of the store held in the local file `path` when some backend
// recognises the file as one of its stores, else nullopt: how `runlens report
// INPUT` tells a store from telemetry without knowing file formats.
std::optional<std::string> probe_store(const std::string& path);

// The store a pipeline writes by default: runlens.db in its output directory
// `dir` (sqlite://DIR/runlens.db).
std::string default_store_url(const std::string& dir);

// The URL of the store file at `path`, as the deprecated forms named it
// (--db PATH, RUNLENS_DB=PATH, the timeline sink's `db`): sqlite://PATH.
std::string store_url_of_file(const std::string& path);

}  // namespace runlens::store
