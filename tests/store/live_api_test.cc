// The query API of a live run: `runlens run --api-port 0` receives telemetry
// over ZeroMQ and answers from the store its timeline sink is writing, while
// the run is still going (commits every second, readers never wait: WAL).
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <regex>
#include <thread>
#include <zmq.hpp>

#include "formats/capnp_codec.h"
#include "tests/cli/child_process.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("live: runlens run --api-port serves the store while the run is going") {
  std::string d = fresh_dir("live-api");
  std::string listen = "ipc://" + d + "/in.sock";
  pid_t run = spawn({"run", "--out", d + "/out", "--threads", "2", "--api-port", "0", "--set",
                     "RUNLENS_LISTEN=" + listen, "--set", "RUNLENS_PUBLISH=ipc://" + d + "/alerts.sock"},
                    d + "/run.log");
  int port = 0;
  REQUIRE(wait_for([&] {
    std::smatch m;
    std::string log = read_file(d + "/run.log");
    if (!std::regex_search(log, m, std::regex("query API on http://127\\.0\\.0\\.1:(\\d+)/v1/"))) return false;
    port = std::stoi(m[1]);
    return std::filesystem::exists(d + "/in.sock");
  }));
  httplib::Client client("127.0.0.1", port);

  // The first 120 steps of a straggler run; the run does not end.
  synth::Options o = small_run("live-run", 200, 8);
  synth::Fault f;
  std::string why;
  REQUIRE(synth::parse_fault("straggler:rank=3,from=20", &f, &why));
  o.faults.push_back(f);
  auto rows = synth_run(o);
  std::vector<Record> first;
  for (auto& r : rows) {
    if (r.kind() == Kind::kRunEnd) continue;
    if (r.kind() == Kind::kTrain && r.as<Train>().step > 120) break;
    first.push_back(r);
  }
  {
    zmq::context_t ctx(1);
    zmq::socket_t push(ctx, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 5000);
    push.connect(listen);
    for (size_t i = 0; i < first.size(); i += 200) {
      std::string b = capnpc::encode_batch(first.data() + i, std::min<size_t>(200, first.size() - i));
      REQUIRE(push.send(zmq::buffer(b), zmq::send_flags::none));
    }
  }
  // Within the lateness and a commit interval the run is queryable, still RUNNING.
  json::Value run_json;
  CHECK(wait_for([&] {
    auto res = client.Get("/v1/runs/live-run");
    if (!res || res->status != 200) return false;
    run_json = parse_json(res->body);
    return run_json.find("step") && run_json.find("step")->number >= 100;
  }));
  CHECK(run_json.find("status")->text == "RUNNING");
  // The rank rows are flushed by their own window: under a slow build (TSan)
  // they may land a commit after the run row, so wait for them too.
  json::Value top;
  REQUIRE(wait_for([&] {
    auto ranks = client.Get("/v1/runs/live-run/ranks?limit=1");
    if (!ranks || ranks->status != 200) return false;
    top = parse_json(ranks->body);
    return top.items.size() == 1;
  }));
  CHECK(top.items[0].find("rank")->number == 3);
  CHECK(wait_for([&] {
    auto a = client.Get("/v1/alerts?runId=live-run&kind=straggler");
    return a && a->status == 200 && parse_json(a->body).find("count")->number == 1;
  }));

  kill(run, SIGINT);
  CHECK(wait_exit(run) == 0);
  // After the run the store holds what the API showed.
  SqliteFile db(d + "/out/runlens.db");
  CHECK(db.rows("SELECT status FROM runs") == "running\n");
  std::filesystem::remove_all(d);
}
