// The evaluation service (docs/evaluation-service.md, docs/eval-protocol.md):
// one thread owns the ZeroMQ ROUTER that workers connect to, the scheduler
// (eval/scheduler.h, on the real clock), one aggregator per open evaluation
// and the read-write store, the one writer of the evaluation tables.
//
// The HTTP routes (eval/service/http.h) call the public methods from the
// server's threads: each takes the service's mutex, which the service thread
// holds while it handles a batch of worker messages, so every method sees a
// consistent state and the store is only ever written under it. The socket is
// touched by the service thread alone (a submission marks the scheduler for a
// pass, which the thread makes within one poll interval).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eval/aggregator.h"
#include "eval/gate.h"
#include "eval/gate_policy.h"
#include "eval/registry.h"
#include "eval/scheduler.h"
#include "eval/service/alerts.h"
#include "eval/service/clusters.h"
#include "eval/suite.h"
#include "eval/wire/wire.h"
#include "store/store.h"

namespace runlens::eval::service {

struct ServiceOptions {
  std::string store_url;                 // read-write: the service writes the evaluation tables
  std::vector<std::string> suite_paths;  // directories of *.yaml, or suite files
  std::vector<std::string> gate_paths;   // gate policies: directories of *.yaml, or policy files
  std::string endpoint = "tcp://127.0.0.1:5571";
  int64_t heartbeat_ms = 1000;  // what workers are told (welcome)
  int64_t heartbeat_timeout_ms = 10000;
  int64_t checkpoint_poll_ms = 500;  // the checkpoints table; 0 = never polled
  int poll_ms = 10;                  // the service thread's longest wait for a message
  std::function<int64_t()> clock;    // milliseconds; default: a steady clock
  // Evaluation alerts (docs/alerts.md, "Evaluation alerts"): always stored in
  // the store's alerts table; also published on this ZeroMQ PUB endpoint
  // ("" = none; `runlens serve --alerts-pub`) and appended to this JSONL file
  // ("" = none; `--alerts-out`).
  std::string alerts_pub, alerts_out;
};

struct SubmitRequest {
  std::string model_version;  // MODEL:VERSION
  std::string checkpoint_id;
  std::string suite;  // the suite's name (benchmarkSuite)
  std::optional<Priority> priority;
  std::optional<int64_t> deadline_s;
};

// What a submission (or a registration) made; error/http_status when refused.
struct SubmitOutcome {
  int http_status = 201;  // 400 (bad input), 404 (unknown suite or checkpoint), 409 (conflict)
  std::string error;
  std::string evaluation_id;
  std::string status;  // QUEUED, CACHED, FAILED (a suite whose dataset is missing or changed), ...
  std::string cached_from;
  std::string suite;
};

struct CheckpointRequest {
  store::CheckpointRecord checkpoint;
  std::string model_version;  // MODEL:VERSION; registered with the checkpoint
};

struct CheckpointOutcome {
  int http_status = 201;
  std::string error;
  bool registered = false;  // false: it was registered before (same content)
  std::vector<SubmitOutcome> evaluations;
};

struct SuiteRow {
  std::string name, file, benchmark, version, evaluator, dataset_id, dataset_version;
  int64_t items = 0;  // 0: resolved when an evaluation is submitted
  int64_t partition_size = 0;
  std::string priority;
  std::vector<std::string> on_checkpoint;
};

struct WorkerRow {
  std::string id, pool, worker_version, code_commit;
  int64_t memory_mib = 0;
  int slots = 0;
  int running = 0;  // leases held
  bool alive = false;
  int64_t last_heartbeat_ms_ago = 0;
  std::vector<std::string> evaluators;
  wire::Libraries libraries;
};

// POST /v1/gates/evaluate: a gate policy applied to two evaluations' stored items.
struct GateRequest {
  std::string policy;               // the policy's name (`gate:`)
  std::string candidate, baseline;  // evaluation ids; no baseline: the production version's (its latest
                                    // COMPLETED or CACHED evaluation of the candidate's suite)
};

struct GateOutcome {
  int http_status = 201;  // 404 (unknown policy or evaluation), 409 (refused: not comparable)
  std::string error;
  std::string gate_id;
  std::string json;  // the stored decision: GateDecision::to_json() with "gateId" and "decidedNs"
  GateDecision decision;
  std::vector<Alert> alerts;  // the evaluation alerts the decision raised (FAIL only)
};

// The statuses a model version moves through (docs/evaluation-service.md,
// "Gates and promotion"); "registered" (a version no one promoted yet) is a candidate.
inline const std::vector<std::string>& promotion_statuses() {
  static const std::vector<std::string> s = {"candidate", "evaluated", "gated", "canary", "production"};
  return s;
}

// POST /v1/models/{id}/versions/{v}/promote.
struct PromoteRequest {
  std::string model_id, version;
  std::string to;       // evaluated, gated, canary, production, or rollback
  std::string gate_id;  // optional: the decision to rely on (default: the version's latest)
  std::string user;     // as declared by the caller; "anonymous" when empty
};

struct PromoteOutcome {
  int http_status = 200;  // 400 (bad status), 404 (unknown version or gate), 409 (refused)
  std::string error;
  std::vector<std::string> reasons;  // a refused gate's reasons
  std::string gate_id;               // the decision relied on, or the refusing one
  std::vector<std::string> audit;    // the audit records written (JSON), in order
};

struct GateInfo {
  std::string name, file, version, suite, description;
  double alpha = 0;
  std::vector<std::string> metrics;  // "quality/accuracy", in policy order
};

struct ServiceCounters {
  int64_t messages = 0, bad_messages = 0, assigned = 0, accepted = 0, duplicates = 0, rejected = 0, failed = 0;
  int64_t items = 0;  // items of accepted results
  int64_t checkpoints_registered = 0;
};

class EvalService {
 public:
  explicit EvalService(ServiceOptions options);
  ~EvalService();  // stops
  EvalService(const EvalService&) = delete;
  EvalService& operator=(const EvalService&) = delete;

  // Loads the suites, opens the store, binds the socket, resumes what the
  // store holds unfinished and starts the service thread; false (and
  // `error`) when the store cannot be opened or the endpoint not bound.
  // Suites that do not parse are skipped, each named in suite_problems().
  bool start(std::string* error);
  void stop();
  const std::string& endpoint() const { return endpoint_; }                  // as bound (the port when :0 was asked)
  const std::string& alerts_endpoint() const { return alerts_.endpoint(); }  // "" without --alerts-pub
  const std::string& store_url() const { return options_.store_url; }
  std::vector<std::string> suite_problems() const { return suite_problems_; }
  std::vector<std::string> resume_notes() const;  // what start() resumed or failed, one line each

  SubmitOutcome submit(const SubmitRequest& request);
  CheckpointOutcome register_checkpoint(const CheckpointRequest& request);
  // The decision log of an evaluation, oldest first; nullopt when unknown.
  std::optional<std::vector<std::string>> why(const std::string& evaluation_id);
  // Why an evaluation failed before any shard ran (missing dataset, changed hash, suite gone); "" otherwise.
  std::string failure(const std::string& evaluation_id);
  std::vector<SuiteRow> suites();
  std::vector<WorkerRow> workers();
  ServiceCounters counters();
  // Whether the evaluation is open (not terminal) in this process.
  bool is_open(const std::string& evaluation_id);

  // Quality gates and promotion (docs/evaluation-service.md, "Gates and promotion").
  std::vector<GateInfo> gates();
  std::vector<std::string> gate_problems() const { return gate_problems_; }
  GateOutcome evaluate_gate(const GateRequest& request);
  PromoteOutcome promote(const PromoteRequest& request);

 private:
  struct LoadedSuite;
  struct Open;
  struct WorkerInfo;

  void load_suites();
  void load_gates();
  const Suite* find_suite(const std::string& name) const;
  const LoadedSuite* find_loaded(const std::string& name) const;
  // The cluster ids the suite's dataset file gives its items, added where
  // `into` has none, when the file read is the content `dataset_hash` names.
  void add_dataset_clusters(const std::string& suite, const std::string& dataset_hash, ClusterIds* into) const;
  // Why the suite's cluster ids could not be read from its dataset; "" when they were (or none are needed).
  std::string clusters_problem(const std::string& suite) const;
  // One evaluation's side of a gate from its stored items (a whole-cache hit's are its source's).
  // Also adds the items' stored cluster ids to `clusters` (those not there yet).
  bool gate_side(const std::string& evaluation_id, GateSide* side, const Suite** suite, GateOutcome* out,
                 ClusterIds* clusters);
  GateOutcome evaluate_gate_locked(const GateRequest& request);
  // The gate the service runs by itself when an evaluation reaches a terminal
  // status: every loaded policy that names its suite, against the production
  // version, when the model has one (and it is not the candidate's version).
  void auto_gate(const std::string& evaluation_id);
  void auto_gate_unguarded(const std::string& evaluation_id);
  // Stores the alerts (the alerts table), publishes and appends them.
  void raise_alerts(const std::string& evaluation_id, const std::vector<Alert>& alerts);
  void run();
  void handle(const std::string& identity, std::string_view bytes);
  void on_hello(const std::string& identity, const wire::Hello& m);
  void on_heartbeat(const std::string& identity, const wire::Heartbeat& m);
  void on_result(const std::string& identity, wire::Result& m);
  void on_fail(const wire::Fail& m);
  void on_bye(const wire::Bye& m);
  void send(const std::string& identity, const std::string& payload);
  void tick();
  void dispatch();
  // Writes the shard states the scheduler changed (all shards, one, or none), then the evaluation's status.
  static constexpr int kAllShards = -1, kStatusOnly = -2;
  void sync(Open& o, int shard = kAllShards);
  void sync_all();
  void finish(Open& o);
  void poll_checkpoints();
  SubmitOutcome submit_locked(const SubmitRequest& request, const store::CheckpointRecord& checkpoint);
  CheckpointOutcome register_checkpoint_locked(const CheckpointRequest& request);
  std::string check_dataset(LoadedSuite& s);  // "" or why evaluations of it fail at once
  std::string new_evaluation_id(const std::string& cache_key);
  void fail_at_once(EvaluationRun run, const std::string& run_id, const Suite& suite, const std::string& reason);
  // Feeds the aggregator a shard's stored items (of this evaluation after a
  // restart, or of the cache's source evaluation, copied into this one).
  bool refeed_stored_shard(Open& o, int shard, const std::string& source_eval, int source_shard, bool copy,
                           std::string* why);
  void resume();
  void note(const std::string& evaluation_id, const std::string& text);
  int64_t now() const;

  ServiceOptions options_;
  std::string endpoint_;
  std::vector<std::string> suite_problems_;
  std::vector<std::unique_ptr<LoadedSuite>> suites_;
  std::vector<GatePolicy> gates_;
  AlertOutlets alerts_;
  std::vector<std::string> gate_problems_;
  std::unique_ptr<store::Store> store_;
  Scheduler scheduler_;
  std::map<std::string, std::unique_ptr<Open>> open_;
  std::map<std::string, std::vector<std::string>> notes_;  // decisions the scheduler did not make, per evaluation
  std::map<std::string, std::string> failures_;
  std::map<std::string, std::unique_ptr<WorkerInfo>> workers_;
  std::vector<std::string> resume_notes_;
  ServiceCounters counters_;
  int64_t last_expire_ms_ = 0, last_poll_ms_ = 0;
  bool need_dispatch_ = false;

  void* zmq_ctx_ = nullptr;
  void* router_ = nullptr;
  mutable std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace runlens::eval::service
