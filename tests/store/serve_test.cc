// The query API over real HTTP on loopback, against a store filled by
// replaying synthetic runs: the slowest ranks, the timeline around a failure,
// the comparison that marks an LR change, the lineage from model version to
// run, and 400/404 for bad parameters and unknown ids.
#include "server/serve.h"

#include <httplib.h>
#include <sys/wait.h>

#include <cstdlib>

#include "tests/store/api_client.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

namespace {}  // namespace

TEST_CASE("GET /v1/runs lists the replayed runs, filtered by experiment, model and status") {
  Api api(scenarios().db);
  auto all = api.ok("/v1/runs");
  CHECK(number(all, "count") == 4);
  CHECK(api.ok("/v1/runs?experiment=exp-7").find("count")->number == 2);
  CHECK(api.ok("/v1/runs?experiment=exp-lr&model=llama-x-7b").find("count")->number == 2);
  auto failed = api.ok("/v1/runs?status=FAILED");
  REQUIRE(at(failed, "runs").items.size() == 1);
  CHECK(str(at(failed, "runs").items[0], "runId") == "diverge");
  CHECK(str(at(failed, "runs").items[0], "status") == "FAILED");
  CHECK(api.ok("/v1/runs?limit=1").find("count")->number == 1);
}

TEST_CASE("GET /v1/runs/{runId} answers in the shape of spec section 39") {
  Api api(scenarios().db);
  auto run = api.ok("/v1/runs/straggle");
  CHECK(str(run, "runId") == "straggle");
  CHECK(str(run, "modelId") == "llama-x-7b");
  CHECK(str(run, "modelVersion") == "v140");
  CHECK(str(run, "experimentId") == "exp-7");
  CHECK(str(run, "jobId") == "job-11");
  CHECK(str(run, "status") == "COMPLETED");
  CHECK(number(run, "step") == 200);
  // 16 ranks x 4 micro-batches x 4096 tokens per step.
  CHECK(at(run, "tokensProcessed").integer == 200LL * 16 * 4 * 4096);
  const auto& m = at(run, "metrics");
  CHECK(number(m, "loss") > 1);
  CHECK(number(m, "mfu") > 0);
  CHECK(number(m, "mfu") < 1);
  CHECK(number(m, "tokensPerSecond") > 0);
  CHECK(number(at(run, "config"), "lr") == doctest::Approx(3e-4));
  REQUIRE(at(run, "incidents").items.size() == 1);
  CHECK(str(at(run, "incidents").items[0], "kind") == "straggler");

  auto diverged = api.ok("/v1/runs/diverge");
  CHECK(str(diverged, "status") == "FAILED");
  CHECK(str(diverged, "endReason") == "loss diverged");
  CHECK(str(at(diverged, "metrics"), "loss") == "NaN");  // kept, not turned into null
}

TEST_CASE("GET /v1/runs/{runId}/ranks puts the straggler first, with node, GPU and ratio to median") {
  Api api(scenarios().db);
  auto ranks = api.ok("/v1/runs/straggle/ranks?sort=step_time&order=desc&limit=3");
  REQUIRE(ranks.type == json::Value::Type::kArray);
  REQUIRE(ranks.items.size() == 3);
  const auto& top = ranks.items[0];
  CHECK(number(top, "rank") == 5);
  CHECK(str(top, "node") == "gpu-node-1");
  CHECK(number(top, "gpu") == 1);
  CHECK(number(top, "ratioToMedian") > 1.3);
  CHECK(number(ranks.items[1], "ratioToMedian") < 1.1);
  CHECK(number(top, "stepTimeMs") > number(ranks.items[1], "stepTimeMs"));
  // Only the steps of the incident: the straggler stands out more.
  auto late = api.ok("/v1/runs/straggle/ranks?fromStep=101&toStep=200&limit=1");
  CHECK(number(late.items[0], "ratioToMedian") > number(top, "ratioToMedian"));
  auto by_rank = api.ok("/v1/runs/straggle/ranks?sort=rank");
  REQUIRE(by_rank.items.size() == 16);
  CHECK(number(by_rank.items[0], "rank") == 0);
  CHECK(number(by_rank.items[15], "rank") == 15);
}

TEST_CASE("GET /v1/runs/{runId}/timeline around the failure: LR change, jump, NaN, alert, end") {
  Api api(scenarios().db);
  auto t = api.ok("/v1/runs/diverge/timeline?fromStep=140&toStep=200");
  const auto& events = at(t, "events").items;
  int64_t prev = 0;
  for (const auto& e : events) {
    CHECK(number(e, "step") >= prev);  // ordered by step
    prev = static_cast<int64_t>(number(e, "step"));
  }
  // The story of the failure, in order (detectors in the pipeline may add their alerts between).
  auto find = [&](size_t from, const std::string& kind, const std::string& alert_kind = "") {
    for (size_t i = from; i < events.size(); ++i) {
      if (str(events[i], "kind") != kind) continue;
      if (!alert_kind.empty() && str(at(events[i], "detail"), "alert_kind") != alert_kind) continue;
      return i;
    }
    FAIL("no " << kind << " " << alert_kind << " after entry " << from);
    return events.size();
  };
  size_t lr = find(0, "lr_change");
  size_t jump = find(lr, "grad_norm_jump");
  size_t nan = find(jump, "non_finite");
  size_t alert = find(nan, "alert", "nan_loss");
  size_t end = find(alert, "run_end");
  CHECK(number(events[lr], "step") == 150);
  CHECK(number(at(events[lr], "detail"), "factor") == doctest::Approx(20).epsilon(0.1));
  CHECK(number(events[jump], "step") == 150);
  CHECK(number(events[nan], "step") == 160);
  CHECK(str(events[alert], "ref").size() == 16);  // the alert id
  CHECK(str(events[alert], "severity") == "critical");
  CHECK(str(events[end], "summary") == "run failed: loss diverged");
  int lr_entries = 0;
  for (const auto& e : events) lr_entries += str(e, "kind") == "lr_change" || str(e, "kind") == "config_change";
  CHECK(lr_entries == 1);  // one change, one entry, however many components noticed it
  // The whole timeline starts with the run.
  auto whole = api.ok("/v1/runs/diverge/timeline");
  CHECK(str(at(whole, "events").items.front(), "kind") == "run_start");
}

TEST_CASE("GET /v1/runs/{runId}/steps gives the per-step aggregates") {
  Api api(scenarios().db);
  auto s = api.ok("/v1/runs/straggle/steps?fromStep=100&toStep=109");
  const auto& steps = at(s, "steps").items;
  REQUIRE(steps.size() == 10);
  CHECK(number(steps[0], "step") == 100);
  CHECK(number(steps[0], "slowestRank") == 5);
  CHECK(number(steps[0], "stragglerRatio") > 1.5);
  const auto& q = at(steps[0], "rankTimeMs");
  CHECK(number(q, "min") <= number(q, "p50"));
  CHECK(number(q, "p50") <= number(q, "p95"));
  CHECK(number(q, "p99") <= number(q, "max"));
  for (const char* k :
       {"loss", "learningRate", "gradNorm", "tokensPerSecond", "mfu", "dataWaitRatio", "communicationRatio"}) {
    CHECK_MESSAGE(at(steps[0], k).type == json::Value::Type::kNumber, k);
  }
  CHECK(at(api.ok("/v1/runs/straggle/steps?limit=5"), "steps").items.size() == 5);
}

TEST_CASE("GET /v1/runs/compare marks the LR change (spec section 23)") {
  Api api(scenarios().db);
  auto c = api.ok("/v1/runs/compare?left=lr-a&right=lr-b");
  std::map<std::string, bool> changed;
  for (const auto& k : at(c, "config").items) changed[str(k, "key")] = at(k, "changed").boolean;
  CHECK(changed["lr"]);
  CHECK_FALSE(changed["global_batch"]);
  CHECK_FALSE(changed["optimizer"]);
  CHECK(at(at(c, "dataset"), "changed").boolean);
  CHECK_FALSE(at(at(c, "codeCommit"), "changed").boolean);
  std::vector<std::string> keys;
  for (const auto& k : at(c, "changedKeys").items) keys.push_back(k.text);
  CHECK(std::find(keys.begin(), keys.end(), "config.lr") != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "dataset") != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "config.optimizer") == keys.end());
  for (const char* m : {"tokensPerSecond", "mfu", "loss", "valLoss", "learningRate", "stepTimeMs"}) {
    CHECK_MESSAGE(at(c, "metrics").find(m), m);
  }
  bool says_lr = false;
  for (const auto& line : at(c, "conclusion").items) says_lr |= line.text.find("changed: lr") != std::string::npos;
  CHECK(says_lr);

  // A scheduler change inside a run is found in its timeline.
  auto d = api.ok("/v1/runs/compare?left=straggle&right=diverge");
  REQUIRE(at(at(d, "lrChanges"), "right").items.size() == 1);
  CHECK(at(at(at(d, "metrics"), "learningRate"), "changed").boolean);
}

TEST_CASE("GET /v1/alerts filters by run, kind and time, in the alert contract's shape") {
  Api api(scenarios().db);
  auto a = api.ok("/v1/alerts?runId=straggle&kind=straggler");
  REQUIRE(at(a, "alerts").items.size() == 1);
  const auto& alert = at(a, "alerts").items[0];
  CHECK(str(alert, "kind") == "straggler");
  CHECK(number(alert, "rank") == 5);
  CHECK(str(alert, "alert_id").size() == 16);
  auto all = api.ok("/v1/alerts");
  CHECK(number(all, "count") >= 2);
  int64_t t = at(alert, "time_ns").integer;
  auto since = api.ok("/v1/alerts?since=" + std::to_string(t + 1));
  for (const auto& x : at(since, "alerts").items) CHECK(at(x, "time_ns").integer > t);
  // state: open (no end yet) and resolved (its closing revision, ends_ns, arrived) split them all.
  auto open = api.ok("/v1/alerts?state=open"), resolved = api.ok("/v1/alerts?state=resolved");
  CHECK(number(open, "count") + number(resolved, "count") == number(all, "count"));
  for (const auto& x : at(open, "alerts").items) CHECK(x.find("ends_ns") == nullptr);
  for (const auto& x : at(resolved, "alerts").items) CHECK(x.find("ends_ns") != nullptr);
}

TEST_CASE("GET /v1/lineage walks model version -> checkpoint -> run -> config, dataset, nodes -> GPUs") {
  Api api(scenarios().db);
  auto l = api.ok("/v1/lineage/v142");
  REQUIRE(at(l, "matches").items.size() == 1);
  const auto& mv = at(l, "matches").items[0];
  CHECK(str(mv, "type") == "model_version");
  CHECK(str(mv, "id") == "llama-x-7b:v142");
  REQUIRE(at(mv, "children").items.size() == 1);
  const auto& ckpt = at(mv, "children").items[0];
  CHECK(str(ckpt, "type") == "checkpoint");
  CHECK(str(ckpt, "id") == "lr-b/ckpt-150");  // the run's last good checkpoint
  CHECK(str(at(ckpt, "attrs"), "uri") == "s3://ckpt/lr-b/150");
  std::map<std::string, const json::Value*> kids;
  for (const auto& c : at(ckpt, "children").items) kids[str(c, "type")] = &c;
  REQUIRE(kids.count("artifact"));
  CHECK(str(at(*kids["artifact"], "attrs"), "object_uri") == "s3://ckpt/lr-b/150");
  REQUIRE(kids.count("training_run"));
  const auto& run = *kids["training_run"];
  CHECK(str(run, "id") == "lr-b");
  std::map<std::string, const json::Value*> of_run;
  for (const auto& c : at(run, "children").items) of_run[str(c, "type")] = &c;
  REQUIRE(of_run.count("config"));
  CHECK(number(at(*of_run["config"], "attrs"), "lr") == doctest::Approx(6e-4));
  REQUIRE(of_run.count("dataset_version"));
  CHECK(str(*of_run["dataset_version"], "id") == "v43");
  CHECK(str(*of_run["experiment"], "id") == "exp-lr");
  CHECK(str(*of_run["code_commit"], "id") == "a94df2");
  REQUIRE(of_run.count("cluster"));
  const auto& nodes = at(*of_run["cluster"], "children").items;
  REQUIRE(nodes.size() == 4);
  CHECK(str(nodes[0], "type") == "node");
  REQUIRE(at(nodes[0], "children").items.size() == 4);
  CHECK(str(at(nodes[0], "children").items[0], "type") == "gpu");

  // From other identifiers: a run, a checkpoint, an experiment, a node, a dataset.
  CHECK(str(at(api.ok("/v1/lineage/lr-a"), "matches").items[0], "type") == "training_run");
  CHECK(str(at(api.ok("/v1/lineage/lr-a%2Fckpt-100"), "matches").items[0], "type") == "checkpoint");
  CHECK(at(at(api.ok("/v1/lineage/exp-7"), "matches").items[0], "children").items.size() == 2);
  CHECK(str(at(api.ok("/v1/lineage/gpu-node-1"), "matches").items[0], "type") == "node");
  CHECK(str(at(api.ok("/v1/lineage/v43"), "matches").items[0], "type") == "dataset_version");
}

// Bad parameters: 400 with a JSON error; unknown ids: 404.
TEST_CASE("bad parameters are 400 and unknown ids 404, each with a JSON error") {
  Api api(scenarios().db);
  struct Case {
    const char* path;
    int status;
    const char* says;
  };
  const Case cases[] = {
      {"/v1/runs?status=sleeping", 400, "parameter 'status'"},
      {"/v1/runs?limit=0", 400, "parameter 'limit'"},
      {"/v1/runs?limit=ten", 400, "parameter 'limit'"},
      {"/v1/runs?experimnet=exp-7", 400, "unknown parameter 'experimnet'"},
      {"/v1/runs?limit=1&limit=2", 400, "more than once"},
      {"/v1/runs/straggle/ranks?sort=speed", 400, "parameter 'sort'"},
      {"/v1/runs/straggle/ranks?order=sideways", 400, "parameter 'order'"},
      {"/v1/runs/straggle/ranks?limit=-1", 400, "parameter 'limit'"},
      {"/v1/runs/straggle/timeline?fromStep=200&toStep=100", 400, "fromStep is after toStep"},
      {"/v1/runs/straggle/timeline?fromStep=-5", 400, "parameter 'fromStep'"},
      {"/v1/runs/straggle/steps?toStep=1e3", 400, "parameter 'toStep'"},
      {"/v1/runs/compare?left=lr-a", 400, "missing parameter 'right'"},
      {"/v1/runs/compare?left=lr-a&right=lr-b&tolerance=2", 400, "parameter 'tolerance'"},
      {"/v1/alerts?since=yesterday", 400, "parameter 'since'"},
      {"/v1/alerts?state=closed", 400, "parameter 'state' must be one of any, open, resolved, got 'closed'"},
      {"/v1/runs/no-such-run", 404, "unknown run 'no-such-run'"},
      {"/v1/runs/no-such-run/ranks", 404, "unknown run"},
      {"/v1/runs/no-such-run/timeline", 404, "unknown run"},
      {"/v1/runs/no-such-run/steps", 404, "unknown run"},
      {"/v1/runs/compare?left=lr-a&right=nope", 404, "unknown run 'nope'"},
      {"/v1/alerts?runId=nope", 404, "unknown run 'nope'"},
      {"/v1/lineage/nothing-by-this-name", 404, "unknown id"},
      {"/v1/no/such/route", 404, "no such route"},
      // Values are bound, never spliced into SQL.
      {"/v1/runs/x'%20OR%20'1'='1", 404, "unknown run"},
      {"/v1/lineage/v142'%20OR%201=1%20--", 404, "unknown id"},
  };
  for (const auto& c : cases) {
    auto [status, body] = api.get(c.path);
    CHECK_MESSAGE(status == c.status, c.path);
    REQUIRE_MESSAGE(body.find("error"), c.path);
    CHECK_MESSAGE(body.find("error")->text.find(c.says) != std::string::npos,
                  c.path << ": " << body.find("error")->text);
    CHECK(body.find("status")->number == c.status);
  }
  auto injected = api.ok("/v1/runs?experiment=exp-7'%20OR%20'1'='1");
  CHECK(number(injected, "count") == 0);
  auto [s, b] = api.get("/v1/health");
  CHECK(s == 200);
}

TEST_CASE("a store that is not there is 503, and the API serves what a live writer has committed") {
  std::string dir = fresh_dir("api-missing");
  {
    Api api(dir + "/absent.db");
    auto [status, body] = api.get("/v1/runs");
    CHECK(status == 503);
    CHECK(body.find("error"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a port already in use is a clear error: ApiServer::start is false, runlens serve exits 2") {
  Api taken(scenarios().db);
  api::ApiServer second(api::ServeOptions{url_of(scenarios().db), "127.0.0.1", taken.server.port()});
  std::string error;
  CHECK_FALSE(second.start(&error));
  CHECK(error.find("cannot listen on 127.0.0.1:" + std::to_string(taken.server.port())) != std::string::npos);
  // `timeout`: were the bind to succeed, serve would run until stopped.
  std::string cmd = "timeout 20 " + std::string(RUNLENS_BINARY) + " serve --store " + url_of(scenarios().db) +
                    " --port " + std::to_string(taken.server.port()) + " --workers tcp://127.0.0.1:0 > /dev/null 2>&1";
  int status = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(status) == 2);
}
