// `runlens serve` as a process: the workers endpoint it prints, the
// evaluation API on its port, a SIGKILL mid-evaluation and a restart on the
// same store (nothing queued is lost, no completed shard runs again), and a
// clean stop on SIGTERM.
#include <httplib.h>

#include <regex>

#include "tests/cli/child_process.h"
#include "tests/eval_service/eval_fixture.h"
#include "tests/read_file.h"

using namespace runlens;
using namespace runlens::testing;
namespace wire = runlens::eval::wire;

namespace {

struct Serve {
  pid_t pid = -1;
  std::string log, endpoint;
  int port = 0;
  Serve(const std::string& url, const std::string& suites, const std::string& log_path) : log(log_path) {
    pid = spawn({"serve", "--store", url, "--port", "0", "--suites", suites, "--workers", "tcp://127.0.0.1:0",
                 "--heartbeat-timeout", "500"},
                log);
    std::smatch m;
    REQUIRE_MESSAGE(
        wait_for(
            [&] {
              std::string text = read_file(log);
              static const std::regex re(
                  R"(evaluation workers connect to (tcp://127\.0\.0\.1:\d+)[^\n]*\nserving .* on http://127\.0\.0\.1:(\d+)/v1/)");
              if (!std::regex_search(text, m, re)) return false;
              endpoint = m[1];
              port = std::stoi(m[2]);
              return true;
            },
            20),
        read_file(log));
  }
  ~Serve() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  int stop(int sig) {
    kill(pid, sig);
    int rc = wait_exit(pid, 20);
    pid = -1;
    return rc;
  }
};

std::string field(const std::string& body, const std::string& name) {
  std::smatch m;
  std::regex re("\"" + name + "\":\"([^\"]*)\"");
  return std::regex_search(body, m, re) ? std::string(m[1]) : std::string();
}

}  // namespace

TEST_CASE("runlens serve: killed with -9 mid-evaluation and restarted, it loses nothing and re-runs nothing done") {
  std::string dir = temp_dir("restart");
  std::string data = dir + "/toy.jsonl";
  SuiteSpec spec;
  spec.dataset_path = data;
  spec.sha256 = write_dataset(data, 40);
  std::filesystem::create_directories(dir + "/suites");
  write_file(dir + "/suites/toy.yaml", suite_yaml(spec));
  const std::string url = store::store_url_of_file(dir + "/runlens.db");
  { store::open_store(url); }

  std::string id;
  std::set<int> done;
  {
    Serve serve(url, dir + "/suites", dir + "/serve1.log");
    httplib::Client http("127.0.0.1", serve.port);
    auto ck =
        http.Post("/v1/checkpoints",
                  R"({"checkpointId":"ck-a","sha256":")" + std::string(64, 'a') + R"(","modelVersion":"toy-mlp:v1"})",
                  "application/json");
    REQUIRE(ck);
    CHECK(ck->status == 201);
    auto ev =
        http.Post("/v1/evaluations", R"({"modelVersion":"toy-mlp:v1","checkpointId":"ck-a","benchmarkSuite":"toy-v1"})",
                  "application/json");
    REQUIRE(ev);
    REQUIRE_MESSAGE(ev->status == 201, ev->body);
    id = field(ev->body, "evaluationId");
    REQUIRE_FALSE(id.empty());
    TestWorker w(serve.endpoint, "w1");
    w.hello();
    for (int i = 0; i < 2; ++i) {
      auto a = w.assignment();
      REQUIRE(a);
      w.send(w.result(*a));
      auto k = w.ack();
      REQUIRE(k);
      REQUIRE(k->outcome == wire::AckOutcome::kAccepted);
      done.insert(a->shard);
    }
    auto held = w.assignment();  // running when the service dies
    REQUIRE(held);
    CHECK(serve.stop(SIGKILL) == 128 + SIGKILL);
  }
  CHECK(status_of(url, id) == "RUNNING");

  Serve serve(url, dir + "/suites", dir + "/serve2.log");
  CHECK(read_file(serve.log).find("runlens serve: restart: " + id + ": resumed, 2 shards done, 2 queued again") !=
        std::string::npos);
  TestWorker w(serve.endpoint, "w2");
  w.hello();
  w.serve([&] { return status_of(url, id) == "COMPLETED"; }, 10000);
  CHECK(status_of(url, id) == "COMPLETED");
  REQUIRE(w.assigned.size() == 2);
  int highest = 0;
  for (const auto& a : w.assigned) {
    CHECK(done.count(a.shard) == 0);
    highest = std::max(highest, a.attempt);
  }
  CHECK(highest == 2);  // the shard that was running continues at attempt 2
  store::Store s = store::open_store(url, {store::OpenMode::kReadOnly});
  CHECK(s.evals->items(id, std::nullopt).size() == 40);
  httplib::Client http("127.0.0.1", serve.port);
  auto why = http.Get(("/v1/evaluations/" + id + "/why").c_str());
  REQUIRE(why);
  CHECK(why->body.find("resumed after a restart") != std::string::npos);
  CHECK(serve.stop(SIGTERM) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("eval service: a worker process killed with -9 mid-shard: its shard is retried on another worker") {
  std::string dir = temp_dir("kill-worker");
  std::string data = dir + "/toy.jsonl";
  SuiteSpec spec;
  spec.dataset_path = data;
  spec.sha256 = write_dataset(data, 10);
  spec.items = 10;
  std::filesystem::create_directories(dir + "/suites");
  write_file(dir + "/suites/toy.yaml", suite_yaml(spec));
  const std::string url = store::store_url_of_file(dir + "/runlens.db");
  eval::service::ServiceOptions so;
  so.store_url = url;
  so.suite_paths = {dir + "/suites"};
  so.endpoint = "tcp://127.0.0.1:0";
  so.heartbeat_timeout_ms = 400;
  eval::service::EvalService svc(so);
  std::string error;
  REQUIRE_MESSAGE(svc.start(&error), error);
  svc.register_checkpoint({checkpoint_record("ck-a", 'a'), "toy-mlp:v1"});
  auto o = svc.submit({"toy-mlp:v1", "ck-a", "toy-v1", std::nullopt, std::nullopt});
  REQUIRE(o.status == "QUEUED");

  // A worker in another process (Python, pyzmq): it takes the shard, says so, and heartbeats without answering.
  const std::string script = dir + "/worker.py";
  write_file(script,
             "import json, sys, time, zmq\n"
             "s = zmq.Context().socket(zmq.DEALER)\n"
             "s.connect(sys.argv[1])\n"
             "s.send(json.dumps({'type': 'hello', 'protocol': 1, 'worker': 'py1', 'workerVersion': 'py/1', "
             "'memoryMib': 1024}).encode())\n"
             "while True:\n"
             "    if s.poll(50):\n"
             "        m = json.loads(s.recv())\n"
             "        if m['type'] == 'assign':\n"
             "            print('assigned', m['shard'], m['attempt'], flush=True)\n"
             "    s.send(json.dumps({'type': 'heartbeat', 'worker': 'py1'}).encode())\n");
  const std::string out = dir + "/worker.out";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FILE* f = std::fopen(out.c_str(), "w");
    if (f) dup2(fileno(f), 1), dup2(fileno(f), 2);
    execl("/usr/bin/python3", "python3", script.c_str(), svc.endpoint().c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  bool assigned = wait_for([&] { return read_file(out).find("assigned 0 1") != std::string::npos; }, 20);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  REQUIRE_MESSAGE(assigned, read_file(out));

  TestWorker w(svc.endpoint(), "w2");
  w.hello();
  w.serve([&] { return status_of(url, o.evaluation_id) == "COMPLETED"; }, 10000);
  REQUIRE(w.assigned.size() == 1);
  CHECK(w.assigned[0].attempt == 2);
  auto why = svc.why(o.evaluation_id);
  REQUIRE(why);
  std::string all;
  for (const auto& l : *why) all += l + "\n";
  CHECK(all.find("worker py1 missed heartbeats") != std::string::npos);
  CHECK(all.find("lost shard 0 (attempt 1)") != std::string::npos);
  svc.stop();
  std::filesystem::remove_all(dir);
}

TEST_CASE("runlens serve: a workers endpoint already in use is a clear error, exit 2") {
  std::string dir = temp_dir("busy-endpoint");
  const std::string url = store::store_url_of_file(dir + "/runlens.db");
  { store::open_store(url); }
  void* ctx = zmq_ctx_new();
  void* taken = zmq_socket(ctx, ZMQ_ROUTER);
  REQUIRE(zmq_bind(taken, "tcp://127.0.0.1:0") == 0);
  char ep[256];
  size_t len = sizeof ep;
  REQUIRE(zmq_getsockopt(taken, ZMQ_LAST_ENDPOINT, ep, &len) == 0);
  auto r = shell("timeout 20 " + std::string(RUNLENS_BINARY) + " serve --store " + url + " --port 0 --suites " + dir +
                 " --workers " + ep);
  CHECK(r.code == 2);
  CHECK(r.output.find(std::string("runlens serve: cannot bind the workers endpoint ") + ep +
                      ": Address already in use") != std::string::npos);
  zmq_close(taken);
  zmq_ctx_term(ctx);
  std::filesystem::remove_all(dir);
}

TEST_CASE("runlens serve --create starts an evaluation service on a store that is not there yet") {
  std::string dir = temp_dir("create");
  std::string url = "sqlite://" + dir + "/new.db";
  pid_t refused = spawn({"serve", "--store", url, "--port", "0", "--workers", "tcp://127.0.0.1:0"}, dir + "/no.log");
  CHECK(wait_exit(refused, 20) == 2);
  CHECK(read_file(dir + "/no.log") ==
        "runlens serve: no store at " + url +
            " (replay or run a pipeline with a timeline sink first, or pass --create to start an empty one)\n");
  CHECK_FALSE(std::filesystem::exists(dir + "/new.db"));

  pid_t pid =
      spawn({"serve", "--store", url, "--create", "--port", "0", "--workers", "tcp://127.0.0.1:0", "--suites", dir},
            dir + "/yes.log");
  int port = 0;
  REQUIRE_MESSAGE(wait_for(
                      [&] {
                        std::smatch m;
                        std::string text = read_file(dir + "/yes.log");
                        static const std::regex re(R"(serving .* on http://127\.0\.0\.1:(\d+)/v1/)");
                        if (!std::regex_search(text, m, re)) return false;
                        port = std::stoi(m[1]);
                        return true;
                      },
                      20),
                  read_file(dir + "/yes.log"));
  CHECK(read_file(dir + "/yes.log").find("runlens serve: created an empty store at " + url + "\n") == 0);
  httplib::Client client("127.0.0.1", port);
  auto health = client.Get("/v1/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  auto evals = client.Get("/v1/evaluations");
  REQUIRE(evals);
  CHECK(evals->status == 200);
  CHECK(evals->body.find("\"count\":0") != std::string::npos);
  kill(pid, SIGTERM);
  CHECK(wait_exit(pid, 20) == 0);
  CHECK(std::filesystem::exists(dir + "/new.db"));
  std::filesystem::remove_all(dir);
}
