// runlens eval: score's numbers against hand-computed ones (the service's
// aggregator, offline), and the commands that talk to the service against
// a small HTTP server in this test standing in for it: what they send, what
// they print, and their errors (unreachable, 404, bad flags).
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "formats/sha256.h"
#include "tests/cli/child_process.h"

namespace {

using runlens::testing::scratch_dir;
using runlens::testing::write_text;

const std::string kBin = RUNLENS_BINARY;

runlens::testing::ShellResult sh(const std::string& args) { return runlens::testing::shell(kBin + " " + args); }

// Four items in two shards of two; metrics of four aggregation kinds.
const char* kSuite = R"(suite: tiny-v1
benchmark: tiny
version: "1"
evaluator: runlens-eval-classify-v1
dataset:
  id: tiny
  version: "1"
  sha256: 46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a
  items: 4
  first_item: 10
prompt:
  template: "{x}"
  version: v1
metrics:
  - accuracy
  - f1: {average: macro}
  - perplexity
  - pass@k: {k: [1, 2]}
partition_size: 2
priority: P2
workers: {pool: cpu, memory: 512MiB}
)";

// accuracy 1 0 1 1; (true, predicted) (0,0) (1,0) (1,1) (0,0); (loglik, tokens)
// (-2,2) (-4,2) (-1,1) (-3,3); (n, c) (2,1) (2,0) (2,2) (2,1).
const char* kResults = R"({"item":10,"stats":[1,0,0,-2,2,2,1]}
{"item":11,"stats":[0,1,0,-4,2,2,0],"itemHash":"ignored"}

{"item":13,"stats":[1,0,0,-3,3,2,1]}
{"item":12,"stats":[1,1,1,-1,1,2,2]}
)";

TEST_CASE("eval score: the service's aggregation, offline, against hand-computed numbers") {
  std::string d = scratch_dir("score");
  std::string suite = write_text(d, "suite.yaml", kSuite);
  auto r = sh("eval score --suite " + suite + " " + write_text(d, "r.jsonl", kResults));
  CHECK(r.code == 0);
  // accuracy: mean 3/4, sd 0.5, stderr 0.5/2. f1 macro: label 0 2TP/(2TP+FP+FN) = 4/5, label 1 2/3, mean 0.733.
  // perplexity exp(10/8), stderr exp(10/8) sqrt(3.125 / 3 / 4) / 2 (residuals .5 -1.5 .25 .75). pass@1: per problem c/n
  // = .5 0 1 .5; pass@2: 1 0 1 1.
  CHECK(r.output ==
        "suite tiny-v1: COMPLETED, 4 of 4 items in 2 of 2 shards\n"
        "  metric             value         n      stderr\n"
        "  accuracy            0.75         4        0.25\n"
        "  f1              0.733333         4           -\n"
        "  perplexity       3.49034         4    0.890579\n"
        "  pass@1               0.5         4    0.204124\n"
        "  pass@2              0.75         4        0.25\n");

  auto j = sh("eval score --json --suite " + suite + " " + d + "/r.jsonl");
  CHECK(j.code == 0);
  CHECK(j.output.find(R"({"suite":"tiny-v1","status":"COMPLETED","items":4,"shards":2,"missingShards":[],)"
                      R"("metrics":[{"name":"accuracy","value":0.75,"n":4,"stderr":0.25},)") == 0);
  CHECK(j.output.find(R"({"name":"f1","value":0.7333333333333334,"n":4,"stderr":"NaN"})") != std::string::npos);
}

TEST_CASE("eval score: a shard with no items leaves the evaluation PARTIAL, naming the shard") {
  std::string d = scratch_dir("partial");
  auto r = sh(
      "eval score --suite " + write_text(d, "suite.yaml", kSuite) + " " +
      write_text(d, "r.jsonl", "{\"item\":10,\"stats\":[1,0,0,-2,2,2,1]}\n{\"item\":11,\"stats\":[0,1,0,-4,2,2,0]}\n"));
  CHECK(r.code == 0);
  CHECK(r.output.find("suite tiny-v1: PARTIAL, 2 of 4 items in 1 of 2 shards\nmissing shards: 1\n") == 0);
}

TEST_CASE("eval score: malformed lines and results are errors naming the line or the shard") {
  std::string d = scratch_dir("bad");
  std::string suite = write_text(d, "suite.yaml", kSuite);
  struct Case {
    std::string results;
    int code;
    std::string message;
  };
  const Case cases[] = {
      {"{\"item\":10,\"stats\":[1,0,0,-2,2,2,1]}\nnot json\n", 2, "r.jsonl:2:1: error: not JSON at column 1"},
      {"{\"item\":14,\"stats\":[1,0,0,-2,2,2,1]}\n", 2,
       "r.jsonl:1:1: error: item 14 is outside the suite's items [10, 14)"},
      {"{\"item\":10,\"stats\":[1,0]}\n", 2,
       "r.jsonl:1:1: error: item 10 has 2 statistics; the suite's metrics take 7"},
      {"{\"stats\":[1]}\n", 2, "r.jsonl:1:1: error: expected {\"item\": INTEGER, \"stats\": [NUMBER, ...]}"},
      {"{\"item\":10,\"stats\":[1,0,0,-2,2,2,\"x\"]}\n", 2,
       "r.jsonl:1:1: error: item 10: statistics must be numbers, got string"},
      {"{\"item\":10,\"stats\":[1,0,0,-2,2,2,1]}\n{\"item\":10,\"stats\":[1,0,0,-2,2,2,1]}\n", 1,
       "runlens eval score: result for shard 0 of score (attempt 1 from " + d +
           "/r.jsonl) rejected: item 10 appears more than once"},
      {"{\"item\":10,\"stats\":[1,0,0,-2,2,2,1]}\n{\"item\":11,\"stats\":[0.5,1,0,-4,2,2,0]}\n", 1,
       "rejected: accuracy of item 11: score 0.5 must be 0 or 1"},
      {"{\"item\":10,\"stats\":[1,0,0,2,2,2,1]}\n{\"item\":11,\"stats\":[0,1,0,-4,2,2,0]}\n", 1,
       "rejected: perplexity of item 10: log-likelihood 2 must be finite and at most 0"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.results);
    auto r = sh("eval score --suite " + suite + " " + write_text(d, "r.jsonl", c.results));
    CHECK(r.code == c.code);
    CHECK(r.output.find(c.message) != std::string::npos);
  }
  auto missing = sh("eval score --suite " + suite + " " + d + "/none.jsonl");
  CHECK(missing.code == 2);
  CHECK(missing.output.find("cannot open " + d + "/none.jsonl") != std::string::npos);
  auto bad_suite = sh("eval score --suite " + write_text(d, "s2.yaml", "suite: x\n") + " " + d + "/r.jsonl");
  CHECK(bad_suite.code == 2);
  CHECK(bad_suite.output.find("s2.yaml:") != std::string::npos);
}

// An HTTP server in this process that answers like the service and records requests.
class FakeService {
 public:
  FakeService() {
    server_.Get(R"(/v1/evaluations/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::string id = req.matches[1];
      if (id != "ev-7") {
        res.status = 404;
        res.set_content(R"({"error":"no evaluation )" + id + R"("})", "application/json");
        return;
      }
      const bool done = ++polls_ >= 3;
      res.set_content(
          std::string(R"({"evaluationId":"ev-7","status":")") + (done ? "COMPLETED" : "RUNNING") +
              R"(","modelVersion":"digits-mlp:v1","checkpointId":"ck-a","benchmarkSuite":"digits-heldout-v1",)"
              R"("benchmark":"sklearn-digits","benchmarkVersion":"2026-12","cachedFrom":null,)"
              R"("startedAt":"2026-12-01T11:25:00.123Z","completedAt":null,"modelId":"digits-mlp",)"
              R"("checkpointHash":"ab12","datasetHash":"46ab","temperature":0,"decoding":{"temperature":0},)"
              R"("libraryVersions":{"torch":"1.13.1"},"error":null,)"
              R"("progress":{"total":2,"completed":2,"cached":0,"running":0,"queued":0,"failed":0},)"
              R"("shards":[{"shard":0,"items":[1437,1497],"status":"COMPLETED","attempt":1,"worker":"w1"},)"
              R"({"shard":1,"items":[1497,1557],"status":"COMPLETED","attempt":2,"worker":"w2"}],)"
              R"("metrics":[{"name":"accuracy","value":0.95,"n":360,"stdError":0.0115},)"
              R"({"name":"f1","value":0.948,"n":360,"stdError":null}],"missingShards":[]})",
          "application/json");
    });
    server_.Get(R"(/v1/evaluations/([^/]+)/why)", [](const httplib::Request& req, httplib::Response& res) {
      if (req.matches[1] != "ev-7") {
        res.status = 404;
        res.set_content(R"({"error":"no evaluation )" + std::string(req.matches[1]) + R"("})", "application/json");
        return;
      }
      res.set_content(
          R"J({"evaluationId":"ev-7","decisions":["t=0 queued P2","t=1 shard 0 -> w1 (checkpoint loaded)"]})J",
          "application/json");
    });
    server_.Post("/v1/evaluations", [this](const httplib::Request& req, httplib::Response& res) {
      record(req.body);
      res.status = 201;
      res.set_content(R"({"evaluationId":"ev-7","status":"QUEUED"})", "application/json");
    });
    server_.Post("/v1/checkpoints", [this](const httplib::Request& req, httplib::Response& res) {
      record(req.body);
      if (req.body.find("\"modelVersion\":\"nope:v1\"") != std::string::npos) {
        res.status = 404;
        res.set_content(R"({"error":"unknown model version nope:v1"})", "application/json");
        return;
      }
      res.status = 201;
      res.set_content(R"({"checkpointId":"ck-a","evaluations":[{"evaluationId":"ev-8","status":"QUEUED"}]})",
                      "application/json");
    });
    server_.Post("/v1/gates/evaluate", [this](const httplib::Request& req, httplib::Response& res) {
      record(req.body);
      res.status = 201;
      res.set_content(
          R"({"gateId":"g-0123456789abcdef","decidedNs":1,"alpha":0.05,"baselineEvaluation":"ev-1",)"
          R"("candidateEvaluation":"ev-2","hardFailure":false,"items":40,"metrics":[{"alpha":0.05,)"
          R"("alphaHolm":0.05,"baseline":0.75,"candidate":0.4,"difference":-0.35,"dimension":"quality",)"
          R"("direction":"higher_is_better","hard":false,"itemsNeeded":0,"lower":-0.4789,"margin":0.05,)"
          R"("method":"paired-mean","metric":"accuracy","n":40,"pInferior":0.0001,"reason":"",)"
          R"("stdError":0.07638,"upper":-0.2211,"verdict":"FAIL"}],"policy":"toy-release","policyVersion":"3",)"
          R"("reasons":["accuracy is shown inferior"],"refused":"","verdict":"FAIL"})",
          "application/json");
    });
    server_.Post(
        R"(/v1/models/([^/]+)/versions/([^/]+)/promote)", [this](const httplib::Request& req, httplib::Response& res) {
          record(req.body);
          {
            std::lock_guard<std::mutex> l(mu_);
            last_user_ = req.get_header_value("X-Runlens-User");
          }
          if (req.body.find("\"gated\"") != std::string::npos) {
            res.status = 409;
            res.set_content(R"({"error":"cannot move m:v2 to gated: gate g-1 is FAIL","status":409,"gateId":"g-1",)"
                            R"("reasons":["accuracy is shown inferior","f1 is inconclusive"]})",
                            "application/json");
            return;
          }
          res.set_content(R"({"modelVersion":"m:v2","to":"canary","gateId":"g-2","audit":[{"modelVersion":)"
                          R"("m:v2","from":"gated","to":"canary","user":"dana","gateId":"g-2","reason":""}]})",
                          "application/json");
        });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeService() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string last_body() {
    std::lock_guard<std::mutex> l(mu_);
    return last_body_;
  }
  int polls() const { return polls_; }
  std::string last_user() {
    std::lock_guard<std::mutex> l(mu_);
    return last_user_;
  }

 private:
  void record(const std::string& body) {
    std::lock_guard<std::mutex> l(mu_);
    last_body_ = body;
  }
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::string last_body_, last_user_;
  std::atomic<int> polls_{0};
};

TEST_CASE("eval submit --wait polls until the evaluation ends and prints it with its provenance") {
  FakeService svc;
  auto r = sh("eval submit --server " + svc.url() +
              " --model-version digits-mlp:v1 --checkpoint ck-a --suite digits-heldout-v1 --wait --timeout 30");
  CHECK(r.code == 0);
  CHECK(svc.last_body() ==
        R"({"modelVersion":"digits-mlp:v1","checkpointId":"ck-a","benchmarkSuite":"digits-heldout-v1"})");
  CHECK(svc.polls() == 3);
  INFO(r.output);
  CHECK(r.output.find("ev-7 QUEUED\nevaluation ev-7: COMPLETED\n") == 0);
  CHECK(r.output.find("  modelVersion      digits-mlp:v1\n  checkpointId      ck-a\n") != std::string::npos);
  CHECK(r.output.find("  cachedFrom        -\n") != std::string::npos);
  CHECK(r.output.find("  error") == std::string::npos);  // null: not shown
  CHECK(r.output.find("progress: total 2, completed 2, cached 0, running 0, queued 0, failed 0\n") !=
        std::string::npos);
  CHECK(r.output.find("  accuracy          0.95       360      0.0115\n") != std::string::npos);
  CHECK(r.output.find("  f1               0.948       360           -\n") != std::string::npos);
  CHECK(r.output.find("shards\n  shard  items             status     attempt  worker\n"
                      "      0  [1437, 1497)      COMPLETED        1  w1\n"
                      "      1  [1497, 1557)      COMPLETED        2  w2\n") != std::string::npos);
  CHECK(r.output.find("provenance\n  modelId           digits-mlp\n  checkpointHash    ab12\n") != std::string::npos);
  CHECK(r.output.find("  libraryVersions   {\"torch\":\"1.13.1\"}\n") != std::string::npos);
}

TEST_CASE("eval show, why and register against the service; --json prints the answer as it is") {
  FakeService svc;
  auto show = sh("eval show ev-7 --json --server " + svc.url());
  CHECK(show.code == 0);
  CHECK(show.output.find(R"({"evaluationId":"ev-7","status":"RUNNING",)") == 0);

  auto why = sh("eval why ev-7 --server " + svc.url());
  CHECK(why.code == 0);
  CHECK(why.output == "t=0 queued P2\nt=1 shard 0 -> w1 (checkpoint loaded)\n");

  std::string d = scratch_dir("register");
  std::string file = write_text(d, "model.pt", "weights");
  auto reg = sh("eval register --server " + svc.url() + " --checkpoint ck-a --file " + file +
                " --run r918 --step 1200 --parent ck-0 --model-version digits-mlp:v1");
  CHECK(reg.code == 0);
  const std::string sha = runlens::sha256::hex("weights");
  CHECK(svc.last_body() == R"({"checkpointId":"ck-a","sha256":")" + sha + R"(","uri":"file://)" + file +
                               R"(","runId":"r918","step":1200,"parentId":"ck-0","modelVersion":"digits-mlp:v1"})");
  CHECK(reg.output == "registered checkpoint ck-a (sha256 " + sha + ") for digits-mlp:v1\n  ev-8 QUEUED\n");
}

TEST_CASE("gate prints the decision as a table and exits 1 on FAIL; eval promote sends the user, prints reasons") {
  FakeService svc;
  auto g = sh("gate --server " + svc.url() + " --policy toy-release --candidate ev-2 --baseline ev-1");
  CHECK(g.code == 1);
  CHECK(svc.last_body() == R"({"policy":"toy-release","candidate":"ev-2","baseline":"ev-1"})");
  INFO(g.output);
  CHECK(g.output ==
        "gate g-0123456789abcdef toy-release v3: FAIL\n"
        "  candidate ev-2, baseline ev-1, 40 paired items, alpha 0.05\n"
        "  metric           dimension    candidate   baseline  difference         se      bound   margin  verdict\n"
        "  accuracy         quality            0.4       0.75       -0.35    0.07638    -0.4789     0.05  FAIL\n"
        "reasons\n"
        "  accuracy is shown inferior\n");
  auto gj = sh("gate --json --server " + svc.url() + " --policy toy-release --candidate ev-2 --baseline ev-1");
  CHECK(gj.code == 1);
  CHECK(gj.output.find(R"({"gateId":"g-0123456789abcdef",)") == 0);

  auto refused = sh("eval promote --server " + svc.url() + " --model-version m:v2 --to gated --user erin");
  CHECK(refused.code == 1);
  CHECK(svc.last_user() == "erin");
  CHECK(svc.last_body() == R"({"to":"gated"})");
  CHECK(refused.output.find("runlens eval promote: POST /v1/models/m/versions/v2/promote answered 409: cannot move "
                            "m:v2 to gated: gate g-1 is FAIL\n  accuracy is shown inferior\n  f1 is inconclusive\n") !=
        std::string::npos);
  auto ok = sh("eval promote --server " + svc.url() + " --model-version m:v2 --to canary --gate g-2 --user dana");
  CHECK(ok.code == 0);
  CHECK(svc.last_body() == R"({"to":"canary","gateId":"g-2"})");
  CHECK(ok.output == "m:v2: gated -> canary by dana (gate g-2)\n");
  auto bad = sh("eval promote --server " + svc.url() + " --model-version m:v2 --to shipped");
  CHECK(bad.code == 2);
}

TEST_CASE("eval commands: unreachable service, 404 and bad flags are one clear line each") {
  FakeService svc;
  struct Case {
    std::string args;
    int code;
    std::string message;
  };
  int closed_port = 0;
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    closed_port = ntohs(a.sin_port);
    close(fd);
  }  // bound and closed, never listening: nothing answers there
  const std::string dead = "http://127.0.0.1:" + std::to_string(closed_port);
  const Case cases[] = {
      {"eval show ev-7 --server " + dead, 1,
       "runlens eval show: cannot reach the service at " + dead +
           " (connection refused): is `runlens serve` running there?"},
      {"eval show ev-404 --server " + svc.url(), 1,
       "runlens eval show: no evaluation ev-404 at " + svc.url() + ": no evaluation ev-404"},
      {"eval why ev-404 --server " + svc.url(), 1, "runlens eval why: no evaluation ev-404 at "},
      {"eval register --server " + svc.url() + " --checkpoint c --sha256 " + std::string(64, 'a') +
           " --model-version nope:v1",
       1, "runlens eval register: no model version at " + svc.url() + ": unknown model version nope:v1"},
      {"eval show ev-7 --server localhost:8080", 2,
       "--server: expected http://HOST:PORT (e.g. http://127.0.0.1:8080), got 'localhost:8080'"},
      {"eval submit --server " + svc.url() + " --model-version digits --checkpoint c --suite s", 2,
       "--model-version: expected MODEL:VERSION (e.g. llama-x:v142), got 'digits'"},
      {"eval submit --server " + svc.url() + " --model-version a:b --checkpoint c --suite s --timeout 5", 2,
       "--timeout requires --wait"},
      {"eval register --server " + svc.url() + " --checkpoint c --sha256 ABC --model-version a:b", 2,
       "--sha256: expected 64 lowercase hexadecimal digits, got 'ABC'"},
      {"eval register --server " + svc.url() + " --checkpoint c --model-version a:b", 2,
       "give exactly one: --file PATH (hashed here) or --sha256 HEX"},
      {"eval register --server " + svc.url() + " --checkpoint c --file /nonexistent/x --model-version a:b", 2,
       "--file: cannot open '/nonexistent/x'"},
      {"eval worker --connect tcp://127.0.0.1:1 --memory lots", 2,
       "--memory: expected a size like 4GiB or 512MiB, got 'lots'"},
      {"eval worker --connect 127.0.0.1:1", 2, "--connect: expected a ZeroMQ endpoint such as tcp://127.0.0.1:5571"},
      {"eval worker --connect tcp://127.0.0.1:1 --runner magic", 2, "--runner: magic not in {"},
      {"eval", 2, "A subcommand is required"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    auto r = sh(c.args);
    INFO(r.output);
    CHECK(r.code == c.code);
    CHECK(r.output.find(c.message) != std::string::npos);
  }
}

}  // namespace
