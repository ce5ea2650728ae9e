// Live end to end over real ZeroMQ sockets: `runlens run` receives Cap'n Proto
// batches, `runlens tail` prints the alert stream, `runlens record` records
// the same stream, and replaying the recording gives the live run's alerts.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "formats/capnp_codec.h"
#include "formats/input_reader.h"
#include "tests/cli/child_process.h"
#include "tests/operators/operator_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

const std::string kSrc = RUNLENS_SOURCE_DIR;

// The golden straggler input, as Cap'n Proto batches of `per_batch` events.
std::vector<std::string> batches(const std::string& jsonl, size_t per_batch) {
  std::string error;
  auto reader = InputReader::open(jsonl, &error);
  REQUIRE(reader);
  testing::CollectDeadLetters dl;
  std::vector<Record> rows;
  std::vector<uint64_t> pos;
  while (reader->next(&rows, &pos, 1 << 20, dl, "test")) {
  }
  REQUIRE(dl.letters.empty());
  std::vector<std::string> out;
  for (size_t i = 0; i < rows.size(); i += per_batch) {
    out.push_back(capnpc::encode_batch(rows.data() + i, std::min(per_batch, rows.size() - i)));
  }
  return out;
}

}  // namespace

TEST_CASE("live: run + tail + record over ZeroMQ, and the recording replays to the same alerts") {
  auto dir = std::filesystem::temp_directory_path() / ("runlens-live-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string d = dir.string();
  std::string listen = "ipc://" + d + "/in.sock", publish = "ipc://" + d + "/alerts.sock",
              record_ep = "ipc://" + d + "/rec.sock";

  pid_t run = spawn({"run", "--out", d + "/live", "--threads", "2", "--set", "RUNLENS_LISTEN=" + listen, "--set",
                     "RUNLENS_PUBLISH=" + publish},
                    d + "/run.log");
  pid_t rec = spawn({"record", "--bind", record_ep, "--out", d + "/live.rlrec"}, d + "/record.log");
  REQUIRE(wait_for([&] {
    return std::filesystem::exists(d + "/in.sock") && std::filesystem::exists(d + "/alerts.sock") &&
           std::filesystem::exists(d + "/rec.sock");
  }));
  pid_t tail = spawn({"tail", "--connect", publish, "--kind", "straggler", "--count", "1"}, d + "/tail.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let the subscriber join

  {
    zmq::context_t ctx(1);
    zmq::socket_t to_run(ctx, zmq::socket_type::push), to_rec(ctx, zmq::socket_type::push);
    to_run.set(zmq::sockopt::linger, 5000);
    to_rec.set(zmq::sockopt::linger, 5000);
    to_run.connect(listen);
    to_rec.connect(record_ep);
    for (const auto& b : batches(kSrc + "/tests/golden/straggler/input.jsonl", 97)) {
      REQUIRE(to_run.send(zmq::buffer(b), zmq::send_flags::none));
      REQUIRE(to_rec.send(zmq::buffer(b), zmq::send_flags::none));
    }
    // A frame that is not a runlens batch is dead-lettered, not fatal.
    std::string junk = "definitely not cap'n proto";
    REQUIRE(to_run.send(zmq::buffer(junk), zmq::send_flags::none));
  }
  // The straggler alert is published while the run is live, before any shutdown.
  CHECK(wait_exit(tail, 60) == 0);
  std::string tailed = read_file(d + "/tail.log");
  CHECK(tailed.find("\"kind\":\"straggler\"") != std::string::npos);
  CHECK(tailed.find("\"rank\":5") != std::string::npos);

  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(run, SIGINT);
  kill(rec, SIGINT);
  CHECK(wait_exit(run) == 0);
  CHECK(wait_exit(rec) == 0);
  // `run` ends with the counters, drops by priority per node among them (none here).
  std::string run_log = read_file(d + "/run.log");
  CHECK_MESSAGE(run_log.find("drop.P0  drop.P1  drop.P2  drop.P3") != std::string::npos, run_log);
  CHECK_MESSAGE(run_log.find("join             rank_join") != std::string::npos, run_log);

  // Live gives the replay's alerts: the golden expectation, byte for byte.
  std::string expected = read_file(kSrc + "/tests/golden/straggler/expected_alerts.jsonl");
  CHECK(read_file(d + "/live/alerts.jsonl") == expected);
  std::string dead = read_file(d + "/live/dead_letter.jsonl");
  CHECK_MESSAGE(dead.find("frame") != std::string::npos, dead);

  pid_t replay = spawn({"replay", d + "/live.rlrec", "--quiet", "--out", d + "/replayed", "--set",
                        "RUNLENS_PUBLISH=ipc://" + d + "/replay-pub.sock"},
                       d + "/replay.log");
  CHECK(wait_exit(replay) == 0);
  CHECK(read_file(d + "/replayed/alerts.jsonl") == expected);
  std::filesystem::remove_all(dir);
}

TEST_CASE("live: a port already in use is a clear error, exit 2") {
  auto dir = std::filesystem::temp_directory_path() / ("runlens-busy-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string d = dir.string();
  zmq::context_t ctx(1);
  zmq::socket_t holder(ctx, zmq::socket_type::pull);
  holder.bind("tcp://127.0.0.1:*");
  std::string taken = holder.get(zmq::sockopt::last_endpoint);
  pid_t run =
      spawn({"run", "--out", d, "--set", "RUNLENS_LISTEN=" + taken, "--set", "RUNLENS_PUBLISH=ipc://" + d + "/p"},
            d + "/run.log");
  CHECK(wait_exit(run) == 2);
  CHECK(read_file(d + "/run.log").find("cannot bind " + taken) != std::string::npos);
  std::filesystem::remove_all(dir);
}
