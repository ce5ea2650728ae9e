-- A store written by schema version 1 (the first version of the store), as
-- `sqlite3 runlens.db .dump` prints it. Frozen: tests/store/migration_test.cc
-- upgrades it to the current version. Do not regenerate.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE schema_version (
  version INTEGER PRIMARY KEY,
  description TEXT NOT NULL
);
INSERT INTO schema_version VALUES(1,'run graph, timeline, per-step aggregates');
CREATE TABLE experiments (
  experiment_id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL DEFAULT ''
);
INSERT INTO experiments VALUES('exp-old','');
CREATE TABLE models (
  model_id TEXT PRIMARY KEY
);
INSERT INTO models VALUES('llama-x-7b');
CREATE TABLE model_versions (
  model_id TEXT NOT NULL,
  model_version TEXT NOT NULL,
  run_id TEXT,
  checkpoint_id TEXT,
  PRIMARY KEY (model_id, model_version)
);
INSERT INTO model_versions VALUES('llama-x-7b','v100','old-run','old-run-ckpt-20');
CREATE TABLE dataset_versions (
  dataset_version TEXT PRIMARY KEY
);
INSERT INTO dataset_versions VALUES('v40');
CREATE TABLE clusters (
  cluster_id TEXT PRIMARY KEY
);
INSERT INTO clusters VALUES('default');
CREATE TABLE nodes (
  node TEXT PRIMARY KEY,
  cluster_id TEXT NOT NULL DEFAULT 'default'
);
INSERT INTO nodes VALUES('node-a','default');
CREATE TABLE gpus (
  node TEXT NOT NULL,
  gpu INTEGER NOT NULL,
  PRIMARY KEY (node, gpu)
) WITHOUT ROWID;
INSERT INTO gpus VALUES('node-a',0);
INSERT INTO gpus VALUES('node-a',1);
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
INSERT INTO runs VALUES('old-run','','exp-old',NULL,'llama-x-7b','v100','v40','c0ffee',2,NULL,NULL,'completed',NULL,1767225600000000000,1767225700000000000,1767225700000000000,30,491520,2.5,NULL,0.00029999999999999997371,NULL,0.40999999999999997557,16384.0);
CREATE TABLE run_config (
  run_id TEXT NOT NULL,
  key TEXT NOT NULL,
  position INTEGER NOT NULL,
  number REAL,
  text TEXT,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
INSERT INTO run_config VALUES('old-run','lr',0,0.00029999999999999997371,NULL);
INSERT INTO run_config VALUES('old-run','optimizer',1,NULL,'adamw');
CREATE TABLE rank_allocations (
  run_id TEXT NOT NULL,
  rank INTEGER NOT NULL,
  node TEXT,
  gpu INTEGER,
  PRIMARY KEY (run_id, rank)
) WITHOUT ROWID;
INSERT INTO rank_allocations VALUES('old-run',0,'node-a',0);
INSERT INTO rank_allocations VALUES('old-run',1,'node-a',1);
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
INSERT INTO checkpoints VALUES('old-run','old-run-ckpt-20',20,1767225660000000000,3000.0,1024,NULL,1,'s3://ckpt/old-run/20','abc123');
CREATE TABLE artifacts (
  artifact_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  artifact_type TEXT NOT NULL,
  object_uri TEXT NOT NULL,
  checksum TEXT,
  created_at_ns INTEGER NOT NULL,
  checkpoint_id TEXT
);
INSERT INTO artifacts VALUES('art-0000000000000001','old-run','checkpoint','s3://ckpt/old-run/20','sha256:abc123',1767225660000000000,'old-run-ckpt-20');
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
INSERT INTO alerts VALUES('00000000000000aa','old-run','straggler','warning',1767225650000000000,12,1,'node-a',1,NULL,'{"alert_id":"00000000000000aa","kind":"straggler","severity":"warning","time_ns":1767225650000000000,"run_id":"old-run","step":12,"rank":1,"node":"node-a","gpu":1,"value":2.1,"threshold":1.5,"summary":"STRAGGLER DETECTED: rank 1"}');
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
INSERT INTO timeline VALUES(1,'old-run',NULL,1767225600000000000,'run_start','info','run started: 2 ranks on 1 nodes',NULL,NULL);
INSERT INTO timeline VALUES(2,'old-run',12,1767225650000000000,'alert','warning','STRAGGLER DETECTED: rank 1','00000000000000aa','{"alert_kind":"straggler"}');
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
INSERT INTO step_stats VALUES('old-run',12,1767225650000000000,2,2,2100.0,1000.0,1000.0,2100.0,2100.0,2100.0,1,2.1000000000000000888,32768,15603.799999999999272,0.4000000000000000222,0.010000000000000000208,0.2000000000000000111,2.6000000000000000888,NULL,0.00029999999999999997371,0.9000000000000000222);
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
COMMIT;
