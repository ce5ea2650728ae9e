// The evaluation routes (docs/api.md, "Evaluations") over real HTTP on the
// run-graph API's port: status codes, the JSON envelope of errors, and the
// field names (a contract).
#include "eval/service/http.h"

#include <httplib.h>

#include "formats/json_reader.h"
#include "tests/eval_service/eval_fixture.h"
#include "tests/eval_service/http_client.h"

using namespace runlens;
using namespace runlens::testing;

namespace {}  // namespace

TEST_CASE("eval routes: submit, read, list, why, items, model versions, checkpoints, suites, workers") {
  std::string dir = temp_dir("http");
  std::string data = dir + "/toy.jsonl";
  SuiteSpec spec;
  spec.dataset_path = data;
  spec.sha256 = write_dataset(data, 40);
  spec.on_checkpoint = "[toy-*]";
  std::filesystem::create_directories(dir + "/suites");
  write_file(dir + "/suites/toy.yaml", suite_yaml(spec));
  write_file(dir + "/suites/broken.yaml", "suite: broken\nbenchmark: b\n");
  eval::service::ServiceOptions so = service_options(dir);
  const std::string url = so.store_url;
  ServedEval served(so);
  auto& svc = served.svc;
  Http& http = *served.http;

  // Registration creates the evaluation the suite asks for.
  auto [cs, ck] = http.post("/v1/checkpoints", R"({"checkpointId":"ck-a","sha256":")" + std::string(64, 'a') +
                                                   R"(","uri":"file:///ckpt/a.pt","runId":"train-1","step":100,)"
                                                   R"("modelVersion":"toy-mlp:v1"})");
  CHECK(cs == 201);
  CHECK(at(ck, "registered").boolean);
  REQUIRE(at(ck, "evaluations").items.size() == 1);
  const std::string auto_id = at(at(ck, "evaluations").items[0], "evaluationId").text;
  CHECK(at(at(ck, "evaluations").items[0], "status").text == "QUEUED");
  CHECK(http.post("/v1/checkpoints",
                  R"({"checkpointId":"ck-a","sha256":")" + std::string(64, 'a') + R"(","modelVersion":"toy-mlp:v1"})")
            .first == 200);
  auto [cbad, cbody] = http.post("/v1/checkpoints", R"({"checkpointId":"ck-x","sha256":"abc","modelVersion":"m:v"})");
  CHECK(cbad == 400);
  CHECK(at(cbody, "error").text == "checkpoint ck-x: sha256 must be 64 lowercase hex digits, got 'abc'");
  CHECK(at(cbody, "status").number == 400);

  // POST /v1/evaluations and its errors.
  auto [s1, b1] = http.post("/v1/evaluations", "{not json");
  CHECK(s1 == 400);
  CHECK(at(b1, "error").text.find("the request body is not JSON") == 0);
  auto [s2, b2] = http.post("/v1/evaluations", R"({"modelVersion":"toy-mlp:v1","checkpointId":"ck-a"})");
  CHECK(s2 == 400);
  CHECK(at(b2, "error").text == "missing member 'benchmarkSuite'");
  auto [s3, b3] =
      http.post("/v1/evaluations", R"({"modelVersion":"toy-mlp:v1","checkpointId":"ck-zz","benchmarkSuite":"toy-v1"})");
  CHECK(s3 == 404);
  auto [s4, b4] =
      http.post("/v1/evaluations", R"({"modelVersion":"toy-mlp:v1","checkpointId":"ck-a","benchmarkSuite":"nope"})");
  CHECK(s4 == 404);
  CHECK(at(b4, "error").text == "unknown benchmark suite 'nope' (loaded: toy-v1)");
  auto [s5, b5] =
      http.post("/v1/evaluations", R"({"modelVersion":"toy-mlp:v1","checkpointId":"ck-a","benchmarkSuite":"toy-v1",)"
                                   R"("priority":"P9"})");
  CHECK(s5 == 400);
  auto [s6, b6] =
      http.post("/v1/evaluations", R"({"modelVersion":"toy-mlp:v1","checkpointId":"ck-a","benchmarkSuite":"toy-v1",)"
                                   R"("priority":"P1"})");
  CHECK(s6 == 201);
  CHECK(at(b6, "status").text == "QUEUED");
  const std::string id = at(b6, "evaluationId").text;

  auto [g1, e1] = http.get("/v1/evaluations/" + id);
  CHECK(g1 == 200);
  CHECK(at(e1, "status").text == "QUEUED");
  CHECK(at(e1, "modelVersion").text == "toy-mlp:v1");
  CHECK(at(at(e1, "progress"), "total").number == 4);
  CHECK(at(at(e1, "progress"), "queued").number == 4);
  CHECK(at(e1, "completedAt").type == json::Value::Type::kNull);

  TestWorker w(svc.endpoint(), "w1");
  w.hello();
  w.serve([&] { return status_of(url, id) == "COMPLETED" && status_of(url, auto_id) == "COMPLETED"; });

  auto [g2, e2] = http.get("/v1/evaluations/" + id);
  CHECK(g2 == 200);
  CHECK(at(e2, "status").text == "COMPLETED");
  for (const char* f : {"evaluationId",
                        "modelId",
                        "version",
                        "checkpointId",
                        "checkpointHash",
                        "runId",
                        "datasetId",
                        "datasetVersion",
                        "datasetHash",
                        "benchmark",
                        "benchmarkVersion",
                        "benchmarkSuite",
                        "promptTemplateVersion",
                        "promptTemplateHash",
                        "evaluatorVersion",
                        "codeCommit",
                        "workerVersion",
                        "cacheKey",
                        "startedAt",
                        "completedAt"}) {
    CAPTURE(f);
    CHECK(at(e2, f).type == json::Value::Type::kString);
    CHECK_FALSE(at(e2, f).text.empty());
  }
  CHECK(at(e2, "runId").text == "train-1");
  CHECK(at(e2, "temperature").number == 0);
  CHECK(at(at(e2, "decoding"), "temperature").number == 0);
  CHECK(at(at(e2, "libraryVersions"), "python").text == "3.11");
  CHECK(at(e2, "judge").type == json::Value::Type::kNull);
  CHECK(at(e2, "cachedFrom").type == json::Value::Type::kNull);
  CHECK(at(e2, "error").type == json::Value::Type::kNull);
  CHECK(at(at(e2, "progress"), "completed").number == 4);
  REQUIRE(at(e2, "shards").items.size() == 4);
  const json::Value& sh = at(e2, "shards").items[2];
  CHECK(at(sh, "shard").number == 2);
  CHECK(at(sh, "items").items[0].number == 20);
  CHECK(at(sh, "status").text == "COMPLETED");
  CHECK(at(sh, "resultAttempt").number == 1);
  CHECK(at(sh, "worker").text == "w1");
  auto& metrics = at(e2, "metrics").items;
  REQUIRE(metrics.size() == 2);
  CHECK(at(metrics[0], "name").text == "accuracy");
  CHECK(at(metrics[0], "n").number == 40);
  CHECK(at(metrics[0], "stdError").type == json::Value::Type::kNumber);
  CHECK(at(e2, "missingShards").items.empty());

  auto [l1, list] = http.get("/v1/evaluations?modelVersion=toy-mlp:v1&benchmark=toy-bench");
  CHECK(l1 == 200);
  CHECK(at(list, "count").number == 2);
  CHECK(http.get("/v1/evaluations?modelVersion=toy-mlp:v9").second.find("count")->number == 0);
  CHECK(http.get("/v1/evaluations?modelVersion=nocolon").first == 400);
  CHECK(http.get("/v1/evaluations?model=x").first == 400);

  auto [wy, why] = http.get("/v1/evaluations/" + id + "/why");
  CHECK(wy == 200);
  REQUIRE(at(why, "decisions").items.size() >= 6);
  CHECK(at(why, "decisions").items[0].text.find("queued 4 shards as P1 (release candidate)") != std::string::npos);

  auto [i1, items] = http.get("/v1/evaluations/" + id + "/items?shard=1");
  CHECK(i1 == 200);
  CHECK(at(items, "count").number == 10);
  CHECK(at(at(items, "items").items[0], "item").number == 10);
  CHECK(at(at(at(items, "items").items[0], "scores"), "f1.label").number == 1);
  CHECK(http.get("/v1/evaluations/" + id + "/items").second.find("count")->number == 40);
  CHECK(http.get("/v1/evaluations/" + id + "/items?shard=-1").first == 400);

  // The same again: CACHED, pointing at the first.
  auto [s7, b7] =
      http.post("/v1/evaluations", R"({"modelVersion":"toy-mlp:v1","checkpointId":"ck-a","benchmarkSuite":"toy-v1"})");
  CHECK(s7 == 201);
  CHECK(at(b7, "status").text == "CACHED");
  const std::string cached_from = at(b7, "cachedFrom").text;
  CHECK((cached_from == id || cached_from == auto_id));
  auto [g3, e3] = http.get("/v1/evaluations/" + at(b7, "evaluationId").text);
  CHECK(at(e3, "cachedFrom").text == cached_from);
  CHECK(at(at(e3, "progress"), "cached").number == 4);
  CHECK(http.get("/v1/evaluations/" + at(b7, "evaluationId").text + "/items").second.find("count")->number == 40);

  auto [m1, mv] = http.get("/v1/models/toy-mlp/versions/v1");
  CHECK(m1 == 200);
  CHECK(at(mv, "modelVersion").text == "toy-mlp:v1");
  CHECK(at(mv, "checkpointId").text == "ck-a");
  CHECK(at(mv, "evaluations").items.size() == 3);
  CHECK(at(at(mv, "evaluations").items[0], "metrics").items.size() == 2);
  CHECK(http.get("/v1/models/toy-mlp/versions/v7").first == 404);

  auto [su, suites] = http.get("/v1/suites");
  CHECK(su == 200);
  REQUIRE(at(suites, "suites").items.size() == 1);
  CHECK(at(at(suites, "suites").items[0], "name").text == "toy-v1");
  CHECK(at(at(suites, "suites").items[0], "onCheckpoint").items[0].text == "toy-*");
  REQUIRE_FALSE(at(suites, "problems").items.empty());
  CHECK(at(suites, "problems").items[0].text.find("broken.yaml:") != std::string::npos);

  auto [wk, workers] = http.get("/v1/workers");
  CHECK(wk == 200);
  REQUIRE(at(workers, "workers").items.size() == 1);
  CHECK(at(at(workers, "workers").items[0], "id").text == "w1");
  CHECK(at(at(workers, "workers").items[0], "alive").boolean);
  CHECK(at(at(workers, "counters"), "items").number == 80);
  CHECK(at(workers, "endpoint").text == svc.endpoint());

  auto [n1, nb] = http.get("/v1/evaluations/ev-nope");
  CHECK(n1 == 404);
  CHECK(at(nb, "error").text == "unknown evaluation 'ev-nope'");
  CHECK(http.get("/v1/evaluations/ev-nope/why").first == 404);
  // The run-graph API is still there on the same port.
  CHECK(http.get("/v1/health").first == 200);
  served.stop();
  std::filesystem::remove_all(dir);
}
