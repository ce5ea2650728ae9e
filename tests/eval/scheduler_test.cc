// eval/scheduler: the rules of section 44 one by one, each with the decision
// text `runlens eval why` prints; leases, retries, PARTIAL and FAILED;
// preemption at shard boundaries; determinism.
#include "eval/scheduler.h"

#include <doctest/doctest.h>

#include <map>
#include <random>
#include <string>

namespace runlens::eval {
namespace {

EvaluationSpec eval_spec(const std::string& id, Priority p, int shards, Pool pool = Pool::kGpu, int64_t memory = 1024,
                         const std::string& checkpoint = "ck-1") {
  EvaluationSpec e;
  e.evaluation_id = id;
  e.priority = p;
  e.requirements = {pool, memory};
  e.checkpoint_id = checkpoint;
  e.shards = plan_shards(id, shards * 10, 10);
  return e;
}

// "e/partition@worker" for each assignment, for compact comparisons.
std::vector<std::string> placed(const std::vector<Assignment>& as) {
  std::vector<std::string> out;
  for (const auto& a : as) out.push_back(a.evaluation_id + "/" + std::to_string(a.partition) + "@" + a.worker);
  return out;
}

bool log_has(const Scheduler& s, const std::string& id, const std::string& text) {
  for (const auto& line : s.why(id)) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("scheduler: priority before submission order, with locality and requirements in the reason") {
  Scheduler s;
  s.add_worker({"w1", Pool::kCpu, 65536, 1}, 0);
  s.add_worker({"w2", Pool::kGpu, 81920, 1}, 0);
  const std::vector<std::string> loaded{"ck-9"};
  s.heartbeat("w2", 0, &loaded);
  s.submit(eval_spec("e-3", Priority::kP3, 2, Pool::kGpu, 1024, "ck-1"), 0);
  s.submit(eval_spec("e-17", Priority::kP1, 4, Pool::kGpu, 1024, "ck-9"), 10);
  auto as = s.schedule(20);
  CHECK(placed(as) == std::vector<std::string>{"e-17/0@w2"});
  CHECK(as[0].attempt == 1);
  CHECK(as[0].items == ItemRange{0, 10});
  CHECK(as[0].checkpoint_id == "ck-9");
  auto why = s.why("e-17");
  REQUIRE(why.size() == 2);
  CHECK(why[0] == "t=10ms queued 4 shards as P1 (release candidate), needing a gpu worker with 1024 MiB");
  CHECK(why[1] ==
        "t=20ms shard 0 of e-17 went to worker w2: P1 before P3 work queued earlier (e-3); w2 has checkpoint ck-9 "
        "loaded; w1 lacks a GPU");
  CHECK(s.status("e-17") == EvalStatus::kRunning);
  CHECK(s.status("e-3") == EvalStatus::kQueued);
}

TEST_CASE("scheduler: earliest deadline first within a priority; none last") {
  Scheduler s;
  s.add_worker({"w1", Pool::kGpu, 81920, 1}, 0);
  auto a = eval_spec("e-a", Priority::kP2, 1);
  auto b = eval_spec("e-b", Priority::kP2, 1);
  b.deadline_ms = 5000;
  auto c = eval_spec("e-c", Priority::kP2, 1);
  c.deadline_ms = 3000;
  s.submit(a, 0);
  s.submit(b, 1);
  s.submit(c, 2);
  std::vector<std::string> order;
  for (int t = 10; t < 40; t += 10) {
    auto as = s.schedule(t);
    REQUIRE(as.size() == 1);
    order.push_back(as[0].evaluation_id);
    CHECK(s.complete(as[0].evaluation_id, as[0].partition, as[0].attempt, "w1", t + 5) == Completion::kAccepted);
  }
  CHECK(order == std::vector<std::string>{"e-c", "e-b", "e-a"});
  CHECK(log_has(
      s, "e-c",
      "shard 0 of e-c went to worker w1: P2 with deadline t=3000ms before e-a without a deadline, queued earlier"));
  CHECK(log_has(s, "e-b", "P2 with deadline t=5000ms before e-a without a deadline, queued earlier"));
  CHECK(log_has(s, "e-a", "P2, the only queued work"));
}

TEST_CASE("scheduler: worker capacity, pool and memory") {
  Scheduler s;
  s.add_worker({"small", Pool::kGpu, 16384, 4}, 0);
  s.add_worker({"cpu", Pool::kCpu, 262144, 4}, 0);
  s.add_worker({"big", Pool::kGpu, 81920, 2}, 0);
  s.submit(eval_spec("e-70b", Priority::kP2, 3, Pool::kGpu, 40960), 0);
  auto as = s.schedule(1);
  CHECK(placed(as) == std::vector<std::string>{"e-70b/0@big", "e-70b/1@big"});  // 2 slots; shard 2 waits
  CHECK(s.why("e-70b")[1] ==
        "t=1ms shard 0 of e-70b went to worker big: P2, the only queued work; no free eligible worker has checkpoint "
        "ck-1 loaded, big has 2 free of 2 slots; small has 16384 MiB of the 40960 MiB needed; cpu lacks a GPU");
  CHECK(s.why("e-70b")[2] ==
        "t=1ms shard 1 of e-70b went to worker big: P2, the only queued work; big has checkpoint ck-1 loaded; small "
        "has 16384 MiB of the 40960 MiB needed; cpu lacks a GPU");
  CHECK(s.schedule(2).empty());
  CHECK(s.queued_shards() == 1);
  CHECK(s.complete("e-70b", 0, 1, "big", 3) == Completion::kAccepted);
  CHECK(placed(s.schedule(4)) == std::vector<std::string>{"e-70b/2@big"});

  // CPU work does not take GPU workers.
  s.submit(eval_spec("e-cpu", Priority::kP2, 1, Pool::kCpu, 1024), 5);
  CHECK(placed(s.schedule(6)) == std::vector<std::string>{"e-cpu/0@cpu"});
  CHECK(log_has(s, "e-cpu", "small is in the GPU pool (this is CPU work)"));
}

TEST_CASE("scheduler: checkpoint locality picks the worker with the checkpoint loaded") {
  Scheduler s;
  s.add_worker({"w1", Pool::kGpu, 81920, 1}, 0);
  s.add_worker({"w2", Pool::kGpu, 81920, 1}, 0);
  s.add_worker({"w3", Pool::kGpu, 81920, 1}, 0);
  const std::vector<std::string> loaded{"ck-9"};
  s.heartbeat("w3", 0, &loaded);
  s.submit(eval_spec("e-1", Priority::kP2, 1, Pool::kGpu, 1024, "ck-9"), 0);
  CHECK(placed(s.schedule(1)) == std::vector<std::string>{"e-1/0@w3"});
  CHECK(s.why("e-1")[1] ==
        "t=1ms shard 0 of e-1 went to worker w3: P2, the only queued work; w3 has checkpoint ck-9 loaded; w1 does not "
        "have it loaded; w2 does not have it loaded");
}

TEST_CASE("scheduler: a P0 evaluation preempts P3 work at a shard boundary") {
  Scheduler s;
  s.add_worker({"w1", Pool::kGpu, 81920, 1}, 0);
  s.add_worker({"w2", Pool::kGpu, 81920, 1}, 0);
  s.submit(eval_spec("e-explore", Priority::kP3, 6), 0);
  CHECK(placed(s.schedule(2)) == std::vector<std::string>{"e-explore/0@w1", "e-explore/1@w2"});

  // P0 arrives: no free worker. Nothing running is killed; w1 is reserved.
  s.submit(eval_spec("e-safety", Priority::kP0, 2), 100);
  CHECK(s.schedule(101).empty());
  CHECK(s.counters().preemptions == 1);
  CHECK(log_has(
      s, "e-safety",
      "t=101ms P0 preempts P3 work at a shard boundary: worker w1 finishes its P3 shard e-explore/0 (shards are "
      "never killed), then takes only P0 work"));
  CHECK(log_has(s, "e-explore", "worker w1 drains for P0 evaluation e-safety"));
  CHECK(s.shard_state("e-explore", 0) == ShardState::kRunning);

  // The P3 shard finishes and is accepted; w1 gets P0 next although P3 shards were queued earlier.
  CHECK(s.complete("e-explore", 0, 1, "w1", 200) == Completion::kAccepted);
  auto as = s.schedule(201);
  CHECK(placed(as) == std::vector<std::string>{"e-safety/0@w1"});
  CHECK(log_has(s, "e-safety",
                "t=201ms shard 0 of e-safety went to worker w1: P0 before P3 work queued earlier (e-explore); w1 has "
                "checkpoint ck-1 loaded; w1 was reserved for this P0 evaluation; w2 is busy (1 of 1 slots)"));
  // w2's P3 shard finishes: the second P0 shard goes there, before any P3 work.
  CHECK(s.complete("e-explore", 1, 1, "w2", 300) == Completion::kAccepted);
  CHECK(placed(s.schedule(301)) == std::vector<std::string>{"e-safety/1@w2"});
  // P0 is placed; P3 resumes when slots free.
  CHECK(s.complete("e-safety", 0, 1, "w1", 400) == Completion::kAccepted);
  CHECK(placed(s.schedule(401)) == std::vector<std::string>{"e-explore/2@w1"});
}

TEST_CASE("scheduler: a reserved worker takes no lower-priority work while the P0 evaluation waits") {
  Scheduler s;
  s.add_worker({"w1", Pool::kGpu, 81920, 1}, 0);
  s.add_worker({"cpu1", Pool::kCpu, 81920, 1}, 0);
  s.submit(eval_spec("e-p3", Priority::kP3, 3), 0);
  CHECK(placed(s.schedule(1)) == std::vector<std::string>{"e-p3/0@w1"});
  auto p0 = eval_spec("e-p0", Priority::kP0, 1);
  s.submit(p0, 2);
  CHECK(s.schedule(3).empty());
  // A P2 GPU evaluation queued now cannot take w1 even if P0 could not use it for a moment.
  s.submit(eval_spec("e-p2", Priority::kP2, 1), 4);
  CHECK(s.complete("e-p3", 0, 1, "w1", 5) == Completion::kAccepted);
  CHECK(placed(s.schedule(6)) == std::vector<std::string>{"e-p0/0@w1"});
  CHECK(s.complete("e-p0", 0, 1, "w1", 7) == Completion::kAccepted);
  CHECK(s.status("e-p0") == EvalStatus::kCompleted);
  CHECK(placed(s.schedule(8)) == std::vector<std::string>{"e-p2/0@w1"});
}

TEST_CASE("scheduler: a worker that misses heartbeats loses its shards, retried elsewhere") {
  Scheduler s(SchedulerOptions{30000});
  s.add_worker({"w1", Pool::kGpu, 81920, 1}, 0);
  s.add_worker({"w2", Pool::kGpu, 81920, 1}, 0);
  auto e = eval_spec("e-5", Priority::kP2, 2);
  e.max_attempts = 2;
  s.submit(e, 0);
  CHECK(placed(s.schedule(0)) == std::vector<std::string>{"e-5/0@w1", "e-5/1@w2"});
  s.heartbeat("w1", 20000);
  s.heartbeat("w2", 29000);
  CHECK(s.expire(45000).empty());  // w1 last seen 25 s ago
  CHECK(s.expire(50001) == std::vector<std::string>{"w1"});
  CHECK(s.shard_state("e-5", 0) == ShardState::kQueued);
  CHECK(log_has(s, "e-5",
                "t=50001ms worker w1 missed heartbeats for 30.001 s (timeout 30 s): lost shard 0 (attempt 1); retried "
                "elsewhere (attempt 2 of 2 queued)"));
  CHECK_FALSE(s.heartbeat("w1", 50002));  // a lost worker must register again
  CHECK(s.complete("e-5", 1, 1, "w2", 50003) == Completion::kAccepted);
  auto as = s.schedule(50004);
  CHECK(placed(as) == std::vector<std::string>{"e-5/0@w2"});
  CHECK(as[0].attempt == 2);
  CHECK(log_has(s, "e-5", "shard 0 of e-5 went to worker w2 (attempt 2 of 2): P2, the only queued work"));
  CHECK(log_has(s, "e-5", "w1 is not heartbeating"));
  // w2 dies too: no attempts left, the evaluation is PARTIAL with the missing shard named.
  CHECK(s.expire(90000) == std::vector<std::string>{"w2"});
  CHECK(s.status("e-5") == EvalStatus::kPartial);
  CHECK(s.missing_shards("e-5") == std::vector<int>{0});
  CHECK(log_has(s, "e-5", "shard 0 [0, 10) failed after 2 of 2 attempts"));
  CHECK(log_has(s, "e-5", "evaluation e-5 is PARTIAL: 1 shards done, 0 cached, 1 failed (missing shards: 0 [0, 10))"));
  CHECK(s.counters().retried == 1);
  CHECK(s.counters().failed_shards == 1);
  CHECK(s.counters().workers_lost == 2);
}

TEST_CASE("scheduler: FAILED when no shard finishes") {
  Scheduler s(SchedulerOptions{1000});
  s.add_worker({"w1", Pool::kCpu, 4096, 2}, 0);
  auto e = eval_spec("e-6", Priority::kP2, 2, Pool::kCpu);
  e.max_attempts = 1;
  s.submit(e, 0);
  CHECK(s.schedule(0).size() == 2);
  s.fail("e-6", 0, 1, "w1", "result rejected: accuracy of item 3: score 1.5 is outside [0, 1]", 10);
  CHECK(log_has(s, "e-6",
                "shard 0 attempt 1 on w1 failed: result rejected: accuracy of item 3: score 1.5 is outside [0, 1]; "
                "shard 0 [0, 10) failed after 1 of 1 attempts"));
  CHECK(s.status("e-6") == EvalStatus::kRunning);
  s.expire(5000);
  CHECK(s.status("e-6") == EvalStatus::kFailed);
  CHECK(s.missing_shards("e-6") == std::vector<int>{0, 1});
}

TEST_CASE("scheduler: the first result wins; late duplicates and repeats change nothing") {
  Scheduler s(SchedulerOptions{1000});
  s.add_worker({"w1", Pool::kCpu, 4096, 1}, 0);
  s.add_worker({"w2", Pool::kCpu, 4096, 1}, 0);
  s.submit(eval_spec("e-7", Priority::kP2, 1, Pool::kCpu), 0);
  CHECK(placed(s.schedule(0)) == std::vector<std::string>{"e-7/0@w1"});
  s.heartbeat("w2", 1500);
  s.expire(1500);  // w1 lost; attempt 2 goes to w2
  CHECK(placed(s.schedule(1600)) == std::vector<std::string>{"e-7/0@w2"});
  // w1 was only slow: its attempt-1 result arrives first and wins; attempt 2 is cancelled.
  CHECK(s.can_accept("e-7", 0, 1));
  CHECK(s.complete("e-7", 0, 1, "w1", 1700) == Completion::kAccepted);
  CHECK(log_has(s, "e-7", "shard 0 done by w1 (a late result of attempt 1; attempt 2 on w2 is cancelled)"));
  CHECK(s.status("e-7") == EvalStatus::kCompleted);
  CHECK_FALSE(s.can_accept("e-7", 0, 2));
  CHECK(s.complete("e-7", 0, 2, "w2", 1800) == Completion::kDuplicate);
  CHECK(s.complete("e-7", 0, 1, "w1", 1900) == Completion::kDuplicate);
  CHECK(s.complete("e-7", 0, 3, "w2", 1900) == Completion::kDuplicate);
  CHECK(s.complete("e-7", 5, 1, "w2", 1900) == Completion::kRejected);
  CHECK(s.complete("nope", 0, 1, "w2", 1900) == Completion::kRejected);
  CHECK(s.counters().duplicates == 3);
  CHECK(s.counters().completed == 1);
  // w2's slot is free again: new work goes there.
  s.submit(eval_spec("e-8", Priority::kP2, 1, Pool::kCpu), 2000);
  CHECK(placed(s.schedule(2000)) == std::vector<std::string>{"e-8/0@w2"});
  // An attempt that was never issued is rejected.
  CHECK_FALSE(s.can_accept("e-8", 0, 2));
  CHECK(s.complete("e-8", 0, 2, "w2", 2001) == Completion::kRejected);
}

TEST_CASE("scheduler: a late result for a shard queued for a retry completes it and drops the retry") {
  Scheduler s(SchedulerOptions{1000});
  s.add_worker({"w1", Pool::kCpu, 4096, 1}, 0);
  s.add_worker({"w2", Pool::kCpu, 4096, 1}, 0);
  auto e = eval_spec("e-11", Priority::kP2, 1, Pool::kCpu);
  e.max_attempts = 3;
  s.submit(e, 0);
  CHECK(placed(s.schedule(0)) == std::vector<std::string>{"e-11/0@w1"});
  s.heartbeat("w2", 1500);
  s.expire(1500);  // w1 lost
  CHECK(placed(s.schedule(1500)) == std::vector<std::string>{"e-11/0@w2"});
  s.expire(3000);  // w2 lost too: attempt 3 is queued, no worker left
  CHECK(s.shard_state("e-11", 0) == ShardState::kQueued);
  CHECK(s.queued_shards() == 1);
  CHECK(s.complete("e-11", 0, 1, "w1", 3100) == Completion::kAccepted);
  CHECK(log_has(s, "e-11",
                "shard 0 done by w1 (a late result of attempt 1; attempt 2 was lost; the queued retry is dropped)"));
  CHECK(s.queued_shards() == 0);
  CHECK(s.status("e-11") == EvalStatus::kCompleted);
}

TEST_CASE("scheduler: cached shards need no worker; all cached is CACHED") {
  Scheduler s;
  s.add_worker({"w1", Pool::kCpu, 4096, 4}, 0);
  auto e = eval_spec("e-9", Priority::kP2, 3, Pool::kCpu);
  e.cached = {true, false, true};
  s.submit(e, 0);
  CHECK(log_has(s, "e-9", "2 shards served from the cache"));
  CHECK(placed(s.schedule(1)) == std::vector<std::string>{"e-9/1@w1"});
  s.complete("e-9", 1, 1, "w1", 2);
  CHECK(s.status("e-9") == EvalStatus::kCompleted);
  auto all = eval_spec("e-10", Priority::kP2, 2, Pool::kCpu);
  all.cached = {true, true};
  s.submit(all, 3);
  CHECK(s.status("e-10") == EvalStatus::kCached);
  CHECK(s.schedule(4).empty());
}

TEST_CASE("scheduler: invalid submissions") {
  Scheduler s;
  s.submit(eval_spec("e-1", Priority::kP2, 1), 0);
  CHECK_THROWS_WITH_AS(s.submit(eval_spec("e-1", Priority::kP2, 1), 0), "evaluation e-1 was submitted already",
                       std::invalid_argument);
  auto empty = eval_spec("e-2", Priority::kP2, 1);
  empty.shards.clear();
  CHECK_THROWS_WITH_AS(s.submit(empty, 0), "evaluation e-2 has no shards", std::invalid_argument);
  auto bad = eval_spec("e-3", Priority::kP2, 2);
  bad.cached = {true};
  CHECK_THROWS_WITH_AS(s.submit(bad, 0), "evaluation e-3: one cached flag per shard is needed", std::invalid_argument);
}

TEST_CASE("scheduler: an evaluation from a suite") {
  Suite suite;
  suite.dataset.items = 360;
  suite.dataset.first_item = 1437;
  suite.partition_size = 100;
  suite.priority = Priority::kP0;
  suite.deadline_s = 1800;
  suite.max_attempts = 2;
  suite.workers = {Pool::kCpu, 512};
  EvaluationSpec e = make_evaluation_spec(suite, "e-1", "ck-3", 5000);
  CHECK(e.evaluation_id == "e-1");
  CHECK(e.priority == Priority::kP0);
  CHECK(e.deadline_ms == 5000 + 1800 * 1000);
  CHECK(e.requirements.pool == Pool::kCpu);
  CHECK(e.requirements.memory_mib == 512);
  CHECK(e.checkpoint_id == "ck-3");
  CHECK(e.max_attempts == 2);
  REQUIRE(e.shards.size() == 4);
  CHECK(e.shards[3].items == ItemRange{1737, 1797});
}

// The same calls give the same decisions, whatever happened before in the process.
std::vector<std::string> run_scenario() {
  Scheduler s(SchedulerOptions{500});
  for (int w = 0; w < 4; ++w) s.add_worker({"w" + std::to_string(w), w % 2 ? Pool::kGpu : Pool::kCpu, 8192, 2}, 0);
  s.submit(eval_spec("a", Priority::kP3, 7, Pool::kGpu), 0);
  s.submit(eval_spec("b", Priority::kP1, 5, Pool::kCpu, 1024, "ck-2"), 1);
  s.submit(eval_spec("c", Priority::kP0, 3, Pool::kGpu, 1024, "ck-3"), 2);
  int64_t t = 3;
  for (int round = 0; round < 40; ++round, t += 100) {
    for (const auto& a : s.schedule(t)) {
      if ((a.partition + round) % 5 == 0) continue;  // some never report: their workers expire
      s.complete(a.evaluation_id, a.partition, a.attempt, a.worker, t + 1);
    }
    for (int w = 0; w < 4; ++w) {
      if (round < 10 || w != 1) s.heartbeat("w" + std::to_string(w), t + 2);
    }
    s.expire(t + 3);
  }
  std::vector<std::string> out;
  for (const char* id : {"a", "b", "c"}) {
    for (auto& line : s.why(id)) out.push_back(std::move(line));
    out.push_back(std::string(eval_status_name(s.status(id))));
  }
  return out;
}

// Random workloads, checked against what the public API promises: a shard is
// handed out only while queued, a worker never holds more leases than slots,
// the queue holds exactly the queued shards, a terminal evaluation has no
// queued or running shard, and once workers stay healthy every evaluation a
// worker can run ends, COMPLETED exactly when no shard is missing.
TEST_CASE("scheduler: invariants under random submissions, results, failures and lost workers") {
  int ended = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    Scheduler s(SchedulerOptions{300});
    const int workers = 1 + static_cast<int>(rng() % 4);
    std::map<std::string, int> slots;
    auto pool_of = [](int w) { return w % 2 ? Pool::kCpu : Pool::kGpu; };  // w0 GPU, w1 CPU, ...
    for (int w = 0; w < workers; ++w) {
      const std::string id = "w" + std::to_string(w);
      slots[id] = 1 + static_cast<int>(rng() % 3);
      s.add_worker({id, pool_of(w), 8192, slots[id]}, 0);
    }
    auto keep_alive = [&](int64_t t, int silent) {
      for (int w = 0; w < workers; ++w) {
        const std::string id = "w" + std::to_string(w);
        if (w != silent && !s.heartbeat(id, t)) s.add_worker({id, pool_of(w), 8192, slots[id]}, t);
      }
    };
    std::vector<std::string> evals;
    std::map<std::pair<std::string, int>, std::pair<std::string, int>> outstanding;  // shard -> worker, attempt
    int64_t t = 1;
    for (int round = 0; round < 200; ++round, t += 50) {
      if (rng() % 4 == 0) {
        const std::string id = "e" + std::to_string(evals.size());
        auto e = eval_spec(id, static_cast<Priority>(rng() % 4), 1 + static_cast<int>(rng() % 6),
                           rng() % 2 ? Pool::kCpu : Pool::kGpu);
        e.max_attempts = 1 + static_cast<int>(rng() % 3);
        if (rng() % 3 == 0) e.deadline_ms = t + static_cast<int64_t>(rng() % 5000);
        s.submit(e, t);
        evals.push_back(id);
      }
      for (const auto& a : s.schedule(t)) {
        CHECK(s.shard_state(a.evaluation_id, a.partition) == ShardState::kRunning);
        outstanding[{a.evaluation_id, a.partition}] = {a.worker, a.attempt};
      }
      std::map<std::string, int> held;
      for (const auto& [shard, lease] : outstanding) {
        if (s.shard_state(shard.first, shard.second) == ShardState::kRunning) ++held[lease.first];
      }
      for (const auto& [w, n] : held) CHECK(n <= slots[w]);
      // Workers report some of their shards, a few fail, and now and then one goes silent.
      const int silent = rng() % 5 == 0 ? static_cast<int>(rng() % workers) : -1;
      for (auto it = outstanding.begin(); it != outstanding.end();) {
        const auto [shard, lease] = *it;
        const unsigned r = rng() % 10;
        if (lease.first == "w" + std::to_string(silent) || r < 3) {
          ++it;
          continue;
        }
        if (r == 3)
          s.fail(shard.first, shard.second, lease.second, lease.first, "scorer crashed", t);
        else if (s.can_accept(shard.first, shard.second, lease.second))
          CHECK(s.complete(shard.first, shard.second, lease.second, lease.first, t) == Completion::kAccepted);
        else
          CHECK(s.complete(shard.first, shard.second, lease.second, lease.first, t) != Completion::kAccepted);
        it = outstanding.erase(it);
      }
      keep_alive(t, silent);
      s.expire(t + 1);
      size_t queued = 0;
      for (const auto& id : evals) {
        for (int p = 0; p < s.shard_count(id); ++p) {
          const ShardState st = s.shard_state(id, p);
          queued += st == ShardState::kQueued;
          if (is_terminal(s.status(id))) CHECK((st != ShardState::kQueued && st != ShardState::kRunning));
        }
      }
      CHECK(s.queued_shards() == queued);
    }
    // Healthy from here on: every worker heartbeats and reports everything.
    for (int round = 0; round < 400; ++round, t += 50) {
      keep_alive(t, -1);
      for (const auto& [shard, lease] : outstanding)
        s.complete(shard.first, shard.second, lease.second, lease.first, t);
      outstanding.clear();
      for (const auto& a : s.schedule(t)) outstanding[{a.evaluation_id, a.partition}] = {a.worker, a.attempt};
    }
    const bool has_cpu = workers > 1;
    for (const auto& id : evals) {
      CAPTURE(id);
      const EvalStatus st = s.status(id);
      if (s.why(id)[0].find("needing a cpu worker") != std::string::npos && !has_cpu) {
        CHECK(st == EvalStatus::kQueued);  // no worker can run it: it waits
        continue;
      }
      CHECK(is_terminal(st));
      CHECK((st == EvalStatus::kCompleted) == s.missing_shards(id).empty());
      ++ended;
    }
  }
  CHECK(ended > 50);
}

TEST_CASE("scheduler: deterministic") {
  auto first = run_scenario();
  CHECK(first.size() > 20);
  CHECK(first == run_scenario());
}

TEST_CASE("scheduler: a worker gets only shards of suites whose evaluator it runs") {
  Scheduler s;
  s.add_worker({"lm", Pool::kCpu, 8192, 1, {"lm-eval-v1"}}, 0);
  s.add_worker({"any", Pool::kCpu, 8192, 1}, 0);
  EvaluationSpec e = eval_spec("e-c", Priority::kP2, 3, Pool::kCpu);
  e.evaluator = "classify-v1";
  s.submit(e, 0);
  auto as = s.schedule(1);
  CHECK(placed(as) == std::vector<std::string>{"e-c/0@any"});
  CHECK(log_has(s, "e-c", "running evaluator classify-v1"));
  CHECK(log_has(s, "e-c", "lm does not run evaluator classify-v1"));
  EvaluationSpec l = eval_spec("e-l", Priority::kP3, 1, Pool::kCpu);
  l.evaluator = "lm-eval-v1";
  s.submit(l, 2);
  CHECK(placed(s.schedule(3)) == std::vector<std::string>{"e-l/0@lm"});
}

TEST_CASE("scheduler: resuming after a restart keeps done shards and numbers attempts past the stored ones") {
  Scheduler s;
  s.add_worker({"w1", Pool::kCpu, 8192, 1}, 0);
  EvaluationSpec e = eval_spec("e-r", Priority::kP2, 3, Pool::kCpu);
  e.max_attempts = 2;
  e.done = {true, false, false};
  e.prior_attempts = {1, 2, 0};
  s.submit(e, 0);
  CHECK(s.shard_state("e-r", 0) == ShardState::kDone);
  CHECK(s.shards_done("e-r") == 1);
  CHECK(log_has(s, "e-r", "1 shards done before a restart"));
  auto as = s.schedule(1);
  REQUIRE(as.size() == 1);
  CHECK(as[0].partition == 1);
  CHECK(as[0].attempt == 3);  // attempts 1 and 2 were issued before the restart
  // A late result of attempt 2 (issued before the restart) is still the shard's first valid one.
  CHECK(s.can_accept("e-r", 1, 2));
  CHECK_FALSE(s.can_accept("e-r", 1, 4));
  // max_attempts counts the attempts since the restart: one more retry is left.
  s.fail("e-r", 1, 3, "w1", "model crashed", 2);
  CHECK(s.shard_state("e-r", 1) == ShardState::kQueued);
  CHECK(log_has(s, "e-r", "retried elsewhere (attempt 4 of 4 queued)"));
  CHECK(s.complete("e-r", 0, 1, "w1", 3) == Completion::kDuplicate);
}

TEST_CASE("scheduler: a shard that failed before a restart stays failed; the rest decides the status") {
  Scheduler s;
  s.add_worker({"w1", Pool::kCpu, 8192, 1}, 0);
  EvaluationSpec e = eval_spec("e-f", Priority::kP2, 3, Pool::kCpu);
  e.done = {true, false, false};
  e.failed = {false, true, false};
  e.prior_attempts = {1, 3, 1};
  s.submit(e, 0);
  CHECK(s.shard_state("e-f", 1) == ShardState::kFailed);
  CHECK(log_has(s, "e-f", "1 shards failed before a restart (not run again)"));
  auto as = s.schedule(1);
  REQUIRE(as.size() == 1);
  CHECK(as[0].partition == 2);  // only the shard that had not failed
  CHECK(s.schedule(2).empty());
  CHECK(s.complete("e-f", 2, as[0].attempt, "w1", 3) == Completion::kAccepted);
  CHECK(s.status("e-f") == EvalStatus::kPartial);
  CHECK(s.missing_shards("e-f") == std::vector<int>{1});
  EvaluationSpec bad = eval_spec("e-g", Priority::kP2, 3, Pool::kCpu);
  bad.failed = {true};
  CHECK_THROWS_WITH_AS(s.submit(bad, 4), "evaluation e-g: one failed flag per shard is needed", std::invalid_argument);
}

TEST_CASE("scheduler: a fail that is not retryable fails the shard at once") {
  Scheduler s;
  s.add_worker({"w1", Pool::kCpu, 8192, 1}, 0);
  s.submit(eval_spec("e-n", Priority::kP2, 1, Pool::kCpu), 0);
  auto as = s.schedule(1);
  REQUIRE(as.size() == 1);
  s.fail("e-n", 0, 1, "w1", "dataset hash differs", 2, /*retryable=*/false);
  CHECK(s.shard_state("e-n", 0) == ShardState::kFailed);
  CHECK(s.status("e-n") == EvalStatus::kFailed);
  CHECK(s.missing_shards("e-n") == std::vector<int>{0});
  CHECK(log_has(s, "e-n", "dataset hash differs (not retryable); shard 0 [0, 10) failed after 1 of 3 attempts"));
}

}  // namespace
}  // namespace runlens::eval
