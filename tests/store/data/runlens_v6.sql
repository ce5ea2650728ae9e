-- A store written by schema version 6, as `sqlite3 runlens.db .dump` prints it: the frozen v5
-- store (runlens_v5.sql) with the v6 migration SQL of store/sqlite/sqlite_schema.cc run by
-- sqlite3, then one row inserted by SQL the way the v6 code wrote it: a data_starvation alert
-- at revision 1 (asof_join's refined context). v6 has no column for an alert's end.
-- Frozen: tests/store/migration_test.cc upgrades it to the current version.
-- Do not regenerate.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE schema_version (
  version INTEGER PRIMARY KEY,
  description TEXT NOT NULL
);
INSERT INTO schema_version VALUES(1,'run graph, timeline, per-step aggregates');
INSERT INTO schema_version VALUES(2,'incidents, restarts, tiered retention (rank windows, rank and GPU blocks, rollups), evaluation keys');
INSERT INTO schema_version VALUES(3,'evaluation store: registry (models, versions, checkpoints, datasets, benchmarks), provenance, shards, items, metrics, cache');
INSERT INTO schema_version VALUES(4,'gate decisions (quality_gates.decision_json), the promotion audit (model_version_transitions)');
INSERT INTO schema_version VALUES(5,'item cluster ids (evaluation_items.clusters_json)');
INSERT INTO schema_version VALUES(6,'alert revisions (alerts.revision)');
CREATE TABLE experiments (
  experiment_id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL DEFAULT ''
);
CREATE TABLE models (
  model_id TEXT PRIMARY KEY
, description TEXT, created_ns INTEGER);
INSERT INTO models VALUES('toy-mlp',NULL,1700000000000000000);
CREATE TABLE model_versions (
  model_id TEXT NOT NULL,
  model_version TEXT NOT NULL,
  run_id TEXT,
  checkpoint_id TEXT, status TEXT, created_ns INTEGER,
  PRIMARY KEY (model_id, model_version)
);
INSERT INTO model_versions VALUES('toy-mlp','v1',NULL,'ck-v1','production',1700000000000000000);
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
, restarts INTEGER NOT NULL DEFAULT 0);
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
  sha256 TEXT, parent_checkpoint_id TEXT, registered_ns INTEGER,
  PRIMARY KEY (run_id, checkpoint_id)
) WITHOUT ROWID;
CREATE TABLE artifacts (
  artifact_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  artifact_type TEXT NOT NULL,
  object_uri TEXT NOT NULL,
  checksum TEXT,
  created_at_ns INTEGER NOT NULL,
  checkpoint_id TEXT
);
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
, incident_id TEXT, revision INTEGER NOT NULL DEFAULT 0);
INSERT INTO alerts VALUES('ff6905e0a095d878','pretrain-4821','straggler','warning',1767225847861841318,102,13,'gpu-node-1',5,NULL,'{"alert_id":"ff6905e0a095d878","kind":"straggler","severity":"warning","time_ns":1767225847861841318,"run_id":"pretrain-4821","step":102,"rank":13,"node":"gpu-node-1","gpu":5,"value":1.99,"threshold":1.5,"summary":"STRAGGLER DETECTED: rank 13"}','inc-ff6905e0a095d878',0);
INSERT INTO alerts VALUES('d1a9005e00000001','pretrain-4821','diagnosis','info',1767225867861841318,102,13,'gpu-node-1',5,'hardware_throttle','{"alert_id":"d1a9005e00000001","kind":"diagnosis","severity":"info","time_ns":1767225867861841318,"run_id":"pretrain-4821","step":102,"rank":13,"node":"gpu-node-1","gpu":5,"summary":"LIKELY CAUSE: hardware_throttle (owner infrastructure): rank 13 runs hot","symptom":"straggler","cause":"hardware_throttle","owner":"infrastructure","attrs":{"onset_step":100,"symptoms":2,"revision":2}}','inc-ff6905e0a095d878',1);
INSERT INTO alerts VALUES('0c0ffee000000002','pretrain-4821','data_starvation','warning',1767225887861841318,130,2,'gpu-node-0',2,NULL,'{"alert_id":"0c0ffee000000002","revision":1,"kind":"data_starvation","severity":"warning","time_ns":1767225887861841318,"run_id":"pretrain-4821","step":130,"rank":2,"node":"gpu-node-0","gpu":2,"value":0.4,"threshold":0.1,"summary":"DATA STARVATION: rank 2","attrs":{"onset_step":126,"node_cpu_pct":41}}',NULL,1);
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
INSERT INTO incidents VALUES('inc-ff6905e0a095d878','pretrain-4821','straggler','warning',1767225847861841318,102,1767225867861841318,102,2);
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
, checkpoint_hash TEXT, dataset_id TEXT, dataset_version TEXT, dataset_hash TEXT, benchmark TEXT, benchmark_version TEXT, suite TEXT, prompt_template_version TEXT, prompt_template_hash TEXT, evaluator_version TEXT, uses_judge INTEGER, judge_model TEXT, judge_model_version TEXT, judge_prompt_version TEXT, judge_prompt_hash TEXT, rubric_version TEXT, temperature REAL, decoding_json TEXT, code_commit TEXT, worker_version TEXT, library_versions_json TEXT, cache_key TEXT, cached_from TEXT, started_at TEXT, completed_at TEXT, updated_ns INTEGER);
INSERT INTO evaluation_runs VALUES('ev-v4-1','toy-mlp','v1','ck-v1',NULL,'COMPLETED',1700000000100000000,NULL,'toy-data','1','aa','toy-bench','1','toy-v1',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'k1',NULL,NULL,NULL,NULL);
CREATE TABLE quality_gates (
  gate_id TEXT NOT NULL,
  evaluation_id TEXT NOT NULL,
  benchmark TEXT,
  threshold REAL,
  passed INTEGER, metric TEXT, observed REAL, decided_ns INTEGER, decision_json TEXT,
  PRIMARY KEY (gate_id, evaluation_id)
) WITHOUT ROWID;
CREATE TABLE datasets (
  dataset_id TEXT PRIMARY KEY,
  description TEXT,
  created_ns INTEGER
);
CREATE TABLE IF NOT EXISTS "dataset_versions" (
  dataset_id TEXT NOT NULL DEFAULT '',
  dataset_version TEXT NOT NULL,
  content_hash TEXT,
  items INTEGER,
  created_ns INTEGER,
  PRIMARY KEY (dataset_id, dataset_version)
) WITHOUT ROWID;
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
CREATE TABLE IF NOT EXISTS "evaluation_scores" (
  evaluation_id TEXT NOT NULL,
  benchmark TEXT NOT NULL,
  metric TEXT NOT NULL DEFAULT '',
  score REAL,
  n INTEGER,
  std_error REAL,
  PRIMARY KEY (evaluation_id, benchmark, metric)
) WITHOUT ROWID;
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
INSERT INTO evaluation_shards VALUES('ev-v4-1',0,'0',0,2,'COMPLETED',1,'w1','ks0',1,1700000000200000000);
CREATE TABLE evaluation_items (
  evaluation_id TEXT NOT NULL,
  item INTEGER NOT NULL,
  shard INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  item_hash TEXT,
  scores_json TEXT NOT NULL,
  response_hash TEXT,
  latency_ms REAL,
  error TEXT, clusters_json TEXT,
  PRIMARY KEY (evaluation_id, item)
) WITHOUT ROWID;
INSERT INTO evaluation_items VALUES('ev-v4-1',0,0,1,'h0','{"accuracy":1}','r0',2.5,NULL,NULL);
INSERT INTO evaluation_items VALUES('ev-v4-1',1,0,1,'h1','{"accuracy":0}','r1',3.0,'timeout',NULL);
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
CREATE INDEX model_versions_by_version ON model_versions (model_version);
CREATE INDEX runs_by_experiment ON runs (experiment_id);
CREATE INDEX runs_by_model ON runs (model_id, model_version);
CREATE INDEX runs_by_dataset ON runs (dataset_version);
CREATE INDEX runs_by_job ON runs (job_id);
CREATE INDEX rank_allocations_by_gpu ON rank_allocations (node, gpu);
CREATE INDEX checkpoints_by_id ON checkpoints (checkpoint_id);
CREATE INDEX artifacts_by_run ON artifacts (run_id);
CREATE INDEX alerts_by_run ON alerts (run_id, time_ns);
CREATE INDEX alerts_by_time ON alerts (time_ns);
CREATE INDEX timeline_by_run ON timeline (run_id, step, time_ns);
CREATE INDEX incidents_by_run ON incidents (run_id, opened_ns);
CREATE INDEX evaluation_runs_by_model ON evaluation_runs (model_id, model_version);
CREATE INDEX dataset_versions_by_version ON dataset_versions (dataset_version);
CREATE INDEX evaluation_runs_by_benchmark ON evaluation_runs (benchmark, benchmark_version);
CREATE INDEX evaluation_runs_by_cache_key ON evaluation_runs (cache_key);
CREATE INDEX quality_gates_by_evaluation ON quality_gates (evaluation_id);
CREATE INDEX evaluation_shards_by_cache_key ON evaluation_shards (cache_key);
CREATE INDEX evaluation_items_by_shard ON evaluation_items (evaluation_id, shard);
CREATE INDEX evaluation_cache_by_evaluation ON evaluation_cache (evaluation_id);
CREATE INDEX model_version_transitions_by_seq ON model_version_transitions (model_id, seq);
COMMIT;
