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
// And a third, EvalStore: the evaluation service's registry and results
// (model versions, checkpoints, dataset and benchmark versions, evaluations
// with their provenance, shards, items, metrics, the cache).
// Writers hand over whole batches, one transaction each; readers return plain
// rows. No SQL and no database type appears outside the implementation.
//
// A store is named by a URL, SCHEME://LOCATION (docs/storage.md): the scheme
// picks the backend (store/open_store.cc lists them, one line each; today
// sqlite://, in store/sqlite/) and the backend reads the location.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "schema/alert.h"
#include "schema/record.h"
#include "store/gpu_sample_log.h"
#include "store/rank_block.h"

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

// What a backend made of a MetricBatch ahead of its write (MetricRows::
// prepare), on a thread other than its writer's; the backend's own, opaque to
// everyone else.
struct PreparedRows {
  virtual ~PreparedRows() = default;
};

struct MetricBatch {
  std::vector<std::string> replace_runs;
  std::vector<RankStepBlock> rank_steps;             // a block a step; each step kept once (the first reason wins)
  std::vector<RankWindowRow> rank_windows;           // upserts (the whole window so far)
  std::vector<RankWindowRow> rank_window_additions;  // added to what is stored (steps that came late)
  GpuSampleLog gpu_samples;                          // each sample once (the writer sees to it), in time order per node
  std::vector<GpuRollupRow> gpu_rollups;             // upserts
  std::vector<NodeRollupRow> node_rollups;           // upserts
  std::vector<RollupTier> prune;                     // apply these tiers' retention after writing
  // MetricRows::prepare's, made from the rows above as they are now (none:
  // the write makes what it needs itself). Whoever changes the rows drops it.
  std::shared_ptr<const PreparedRows> prepared;
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
  std::optional<int64_t> since_ns, until_ns;    // started_ns within [since_ns, until_ns]
  std::string text;                             // a substring of run, job, experiment or model id (empty: any)
  std::string run_id_prefix;                    // run ids starting with it (empty: any)
  int64_t limit = 100;
};

// Incidents of a run, and how many of them are open: none of their alerts carries an end (ends_ns).
struct IncidentCounts {
  int64_t incidents = 0, open = 0;
};

struct AlertFilter {
  std::string run_id, kind;  // empty: any
  std::optional<int64_t> since_ns;
  std::optional<bool> resolved;  // true: only alerts with an end (ends_ns); false: only open ones; none: all
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

// What the heatmap reads of a rank window (RankWindowRow's first_step,
// last_step, rank, steps and ratio_sum only).
struct RankWindowRatio {
  int64_t first_step = 0, last_step = 0;
  int32_t rank = 0;
  int64_t steps = 0;
  double ratio_sum = 0;
};

// The ratios to the median of one stored step's ranks (a rank step block).
struct RankStepRatios {
  int64_t step = 0;
  std::string kept_for;                           // "failure" | "recent"
  std::vector<std::pair<int32_t, double>> ranks;  // (rank, ratio_to_median)
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
  // Per run id (runs without incidents are left out), in one query.
  virtual std::map<std::string, IncidentCounts> incident_counts(const std::vector<std::string>& run_ids) = 0;
  // Every entity the identifier names, each with what it leads to; empty when none.
  virtual std::vector<LineageNode> lineage(const std::string& id) = 0;
};

class MetricRows {
 public:
  virtual ~MetricRows() = default;
  virtual void write(const MetricBatch& batch) = 0;
  // The part of write()'s work that needs only the batch (encoding its
  // blocks), done ahead on the calling thread: write() then uses it. Safe on
  // any thread while another writes (it touches no store); none where a
  // backend has nothing to prepare.
  virtual std::shared_ptr<const PreparedRows> prepare(const MetricBatch&) const { return nullptr; }

  // Per rank over the windows that overlap `range` (the whole run when open).
  virtual std::vector<RankSummary> rank_summaries(const std::string& run_id, StepRange range) = 0;
  virtual std::vector<RankStepRow> rank_steps(const std::string& run_id, StepRange range, int64_t limit) = 0;
  // One rank's full-resolution rows (node left empty), by step.
  virtual std::vector<RankStepRow> rank_steps_of(const std::string& run_id, int32_t rank, StepRange range) = 0;
  // The windows that overlap `range`: of every rank (ratios only), or whole rows of one rank, by first step.
  virtual std::vector<RankWindowRatio> rank_window_ratios(const std::string& run_id, StepRange range) = 0;
  virtual std::vector<RankWindowRow> rank_windows_of(const std::string& run_id, int32_t rank, StepRange range) = 0;
  // Every stored rank step block in `range` kept for `kept_for` (any when empty), ratios only, by step.
  virtual std::vector<RankStepRatios> rank_step_ratios(const std::string& run_id, StepRange range,
                                                       const std::string& kept_for) = 0;
  // Full-resolution GPU rows of these nodes (all when empty) within [from_ns, to_ns].
  virtual std::vector<GpuSampleRow> gpu_samples(const std::vector<std::string>& nodes, int64_t from_ns,
                                                int64_t to_ns) = 0;
  // The rollup rows of one tier for these nodes (all when empty) with buckets in [from_ns, to_ns].
  virtual std::vector<GpuRollupRow> gpu_rollups(const std::vector<std::string>& nodes, int64_t resolution_ns,
                                                int64_t from_ns, int64_t to_ns) = 0;
  // The node rollup rows of one tier for these nodes (all when empty) with buckets in [from_ns, to_ns].
  // Of the Aggs, cpu_pct carries mean and max, mem_used_bytes max, net and disk means (what is stored).
  virtual std::vector<NodeRollupRow> node_rollups(const std::vector<std::string>& nodes, int64_t resolution_ns,
                                                  int64_t from_ns, int64_t to_ns) = 0;
  // The resolutions of the rollup tiers held (GPU rollups), finest first.
  virtual std::vector<int64_t> rollup_resolutions() = 0;
  // Over the finest rollup tier, for these (node, gpu) pairs and event times.
  virtual GpuSummary gpu_summary(const std::vector<std::pair<std::string, int32_t>>& gpus, int64_t from_ns,
                                 int64_t to_ns) = 0;
};

// --- the evaluation store ----------------------------------------------------------
//
// What the evaluation service (eval/, docs/evaluation-service.md) keeps: the
// registry (model versions, checkpoints, dataset and benchmark versions), each
// evaluation with its full provenance, its shards, per-item results, metrics
// and the result cache. Plain rows: eval/ maps its types (eval/registry.h)
// onto these, the store never sees eval/. `runlens serve` is the one writer
// of these rows while `replay`/`run` write runs into the same store: every
// write below is one short transaction.

// A model version, MODEL:VERSION (model_version_id()).
struct ModelVersionRecord {
  std::string model_id, version;
  std::string checkpoint_id;  // the checkpoint it was cut from; empty = none
  std::string run_id;         // the training run that produced it; empty = none
  std::string status = "registered";
  int64_t created_ns = 0;  // set by the store when 0
  std::string id() const { return model_id + ":" + version; }
};

struct CheckpointRecord {
  std::string checkpoint_id;
  std::string run_id;  // the training run that saved it
  std::optional<int64_t> step;
  std::string content_hash;  // SHA-256 (64 hex digits) of the checkpoint file(s)
  std::string parent_id;     // resumed or fine-tuned from; empty = none
  std::string uri;
};

struct DatasetVersionRecord {
  std::string dataset_id, version;
  std::string content_hash;  // SHA-256 (64 hex digits) of the version's content
  int64_t items = 0;
};

struct BenchmarkVersionRecord {
  std::string benchmark, version;
  std::string content_hash;  // optional: SHA-256 of the benchmark's definition
};

// A metric of an evaluation (or of one of its shards).
struct MetricValue {
  std::string name;  // "accuracy", "pass@10"
  double value = 0;
  int64_t n = 0;
  std::optional<double> std_error;  // absent where it is not defined
};

// One evaluation with every provenance field (the columns of evaluation_runs).
// Statuses are the service's names: QUEUED RUNNING PARTIAL COMPLETED FAILED CACHED.
struct EvaluationRecord {
  std::string evaluation_id, model_id, model_version, checkpoint_id, checkpoint_hash;
  std::string run_id;  // the training run of the checkpoint, when known (lineage)
  std::string dataset_id, dataset_version, dataset_hash, benchmark, benchmark_version, suite;
  std::string prompt_template_version, prompt_template_hash, evaluator_version;
  bool uses_judge = false;
  std::string judge_model, judge_model_version, judge_prompt_version, judge_prompt_hash, rubric_version;
  std::optional<double> temperature;
  std::string decoding_json;  // canonical JSON
  std::string code_commit, worker_version;
  std::vector<std::pair<std::string, std::string>> library_versions;  // sorted by name
  std::string cache_key, cached_from;
  std::string status = "QUEUED";
  std::string started_at, completed_at;  // RFC 3339 UTC
  int64_t created_ns = 0;                // set by the store when 0
};

// Whether the status is final (PARTIAL, COMPLETED, FAILED, CACHED).
inline bool is_terminal_status(const std::string& s) {
  return s == "PARTIAL" || s == "COMPLETED" || s == "FAILED" || s == "CACHED";
}

inline bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  }
  return true;
}

// Whether an evaluation with this status holds results (COMPLETED, PARTIAL,
// CACHED): the rows that must say which worker code produced them.
inline bool has_results_status(const std::string& s) { return s == "COMPLETED" || s == "PARTIAL" || s == "CACHED"; }

// The provenance fields `r` lacks, by name, in declaration order. This is the
// one provenance rule (the evaluation service maps its types onto this row,
// eval/service/records.h, and the store enforces it on every write):
//  - always: the ids, hashes (64 hex digits), versions, temperature, decoding
//    configuration, cache key and started_at; the judge's fields when a
//    metric uses the judge;
//  - once the evaluation holds results (COMPLETED, PARTIAL, CACHED): the
//    worker's code_commit, worker_version and library_versions. A QUEUED or
//    RUNNING evaluation has no result yet, so no worker to name, and a FAILED
//    one has none at all; their worker fields may be empty;
//  - CACHED: cached_from; terminal: completed_at.
inline std::vector<std::string> missing_provenance(const EvaluationRecord& r) {
  std::vector<std::string> m;
  auto need = [&](const std::string& v, const char* f) {
    if (v.empty()) m.emplace_back(f);
  };
  auto hash = [&](const std::string& v, const char* f) {
    if (!is_sha256_hex(v)) m.emplace_back(f);
  };
  need(r.evaluation_id, "evaluation_id");
  need(r.model_id, "model_id");
  need(r.model_version, "model_version");
  need(r.checkpoint_id, "checkpoint_id");
  hash(r.checkpoint_hash, "checkpoint_hash");
  need(r.dataset_id, "dataset_id");
  need(r.dataset_version, "dataset_version");
  hash(r.dataset_hash, "dataset_hash");
  need(r.benchmark, "benchmark");
  need(r.benchmark_version, "benchmark_version");
  need(r.prompt_template_version, "prompt_template_version");
  hash(r.prompt_template_hash, "prompt_template_hash");
  need(r.evaluator_version, "evaluator_version");
  if (r.uses_judge) {
    need(r.judge_model, "judge_model");
    need(r.judge_model_version, "judge_model_version");
    need(r.judge_prompt_version, "judge_prompt_version");
    hash(r.judge_prompt_hash, "judge_prompt_hash");
    need(r.rubric_version, "rubric_version");
  }
  if (!r.temperature || !std::isfinite(*r.temperature)) m.emplace_back("temperature");
  need(r.decoding_json, "decoding_json");
  if (has_results_status(r.status)) {
    need(r.code_commit, "code_commit");
    need(r.worker_version, "worker_version");
    if (r.library_versions.empty()) m.emplace_back("library_versions");
  }
  hash(r.cache_key, "cache_key");
  if (r.status == "CACHED") need(r.cached_from, "cached_from");
  need(r.started_at, "started_at");
  if (is_terminal_status(r.status)) need(r.completed_at, "completed_at");
  return m;
}

// "" when `r` may be written, else
// "evaluation e-17 cannot be written without its provenance: missing checkpoint_hash, dataset_hash".
inline std::string check_writable(const EvaluationRecord& r) {
  std::vector<std::string> missing = missing_provenance(r);
  if (missing.empty()) return {};
  std::string s = "evaluation " + (r.evaluation_id.empty() ? std::string("(no id)") : r.evaluation_id) +
                  " cannot be written without its provenance: missing ";
  for (size_t i = 0; i < missing.size(); ++i) s += (i ? ", " : "") + missing[i];
  return s;
}

// A shard of an evaluation: items [item_begin, item_end) of a dataset partition.
// Statuses: QUEUED RUNNING COMPLETED FAILED CACHED.
struct ShardRecord {
  std::string evaluation_id;
  int32_t shard = 0;
  std::string dataset_partition;
  int64_t item_begin = 0, item_end = 0;
  std::string status = "QUEUED";
  int32_t attempt = 0;
  std::string worker;
  std::string cache_key;
  std::optional<int32_t> result_attempt;  // read only: the attempt whose results are kept
};

// One item's result (eval::ItemRecord).
struct ItemResult {
  int64_t item = 0;
  int32_t shard = 0;    // read only: set from the ShardResult
  int32_t attempt = 0;  // read only
  std::string item_hash;
  std::vector<std::pair<std::string, double>> scores;  // metric -> score, kept in order
  // The item's cluster ids (schema v5): dataset field -> the item's value of
  // it, for the fields a gate policy clusters by (docs/evaluation-service.md).
  std::vector<std::pair<std::string, std::string>> clusters;
  std::string response_hash;
  double latency_ms = 0;
  std::string error;
};

// What a worker hands back for one attempt at a shard.
struct ShardResult {
  std::string evaluation_id;
  int32_t shard = 0;
  int32_t attempt = 0;
  std::string worker;
  std::vector<ItemResult> items;
  std::vector<MetricValue> metrics;
};

// Where a cache key's results are: a whole evaluation (no shard) or one shard of it.
struct CacheEntry {
  std::string cache_key, evaluation_id;
  std::optional<int32_t> shard;
};

struct EvaluationView {
  EvaluationRecord run;
  std::vector<ShardRecord> shards;   // by shard
  int64_t shards_completed = 0;      // COMPLETED or CACHED
  std::vector<MetricValue> metrics;  // the evaluation's, by name
};

struct EvaluationFilter {
  std::string model_id, model_version;  // both or neither
  std::string benchmark;                // empty = any
  std::string benchmark_version;        // empty = any
};

// A checkpoint a training run saved (the `checkpoints` table, written by the
// timeline sink of `runlens run`/`replay`) that the evaluation service has
// not registered yet: it has a content hash, did not fail, and its
// registered_ns is unset.
struct PendingCheckpoint {
  CheckpointRecord checkpoint;
  std::string model_id;  // the run's model_id; empty when the run has none
};

// A row of quality_gates (docs/storage.md). Two kinds, told apart by gate_id:
//  - a decision: gate_id "g-...", evaluation_id the candidate evaluation,
//    benchmark the candidate's benchmark (empty: NULL), decision_json the
//    decision's JSON (GateDecision::to_json plus gateId and decidedNs),
//    metric empty, threshold the policy's alpha, passed whether it PASSed;
//  - a gated metric of a decision: gate_id "g-.../METRIC", metric its name,
//    observed the improvement-oriented difference, threshold -margin (or the
//    cap of a cap-only safety gate), passed whether the metric PASSed,
//    decision_json empty.
struct GateRow {
  std::string gate_id, evaluation_id, benchmark, metric;
  std::optional<double> threshold, observed;
  std::optional<bool> passed;
  int64_t decided_ns = 0;
  std::string decision_json;
};

// A row of model_version_transitions (docs/storage.md): one move of a model
// version's promotion status. seq numbers the moves of one model (all its
// versions) from 1; gate_id is the gate decision the move relied on (empty:
// none), actor who asked for it.
struct TransitionRecord {
  std::string model_id, model_version;
  int64_t seq = 0;
  std::string from_status, to_status, actor;
  int64_t decided_ns = 0;
  std::string gate_id, reason;
};

struct ModelVersionView {
  ModelVersionRecord version;
  std::vector<EvaluationRecord> evaluations;  // by evaluation_id
};

class EvalStore {
 public:
  virtual ~EvalStore() = default;

  // Registration is idempotent: the same content again is a no-op (false);
  // new content is written (true); a different hash (or checkpoint, or item
  // count) for a version already registered throws StoreError naming both.
  virtual bool register_model_version(const ModelVersionRecord& v) = 0;
  virtual bool register_checkpoint(const CheckpointRecord& c) = 0;
  virtual bool register_dataset_version(const DatasetVersionRecord& d) = 0;
  virtual bool register_benchmark_version(const BenchmarkVersionRecord& b) = 0;
  virtual void set_model_version_status(const std::string& model_id, const std::string& version,
                                        const std::string& status) = 0;

  // Writes (inserts or replaces) an evaluation; throws StoreError with
  // check_writable()'s message when provenance is missing.
  virtual void write_evaluation(const EvaluationRecord& r) = 0;
  // Sets the status (and, when not empty, completed_at); throws StoreError
  // for an unknown evaluation or when the status makes the row unwritable.
  virtual void set_evaluation_status(const std::string& evaluation_id, const std::string& status,
                                     const std::string& completed_at) = 0;
  // Replaces the evaluation's metrics (evaluation_scores, under its benchmark).
  virtual void set_metrics(const std::string& evaluation_id, const std::vector<MetricValue>& metrics) = 0;

  // Plans shards (rows already there are kept).
  virtual void add_shards(const std::vector<ShardRecord>& shards) = 0;
  // A shard's status, attempt and worker; throws StoreError for an unknown shard.
  virtual void set_shard_status(const std::string& evaluation_id, int32_t shard, const std::string& status,
                                int32_t attempt, const std::string& worker) = 0;
  // Writes an attempt's items and metrics and marks the shard COMPLETED, all
  // in one transaction. A shard holds one attempt's results: a result for a
  // shard that already has one (the same attempt delivered twice, or a late
  // retry) is ignored and false returned. Throws StoreError for an unknown shard.
  virtual bool write_shard_result(const ShardResult& r) = 0;

  virtual void put_cache(const CacheEntry& e) = 0;
  virtual std::optional<CacheEntry> cache_lookup(const std::string& cache_key) = 0;

  virtual std::optional<EvaluationView> evaluation(const std::string& evaluation_id) = 0;
  virtual std::vector<ItemResult> items(const std::string& evaluation_id, std::optional<int32_t> shard) = 0;
  virtual std::vector<MetricValue> shard_metrics(const std::string& evaluation_id, int32_t shard) = 0;
  virtual std::vector<EvaluationRecord> evaluations(const EvaluationFilter& filter) = 0;
  virtual std::optional<ModelVersionView> model_version(const std::string& model_id, const std::string& version) = 0;
  virtual std::optional<CheckpointRecord> checkpoint(const std::string& checkpoint_id) = 0;
  // Checkpoints saved by training runs and not yet registered, oldest first
  // (at most `limit`), and marking one registered (sets registered_ns).
  virtual std::vector<PendingCheckpoint> unregistered_checkpoints(int64_t limit) = 0;
  virtual void mark_checkpoint_registered(const std::string& run_id, const std::string& checkpoint_id) = 0;
  virtual std::optional<DatasetVersionRecord> dataset_version(const std::string& dataset_id,
                                                              const std::string& version) = 0;

  // Quality-gate rows (GateRow): written (inserted or replaced) in one
  // transaction; read back by gate_id (the row itself and the rows under
  // "GATE_ID/"), or by evaluation_id, each ordered by decided_ns then gate_id.
  virtual void write_gate_rows(const std::vector<GateRow>& rows) = 0;
  virtual std::vector<GateRow> gate_rows(const std::string& gate_id) = 0;
  virtual std::vector<GateRow> gate_rows_of_evaluation(const std::string& evaluation_id) = 0;

  // The promotion audit (TransitionRecord): written (inserted or replaced) in
  // one transaction; read back for one version of a model, or for all its
  // versions when `version` is empty, ordered by seq.
  virtual void write_transitions(const std::vector<TransitionRecord>& records) = 0;
  virtual std::vector<TransitionRecord> transitions(const std::string& model_id, const std::string& version) = 0;
};

struct Store {
  std::unique_ptr<RunGraph> graph;
  std::unique_ptr<MetricRows> metrics;
  std::unique_ptr<EvalStore> evals;
  int schema_version = 0;  // the backend's schema version of this store, as opened (GET /v1/health)
  // The URL a second connection opens to read what this one writes: the URL
  // opened, or, while a store is built whole (OpenOptions::build_whole), where
  // it is being built.
  std::string read_url;
  // Set only while a store is built whole: puts it in place, whole and
  // synced, and closes it (graph, metrics and evals serve nothing more).
  // Every other connection to it must be closed first. Throws StoreError when
  // it cannot; the message names where the new store was left. After a failed
  // write it removes the store instead (with no log, what the write left
  // cannot be rolled back) and throws. A store built whole and destroyed
  // without this call is put in place (or removed) all the same.
  std::function<void()> finish_build;
};

enum class OpenMode { kReadWrite, kReadOnly };

struct OpenOptions {
  OpenMode mode = OpenMode::kReadWrite;
  // Read-write, where no store exists yet: build the new store whole, for a
  // writer no one reads while it writes (a replay). The backend writes it
  // where readers of the URL do not look, without what makes each commit
  // durable and visible (SQLite: beside its file, with no log and no syncs),
  // and Store::finish_build puts it in place: readers see no store until
  // then, and then all of it. A store that exists, or one a backend cannot
  // build aside (SQLite's ":memory:"), is opened as without this.
  bool build_whole = false;
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
