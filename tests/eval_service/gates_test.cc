// Quality gates and promotion in the evaluation service over real HTTP
// (docs/evaluation-service.md, "Gates and promotion"; docs/api.md): two
// evaluations of one suite with per-item statistics the test controls, the
// gate decision and its stored rows, the promotion state machine refusing
// without a PASS and allowing after one, the audit records with the declared
// user, and the refusal of evaluations of different datasets.
#include <httplib.h>

#include <cmath>

#include "eval/service/http.h"
#include "formats/json_reader.h"
#include "tests/eval_service/eval_fixture.h"
#include "tests/eval_service/http_client.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

const char* kPolicy =
    "gate: toy-release\nversion: \"3\"\nsuite: toy-v1\nalpha: 0.05\ndimensions:\n  quality:\n"
    "    - metric: accuracy\n      margin: 0.05\n";

// The accuracy statistic of an item for a model that gets it right unless `wrong(item)`.
eval::wire::Result result_for(const TestWorker& w, const eval::wire::Assign& a, bool worse) {
  eval::wire::Result r = w.result(a);
  if (worse) {
    for (int64_t i = a.begin; i < a.end; ++i) {
      const size_t k = static_cast<size_t>(i - a.begin) * 3;
      if (i % 2 == 0) r.stats[k] = 0;  // accuracy 0 on every even item
    }
  }
  return r;
}

const json::Value* metric_of(const json::Value& decision, const std::string& name) {
  for (const auto& m : at(decision, "metrics").items) {
    if (at(m, "metric").text == name) return &m;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("gates and promotion: FAIL with its numbers, PASS, stored rows, 409 refusals, audit") {
  std::string dir = temp_dir("gates");
  SuiteSpec spec = write_toy_suite(dir);
  SuiteSpec other = spec;  // the same metrics on a different dataset
  other.name = "toy-other-v1";
  other.dataset_path = dir + "/other.jsonl";
  other.sha256 = write_dataset(other.dataset_path, 40);
  {
    std::ofstream out(other.dataset_path, std::ios::app);
    out << "{\"x\":99,\"label\":1}\n";
  }
  other.sha256 = sha_of_file(other.dataset_path);
  other.items = 41;
  other.on_checkpoint = "";
  write_file(dir + "/suites/other.yaml", suite_yaml(other));
  write_file(dir + "/gates/toy.yaml", kPolicy);
  write_file(dir + "/gates/broken.yaml", "gate: broken\nversion: \"1\"\nalpha: 2\n");

  eval::service::ServiceOptions so = service_options(dir);
  const std::string url = so.store_url;
  ServedEval served(so);
  auto& svc = served.svc;
  Http& http = *served.http;

  // The policies and their problems.
  auto [gs, gl] = http.get("/v1/gates");
  CHECK(gs == 200);
  REQUIRE(at(gl, "gates").items.size() == 1);
  CHECK(at(at(gl, "gates").items[0], "name").text == "toy-release");
  CHECK(at(at(gl, "gates").items[0], "version").text == "3");
  CHECK(at(at(gl, "gates").items[0], "metrics").items.at(0).text == "quality/accuracy");
  REQUIRE(!at(gl, "problems").items.empty());
  CHECK(at(gl, "problems").items[0].text.find(dir + "/gates/broken.yaml:") == 0);

  // Three versions: v1 the baseline, v2 worse on accuracy, v3 the same as v1.
  std::map<std::string, std::string> ev;  // version -> its toy-v1 evaluation
  for (const char* v : {"v1", "v2", "v3"}) {
    const char hc = v[1] == '1' ? 'a' : v[1] == '2' ? 'b' : 'c';
    auto [cs, ck] =
        http.post("/v1/checkpoints", std::string(R"({"checkpointId":"ck-)") + v + R"(","sha256":")" +
                                         std::string(64, hc) + R"(","modelVersion":"toy-mlp:)" + v + R"("})");
    REQUIRE(cs == 201);
    REQUIRE(at(ck, "evaluations").items.size() == 1);
    ev[v] = at(at(ck, "evaluations").items[0], "evaluationId").text;
  }
  // v1 on the other dataset too.
  auto [os, ob] = http.post("/v1/evaluations",
                            R"({"modelVersion":"toy-mlp:v1","checkpointId":"ck-v1","benchmarkSuite":"toy-other-v1"})");
  REQUIRE(os == 201);
  const std::string other_ev = at(ob, "evaluationId").text;

  // Promotion to gated before any evaluation finished: it must be evaluated first.
  auto [p0, pb0] =
      http.post("/v1/models/toy-mlp/versions/v2/promote", R"({"to":"evaluated"})", "application/json", "alice");
  CHECK(p0 == 409);
  CHECK(at(pb0, "error").text == "toy-mlp:v2 has no COMPLETED or CACHED evaluation: it cannot be marked evaluated");

  TestWorker w(svc.endpoint(), "w1");
  w.hello();
  auto done = [&] {
    for (const auto& [v, id] : ev) {
      if (status_of(url, id) != "COMPLETED") return false;
    }
    return status_of(url, other_ev) == "COMPLETED";
  };
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < until) {
    auto a = w.assignment(50);
    if (!a) continue;
    w.send(result_for(w, *a, a->evaluation_id == ev["v2"]));
    auto k = w.ack();
    REQUIRE(k.has_value());
    CHECK(k->outcome == eval::wire::AckOutcome::kAccepted);
  }
  REQUIRE(done());

  // Unknown policy or evaluation: 404.
  CHECK(http.post("/v1/gates/evaluate",
                  R"({"policy":"nope","candidate":")" + ev["v2"] + R"(","baseline":")" + ev["v1"] + R"("})")
            .first == 404);
  auto [u4, ub4] = http.post("/v1/gates/evaluate",
                             R"({"policy":"toy-release","candidate":"e-missing","baseline":")" + ev["v1"] + R"("})");
  CHECK(u4 == 404);
  CHECK(at(ub4, "error").text == "unknown evaluation 'e-missing'");
  CHECK(http.post("/v1/gates/evaluate", R"({"baseline":"x"})").first == 400);
  // No baseline named and no production version yet.
  auto [n9, nb9] = http.post("/v1/gates/evaluate", R"({"policy":"toy-release","candidate":")" + ev["v2"] + R"("})");
  CHECK(n9 == 409);
  CHECK(at(nb9, "error").text == "no baseline named and toy-mlp has no production version to compare with");

  // A whole-cache hit keeps no items of its own: the gate reads its source's.
  auto [cs9, cb9] =
      http.post("/v1/evaluations", R"({"modelVersion":"toy-mlp:v1","checkpointId":"ck-v1","benchmarkSuite":"toy-v1"})");
  REQUIRE(cs9 == 201);
  REQUIRE(at(cb9, "status").text == "CACHED");
  auto [c9, ccb9] =
      http.post("/v1/gates/evaluate", R"({"policy":"toy-release","candidate":")" + at(cb9, "evaluationId").text +
                                          R"(","baseline":")" + ev["v1"] + R"("})");
  CHECK(c9 == 201);
  CHECK(at(ccb9, "verdict").text == "PASS");
  CHECK(at(ccb9, "items").number == 40);

  // Different datasets: refused, with the reason.
  auto [r9, rb9] = http.post("/v1/gates/evaluate", R"({"policy":"toy-release","candidate":")" + ev["v1"] +
                                                       R"(","baseline":")" + other_ev + R"("})");
  CHECK(r9 == 409);
  CHECK(at(rb9, "error").text.find("a paired comparison needs the same dataset") != std::string::npos);
  CHECK(at(rb9, "error").text.find(other.sha256) != std::string::npos);

  // v2 against v1: accuracy 0.75 -> 0.40 on 40 paired items, FAIL.
  auto [f1, fb] = http.post("/v1/gates/evaluate", R"({"policy":"toy-release","candidate":")" + ev["v2"] +
                                                      R"(","baseline":")" + ev["v1"] + R"("})");
  REQUIRE(f1 == 201);
  CHECK(at(fb, "verdict").text == "FAIL");
  const std::string fail_id = at(fb, "gateId").text;
  CHECK(fail_id.rfind("g-", 0) == 0);
  CHECK(at(fb, "candidateEvaluation").text == ev["v2"]);
  CHECK(at(fb, "baselineEvaluation").text == ev["v1"]);
  CHECK(at(fb, "policyVersion").text == "3");
  const json::Value* acc = metric_of(fb, "accuracy");
  REQUIRE(acc);
  // toy_stats: item i is wrong when i % 4 == 0 (10 of 40): baseline 30/40; the
  // candidate also misses the other even items (10 more): 20/40... minus none.
  int base_right = 0, cand_right = 0;
  std::vector<double> d;
  for (int i = 0; i < 40; ++i) {
    const double b = toy_stats(i)[0], c = i % 2 == 0 ? 0.0 : b;
    base_right += b > 0, cand_right += c > 0;
    d.push_back(c - b);
  }
  double mean = 0, ss = 0;
  for (double x : d) mean += x / 40;
  for (double x : d) ss += (x - mean) * (x - mean);
  const double se = std::sqrt(ss / 39) / std::sqrt(40.0);
  CHECK(at(*acc, "baseline").number == doctest::Approx(base_right / 40.0));
  CHECK(at(*acc, "candidate").number == doctest::Approx(cand_right / 40.0));
  CHECK(at(*acc, "difference").number == doctest::Approx(mean));
  CHECK(at(*acc, "stdError").number == doctest::Approx(se));
  CHECK(at(*acc, "verdict").text == "FAIL");
  REQUIRE(!at(fb, "reasons").items.empty());

  // The stored rows: the decision (its JSON) and one per gated metric.
  {
    store::Store s = store::open_store(url, {store::OpenMode::kReadOnly});
    auto rows = s.evals->gate_rows(fail_id);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].gate_id == fail_id);
    CHECK(rows[0].evaluation_id == ev["v2"]);
    CHECK(rows[0].metric.empty());
    CHECK(rows[0].passed == std::optional<bool>(false));
    CHECK(parse(rows[0].decision_json).find("gateId")->text == fail_id);
    CHECK(rows[0].benchmark == rows[1].benchmark);  // the candidate's benchmark
    CHECK(rows[1].gate_id == fail_id + "/accuracy");
    CHECK(rows[1].metric == "accuracy");
    CHECK(rows[1].benchmark == "toy-bench");
    CHECK(rows[1].observed.value_or(0) == doctest::Approx(mean));
    CHECK(rows[1].threshold.value_or(0) == doctest::Approx(-0.05));
    CHECK(rows[1].passed == std::optional<bool>(false));
    CHECK(rows[1].decided_ns > 0);
  }

  // v3 against v1: the same statistics, PASS.
  auto [p1, pb] = http.post("/v1/gates/evaluate", R"({"policy":"toy-release","candidate":")" + ev["v3"] +
                                                      R"(","baseline":")" + ev["v1"] + R"("})");
  REQUIRE(p1 == 201);
  CHECK(at(pb, "verdict").text == "PASS");
  const std::string pass_id = at(pb, "gateId").text;
  CHECK(at(*metric_of(pb, "accuracy"), "difference").number == 0);

  // The version's decisions.
  auto [mv2, mvb2] = http.get("/v1/models/toy-mlp/versions/v2");
  CHECK(mv2 == 200);
  REQUIRE(at(mvb2, "gates").items.size() == 1);
  CHECK(at(at(mvb2, "gates").items[0], "gateId").text == fail_id);
  CHECK(at(at(mvb2, "gates").items[0], "verdict").text == "FAIL");

  // Promotion of v2: evaluated, then refused at gated with the gate's reasons.
  auto [e2, eb2] =
      http.post("/v1/models/toy-mlp/versions/v2/promote", R"({"to":"evaluated"})", "application/json", "alice");
  CHECK(e2 == 200);
  CHECK(at(eb2, "to").text == "evaluated");
  auto [g2, gb2] =
      http.post("/v1/models/toy-mlp/versions/v2/promote", R"({"to":"gated"})", "application/json", "alice");
  CHECK(g2 == 409);
  CHECK(at(gb2, "error").text == "cannot move toy-mlp:v2 to gated: gate " + fail_id + " is FAIL");
  CHECK(at(gb2, "gateId").text == fail_id);
  REQUIRE(!at(gb2, "reasons").items.empty());
  CHECK(at(gb2, "reasons").items[0].text == at(fb, "reasons").items[0].text);
  // Skipping a step is refused too.
  auto [k2, kb2] = http.post("/v1/models/toy-mlp/versions/v2/promote", R"({"to":"production"})");
  CHECK(k2 == 409);
  CHECK(at(kb2, "error").text == "cannot move toy-mlp:v2 from evaluated to production: it must be canary first");
  CHECK(http.post("/v1/models/toy-mlp/versions/v2/promote", R"({"to":"shipped"})").first == 400);
  CHECK(http.post("/v1/models/toy-mlp/versions/v9/promote", R"({"to":"evaluated"})").first == 404);
  // A gate decision of another version cannot be borrowed.
  auto [b2, bb2] =
      http.post("/v1/models/toy-mlp/versions/v2/promote", R"({"to":"gated","gateId":")" + pass_id + R"("})");
  CHECK(b2 == 409);
  CHECK(at(bb2, "error").text.find("which is not an evaluation of toy-mlp:v2") != std::string::npos);

  // v1 (gated against itself) is the production version v3 will replace.
  auto [s1, sb1] = http.post("/v1/gates/evaluate", R"({"policy":"toy-release","candidate":")" + ev["v1"] +
                                                       R"(","baseline":")" + ev["v1"] + R"("})");
  REQUIRE(s1 == 201);
  CHECK(at(sb1, "verdict").text == "PASS");
  for (const char* to : {"evaluated", "gated", "canary", "production"}) {
    CHECK(http.post("/v1/models/toy-mlp/versions/v1/promote", std::string(R"({"to":")") + to + R"("})",
                    "application/json", "ops")
              .first == 200);
  }

  // With v1 in production, a gate without a baseline compares with v1's evaluation of the suite.
  auto [d9, db9] = http.post("/v1/gates/evaluate", R"({"policy":"toy-release","candidate":")" + ev["v2"] + R"("})");
  CHECK(d9 == 201);
  CHECK(at(db9, "verdict").text == "FAIL");
  const std::string v1_cached = at(cb9, "evaluationId").text;  // the latest COMPLETED/CACHED one of v1
  CHECK(at(db9, "baselineEvaluation").text == v1_cached);

  // v3 goes all the way after its PASS; the declared user is recorded (anonymous when none).
  for (const char* to : {"evaluated", "gated", "canary", "production"}) {
    auto [st, sb] = http.post("/v1/models/toy-mlp/versions/v3/promote", std::string(R"({"to":")") + to + R"("})",
                              "application/json", std::string(to) == "canary" ? "" : "bob");
    CHECK_MESSAGE(st == 200, to);
    CHECK(at(sb, "to").text == to);
  }
  auto [a3, ab3] = http.get("/v1/models/toy-mlp/versions/v3/audit");
  CHECK(a3 == 200);
  CHECK(at(ab3, "status").text == "production");
  const auto& audit = at(ab3, "audit").items;
  REQUIRE(audit.size() == 4);
  CHECK(at(audit[0], "from").text == "registered");
  CHECK(at(audit[0], "to").text == "evaluated");
  CHECK(at(audit[0], "user").text == "bob");
  CHECK(at(audit[0], "gateId").type == json::Value::Type::kNull);
  CHECK(at(audit[1], "to").text == "gated");
  CHECK(at(audit[1], "gateId").text == pass_id);
  CHECK(at(audit[2], "user").text == "anonymous");
  CHECK(at(audit[3], "from").text == "canary");
  CHECK(at(audit[3], "to").text == "production");
  CHECK(at(audit[3], "atNs").number > 0);
  auto [a2, ab2] = http.get("/v1/models/toy-mlp/versions/v2/audit");
  CHECK(at(ab2, "status").text == "evaluated");
  REQUIRE(at(ab2, "audit").items.size() == 1);
  CHECK(at(at(ab2, "audit").items[0], "user").text == "alice");

  // v1 was retired when v3 reached production; a rollback of v3 brings it back.
  auto [a1, ab1] = http.get("/v1/models/toy-mlp/versions/v1/audit");
  CHECK(at(ab1, "status").text == "retired");
  REQUIRE(at(ab1, "audit").items.size() == 5);
  CHECK(at(at(ab1, "audit").items[4], "to").text == "retired");
  CHECK(at(at(ab1, "audit").items[4], "reason").text == "superseded by toy-mlp:v3");
  CHECK(http.post("/v1/models/toy-mlp/versions/v1/promote", R"({"to":"rollback"})").first == 409);
  auto [rb, rbb] =
      http.post("/v1/models/toy-mlp/versions/v3/promote", R"({"to":"rollback"})", "application/json", "carol");
  CHECK(rb == 200);
  REQUIRE(at(rbb, "audit").items.size() == 2);
  CHECK(at(at(rbb, "audit").items[0], "to").text == "rolled_back");
  CHECK(at(at(rbb, "audit").items[1], "modelVersion").text == "toy-mlp:v1");
  CHECK(at(at(rbb, "audit").items[1], "to").text == "production");
  CHECK(at(at(rbb, "audit").items[1], "user").text == "carol");
  CHECK(at(http.get("/v1/models/toy-mlp/versions/v1").second, "status").text == "production");
  CHECK(at(http.get("/v1/models/toy-mlp/versions/v3").second, "status").text == "rolled_back");
  // With nothing retired left, a second rollback has nowhere to go.
  auto [r2, rb2] = http.post("/v1/models/toy-mlp/versions/v1/promote", R"({"to":"rollback"})");
  CHECK(r2 == 409);
  CHECK(at(rb2, "error").text == "no previous production version of toy-mlp to roll back to");

  served.stop();
  std::filesystem::remove_all(dir);
}
