// The evaluation scheduler (seed section 44) as a deterministic state
// machine: it has no clock and no threads; every call takes the current time
// as an argument, so the same calls give the same decisions (and tests
// replay them exactly).
//
// Rules, in the order they apply (docs/evaluation-service.md):
//  1. Queued shards are ordered by priority (P0 safety certification > P1
//     release candidate > P2 researcher > P3 exploratory), then deadline
//     (earliest first; none last), then submission order, then partition.
//  2. A shard goes only to a live worker with a free slot in the pool it
//     needs (gpu or cpu) and at least the memory it needs (for the model
//     size).
//  3. Among those, checkpoint locality first (a worker that has the
//     evaluation's checkpoint loaded), then the most free slots, then worker
//     id.
//  4. Preemption happens at shard boundaries: a running shard is never
//     killed (it is the unit of retry and of work lost). When a P0 shard
//     cannot be placed, one worker that could run it and is running P3 work
//     is reserved for that P0 evaluation: its P3 shard finishes, and the
//     worker takes no other work until it has a P0 shard. Any freed slot
//     serves P0 first anyway by rule 1.
//  5. Leases: an assignment is a lease of (evaluation, shard, attempt) on a
//     worker. A worker whose last heartbeat is older than the timeout (at
//     expire()) is lost with its leases; each shard is queued again while
//     attempts < max_attempts, otherwise it fails. An evaluation whose shards
//     are all done, cached or failed is COMPLETED, CACHED, PARTIAL (some
//     failed; named) or FAILED (none finished).
//  6. The first result accepted for a shard wins, whatever its attempt
//     (results depend only on the cache-key inputs); later ones are
//     duplicates and change nothing.
// Every decision is logged with its reason, per evaluation (why()).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "eval/registry.h"
#include "eval/shard_plan.h"
#include "eval/suite.h"

namespace runlens::eval {

struct SchedulerOptions {
  int64_t heartbeat_timeout_ms = 30000;
};

struct WorkerSpec {
  std::string id;
  Pool pool = Pool::kCpu;
  int64_t memory_mib = 0;
  int slots = 1;  // shards it runs at once
  // The suite evaluators it runs (Suite::evaluator_version); empty = any.
  std::vector<std::string> evaluators = {};
};

struct EvaluationSpec {
  std::string evaluation_id;
  Priority priority = Priority::kP2;
  std::optional<int64_t> deadline_ms;  // absolute time; none = no deadline
  WorkerRequirements requirements;
  std::string checkpoint_id;
  int max_attempts = 3;
  std::vector<Shard> shards;
  std::vector<bool> cached;  // per shard: served from the cache, needs no worker; empty = none
  // The suite's evaluator: only workers that list it (or list none) get its shards.
  std::string evaluator;
  // Resuming after a restart (per shard; empty = none): done before the
  // restart, and attempts issued before it. A resumed shard's next attempt
  // is numbered after those, so a late result of an attempt from before the
  // restart is told apart and applied at most once; max_attempts counts the
  // attempts issued since the restart (a restart is not the worker's fault).
  // A shard that had failed before the restart (its attempts used up, or a
  // failure no retry mends) stays failed: it is not run again.
  std::vector<bool> done;
  std::vector<bool> failed;
  std::vector<int> prior_attempts;
};

// The scheduling part of a suite for one evaluation: its shard plan, priority,
// deadline (relative in the suite, absolute here), requirements and attempts.
EvaluationSpec make_evaluation_spec(const Suite& suite, const std::string& evaluation_id,
                                    const std::string& checkpoint_id, int64_t submitted_ms);

struct Assignment {
  std::string evaluation_id;
  int partition = 0;
  ItemRange items;
  int attempt = 1;
  std::string worker;
  std::string checkpoint_id;
};

enum class ShardState : uint8_t { kQueued, kRunning, kDone, kCached, kFailed };
std::string_view shard_state_name(ShardState s);

enum class Completion : uint8_t {
  kAccepted,   // the shard is done now
  kDuplicate,  // it was done already (a repeat, or a late result of another attempt): nothing changed
  kRejected,   // no such evaluation, shard or attempt, or the shard has failed already: nothing changed
};

struct Decision {
  int64_t at_ms = 0;
  int partition = -1;  // -1: about the whole evaluation
  std::string text;
  std::string str() const;  // "t=1500ms shard 3 of e-17 went to worker w2: ..."
};

struct SchedulerCounters {
  int64_t assigned = 0;
  int64_t completed = 0;
  int64_t duplicates = 0;
  int64_t rejected = 0;
  int64_t retried = 0;
  int64_t failed_shards = 0;
  int64_t workers_lost = 0;
  int64_t preemptions = 0;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {});

  // Registers (or re-registers, after it was lost) a worker; it counts as heartbeating at now_ms.
  void add_worker(const WorkerSpec& w, int64_t now_ms);
  // Renews the worker's leases. `loaded` (when given) is the set of checkpoints
  // it holds in memory. False for a worker that is unknown or was lost: it must add_worker again.
  bool heartbeat(const std::string& worker, int64_t now_ms, const std::vector<std::string>* loaded = nullptr);
  // A worker leaving on purpose: as if lost, at once.
  void remove_worker(const std::string& worker, int64_t now_ms, const std::string& reason);

  // Queues an evaluation's shards. Throws std::invalid_argument for a
  // duplicate id, no shards, max_attempts < 1 or a cached vector of the wrong size.
  void submit(EvaluationSpec e, int64_t now_ms);

  // Places as many queued shards as the workers take, in rule order.
  std::vector<Assignment> schedule(int64_t now_ms);

  // Whether a result for this (evaluation, shard, attempt) may be applied: the
  // shard exists, is not done, cached or failed, and the attempt was issued.
  bool can_accept(const std::string& evaluation_id, int partition, int attempt) const;
  // A result was applied (or was a duplicate): frees the worker's slot.
  Completion complete(const std::string& evaluation_id, int partition, int attempt, const std::string& worker,
                      int64_t now_ms);
  // The worker gave up on the shard or its result was rejected: retried while
  // attempts remain; not retryable (no other worker would do better, e.g. the
  // dataset's hash differs): the shard fails at once.
  void fail(const std::string& evaluation_id, int partition, int attempt, const std::string& worker,
            const std::string& reason, int64_t now_ms, bool retryable = true);

  // Declares lost every worker whose last heartbeat is older than the
  // timeout, retrying or failing its shards; returns their ids.
  std::vector<std::string> expire(int64_t now_ms);

  bool has_evaluation(const std::string& id) const { return index_.count(id) > 0; }
  EvalStatus status(const std::string& evaluation_id) const;
  ShardState shard_state(const std::string& evaluation_id, int partition) const;
  std::vector<int> missing_shards(const std::string& evaluation_id) const;  // failed shards, ascending
  int shards_done(const std::string& evaluation_id) const;                  // done + cached
  int shard_count(const std::string& evaluation_id) const;                  // 0 for an unknown evaluation
  // The decision log of one evaluation, oldest first, for `runlens eval why ID`.
  std::vector<std::string> why(const std::string& evaluation_id) const;
  const SchedulerCounters& counters() const { return counters_; }
  size_t queued_shards() const { return queue_.size(); }

 private:
  struct ShardEntry {
    ShardState state = ShardState::kQueued;
    int attempts = 0;  // issued so far; the running lease is attempt `attempts`
    int prior = 0;     // issued before a restart (not counted against max_attempts)
    int worker = -1;   // index of the worker holding the lease
    std::string last_worker;
  };
  struct EvalEntry {
    EvaluationSpec spec;
    std::vector<ShardEntry> shards;
    int queued = 0, running = 0, done = 0, cached = 0, failed = 0;
    int64_t submitted_ms = 0;
    std::vector<Decision> log;
    EvalStatus status = EvalStatus::kQueued;
  };
  struct WorkerEntry {
    WorkerSpec spec;
    int64_t last_heartbeat_ms = 0;
    bool alive = true;
    int running = 0;
    std::vector<std::string> loaded;       // checkpoints in memory, most recent last
    int reserved_for = -1;                 // a P0 evaluation it drains for
    std::set<std::pair<int, int>> leases;  // (evaluation, partition)
  };
  // priority, deadline, submission sequence (= evaluation index), partition
  using QueueKey = std::tuple<int, int64_t, int, int>;

  QueueKey key_of(int e, int partition) const;
  void enqueue(int e, int partition);
  void dequeued(int e);  // one of e's shards left the queue
  void log(int e, int64_t at_ms, int partition, std::string text);
  std::string rejection(const WorkerEntry& w, const EvalEntry& e) const;  // "" = eligible
  bool has_loaded(const WorkerEntry& w, const std::string& checkpoint) const;
  std::string order_reason(int e) const;
  void release_lease(int e, int partition, int64_t now_ms);
  void lose_worker(int w, int64_t now_ms, const std::string& why);
  void requeue_or_fail(int e, int partition, int64_t now_ms, const std::string& why, bool retry = true);
  void update_status(int e, int64_t now_ms);
  void clear_reservations(int e);
  const EvalEntry* find(const std::string& id) const;

  SchedulerOptions options_;
  std::vector<EvalEntry> evals_;
  std::map<std::string, int> index_;
  std::vector<WorkerEntry> workers_;  // in id order
  std::map<std::string, int> worker_index_;
  std::set<QueueKey> queue_;
  std::set<int> with_queued_;  // evaluations with queued shards, for order_reason()
  SchedulerCounters counters_;
};

}  // namespace runlens::eval
