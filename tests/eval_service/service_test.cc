// The evaluation service end to end in one process: real ZeroMQ sockets, a
// real SQLite store in a temp dir, suites and datasets written by the test,
// workers speaking the protocol (tests/eval_service/eval_fixture.h).
#include "eval/service/service.h"

#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "eval/service/records.h"
#include "tests/eval_service/eval_fixture.h"

using namespace runlens;
using namespace runlens::testing;
using eval::service::EvalService;
using eval::service::ServiceOptions;
using eval::service::SubmitRequest;
namespace wire = runlens::eval::wire;

namespace {

struct Env {
  std::string dir, db, url, data, sha;
  std::unique_ptr<EvalService> svc;

  explicit Env(const std::string& name, int dataset_items = 60) {
    dir = temp_dir(name);
    db = dir + "/runlens.db";
    url = store::store_url_of_file(db);
    data = dir + "/toy.jsonl";
    sha = write_dataset(data, dataset_items);
    std::filesystem::create_directories(dir + "/suites");
  }
  ~Env() {
    svc.reset();
    std::filesystem::remove_all(dir);
  }
  SuiteSpec spec(const std::string& name = "toy-v1") const {
    SuiteSpec s;
    s.name = name;
    s.dataset_path = data;
    s.sha256 = sha;
    return s;
  }
  void add_suite(const SuiteSpec& s) { write_file(dir + "/suites/" + s.name + ".yaml", suite_yaml(s)); }
  void start(int64_t heartbeat_timeout_ms = 10000, int64_t poll_ms = 0) {
    ServiceOptions o;
    o.store_url = url;
    o.suite_paths = {dir + "/suites"};
    o.endpoint = "tcp://127.0.0.1:0";
    o.heartbeat_ms = 50;
    o.heartbeat_timeout_ms = heartbeat_timeout_ms;
    o.checkpoint_poll_ms = poll_ms;
    svc = std::make_unique<EvalService>(o);
    std::string error;
    REQUIRE_MESSAGE(svc->start(&error), error);
    CHECK(svc->endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
    CHECK(svc->endpoint() != "tcp://127.0.0.1:0");
  }
  void checkpoint(const std::string& id, char hash_char, const std::string& model_version) {
    eval::service::CheckpointRequest r{checkpoint_record(id, hash_char), model_version};
    auto o = svc->register_checkpoint(r);
    REQUIRE_MESSAGE(o.error.empty(), o.error);
  }
  eval::service::SubmitOutcome submit(const std::string& mv, const std::string& ck,
                                      const std::string& suite = "toy-v1") {
    return svc->submit(SubmitRequest{mv, ck, suite, std::nullopt, std::nullopt});
  }
  std::string why(const std::string& id) {
    std::string all;
    for (const auto& l : svc->why(id).value_or(std::vector<std::string>{})) all += l + "\n";
    return all;
  }
};

double metric(const store::EvaluationView& v, const std::string& name) {
  for (const auto& m : v.metrics) {
    if (m.name == name) return m.value;
  }
  FAIL("no metric " << name);
  return NAN;
}

// The toy suite's accuracy over items [begin, end), computed here from the statistics.
double expected_accuracy(int begin, int end) {
  double s = 0;
  for (int i = begin; i < end; ++i) s += toy_stats(i)[0];
  return s / (end - begin);
}

}  // namespace

TEST_CASE("eval service: a full evaluation over the wire, with every provenance field and per-item statistics") {
  Env env("full");
  env.add_suite(env.spec());
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  auto o = env.submit("toy-mlp:v1", "ck-a");
  REQUIRE_MESSAGE(o.error.empty(), o.error);
  CHECK(o.http_status == 201);
  CHECK(o.status == "QUEUED");
  CHECK(o.evaluation_id.rfind("ev-", 0) == 0);
  CHECK(status_of(env.url, o.evaluation_id) == "QUEUED");

  TestWorker w(env.svc->endpoint(), "w1", {"toy-eval-v1"});
  w.hello();
  auto outcomes = w.serve([&] { return status_of(env.url, o.evaluation_id) == "COMPLETED"; });
  CHECK(outcomes == std::vector<std::string>{"accepted", "accepted", "accepted", "accepted"});
  REQUIRE(w.assigned.size() == 4);
  const wire::Assign& a = w.assigned[0];
  CHECK(a.model_version == "toy-mlp:v1");
  CHECK(a.checkpoint.id == "ck-a");
  CHECK(a.checkpoint.sha256 == std::string(64, 'a'));
  CHECK(a.checkpoint.uri == "file:///ckpt/ck-a.pt");
  CHECK(a.suite.evaluator == "toy-eval-v1");
  CHECK(a.suite.dataset.path == env.data);
  CHECK(a.suite.dataset.sha256 == env.sha);
  CHECK(a.stride == 3);
  REQUIRE(a.metrics.size() == 2);
  CHECK(a.metrics[1].name == "f1");
  CHECK(a.metrics[1].stats == 2);
  std::set<std::pair<int64_t, int64_t>> ranges;
  for (const auto& x : w.assigned) ranges.insert({x.begin, x.end});
  CHECK(ranges == std::set<std::pair<int64_t, int64_t>>{{0, 10}, {10, 20}, {20, 30}, {30, 40}});

  auto v = read_evaluation(env.url, o.evaluation_id);
  REQUIRE(v);
  const auto& r = v->run;
  CHECK(r.status == "COMPLETED");
  CHECK(r.model_id == "toy-mlp");
  CHECK(r.model_version == "v1");
  CHECK(r.checkpoint_hash == std::string(64, 'a'));
  CHECK(r.run_id == "run-1");
  CHECK(r.dataset_hash == env.sha);
  CHECK(r.benchmark == "toy-bench");
  CHECK(r.suite == "toy-v1");
  CHECK(r.evaluator_version == "toy-eval-v1");
  CHECK(r.worker_version == "test-worker/1");
  CHECK(r.code_commit == "c0ffee");
  CHECK(r.library_versions == std::vector<std::pair<std::string, std::string>>{{"python", "3.11"}});
  CHECK(r.temperature == 0.0);
  CHECK(r.decoding_json == R"({"temperature":0})");
  CHECK(store::is_sha256_hex(r.cache_key));
  CHECK_FALSE(r.completed_at.empty());
  CHECK(store::check_writable(r) == "");
  CHECK(v->shards_completed == 4);
  for (const auto& s : v->shards) {
    CHECK(s.status == "COMPLETED");
    CHECK(s.result_attempt == 1);
    CHECK(s.worker == "w1");
  }
  CHECK(metric(*v, "accuracy") == doctest::Approx(expected_accuracy(0, 40)));
  store::Store s = store::open_store(env.url, {store::OpenMode::kReadOnly});
  auto items = s.evals->items(o.evaluation_id, std::nullopt);
  REQUIRE(items.size() == 40);
  CHECK(items[5].item == 5);
  REQUIRE(items[5].scores.size() == 3);
  CHECK(items[5].scores[0].first == "accuracy");
  CHECK(items[5].scores[1].first == "f1.label");
  CHECK(items[5].scores[2].first == "f1.pred");
  CHECK(items[5].scores[1].second == 2);
  CHECK(items[5].item_hash == sha256::hex("item 5"));
  auto shard_metrics = s.evals->shard_metrics(o.evaluation_id, 1);
  REQUIRE(shard_metrics.size() == 2);
  CHECK(shard_metrics[0].name == "accuracy");
  CHECK(shard_metrics[0].value == doctest::Approx(expected_accuracy(10, 20)));
  CHECK(shard_metrics[0].n == 10);
  auto hit = s.evals->cache_lookup(r.cache_key);
  REQUIRE(hit);
  CHECK(hit->evaluation_id == o.evaluation_id);
  CHECK_FALSE(hit->shard.has_value());
  std::string why = env.why(o.evaluation_id);
  CHECK(why.find("queued 4 shards as P2") != std::string::npos);
  CHECK(why.find("running evaluator toy-eval-v1") != std::string::npos);
  CHECK(why.find("went to worker w1") != std::string::npos);
  CHECK(why.find("is COMPLETED: 4 shards done, 0 cached, 0 failed") != std::string::npos);
  auto workers = env.svc->workers();
  REQUIRE(workers.size() == 1);
  CHECK(workers[0].alive);
  CHECK(workers[0].worker_version == "test-worker/1");
  CHECK(env.svc->counters().items == 40);
}

TEST_CASE(
    "eval service: cache hits: whole (CACHED, no worker time), per shard (only new shards run), none for another "
    "model") {
  Env env("cache");
  env.add_suite(env.spec());
  SuiteSpec wide = env.spec("toy-wide");
  wide.items = 60;
  env.add_suite(wide);
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  TestWorker w(env.svc->endpoint(), "w1");
  w.hello();
  auto first = env.submit("toy-mlp:v1", "ck-a");
  w.serve([&] { return status_of(env.url, first.evaluation_id) == "COMPLETED"; });
  REQUIRE(w.assigned.size() == 4);

  SUBCASE("the same evaluation again is CACHED, pointing at the first, with its metrics; no assignment") {
    auto again = env.submit("toy-mlp:v1", "ck-a");
    CHECK(again.http_status == 201);
    CHECK(again.status == "CACHED");
    CHECK(again.cached_from == first.evaluation_id);
    CHECK(again.evaluation_id != first.evaluation_id);
    CHECK_FALSE(w.assignment(300).has_value());
    auto v = read_evaluation(env.url, again.evaluation_id);
    REQUIRE(v);
    CHECK(v->run.status == "CACHED");
    CHECK(v->run.cached_from == first.evaluation_id);
    CHECK(v->run.worker_version == "test-worker/1");
    CHECK_FALSE(v->run.completed_at.empty());
    CHECK(metric(*v, "accuracy") == metric(*read_evaluation(env.url, first.evaluation_id), "accuracy"));
    REQUIRE(v->shards.size() == 4);
    for (const auto& s : v->shards) CHECK(s.status == "CACHED");
    CHECK(env.why(again.evaluation_id).find("was computed by " + first.evaluation_id) != std::string::npos);
  }
  SUBCASE("a wider item range re-runs only the new shards; the cached ones are fed from the store") {
    w.assigned.clear();
    auto wider = env.submit("toy-mlp:v1", "ck-a", "toy-wide");
    CHECK(wider.status == "QUEUED");
    w.serve([&] { return status_of(env.url, wider.evaluation_id) == "COMPLETED"; });
    REQUIRE(w.assigned.size() == 2);
    std::set<int> shards{w.assigned[0].shard, w.assigned[1].shard};
    CHECK(shards == std::set<int>{4, 5});
    auto v = read_evaluation(env.url, wider.evaluation_id);
    REQUIRE(v);
    CHECK(v->run.status == "COMPLETED");
    for (int i = 0; i < 4; ++i) CHECK(v->shards[i].status == "CACHED");
    CHECK(v->shards[4].status == "COMPLETED");
    // The metrics are over all 60 items: the cached shards' statistics count.
    CHECK(metric(*v, "accuracy") == doctest::Approx(expected_accuracy(0, 60)));
    store::Store s = store::open_store(env.url, {store::OpenMode::kReadOnly});
    CHECK(s.evals->items(wider.evaluation_id, std::nullopt).size() == 60);
  }
  SUBCASE("another model version, or a checkpoint with another hash, gets no hit") {
    w.assigned.clear();
    env.checkpoint("ck-a", 'a', "toy-mlp:v2");
    auto other_version = env.submit("toy-mlp:v2", "ck-a");
    CHECK(other_version.status == "QUEUED");
    w.serve([&] { return status_of(env.url, other_version.evaluation_id) == "COMPLETED"; });
    CHECK(w.assigned.size() == 4);
    w.assigned.clear();
    env.checkpoint("ck-b", 'b', "toy-mlp:v3");
    auto other_hash = env.submit("toy-mlp:v3", "ck-b");
    CHECK(other_hash.status == "QUEUED");
    w.serve([&] { return status_of(env.url, other_hash.evaluation_id) == "COMPLETED"; });
    CHECK(w.assigned.size() == 4);
  }
}

TEST_CASE(
    "eval service: a worker that goes silent mid-shard: retried elsewhere as attempt 2; its late result is a "
    "duplicate") {
  Env env("silent");
  SuiteSpec one = env.spec();
  one.items = 10;
  env.add_suite(one);
  env.start(/*heartbeat_timeout_ms=*/300);
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  TestWorker w1(env.svc->endpoint(), "w1");
  w1.hello();
  auto o = env.submit("toy-mlp:v1", "ck-a");
  auto a1 = w1.assignment();
  REQUIRE(a1);
  CHECK(a1->attempt == 1);
  w1.silent = true;  // stops heartbeating, keeps the shard
  TestWorker w2(env.svc->endpoint(), "w2");
  w2.hello();
  auto a2 = w2.assignment(3000);
  REQUIRE(a2);
  CHECK(a2->shard == a1->shard);
  CHECK(a2->attempt == 2);
  w2.send(w2.result(*a2));
  auto k2 = w2.ack();
  REQUIRE(k2);
  CHECK(k2->outcome == wire::AckOutcome::kAccepted);
  REQUIRE(wait_status(env.url, o.evaluation_id, "COMPLETED"));
  std::string why = env.why(o.evaluation_id);
  CHECK(why.find("worker w1 missed heartbeats") != std::string::npos);
  CHECK(why.find("retried elsewhere (attempt 2 of 3 queued)") != std::string::npos);

  // The late attempt-1 result: acked duplicate, nothing changes in the store.
  auto before = read_evaluation(env.url, o.evaluation_id);
  w1.send(w1.result(*a1));
  auto k1 = w1.next(3000, [](const auto& m) { return std::holds_alternative<wire::Ack>(m); });
  REQUIRE(k1);
  CHECK(std::get<wire::Ack>(*k1).outcome == wire::AckOutcome::kDuplicate);
  auto after = read_evaluation(env.url, o.evaluation_id);
  CHECK(after->shards[0].result_attempt == 2);
  CHECK(after->shards[0].worker == "w2");
  CHECK(after->run.completed_at == before->run.completed_at);
  store::Store s = store::open_store(env.url, {store::OpenMode::kReadOnly});
  for (const auto& it : s.evals->items(o.evaluation_id, std::nullopt)) CHECK(it.attempt == 2);
  CHECK(env.svc->counters().duplicates == 1);
  // The lost worker is told to register again when it heartbeats.
  w1.silent = false;
  auto rr = w1.next(2000, [](const auto& m) { return std::holds_alternative<wire::Reregister>(m); });
  REQUIRE(rr);
  CHECK(std::get<wire::Reregister>(*rr).reason.find("declared lost") != std::string::npos);
}

TEST_CASE("eval service: shards that exhaust max_attempts: PARTIAL with the missing shard named, or FAILED") {
  Env env("attempts");
  SuiteSpec s = env.spec();
  s.items = 20;
  s.max_attempts = 2;
  env.add_suite(s);
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  TestWorker w(env.svc->endpoint(), "w1");
  w.hello();

  SUBCASE("PARTIAL") {
    auto o = env.submit("toy-mlp:v1", "ck-a");
    int fails = 0;
    for (int n = 0; n < 3; ++n) {  // shard 0 once, shard 1 twice (max_attempts 2)
      auto a = w.assignment();
      REQUIRE_MESSAGE(a, env.why(o.evaluation_id));
      if (a->shard == 1) {
        w.send(wire::Fail{"w1", a->evaluation_id, a->shard, a->attempt, "model crashed", true});
        ++fails;
      } else {
        w.send(w.result(*a));
        REQUIRE(w.ack());
      }
    }
    REQUIRE(wait_status(env.url, o.evaluation_id, "PARTIAL"));
    CHECK(fails == 2);
    auto v = read_evaluation(env.url, o.evaluation_id);
    CHECK(v->shards[1].status == "FAILED");
    CHECK(v->shards[1].attempt == 2);
    CHECK(v->shards[0].status == "COMPLETED");
    CHECK(metric(*v, "accuracy") == doctest::Approx(expected_accuracy(0, 10)));
    CHECK(env.why(o.evaluation_id).find("is PARTIAL: 1 shards done, 0 cached, 1 failed (missing shards: 1 [10, 20))") !=
          std::string::npos);
    // A PARTIAL evaluation is never a whole-cache hit.
    auto again = env.submit("toy-mlp:v1", "ck-a");
    CHECK(again.status == "QUEUED");
  }
  SUBCASE("FAILED: no shard finished; a fail that is not retryable ends its shard at once") {
    auto o = env.submit("toy-mlp:v1", "ck-a");
    int fails = 0;
    for (int n = 0; n < 2; ++n) {
      auto a = w.assignment();
      REQUIRE_MESSAGE(a, env.why(o.evaluation_id));
      w.send(wire::Fail{"w1", a->evaluation_id, a->shard, a->attempt, "dataset hash differs", false});
      ++fails;
    }
    REQUIRE(wait_status(env.url, o.evaluation_id, "FAILED"));
    CHECK_FALSE(w.assignment(200).has_value());
    CHECK(fails == 2);  // one attempt per shard: not retryable
    auto v = read_evaluation(env.url, o.evaluation_id);
    CHECK(v->shards[0].status == "FAILED");
    CHECK(v->shards[1].status == "FAILED");
    CHECK(v->run.worker_version == "");  // no result: no worker to name
    CHECK(env.why(o.evaluation_id).find("(not retryable)") != std::string::npos);
  }
}

TEST_CASE("eval service: malformed and out-of-range results are rejected with the reason, retried, nothing written") {
  Env env("malformed");
  SuiteSpec s = env.spec();
  s.items = 10;
  env.add_suite(s);
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  TestWorker w(env.svc->endpoint(), "w1");
  w.hello();
  auto o = env.submit("toy-mlp:v1", "ck-a");
  store::Store st = store::open_store(env.url, {store::OpenMode::kReadOnly});

  auto a = w.assignment();
  REQUIRE(a);
  wire::Result bad = w.result(*a);
  bad.stats[3] = 2.0;  // accuracy of item 1: out of range
  w.send(bad);
  auto k = w.ack();
  REQUIRE(k);
  CHECK(k->outcome == wire::AckOutcome::kRejected);
  CHECK(k->reason.find("accuracy of item 1: score 2 is outside [0, 1]") != std::string::npos);
  CHECK(st.evals->items(o.evaluation_id, std::nullopt).empty());

  auto a2 = w.assignment();
  REQUIRE(a2);
  CHECK(a2->attempt == 2);
  wire::Result missing = w.result(*a2);
  missing.items.pop_back();
  missing.stats.resize(missing.stats.size() - 3);
  w.send(missing);
  k = w.ack();
  REQUIRE(k);
  CHECK(k->outcome == wire::AckOutcome::kRejected);
  CHECK(k->reason.find("the shard has 10 items [0, 10), the result has 9") != std::string::npos);

  auto a3 = w.assignment();
  REQUIRE(a3);
  CHECK(a3->attempt == 3);
  wire::Result stride = w.result(*a3);
  stride.stats_per_item = 2;
  stride.stats.clear();
  for (size_t i = 0; i < stride.items.size(); ++i) stride.stats.insert(stride.stats.end(), {1, 0});
  w.send(stride);
  k = w.ack();
  REQUIRE(k);
  CHECK(k->outcome == wire::AckOutcome::kRejected);
  CHECK(k->reason == "each item must carry 3 statistics (the assignment's stride), got 2");
  CHECK(st.evals->items(o.evaluation_id, std::nullopt).empty());
  REQUIRE(wait_status(env.url, o.evaluation_id, "FAILED"));  // max_attempts 3: all three rejected
  auto v = read_evaluation(env.url, o.evaluation_id);
  CHECK(v->shards[0].status == "FAILED");
  CHECK_FALSE(v->shards[0].result_attempt.has_value());

  // Bytes that are not a message: an error naming the problem, and the service carries on.
  w.send_raw("{not json");
  auto e = w.error();
  REQUIRE(e);
  CHECK(e->error.find("not JSON") == 0);
  w.send_raw(R"({"type":"result","worker":"w1"})");
  e = w.error();
  REQUIRE(e);
  CHECK(e->error == "result: missing member 'evaluationId'");
  CHECK(e->about == "result");
  w.send(wire::Result{"w1", "ev-nope", 0, 1, {}, {}, 0, {"v", "", {}}});
  k = w.ack();
  REQUIRE(k);
  CHECK(k->outcome == wire::AckOutcome::kRejected);
  CHECK(k->reason == "no open evaluation ev-nope");
  CHECK(env.svc->counters().bad_messages == 2);
}

TEST_CASE("eval service: a missing dataset and a changed dataset fail the evaluation at once with the message") {
  Env env("dataset");
  SuiteSpec gone = env.spec("toy-gone");
  gone.dataset_path = env.dir + "/nowhere.jsonl";
  env.add_suite(gone);
  SuiteSpec changed = env.spec("toy-changed");
  changed.sha256 = std::string(64, 'e');
  env.add_suite(changed);
  env.add_suite(env.spec());
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  TestWorker w(env.svc->endpoint(), "w1");
  w.hello();

  auto o = env.submit("toy-mlp:v1", "ck-a", "toy-gone");
  CHECK(o.http_status == 201);
  CHECK(o.status == "FAILED");
  CHECK(o.error == "dataset toy-data version 1 is missing: no file " + env.dir +
                       "/nowhere.jsonl (named by suite toy-gone in " + env.dir + "/suites/toy-gone.yaml)");
  CHECK(status_of(env.url, o.evaluation_id) == "FAILED");
  CHECK(env.svc->failure(o.evaluation_id) == o.error);
  auto v = read_evaluation(env.url, o.evaluation_id);
  REQUIRE(v->shards.size() == 4);
  CHECK(v->shards[3].status == "FAILED");

  auto c = env.submit("toy-mlp:v1", "ck-a", "toy-changed");
  CHECK(c.status == "FAILED");
  CHECK(c.error.find("dataset toy-data version 1 has changed: its content hash is " + env.sha + ", the suite expects " +
                     std::string(64, 'e') + " (at " + env.dir + "/suites/toy-changed.yaml:") == 0);
  CHECK_FALSE(w.assignment(200).has_value());
  // Nothing else is lost: the good suite still runs.
  auto ok = env.submit("toy-mlp:v1", "ck-a");
  CHECK(ok.status == "QUEUED");
  w.serve([&] { return status_of(env.url, ok.evaluation_id) == "COMPLETED"; });
  CHECK(status_of(env.url, ok.evaluation_id) == "COMPLETED");
}

TEST_CASE("eval service: submissions refused with a clear error: unknown checkpoint, suite, bad model version") {
  Env env("refused");
  env.add_suite(env.spec());
  env.start();
  auto o = env.submit("toy-mlp:v1", "ck-nope");
  CHECK(o.http_status == 404);
  CHECK(o.error == "checkpoint 'ck-nope' is not registered (register it first: POST /v1/checkpoints with its sha256)");
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  o = env.submit("toy-mlp:v1", "ck-a", "nope");
  CHECK(o.http_status == 404);
  CHECK(o.error == "unknown benchmark suite 'nope' (loaded: toy-v1)");
  o = env.submit("toy-mlp", "ck-a");
  CHECK(o.http_status == 400);
  CHECK(o.error.find("no ':'") != std::string::npos);
  // A model version cut from another checkpoint is a conflict.
  env.checkpoint("ck-b", 'b', "toy-mlp:v2");
  o = env.submit("toy-mlp:v1", "ck-b");
  CHECK(o.http_status == 409);
  CHECK(o.error.find("model version toy-mlp:v1 is registered with checkpoint ck-a, not ck-b") != std::string::npos);
}

TEST_CASE("eval service: workers get only shards of suites whose evaluator they run") {
  Env env("evaluators");
  env.add_suite(env.spec());
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  TestWorker lm(env.svc->endpoint(), "lm", {"lm-eval-v1"});
  lm.hello();
  auto o = env.submit("toy-mlp:v1", "ck-a");
  CHECK_FALSE(lm.assignment(300).has_value());
  TestWorker toy(env.svc->endpoint(), "toy", {"toy-eval-v1"});
  toy.hello();
  toy.serve([&] { return status_of(env.url, o.evaluation_id) == "COMPLETED"; });
  CHECK(toy.assigned.size() == 4);
  CHECK_FALSE(lm.assignment(50).has_value());
  CHECK(env.why(o.evaluation_id).find("lm does not run evaluator toy-eval-v1") != std::string::npos);
}

TEST_CASE("eval service: registering a checkpoint creates the evaluations its suites ask for (on_checkpoint), once") {
  Env env("oncheckpoint");
  SuiteSpec a = env.spec("toy-a");
  a.on_checkpoint = "[toy-*]";
  env.add_suite(a);
  SuiteSpec b = env.spec("toy-b");
  b.on_checkpoint = "[other-*, \"toy-m?p\"]";
  b.items = 20;
  env.add_suite(b);
  env.add_suite(env.spec("toy-manual"));
  env.start();
  eval::service::CheckpointRequest r{checkpoint_record("ck-a", 'a'), "toy-mlp:v1"};
  auto out = env.svc->register_checkpoint(r);
  REQUIRE(out.error.empty());
  CHECK(out.registered);
  REQUIRE(out.evaluations.size() == 2);
  CHECK(out.evaluations[0].suite == "toy-a");
  CHECK(out.evaluations[1].suite == "toy-b");
  CHECK(out.evaluations[0].status == "QUEUED");
  auto again = env.svc->register_checkpoint(r);
  CHECK_FALSE(again.registered);
  REQUIRE(again.evaluations.size() == 2);
  CHECK(again.evaluations[0].evaluation_id == out.evaluations[0].evaluation_id);
  eval::service::CheckpointRequest bad{checkpoint_record("ck-a", 'c'), "toy-mlp:v9"};
  auto conflict = env.svc->register_checkpoint(bad);
  CHECK(conflict.http_status == 409);
  CHECK(conflict.error.find("checkpoint ck-a is registered with content hash") != std::string::npos);
}

TEST_CASE("eval service: a checkpoint a training run saved (the checkpoints table) is registered and evaluated") {
  Env env("poll");
  SuiteSpec a = env.spec("toy-a");
  a.on_checkpoint = "[toy-net]";
  a.items = 10;
  env.add_suite(a);
  env.start(10000, /*poll_ms=*/50);
  {
    // What the timeline sink of `runlens run`/`replay` writes for a checkpoint_saved event.
    store::Store s = store::open_store(env.url);
    store::GraphBatch b;
    store::RunRow run;
    run.run_id = "train-7";
    run.model_id = "toy-net";
    run.started_ns = 1;
    b.runs.push_back(run);
    store::CheckpointRow c;
    c.run_id = "train-7";
    c.checkpoint_id = "step-500";
    c.step = 500;
    c.time_ns = 2;
    c.ok = true;
    c.uri = "file:///ckpt/step-500.pt";
    c.sha256 = std::string(64, 'd');
    b.checkpoints.push_back(c);
    store::CheckpointRow unhashed = c;
    unhashed.checkpoint_id = "step-600";
    unhashed.sha256 = "";
    b.checkpoints.push_back(unhashed);
    s.graph->write(b);
  }
  std::string id;
  REQUIRE(wait_until(
      [&] {
        store::Store s = store::open_store(env.url, {store::OpenMode::kReadOnly});
        auto v = s.evals->model_version("toy-net", "step-500");
        if (!v || v->evaluations.empty()) return false;
        id = v->evaluations[0].evaluation_id;
        return true;
      },
      5000));
  store::Store s = store::open_store(env.url, {store::OpenMode::kReadOnly});
  auto mv = s.evals->model_version("toy-net", "step-500");
  CHECK(mv->version.checkpoint_id == "step-500");
  CHECK(mv->version.run_id == "train-7");
  CHECK(mv->evaluations[0].suite == "toy-a");
  CHECK(mv->evaluations[0].run_id == "train-7");
  CHECK(s.evals->unregistered_checkpoints(10).size() == 0);  // the unhashed one is never pending
  TestWorker w(env.svc->endpoint(), "w1");
  w.hello();
  w.serve([&] { return status_of(env.url, id) == "COMPLETED"; });
  CHECK(status_of(env.url, id) == "COMPLETED");
}

TEST_CASE("eval service: stopped and started again on the same store, it resumes: done shards stay done") {
  Env env("resume");
  env.add_suite(env.spec());
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  auto o = env.submit("toy-mlp:v1", "ck-a");
  std::vector<int> done;
  std::optional<wire::Assign> held;
  {
    TestWorker w(env.svc->endpoint(), "w1");
    w.hello();
    for (int i = 0; i < 2; ++i) {
      auto a = w.assignment();
      REQUIRE(a);
      w.send(w.result(*a));
      REQUIRE(w.ack()->outcome == wire::AckOutcome::kAccepted);
      done.push_back(a->shard);
    }
    held = w.assignment();  // running when the service stops
    REQUIRE(held);
    CHECK(held->attempt == 1);
  }
  env.svc.reset();
  CHECK(status_of(env.url, o.evaluation_id) == "RUNNING");
  env.start();
  auto notes = env.svc->resume_notes();
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == o.evaluation_id + ": resumed, 2 shards done, 2 queued again");
  TestWorker w(env.svc->endpoint(), "w2");
  w.hello();
  w.serve([&] { return status_of(env.url, o.evaluation_id) == "COMPLETED"; });
  REQUIRE(w.assigned.size() == 2);
  for (const auto& a : w.assigned) {
    CHECK(std::find(done.begin(), done.end(), a.shard) == done.end());
  }
  int max_attempt = std::max(w.assigned[0].attempt, w.assigned[1].attempt);
  CHECK(max_attempt == 2);  // the shard that was running had attempt 1 before the restart
  // The attempt from before the restart, delivered late: a duplicate, applied once only.
  TestWorker late(env.svc->endpoint(), "w1");
  late.hello();
  late.send(late.result(*held));
  auto k = late.ack();
  REQUIRE(k);
  CHECK(k->outcome == wire::AckOutcome::kDuplicate);
  CHECK(read_evaluation(env.url, o.evaluation_id)->shards[held->shard].result_attempt == 2);
  auto v = read_evaluation(env.url, o.evaluation_id);
  CHECK(metric(*v, "accuracy") == doctest::Approx(expected_accuracy(0, 40)));
  CHECK(env.why(o.evaluation_id).find("resumed after a restart: 2 shards done before it") != std::string::npos);
}

TEST_CASE("eval service: a shard that failed before a restart stays failed; the evaluation ends PARTIAL") {
  Env env("resume-failed");
  SuiteSpec s = env.spec();
  s.items = 30;  // 3 shards of 10
  env.add_suite(s);
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  auto o = env.submit("toy-mlp:v1", "ck-a");
  int failed_shard = -1, done_shard = -1;
  {
    TestWorker w(env.svc->endpoint(), "w1");
    w.hello();
    auto a = w.assignment();
    REQUIRE(a);
    failed_shard = a->shard;
    w.send(wire::Fail{"w1", a->evaluation_id, a->shard, a->attempt, "dataset hash differs here", false});
    auto b = w.assignment();
    REQUIRE(b);
    done_shard = b->shard;
    w.send(w.result(*b));
    REQUIRE(w.ack()->outcome == wire::AckOutcome::kAccepted);
    REQUIRE(w.assignment());  // the third shard is running when the service stops
  }
  env.svc.reset();
  CHECK(read_evaluation(env.url, o.evaluation_id)->shards[failed_shard].status == "FAILED");
  env.start();
  REQUIRE(env.svc->resume_notes().size() == 1);
  CHECK(env.svc->resume_notes()[0] == o.evaluation_id + ": resumed, 1 shards done, 1 failed, 1 queued again");
  TestWorker w(env.svc->endpoint(), "w2");
  w.hello();
  w.serve([&] { return status_of(env.url, o.evaluation_id) == "PARTIAL"; });
  REQUIRE(w.assigned.size() == 1);  // neither the done nor the failed shard runs again
  CHECK(w.assigned[0].shard != failed_shard);
  CHECK(w.assigned[0].shard != done_shard);
  auto v = read_evaluation(env.url, o.evaluation_id);
  CHECK(v->shards[failed_shard].status == "FAILED");
  CHECK(v->shards[failed_shard].attempt == 1);
  CHECK(env.why(o.evaluation_id).find("1 shards failed before a restart (not run again)") != std::string::npos);
}

TEST_CASE("eval service: on restart an evaluation whose suite is gone or changed FAILS with the reason") {
  Env env("resume-changed");
  env.add_suite(env.spec());
  env.add_suite(env.spec("toy-2"));
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  auto a = env.submit("toy-mlp:v1", "ck-a");
  auto b = env.submit("toy-mlp:v1", "ck-a", "toy-2");
  env.svc.reset();
  std::filesystem::remove(env.dir + "/suites/toy-v1.yaml");
  SuiteSpec changed = env.spec("toy-2");
  changed.partition = 5;
  changed.max_attempts = 2;
  env.add_suite(changed);
  write_file(env.dir + "/suites/toy-2.yaml",
             std::string(suite_yaml(changed)).replace(suite_yaml(changed).find("version: v1"), 11, "version: v2"));
  env.start();
  CHECK(status_of(env.url, a.evaluation_id) == "FAILED");
  CHECK(env.svc->failure(a.evaluation_id) == "its suite toy-v1 is no longer loaded");
  CHECK(status_of(env.url, b.evaluation_id) == "FAILED");
  CHECK(env.svc->failure(b.evaluation_id).find("its suite toy-2 changed since it was submitted (cache key now ") == 0);
}

TEST_CASE("eval service: shards from workers of different versions: the evaluation lists each version") {
  Env env("versions");
  SuiteSpec s = env.spec();
  s.items = 20;
  env.add_suite(s);
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  TestWorker a(env.svc->endpoint(), "wa", {}, 1, "worker-py/1");
  TestWorker b(env.svc->endpoint(), "wb", {}, 1, "worker-cc/2");
  a.hello();
  b.hello();
  auto o = env.submit("toy-mlp:v1", "ck-a");
  auto x = a.assignment();
  auto y = b.assignment();
  REQUIRE(x);
  REQUIRE(y);
  a.send(a.result(*x));
  b.send(b.result(*y));
  REQUIRE(a.ack());
  REQUIRE(b.ack());
  REQUIRE(wait_status(env.url, o.evaluation_id, "COMPLETED"));
  auto v = read_evaluation(env.url, o.evaluation_id);
  CHECK(v->run.worker_version == "worker-cc/2, worker-py/1");
  CHECK(v->run.code_commit == "c0ffee");
}

TEST_CASE("eval service: a worker that disconnected without a bye is lost when an assignment cannot reach it") {
  Env env("unreachable");
  SuiteSpec s = env.spec();
  s.items = 10;
  env.add_suite(s);
  env.start();
  env.checkpoint("ck-a", 'a', "toy-mlp:v1");
  {
    TestWorker gone(env.svc->endpoint(), "a-gone");
    gone.hello();
  }  // its socket is closed: the service still counts it as alive until its heartbeats are missed
  TestWorker live(env.svc->endpoint(), "b-live");
  live.hello();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the disconnect reaches the ROUTER
  auto o = env.submit("toy-mlp:v1", "ck-a");
  live.serve([&] { return status_of(env.url, o.evaluation_id) == "COMPLETED"; });
  REQUIRE(status_of(env.url, o.evaluation_id) == "COMPLETED");
  REQUIRE(live.assigned.size() == 1);
  CHECK(live.assigned[0].attempt == 2);
  std::string why = env.why(o.evaluation_id);
  CHECK(why.find("shard 0 of " + o.evaluation_id + " went to worker a-gone") != std::string::npos);
  CHECK(why.find("worker a-gone left: the assignment could not be sent to it: Host unreachable") != std::string::npos);
}
