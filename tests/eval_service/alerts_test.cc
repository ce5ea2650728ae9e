// Evaluation alerts (docs/alerts.md, "Evaluation alerts"): a FAIL gate
// decision raises one alert per failed metric, of the kind its dimension
// picks, through the real service and store: stored (GET /v1/alerts, by
// kind), published on a ZeroMQ PUB endpoint (a real SUB on a loopback port
// chosen at run time receives [kind, alert JSON]) and appended to a JSONL
// file; the gate the service runs by itself when an evaluation completes
// raises them too; a PASS raises none; the same decision again keeps its ids.
#include "eval/service/alerts.h"

#include <httplib.h>
#include <zmq.h>

#include <cmath>

#include "eval/service/http.h"
#include "formats/json_reader.h"
#include "formats/jsonl_codec.h"
#include "tests/eval_service/eval_fixture.h"
#include "tests/eval_service/http_client.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

// The same accuracy statistic gated in each dimension that has an alert kind.
std::string policy(const std::string& name, const std::string& dimension) {
  return "gate: " + name + "\nversion: \"2\"\nsuite: toy-v1\nalpha: 0.05\ndimensions:\n  " + dimension +
         ":\n    - metric: accuracy\n      margin: 0.05\n";
}

eval::wire::Result result_for(const TestWorker& w, const eval::wire::Assign& a, bool worse) {
  eval::wire::Result r = w.result(a);
  if (worse) {
    for (int64_t i = a.begin; i < a.end; ++i) {
      if (i % 2 == 0) r.stats[static_cast<size_t>(i - a.begin) * 3] = 0;  // accuracy 0 on every even item
    }
  }
  return r;
}

// Reads [kind, body] messages from a SUB socket until `n` arrived or `ms` passed.
std::vector<std::pair<std::string, std::string>> receive(void* sub, size_t n, int ms) {
  std::vector<std::pair<std::string, std::string>> out;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (out.size() < n && std::chrono::steady_clock::now() < until) {
    zmq_pollitem_t item{sub, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 50) <= 0) continue;
    std::string frames[2];
    for (int f = 0; f < 2; ++f) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      REQUIRE(zmq_msg_recv(&m, sub, 0) >= 0);
      frames[f].assign(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
      const bool more = zmq_msg_more(&m);
      zmq_msg_close(&m);
      REQUIRE(more == (f == 0));  // exactly two frames, as the zmq_pub sink sends
    }
    out.emplace_back(frames[0], frames[1]);
  }
  return out;
}

int64_t count_lines(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) n += !line.empty();
  return n;
}

}  // namespace

TEST_CASE("evaluation alerts: each dimension's kind on a FAIL, stored, published, appended; none on a PASS") {
  std::string dir = temp_dir("alerts");
  write_toy_suite(dir);
  write_file(dir + "/gates/quality.yaml", policy("toy-quality", "quality"));
  write_file(dir + "/gates/safety.yaml", policy("toy-safety", "safety"));
  write_file(dir + "/gates/latency.yaml", policy("toy-latency", "latency"));

  eval::service::ServiceOptions so = service_options(dir);
  so.alerts_pub = "tcp://127.0.0.1:0";
  so.alerts_out = dir + "/alerts.jsonl";
  const std::string url = so.store_url;
  ServedEval served(so);
  auto& svc = served.svc;
  REQUIRE(svc.alerts_endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  CHECK(svc.alerts_endpoint() != "tcp://127.0.0.1:0");
  Http& http = *served.http;

  void* zctx = zmq_ctx_new();
  void* sub = zmq_socket(zctx, ZMQ_SUB);
  int zero = 0;
  zmq_setsockopt(sub, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
  REQUIRE(zmq_connect(sub, svc.alerts_endpoint().c_str()) == 0);

  // v1 and v3 answer alike; v1 goes to production (gated by a PASS against v3).
  std::map<std::string, std::string> ev;
  auto checkpoint = [&](const char* v, char hc) {
    auto [cs, ck] =
        http.post("/v1/checkpoints", std::string(R"({"checkpointId":"ck-)") + v + R"(","sha256":")" +
                                         std::string(64, hc) + R"(","modelVersion":"toy-mlp:)" + v + R"("})");
    REQUIRE(cs == 201);
    REQUIRE(at(ck, "evaluations").items.size() == 1);
    ev[v] = at(at(ck, "evaluations").items[0], "evaluationId").text;
  };
  checkpoint("v1", 'a');
  checkpoint("v3", 'c');
  TestWorker w(svc.endpoint(), "w1");
  w.hello();
  auto work = [&](const std::vector<std::string>& ids) {
    auto done = [&] {
      for (const auto& id : ids) {
        if (status_of(url, id) != "COMPLETED") return false;
      }
      return true;
    };
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < until) {
      auto a = w.assignment(50);
      if (!a) continue;
      w.send(result_for(w, *a, a->evaluation_id == ev["v2"]));
      auto k = w.ack();
      REQUIRE(k.has_value());
    }
    REQUIRE(done());
  };
  work({ev["v1"], ev["v3"]});
  // No production version yet: the automatic gate says so and decides nothing.
  auto [ws, wb] = http.get("/v1/evaluations/" + ev["v1"] + "/why");
  CHECK(ws == 200);
  bool said = false;
  for (const auto& l : at(wb, "decisions").items)
    said |= l.text.find("no automatic gate: toy-mlp has no production version to compare with") != std::string::npos;
  CHECK(said);

  // A PASS raises nothing.
  auto [p1, pb] = http.post("/v1/gates/evaluate", R"({"policy":"toy-quality","candidate":")" + ev["v1"] +
                                                      R"(","baseline":")" + ev["v3"] + R"("})");
  REQUIRE(p1 == 201);
  CHECK(at(pb, "verdict").text == "PASS");
  for (const char* to : {"evaluated", "gated", "canary", "production"})
    REQUIRE(http.post("/v1/models/toy-mlp/versions/v1/promote", std::string(R"({"to":")") + to + R"("})").first == 200);
  CHECK(at(http.get("/v1/alerts").second, "count").number == 0);
  CHECK(receive(sub, 1, 200).empty());

  // v2 is worse; when its evaluation completes the service gates it against
  // production (v1) with every policy of its suite: three FAILs, three kinds.
  checkpoint("v2", 'b');
  work({ev["v2"]});
  auto got = receive(sub, 3, 5000);
  REQUIRE(got.size() == 3);
  // Hand-computed: baseline right unless item % 4 == 0 (30/40); the candidate also misses the other even items.
  std::vector<double> d;
  for (int i = 0; i < 40; ++i) d.push_back((i % 2 == 0 ? 0.0 : toy_stats(i)[0]) - toy_stats(i)[0]);
  double mean = 0, ss = 0;
  for (double x : d) mean += x / 40;
  for (double x : d) ss += (x - mean) * (x - mean);
  const double se = std::sqrt(ss / 39) / std::sqrt(40.0);
  std::map<std::string, Alert> by_kind;
  for (const auto& [kind, body] : got) {
    Alert a;
    std::string why;
    REQUIRE_MESSAGE(jsonl::decode_alert(body, &a, &why), why);
    CHECK(a.kind == kind);
    CHECK(a.model_id == "toy-mlp");
    CHECK(a.model_version == "v2");
    CHECK(a.evaluation_id == ev["v2"]);
    CHECK(a.alert_id == make_evaluation_alert_id(kind, "toy-mlp", "v2", ev["v2"], "accuracy"));
    CHECK(a.value.value_or(0) == doctest::Approx(mean));
    CHECK(a.threshold.value_or(0) == doctest::Approx(-0.05));
    CHECK(a.run_id.empty());
    std::map<std::string, double> attrs(a.attrs.begin(), a.attrs.end());
    CHECK(attrs["std_error"] == doctest::Approx(se));
    CHECK(attrs["n"] == 40);
    CHECK(attrs["alpha"] == doctest::Approx(0.05));
    CHECK(attrs["candidate"] == doctest::Approx(0.5));
    CHECK(attrs["baseline"] == doctest::Approx(0.75));
    CHECK(attrs["upper"] < -0.05);
    CHECK(attrs["lower"] < attrs["upper"]);
    CHECK(a.summary.find("toy-mlp:v2 accuracy 0.5 against 0.75 of toy-mlp:v1") != std::string::npos);
    by_kind[kind] = a;
  }
  REQUIRE(by_kind.size() == 3);
  CHECK(by_kind.count("benchmark_regression"));
  CHECK(by_kind["safety_regression"].severity == Severity::kCritical);
  CHECK(by_kind["latency_regression"].severity == Severity::kWarning);
  CHECK(by_kind["benchmark_regression"].summary.rfind("BENCHMARK REGRESSION: ", 0) == 0);

  // Stored: GET /v1/alerts lists them, by kind too; the JSONL file has them.
  REQUIRE(wait_until([&] { return at(http.get("/v1/alerts").second, "count").number == 3; }));
  auto [ks, kb] = http.get("/v1/alerts?kind=safety_regression");
  CHECK(ks == 200);
  REQUIRE(at(kb, "alerts").items.size() == 1);
  CHECK(at(at(kb, "alerts").items[0], "alert_id").text == by_kind["safety_regression"].alert_id);
  CHECK(at(at(kb, "alerts").items[0], "evaluation_id").text == ev["v2"]);
  CHECK(count_lines(dir + "/alerts.jsonl") == 3);

  // The same decision again (POST, the production baseline): the same alert, updated, not a new one.
  auto [f2, fb2] = http.post("/v1/gates/evaluate", R"({"policy":"toy-quality","candidate":")" + ev["v2"] + R"("})");
  REQUIRE(f2 == 201);
  CHECK(at(fb2, "verdict").text == "FAIL");
  auto again = receive(sub, 1, 5000);
  REQUIRE(again.size() == 1);
  CHECK(again[0].first == "benchmark_regression");
  Alert a2;
  std::string why;
  REQUIRE(jsonl::decode_alert(again[0].second, &a2, &why));
  CHECK(a2.alert_id == by_kind["benchmark_regression"].alert_id);
  CHECK(at(http.get("/v1/alerts").second, "count").number == 3);
  CHECK(count_lines(dir + "/alerts.jsonl") == 4);

  // The decision log names the automatic gates and what they raised.
  auto [w2, wb2] = http.get("/v1/evaluations/" + ev["v2"] + "/why");
  std::string log;
  for (const auto& l : at(wb2, "decisions").items) log += l.text + "\n";
  CHECK(log.find("automatic gate toy-safety: g-") != std::string::npos);
  CHECK(log.find(" FAIL, 1 alert(s)") != std::string::npos);
  CHECK(log.find("raised safety_regression " + by_kind["safety_regression"].alert_id) != std::string::npos);

  zmq_close(sub);
  zmq_ctx_term(zctx);
  served.stop();
  std::filesystem::remove_all(dir);
}

TEST_CASE("evaluation alerts: a broken safety cap, and dimensions without a kind") {
  eval::GateDecision d;
  d.verdict = eval::Verdict::kFail;
  d.policy = "safety-release";
  d.policy_version = "1";
  d.candidate_evaluation = "ev-c";
  d.baseline_evaluation = "ev-b";
  d.alpha = 0.05;
  eval::MetricDecision cap;
  cap.metric = "harmful_response_rate";
  cap.dimension = eval::Dimension::kSafety;
  cap.hard = true;
  cap.method = eval::GateMethod::kCapOnly;
  cap.verdict = eval::Verdict::kFail;
  cap.candidate = 2.0 / 24;
  cap.cap = 0.15;
  cap.cap_upper = 0.2414;
  cap.cap_events = 2;
  cap.cap_n = 24;
  cap.cap_bound = "clopper-pearson";
  cap.n = 24;
  eval::MetricDecision cost = cap;
  cost.metric = "usd_per_item";
  cost.dimension = eval::Dimension::kCost;
  cost.cap.reset();
  cost.margin = 0.1;
  eval::MetricDecision passed = cap;
  passed.metric = "jailbreak_success_rate";
  passed.verdict = eval::Verdict::kPass;
  d.metrics = {cap, cost, passed};
  eval::service::GateAlertContext c{"chat", "v7", "chat:v6", "g-0123456789abcdef", 1767225600000000000};
  auto alerts = eval::service::gate_alerts(d, c);
  REQUIRE(alerts.size() == 1);  // cost has no alert kind; a passed metric raises none
  const Alert& a = alerts[0];
  CHECK(a.kind == "safety_regression");
  CHECK(a.severity == Severity::kCritical);
  CHECK(a.value.value_or(0) == doctest::Approx(0.2414));
  CHECK(a.threshold.value_or(0) == doctest::Approx(0.15));
  CHECK(a.time_ns == 1767225600000000000);
  CHECK(a.alert_id == make_evaluation_alert_id("safety_regression", "chat", "v7", "ev-c", "harmful_response_rate"));
  CHECK(a.summary ==
        "SAFETY REGRESSION: chat:v7 harmful_response_rate is 0.08333 (2 of 24), its 95% clopper-pearson upper bound "
        "0.2414 is above the cap 0.15 (gate safety-release v1, g-0123456789abcdef)");
  std::map<std::string, double> attrs(a.attrs.begin(), a.attrs.end());
  CHECK(attrs.at("cap_events") == 2);
  CHECK(attrs.at("cap_n") == 24);
  CHECK(attrs.at("hard") == 1);
  CHECK(attrs.count("std_error") == 0);  // no comparison with the baseline
  // Not FAIL: nothing.
  d.verdict = eval::Verdict::kInconclusive;
  CHECK(eval::service::gate_alerts(d, c).empty());
}
