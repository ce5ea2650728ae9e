// The walk's routes through a real ApiServer with the evaluation routes
// (GET /v1/models/{id}/compare, .../versions/{v}/explain, the evaluations of
// GET /v1/runs/compare), and `runlens explain` against it.
#include <doctest/doctest.h>

#include <filesystem>

#include "eval/service/http.h"
#include "eval/service/service.h"
#include "tests/cli/child_process.h"
#include "tests/eval_service/http_client.h"
#include "tests/eval_walk/walk_fixture.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct Served {
  std::string dir, url;
  std::unique_ptr<ServedEval> eval;
};

void serve(Served* s, const std::string& name) {
  s->dir = walk_dir(name);
  s->url = store::store_url_of_file(s->dir + "/runlens.db");
  {
    store::Store st = store::open_store(s->url);
    WalkScenario{}.write(st);
  }
  std::filesystem::create_directories(s->dir + "/suites");
  eval::service::ServiceOptions so = service_options(s->dir);
  so.checkpoint_poll_ms = 0;
  s->eval = std::make_unique<ServedEval>(so);
}

const json::Value* find_config(const json::Value& c, const std::string& key) {
  for (const auto& e : at(c, "config").items) {
    if (at(e, "key").text == key) return &e;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("GET /v1/models/{id}/compare: section 23's table") {
  Served s;
  serve(&s, "compare");
  Http http(s.eval->server.port());
  auto [status, c] = http.get("/v1/models/toy/compare?left=v1&right=v2");
  REQUIRE(status == 200);
  CHECK(at(at(c, "left"), "modelVersion").text == "toy:v1");
  CHECK(at(at(c, "right"), "runId").text == "r-lr");
  CHECK(at(at(c, "right"), "step").integer == 300);
  CHECK(at(at(c, "right"), "checkpointId").text == "r-lr-ck");
  const json::Value* lr = find_config(c, "lr");
  REQUIRE(lr);
  CHECK(at(*lr, "changed").boolean);
  CHECK(at(*lr, "left").number == 0.05);
  CHECK(at(*lr, "right").number == 1.0);
  CHECK(at(*lr, "rightStep").integer == 150);
  CHECK_FALSE(at(*find_config(c, "batch_size"), "changed").boolean);
  CHECK_FALSE(at(at(c, "dataset"), "changed").boolean);
  CHECK(at(at(at(c, "metrics"), "valLoss"), "right").number == doctest::Approx(0.95));
  CHECK(at(at(at(c, "metrics"), "mfu"), "left").number == doctest::Approx(0.45));
  const json::Value& b = at(c, "benchmarks").items.at(0);
  CHECK(at(b, "benchmark").text == "digits-holdout");
  CHECK(at(b, "paired").boolean);
  const json::Value& m = at(b, "metrics").items.at(0);
  CHECK(at(m, "metric").text == "accuracy");
  CHECK(at(m, "difference").number == doctest::Approx(-0.3));
  CHECK(at(m, "stdError").number == doctest::Approx(0.07338).epsilon(1e-3));
  CHECK(at(m, "significant").boolean);
  CHECK(at(m, "method").text == "paired");
  CHECK(at(at(at(c, "health"), "right"), "healthy").boolean);
  CHECK(at(at(c, "decision"), "cause").text == "config_change");
  CHECK(at(at(c, "decision"), "owner").text == "training");
  CHECK(at(at(c, "changedKeys"), "lr").integer == 150);
  CHECK(at(c, "conclusion").items.at(0).text == "Infrastructure appears healthy.");

  // Another model's version as MODEL:VERSION, unknown versions, missing parameters.
  CHECK(http.get("/v1/models/toy/compare?left=toy:v3&right=toy:v4").first == 200);
  auto [s404, e404] = http.get("/v1/models/toy/compare?left=v1&right=v9");
  CHECK(s404 == 404);
  CHECK(at(e404, "error").text == "unknown model version 'toy:v9'");
  auto [s409, e409] = http.get("/v1/models/toy/compare?left=v1&right=v7");
  CHECK(s409 == 409);
  CHECK(at(e409, "error").text.find("toy:v7 has no COMPLETED") != std::string::npos);
  CHECK(http.get("/v1/models/toy/compare?left=v1").first == 400);
  CHECK(http.get("/v1/models/toy/compare?left=v1&right=v2&bogus=1").first == 400);
}

TEST_CASE("GET /v1/models/{id}/versions/{v}/explain: the walk, baseline named or production") {
  Served s;
  serve(&s, "explain");
  Http http(s.eval->server.port());
  auto [status, e] = http.get("/v1/models/toy/versions/v2/explain");
  REQUIRE(status == 200);
  CHECK(at(e, "baselineFrom").text == "production");
  CHECK(at(e, "baseline").text == "toy:v1");
  const auto& walk = at(e, "walk").items;
  REQUIRE(walk.size() == 7);
  const char* levels[] = {"modelVersion", "evaluation", "checkpoint", "trainingRun", "configDiff", "health", "cause"};
  for (size_t i = 0; i < walk.size(); ++i) CHECK(at(walk[i], "level").text == levels[i]);
  CHECK(at(walk[1], "id").text == "e-v2");
  CHECK(at(walk[2], "summary").text == "step 300");
  CHECK(at(walk[3], "id").text == "r-lr");
  CHECK(at(walk[4], "summary").text == "lr 0.05 → 1 at step 150");
  CHECK(at(walk[6], "id").text == "config_change");
  CHECK(at(at(e, "decision"), "summary").text.find("lr 0.05 → 1.0 at step 150") != std::string::npos);

  auto [s2, e2] = http.get("/v1/models/toy/versions/v4/explain?baseline=v3");
  REQUIRE(s2 == 200);
  CHECK(at(e2, "baselineFrom").text == "named");
  CHECK(at(at(e2, "decision"), "cause").text == "evaluation_mismatch");
  CHECK(at(at(e2, "decision"), "owner").text == "evaluation");

  auto [s3, e3] = http.get("/v1/models/toy/versions/v1/explain");
  CHECK(s3 == 409);
  CHECK(at(e3, "error").text.find("is the production version itself") != std::string::npos);
  CHECK(http.get("/v1/models/toy/versions/v9/explain?baseline=v1").first == 404);
  CHECK(http.get("/v1/models/nope/versions/v1/explain").first == 404);
}

TEST_CASE("GET /v1/runs/compare gains the evaluations of both runs' checkpoints") {
  Served s;
  serve(&s, "runs");
  Http http(s.eval->server.port());
  auto [status, c] = http.get("/v1/runs/compare?left=r-base&right=r-lr");
  REQUIRE(status == 200);
  const auto& evs = at(c, "evaluations").items;
  REQUIRE(evs.size() == 1);
  CHECK(at(evs[0], "leftEvaluation").text == "e-v1");
  CHECK(at(evs[0], "rightEvaluation").text == "e-v2");
  CHECK(at(at(evs[0], "metrics").items.at(0), "difference").number == doctest::Approx(-0.3));
  // Different datasets: not paired, no p-value, not significant.
  auto [s2, c2] = http.get("/v1/runs/compare?left=r-base&right=r-same3");
  REQUIRE(s2 == 200);
  const auto& ev2 = at(c2, "evaluations").items.at(0);
  CHECK_FALSE(at(ev2, "paired").boolean);
  CHECK(at(ev2, "note").text.find("not paired") != std::string::npos);
  CHECK(at(at(ev2, "metrics").items.at(0), "pValue").type == json::Value::Type::kNull);
  CHECK_FALSE(at(at(ev2, "metrics").items.at(0), "significant").boolean);
  // Runs without evaluations: an empty section.
  auto [s3, c3] = http.get("/v1/runs/compare?left=r-base&right=r-same4");
  REQUIRE(s3 == 200);
  CHECK(at(c3, "evaluations").items.empty());
}

TEST_CASE("runlens explain: the walk in words, --json, and errors") {
  Served s;
  serve(&s, "cli");
  const std::string server = " --server http://127.0.0.1:" + std::to_string(s.eval->server.port());
  const std::string bin = RUNLENS_BINARY;
  ShellResult r = shell(bin + " explain toy:v2 --baseline v1" + server);
  CHECK(r.code == 0);
  INFO(r.output);
  CHECK(r.output.find("model version toy:v2 against toy:v1\n") == 0);
  CHECK(r.output.find("  ↓ evaluation e-v2: digits-holdout COMPLETED accuracy=0.6\n") != std::string::npos);
  CHECK(r.output.find("  ↓ checkpoint r-lr-ck: step 300\n") != std::string::npos);
  CHECK(r.output.find("  ↓ training run r-lr: status completed, dataset digits-v1\n") != std::string::npos);
  CHECK(r.output.find("  ↓ config diff vs r-base: lr 0.05 → 1 at step 150\n") != std::string::npos);
  CHECK(r.output.find("  ↓ health of r-lr: healthy") != std::string::npos);
  CHECK(r.output.find("  ↓ likely cause config_change: owner training: validation loss 0.4 → 0.95") !=
        std::string::npos);
  CHECK(r.output.find("decision (model_failure): config_change, owner training\n") != std::string::npos);
  CHECK(r.output.find("  evidence: lr_step = 150\n") != std::string::npos);
  CHECK(r.output.find("  digits-holdout accuracy 0.9 → 0.6  difference -0.3 (SE 0.07338") != std::string::npos);
  CHECK(r.output.find("likely conclusion:\n  Infrastructure appears healthy.\n") != std::string::npos);

  ShellResult j = shell(bin + " explain toy:v4 --baseline toy:v3 --json" + server);
  CHECK(j.code == 0);
  CHECK(j.output.find(R"("baselineFrom":"named")") == 1);
  CHECK(j.output.find(R"("cause":"evaluation_mismatch")") != std::string::npos);

  ShellResult prod = shell(bin + " explain toy:v2" + server);
  CHECK(prod.code == 0);
  CHECK(prod.output.find("model version toy:v2 against toy:v1 (the production version)\n") == 0);

  ShellResult unpaired = shell(bin + " explain toy:v6" + server);
  CHECK(unpaired.code == 0);
  CHECK(unpaired.output.find("  digits-holdout accuracy 0.9 → 0.8  difference -0.1 (NOT PAIRED: the datasets differ; "
                             "no significance claimed)\n    dataset changed: digits-test@1 → digits-test@2\n"
                             "    datasetHash changed: bbbbbbbbbbbb → cccccccccccc\n") != std::string::npos);
  CHECK(unpaired.output.find("decision (model_failure): evaluation_mismatch, owner evaluation\n") != std::string::npos);

  ShellResult missing = shell(bin + " explain toy:v9 --baseline v1" + server);
  CHECK(missing.code == 1);
  CHECK(missing.output.find("runlens explain: no model version at http://127.0.0.1:") == 0);
  CHECK(missing.output.find("unknown model version 'toy:v9'") != std::string::npos);

  ShellResult none = shell(bin + " explain toy:v7 --baseline v1" + server);
  CHECK(none.code == 1);
  CHECK(none.output.find("answered 409: model version toy:v7 has no COMPLETED") != std::string::npos);

  ShellResult usage = shell(bin + " explain v2" + server);
  CHECK(usage.code == 2);
  CHECK(usage.output.find("expected MODEL:VERSION") != std::string::npos);
}

TEST_CASE("runlens validate checks the model-failure tree and root-cause trees, with file:line:col") {
  const std::string bin = RUNLENS_BINARY;
  const std::string src = RUNLENS_SOURCE_DIR;
  ShellResult ok = shell(bin + " validate " + src + "/configs/rules/model/model_failure.yaml " + src +
                         "/configs/rules/straggler.yaml");
  CHECK(ok.code == 0);
  CHECK(ok.output.find("model_failure.yaml: ok (model-failure rule tree model_failure") != std::string::npos);
  CHECK(ok.output.find("straggler.yaml: ok (root-cause rule tree straggler_localization") != std::string::npos);
  const std::string dir = scratch_dir("walk-validate");
  const std::string bad = write_text(dir, "bad.yaml",
                                     "name: m\nsymptoms: [benchmark_regression]\npriority: 0\ntree:\n"
                                     "  if: lr_ratio > 2 and temp_c > 3\n"
                                     "  then: {cause: config_change, owner: training, recommendation: r}\n"
                                     "  else: {cause: unknown, owner: evaluator, recommendation: r}\n");
  ShellResult r = shell(bin + " validate " + bad);
  CHECK(r.code == 2);
  CHECK(r.output.find(bad + ":5:24: error: invalid condition: unknown signal 'temp_c'") != std::string::npos);
  CHECK(r.output.find(bad + ":7:33: error: unknown owner 'evaluator'") != std::string::npos);
}
