#include "store/sqlite/sqlite_schema.h"

namespace runlens::store {

namespace {

// Version 1: the run graph, the timeline and the per-step aggregates.
constexpr const char* kV1 = R"sql(
CREATE TABLE schema_version (
  version INTEGER PRIMARY KEY,
  description TEXT NOT NULL
);
CREATE TABLE experiments (
  experiment_id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL DEFAULT ''
);
CREATE TABLE models (
  model_id TEXT PRIMARY KEY
);
CREATE TABLE model_versions (
  model_id TEXT NOT NULL,
  model_version TEXT NOT NULL,
  run_id TEXT,
  checkpoint_id TEXT,
  PRIMARY KEY (model_id, model_version)
);
CREATE INDEX model_versions_by_version ON model_versions (model_version);
CREATE TABLE dataset_versions (
  dataset_version TEXT PRIMARY KEY
);
CREATE TABLE clusters (
  cluster_id TEXT PRIMARY KEY
);
CREATE TABLE nodes (
  node TEXT PRIMARY KEY,
  cluster_id TEXT NOT NULL DEFAULT 'default'
);
CREATE TABLE gpus (
  node TEXT NOT NULL,
  gpu INTEGER NOT NULL,
  PRIMARY KEY (node, gpu)
) WITHOUT ROWID;
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL DEFAULT '',
  experiment_id TEXT,
  job_id TEXT,
  model_id TEXT,
  model_version TEXT,
  dataset_version TEXT,
  code_commit TEXT,
  world_size INTEGER NOT NULL,
  gpu_peak_flops REAL,
  model_flops_per_token REAL,
  status TEXT NOT NULL,
  end_reason TEXT,
  started_ns INTEGER NOT NULL,
  ended_ns INTEGER,
  last_time_ns INTEGER NOT NULL,
  step INTEGER,
  tokens_processed INTEGER NOT NULL DEFAULT 0,
  loss REAL,
  val_loss REAL,
  lr REAL,
  grad_norm REAL,
  mfu REAL,
  tokens_per_s REAL
);
CREATE INDEX runs_by_experiment ON runs (experiment_id);
CREATE INDEX runs_by_model ON runs (model_id, model_version);
CREATE INDEX runs_by_dataset ON runs (dataset_version);
CREATE INDEX runs_by_job ON runs (job_id);
CREATE TABLE run_config (
  run_id TEXT NOT NULL,
  key TEXT NOT NULL,
  position INTEGER NOT NULL,
  number REAL,
  text TEXT,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE TABLE rank_allocations (
  run_id TEXT NOT NULL,
  rank INTEGER NOT NULL,
  node TEXT,
  gpu INTEGER,
  PRIMARY KEY (run_id, rank)
) WITHOUT ROWID;
CREATE INDEX rank_allocations_by_gpu ON rank_allocations (node, gpu);
CREATE TABLE checkpoints (
  run_id TEXT NOT NULL,
  checkpoint_id TEXT NOT NULL,
  step INTEGER,
  time_ns INTEGER NOT NULL,
  duration_ms REAL,
  size_bytes INTEGER,
  upload_ms REAL,
  ok INTEGER,
  uri TEXT,
  sha256 TEXT,
  PRIMARY KEY (run_id, checkpoint_id)
) WITHOUT ROWID;
CREATE INDEX checkpoints_by_id ON checkpoints (checkpoint_id);
CREATE TABLE artifacts (
  artifact_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  artifact_type TEXT NOT NULL,
  object_uri TEXT NOT NULL,
  checksum TEXT,
  created_at_ns INTEGER NOT NULL,
  checkpoint_id TEXT
);
CREATE INDEX artifacts_by_run ON artifacts (run_id);
CREATE TABLE alerts (
  alert_id TEXT PRIMARY KEY,
  run_id TEXT,
  kind TEXT NOT NULL,
  severity TEXT NOT NULL,
  time_ns INTEGER NOT NULL,
  step INTEGER,
  rank INTEGER,
  node TEXT,
  gpu INTEGER,
  cause TEXT,
  json TEXT NOT NULL
);
CREATE INDEX alerts_by_run ON alerts (run_id, time_ns);
CREATE INDEX alerts_by_time ON alerts (time_ns);
CREATE TABLE timeline (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL,
  step INTEGER,
  time_ns INTEGER NOT NULL,
  kind TEXT NOT NULL,
  severity TEXT NOT NULL,
  summary TEXT NOT NULL,
  ref TEXT,
  detail TEXT
);
CREATE INDEX timeline_by_run ON timeline (run_id, step, time_ns);
CREATE TABLE step_stats (
  run_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  time_ns INTEGER NOT NULL,
  world_size INTEGER NOT NULL,
  reported INTEGER NOT NULL,
  step_ms REAL NOT NULL,
  work_min_ms REAL NOT NULL,
  work_p50_ms REAL NOT NULL,
  work_p95_ms REAL NOT NULL,
  work_p99_ms REAL NOT NULL,
  work_max_ms REAL NOT NULL,
  slowest_rank INTEGER,
  straggler_ratio REAL NOT NULL,
  tokens INTEGER NOT NULL,
  tokens_per_s REAL,
  mfu REAL,
  data_wait_ratio REAL,
  communication_ratio REAL,
  loss REAL,
  val_loss REAL,
  lr REAL,
  grad_norm REAL,
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
)sql";

// Version 2: incidents (each alert of a version-1 store becomes its own),
// restarts per run, and tiered retention: per-rank window summaries,
// full-resolution rank and GPU rows of failure windows, GPU and node rollups
// (GPU rows packed in blocks: one row per step of a run, per batch of a node's
// GPU samples, per node and rollup bucket); and the keys of evaluation runs
// and quality gates. Tables of blocks keep rowids: WITHOUT ROWID suits small
// rows only, a block would spill to overflow pages.
constexpr const char* kV2 = R"sql(
CREATE TABLE incidents (
  incident_id TEXT PRIMARY KEY,
  run_id TEXT,
  kind TEXT NOT NULL,
  severity TEXT NOT NULL,
  opened_ns INTEGER NOT NULL,
  opened_step INTEGER,
  last_ns INTEGER NOT NULL,
  last_step INTEGER,
  alert_count INTEGER NOT NULL
);
CREATE INDEX incidents_by_run ON incidents (run_id, opened_ns);
ALTER TABLE alerts ADD COLUMN incident_id TEXT;
INSERT INTO incidents (incident_id, run_id, kind, severity, opened_ns, opened_step, last_ns, last_step, alert_count)
  SELECT 'inc-' || alert_id, run_id, kind, severity, time_ns, step, time_ns, step, 1 FROM alerts;
UPDATE alerts SET incident_id = 'inc-' || alert_id;
ALTER TABLE runs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
CREATE TABLE rank_step_blocks (
  run_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  time_ns INTEGER NOT NULL,
  kept_for TEXT NOT NULL,
  ranks INTEGER NOT NULL,
  data BLOB NOT NULL,
  UNIQUE (run_id, step)
);
CREATE TABLE rank_windows (
  run_id TEXT NOT NULL,
  first_step INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  last_step INTEGER NOT NULL,
  node TEXT,
  gpu INTEGER,
  steps INTEGER NOT NULL,
  work_ms_sum REAL NOT NULL,
  work_ms_max REAL NOT NULL,
  step_ms_sum REAL NOT NULL,
  ratio_sum REAL NOT NULL,
  comm_ms_sum REAL NOT NULL,
  comm_n INTEGER NOT NULL,
  data_wait_ms_sum REAL NOT NULL,
  data_wait_n INTEGER NOT NULL,
  slowest_count INTEGER NOT NULL,
  PRIMARY KEY (run_id, first_step, rank)
) WITHOUT ROWID;
CREATE TABLE gpu_sample_blocks (
  node TEXT NOT NULL,
  first_ns INTEGER NOT NULL,
  last_ns INTEGER NOT NULL,
  kept_for TEXT NOT NULL,
  samples INTEGER NOT NULL,
  data BLOB NOT NULL,
  UNIQUE (node, first_ns)
);
CREATE TABLE gpu_rollups (
  resolution_ns INTEGER NOT NULL,
  node TEXT NOT NULL,
  bucket_ns INTEGER NOT NULL,
  gpus INTEGER NOT NULL,
  data BLOB NOT NULL,
  UNIQUE (resolution_ns, node, bucket_ns)
);
CREATE TABLE node_rollups (
  resolution_ns INTEGER NOT NULL,
  node TEXT NOT NULL,
  bucket_ns INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  cpu_avg REAL, cpu_max REAL,
  mem_used_max REAL,
  net_tx_avg REAL, net_rx_avg REAL,
  disk_read_avg REAL, disk_write_avg REAL,
  tcp_retransmits_total INTEGER NOT NULL,
  rdma_errors_total INTEGER NOT NULL,
  PRIMARY KEY (resolution_ns, node, bucket_ns)
) WITHOUT ROWID;
CREATE TABLE evaluation_runs (
  evaluation_id TEXT PRIMARY KEY,
  model_id TEXT,
  model_version TEXT,
  checkpoint_id TEXT,
  run_id TEXT,
  status TEXT,
  created_at_ns INTEGER
);
CREATE INDEX evaluation_runs_by_model ON evaluation_runs (model_id, model_version);
CREATE TABLE evaluation_scores (
  evaluation_id TEXT NOT NULL,
  benchmark TEXT NOT NULL,
  score REAL,
  PRIMARY KEY (evaluation_id, benchmark)
) WITHOUT ROWID;
CREATE TABLE quality_gates (
  gate_id TEXT NOT NULL,
  evaluation_id TEXT NOT NULL,
  benchmark TEXT,
  threshold REAL,
  passed INTEGER,
  PRIMARY KEY (gate_id, evaluation_id)
) WITHOUT ROWID;
)sql";

// Version 3: the evaluation store. The registry (models, model versions with a
// status, checkpoints with their content hash and parent, datasets and their
// versions, benchmarks and their versions) and the results: the v2 keys of
// evaluation_runs gain every provenance field, evaluation_scores one row per
// (benchmark, metric) with n and standard error, quality_gates the metric and
// the observed value; shards, per-item results, per-shard metrics and the
// cache are new. dataset_versions and evaluation_scores are rebuilt (their
// keys grow a column); the rows of a version-2 store are copied over.
constexpr const char* kV3 = R"sql(
ALTER TABLE models ADD COLUMN description TEXT;
ALTER TABLE models ADD COLUMN created_ns INTEGER;
ALTER TABLE model_versions ADD COLUMN status TEXT;
ALTER TABLE model_versions ADD COLUMN created_ns INTEGER;
ALTER TABLE checkpoints ADD COLUMN parent_checkpoint_id TEXT;
ALTER TABLE checkpoints ADD COLUMN registered_ns INTEGER;
CREATE TABLE datasets (
  dataset_id TEXT PRIMARY KEY,
  description TEXT,
  created_ns INTEGER
);
CREATE TABLE dataset_versions_v3 (
  dataset_id TEXT NOT NULL DEFAULT '',
  dataset_version TEXT NOT NULL,
  content_hash TEXT,
  items INTEGER,
  created_ns INTEGER,
  PRIMARY KEY (dataset_id, dataset_version)
) WITHOUT ROWID;
INSERT INTO dataset_versions_v3 (dataset_id, dataset_version) SELECT '', dataset_version FROM dataset_versions;
DROP TABLE dataset_versions;
ALTER TABLE dataset_versions_v3 RENAME TO dataset_versions;
CREATE INDEX dataset_versions_by_version ON dataset_versions (dataset_version);
CREATE TABLE benchmarks (
  benchmark TEXT PRIMARY KEY,
  description TEXT,
  created_ns INTEGER
);
CREATE TABLE benchmark_versions (
  benchmark TEXT NOT NULL,
  benchmark_version TEXT NOT NULL,
  content_hash TEXT,
  created_ns INTEGER,
  PRIMARY KEY (benchmark, benchmark_version)
) WITHOUT ROWID;
ALTER TABLE evaluation_runs ADD COLUMN checkpoint_hash TEXT;
ALTER TABLE evaluation_runs ADD COLUMN dataset_id TEXT;
ALTER TABLE evaluation_runs ADD COLUMN dataset_version TEXT;
ALTER TABLE evaluation_runs ADD COLUMN dataset_hash TEXT;
ALTER TABLE evaluation_runs ADD COLUMN benchmark TEXT;
ALTER TABLE evaluation_runs ADD COLUMN benchmark_version TEXT;
ALTER TABLE evaluation_runs ADD COLUMN suite TEXT;
ALTER TABLE evaluation_runs ADD COLUMN prompt_template_version TEXT;
ALTER TABLE evaluation_runs ADD COLUMN prompt_template_hash TEXT;
ALTER TABLE evaluation_runs ADD COLUMN evaluator_version TEXT;
ALTER TABLE evaluation_runs ADD COLUMN uses_judge INTEGER;
ALTER TABLE evaluation_runs ADD COLUMN judge_model TEXT;
ALTER TABLE evaluation_runs ADD COLUMN judge_model_version TEXT;
ALTER TABLE evaluation_runs ADD COLUMN judge_prompt_version TEXT;
ALTER TABLE evaluation_runs ADD COLUMN judge_prompt_hash TEXT;
ALTER TABLE evaluation_runs ADD COLUMN rubric_version TEXT;
ALTER TABLE evaluation_runs ADD COLUMN temperature REAL;
ALTER TABLE evaluation_runs ADD COLUMN decoding_json TEXT;
ALTER TABLE evaluation_runs ADD COLUMN code_commit TEXT;
ALTER TABLE evaluation_runs ADD COLUMN worker_version TEXT;
ALTER TABLE evaluation_runs ADD COLUMN library_versions_json TEXT;
ALTER TABLE evaluation_runs ADD COLUMN cache_key TEXT;
ALTER TABLE evaluation_runs ADD COLUMN cached_from TEXT;
ALTER TABLE evaluation_runs ADD COLUMN started_at TEXT;
ALTER TABLE evaluation_runs ADD COLUMN completed_at TEXT;
ALTER TABLE evaluation_runs ADD COLUMN updated_ns INTEGER;
CREATE INDEX evaluation_runs_by_benchmark ON evaluation_runs (benchmark, benchmark_version);
CREATE INDEX evaluation_runs_by_cache_key ON evaluation_runs (cache_key);
CREATE TABLE evaluation_scores_v3 (
  evaluation_id TEXT NOT NULL,
  benchmark TEXT NOT NULL,
  metric TEXT NOT NULL DEFAULT '',
  score REAL,
  n INTEGER,
  std_error REAL,
  PRIMARY KEY (evaluation_id, benchmark, metric)
) WITHOUT ROWID;
INSERT INTO evaluation_scores_v3 (evaluation_id, benchmark, metric, score)
  SELECT evaluation_id, benchmark, '', score FROM evaluation_scores;
DROP TABLE evaluation_scores;
ALTER TABLE evaluation_scores_v3 RENAME TO evaluation_scores;
ALTER TABLE quality_gates ADD COLUMN metric TEXT;
ALTER TABLE quality_gates ADD COLUMN observed REAL;
ALTER TABLE quality_gates ADD COLUMN decided_ns INTEGER;
CREATE INDEX quality_gates_by_evaluation ON quality_gates (evaluation_id);
CREATE TABLE evaluation_shards (
  evaluation_id TEXT NOT NULL,
  shard INTEGER NOT NULL,
  dataset_partition TEXT,
  item_begin INTEGER NOT NULL,
  item_end INTEGER NOT NULL,
  status TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  worker TEXT,
  cache_key TEXT,
  result_attempt INTEGER,
  updated_ns INTEGER,
  PRIMARY KEY (evaluation_id, shard)
) WITHOUT ROWID;
CREATE INDEX evaluation_shards_by_cache_key ON evaluation_shards (cache_key);
CREATE TABLE evaluation_items (
  evaluation_id TEXT NOT NULL,
  item INTEGER NOT NULL,
  shard INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  item_hash TEXT,
  scores_json TEXT NOT NULL,
  response_hash TEXT,
  latency_ms REAL,
  error TEXT,
  PRIMARY KEY (evaluation_id, item)
) WITHOUT ROWID;
CREATE INDEX evaluation_items_by_shard ON evaluation_items (evaluation_id, shard);
CREATE TABLE evaluation_shard_metrics (
  evaluation_id TEXT NOT NULL,
  shard INTEGER NOT NULL,
  metric TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  value REAL,
  n INTEGER NOT NULL,
  std_error REAL,
  PRIMARY KEY (evaluation_id, shard, metric)
) WITHOUT ROWID;
CREATE TABLE evaluation_cache (
  cache_key TEXT PRIMARY KEY,
  evaluation_id TEXT NOT NULL,
  shard INTEGER,
  created_ns INTEGER NOT NULL
);
CREATE INDEX evaluation_cache_by_evaluation ON evaluation_cache (evaluation_id);
)sql";

// Version 4: gate decisions and the promotion audit get their own columns.
// quality_gates.decision_json holds a decision row's JSON (v3 kept it in
// `benchmark`, which holds the candidate's benchmark again), and
// model_version_transitions holds the promotion audit (v3 kept it as
// quality_gates rows with gate_id "audit/MODEL/VERSION/NNNNNN", metric
// "promotion" and the record's JSON in `benchmark`); those rows move over.
constexpr const char* kV4 = R"sql(
ALTER TABLE quality_gates ADD COLUMN decision_json TEXT;
UPDATE quality_gates
  SET decision_json = benchmark,
      benchmark = (SELECT e.benchmark FROM evaluation_runs e WHERE e.evaluation_id = quality_gates.evaluation_id)
  WHERE substr(gate_id, 1, 2) = 'g-' AND instr(gate_id, '/') = 0 AND coalesce(metric, '') = '';
CREATE TABLE model_version_transitions (
  model_id TEXT NOT NULL,
  model_version TEXT NOT NULL,
  seq INTEGER NOT NULL,
  from_status TEXT NOT NULL,
  to_status TEXT NOT NULL,
  actor TEXT NOT NULL,
  decided_ns INTEGER NOT NULL,
  gate_id TEXT,
  reason TEXT,
  PRIMARY KEY (model_id, model_version, seq)
) WITHOUT ROWID;
CREATE INDEX model_version_transitions_by_seq ON model_version_transitions (model_id, seq);
INSERT OR REPLACE INTO model_version_transitions
    (model_id, model_version, seq, from_status, to_status, actor, decided_ns, gate_id, reason)
  SELECT substr(json_extract(benchmark, '$.modelVersion'), 1,
                length(json_extract(benchmark, '$.modelVersion')) - length(json_extract(benchmark, '$.version')) - 1),
         json_extract(benchmark, '$.version'),
         CAST(substr(gate_id, length(gate_id) - 5) AS INTEGER),
         coalesce(json_extract(benchmark, '$.from'), ''),
         coalesce(json_extract(benchmark, '$.to'), ''),
         coalesce(json_extract(benchmark, '$.user'), ''),
         coalesce(decided_ns, json_extract(benchmark, '$.atNs'), 0),
         nullif(json_extract(benchmark, '$.gateId'), ''),
         json_extract(benchmark, '$.reason')
  FROM quality_gates
  WHERE substr(gate_id, 1, 6) = 'audit/' AND metric = 'promotion' AND json_valid(benchmark)
    AND json_extract(benchmark, '$.version') IS NOT NULL AND json_extract(benchmark, '$.modelVersion') IS NOT NULL;
DELETE FROM quality_gates WHERE substr(gate_id, 1, 6) = 'audit/' AND metric = 'promotion';
)sql";

// Version 5: each item's cluster ids (evaluation_items.clusters_json, a JSON
// object of dataset field -> the item's value; NULL when the item's suite is
// not clustered), which clustered gates read. Items of a v4 store have none.
constexpr const char* kV5 = R"sql(
ALTER TABLE evaluation_items ADD COLUMN clusters_json TEXT;
)sql";

// Version 6: an alert's revision (alert contract v2: every re-publication of
// an alert_id carries the previous revision + 1; the store keeps the highest).
// Rows of a v5 store are revision 0, but diagnoses, whose v1 contract counted
// revisions from 1 in attrs.revision: theirs moves to the column, less one.
constexpr const char* kV6 = R"sql(
ALTER TABLE alerts ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
UPDATE alerts SET revision = max(0, CAST(json_extract(json, '$.attrs.revision') AS INTEGER) - 1)
  WHERE kind = 'diagnosis' AND json_valid(json) AND json_type(json, '$.attrs.revision') IN ('integer', 'real');
)sql";

// Version 7: an alert's end (alert contract v2: the closing revision of an
// alert whose incident closed carries ends_ns; NULL: open, or an event-like
// kind). Rows of a v6 store are taken from their JSON (none had one).
constexpr const char* kV7 = R"sql(
ALTER TABLE alerts ADD COLUMN ends_ns INTEGER;
UPDATE alerts SET ends_ns = CAST(json_extract(json, '$.ends_ns') AS INTEGER)
  WHERE json_valid(json) AND json_type(json, '$.ends_ns') = 'integer';
)sql";

// Version 8: each step's time breakdown, the means over its ranks of
// forward, backward, optimizer, communication and data wait time (step_stats
// of the step_stats operator; GET /v1/runs/{runId}/steps' breakdownMs). Rows
// of a v7 store have none (NULL).
constexpr const char* kV8 = R"sql(
ALTER TABLE step_stats ADD COLUMN forward_ms REAL;
ALTER TABLE step_stats ADD COLUMN backward_ms REAL;
ALTER TABLE step_stats ADD COLUMN optimizer_ms REAL;
ALTER TABLE step_stats ADD COLUMN comm_ms REAL;
ALTER TABLE step_stats ADD COLUMN data_wait_ms REAL;
)sql";

// Version 9: GPU sample blocks as columns (gpu_sample_blocks.encoding: 1,
// the fixed-size records every block of a v8 store holds; 2, columns, what
// runlens writes from this version: store/sqlite/sqlite_store.cc).
constexpr const char* kV9 = R"sql(
ALTER TABLE gpu_sample_blocks ADD COLUMN encoding INTEGER NOT NULL DEFAULT 1;
)sql";

// Version 10: GPU sample blocks of encoding 3, compact columns (times as
// differences, GPUs as varints, a field with one value in the block stored
// once: store/sqlite/gpu_blocks.h), what runlens writes from this version.
// No table changes: the version keeps a store with such blocks from a
// runlens that cannot read them.
constexpr const char* kV10 = R"sql(
-- gpu_sample_blocks.encoding takes the value 3; encodings 1 and 2 are still read.
)sql";

}  // namespace

const std::vector<Migration>& sqlite_migrations() {
  static const std::vector<Migration> migrations = {
      {1, "run graph, timeline, per-step aggregates", kV1},
      {2, "incidents, restarts, tiered retention (rank windows, rank and GPU blocks, rollups), evaluation keys", kV2},
      {3,
       "evaluation store: registry (models, versions, checkpoints, datasets, benchmarks), provenance, shards, items, "
       "metrics, cache",
       kV3},
      {4, "gate decisions (quality_gates.decision_json), the promotion audit (model_version_transitions)", kV4},
      {5, "item cluster ids (evaluation_items.clusters_json)", kV5},
      {6, "alert revisions (alerts.revision)", kV6},
      {7, "alert ends (alerts.ends_ns)", kV7},
      {8, "step time breakdown (step_stats.forward_ms, backward_ms, optimizer_ms, comm_ms, data_wait_ms)", kV8},
      {9, "GPU sample blocks as columns (gpu_sample_blocks.encoding)", kV9},
      {10, "GPU sample blocks as compact columns (gpu_sample_blocks.encoding 3)", kV10},
  };
  return migrations;
}

}  // namespace runlens::store
