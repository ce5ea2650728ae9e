// Producer progress end to end (contract v2): `runlens run --record` receives
// batches that declare their producer, seq and watermark (one producer per
// rank, one for the samples without a rank), with a seq gap; the telemetry_gap
// alert reaches alerts.jsonl, the console and the alert stream, the counters
// count the lost batches, rows are released as the producers' watermarks pass
// them (not after lateness or at shutdown), and a replay of the recording
// gives the same alerts, byte for byte.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
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

// Stops a child by its PID when the test ends, pass or fail.
struct Child {
  pid_t pid = -1;
  ~Child() {
    if (pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

struct Frame {
  int64_t first = 0;  // event time of its first event, for interleaving producers
  std::string bytes;
};

// The golden straggler input as SDK-like producers would send it: each rank's
// rows (and the rank-less rows, as one more producer) in time order, in
// batches of `per_batch`, each batch's watermark the time of that producer's
// next event (its exact promise), a final batch each. Producer "rank-3"
// skips `skip` seq numbers after its second batch. Batches of all producers
// are interleaved by their first event.
std::vector<Frame> producer_frames(size_t per_batch, uint64_t skip) {
  std::string error;
  auto reader = InputReader::open(kSrc + "/tests/golden/straggler/input.jsonl", &error);
  REQUIRE(reader);
  testing::CollectDeadLetters dl;
  std::vector<Record> rows;
  std::vector<uint64_t> pos;
  while (reader->next(&rows, &pos, 1 << 20, dl, "test")) {
  }
  std::map<std::string, std::vector<Record>> by_producer;
  for (const Record& r : rows) {
    std::string p = "host";
    if (const Step* s = r.get_if<Step>()) p = "rank-" + std::to_string(s->rank);
    if (const Train* t = r.get_if<Train>(); t && t->has(Train::F::rank)) p = "rank-" + std::to_string(t->rank);
    by_producer[p].push_back(r);
  }
  std::vector<Frame> frames;
  int64_t start = INT64_MAX;
  for (const Record& r : rows) start = std::min(start, r.time_ns);
  for (auto& [producer, list] : by_producer) {
    std::stable_sort(list.begin(), list.end(), [](const Record& a, const Record& b) { return a.time_ns < b.time_ns; });
    // Each producer says hello first, as an emitter does when it starts: a
    // producer the collector has not heard of yet cannot hold its watermark.
    capnpc::BatchProgress hello{producer, 1, start, false};
    frames.push_back({INT64_MIN, capnpc::encode_batch(nullptr, 0, &hello)});
    uint64_t seq = 1;
    for (size_t i = 0; i < list.size(); i += per_batch) {
      size_t end = std::min(list.size(), i + per_batch);
      seq += 1;
      if (producer == "rank-3" && seq == 4) seq += skip;
      capnpc::BatchProgress p{producer, seq, end < list.size() ? list[end].time_ns : list.back().time_ns + 1, false};
      frames.push_back({list[i].time_ns, capnpc::encode_batch(list.data() + i, end - i, &p)});
    }
    capnpc::BatchProgress last{producer, seq + 1, list.back().time_ns + 1, true};
    frames.push_back({list.back().time_ns + 1, capnpc::encode_batch(nullptr, 0, &last)});
  }
  std::stable_sort(frames.begin(), frames.end(), [](const Frame& a, const Frame& b) { return a.first < b.first; });
  return frames;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("producers: progress and a seq gap live, the telemetry_gap alert everywhere, and replay gives the same") {
  std::string d = scratch_dir("producers");
  std::string listen = "ipc://" + d + "/in.sock", publish = "ipc://" + d + "/alerts.sock";
  Child run{spawn({"run", "--out", d + "/live", "--threads", "2", "--record", d + "/live.rlrec", "--set",
                   "RUNLENS_LISTEN=" + listen, "--set", "RUNLENS_PUBLISH=" + publish},
                  d + "/run.log")};
  REQUIRE(
      wait_for([&] { return std::filesystem::exists(d + "/in.sock") && std::filesystem::exists(d + "/alerts.sock"); }));
  Child tail{spawn({"tail", "--connect", publish, "--kind", "telemetry_gap", "--count", "1"}, d + "/tail.log")};
  Child tail_straggler{spawn({"tail", "--connect", publish, "--kind", "straggler", "--count", "1"}, d + "/tail2.log")};
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let the subscribers join
  {
    zmq::context_t ctx(1);
    zmq::socket_t to_run(ctx, zmq::socket_type::push);
    to_run.set(zmq::sockopt::linger, 5000);
    to_run.connect(listen);
    for (const auto& f : producer_frames(3, 2)) REQUIRE(to_run.send(zmq::buffer(f.bytes), zmq::send_flags::none));
  }
  // Every producer sent its final batch: everything is released while the
  // run is live (lateness is 5 s of event time and the data is months old; the
  // idle timeout is 30 s), so the alerts are on the stream before any shutdown.
  CHECK(wait_exit(tail.pid, 20) == 0);
  CHECK(wait_exit(tail_straggler.pid, 20) == 0);
  std::string tailed = read_file(d + "/tail.log");
  CHECK(tailed.find("\"kind\":\"telemetry_gap\"") != std::string::npos);
  CHECK(tailed.find("\"run_id\":\"golden-straggler\"") != std::string::npos);
  CHECK(tailed.find("\"lost_batches\":2") != std::string::npos);
  CHECK(tailed.find("\"producers\":1") != std::string::npos);
  CHECK(read_file(d + "/tail2.log").find("\"rank\":5") != std::string::npos);

  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(run.pid, SIGINT);
  CHECK(wait_exit(run.pid) == 0);
  std::string live = read_file(d + "/live/alerts.jsonl");
  CHECK(count(live, "\"kind\":\"telemetry_gap\",\"severity\"") == 1);  // one per run
  CHECK(count(live, "\"revision\":0,\"kind\":\"straggler\",\"severity\"") == 1);
  CHECK(read_file(d + "/live/dead_letter.jsonl").empty());  // exact promises: nothing late
  std::string log = read_file(d + "/run.log");
  CHECK_MESSAGE(log.find("producers of telemetry: 0 active, 0 went idle, 2 batches lost") != std::string::npos, log);
  CHECK(log.find("telemetry_gap") != std::string::npos);  // the console

  Child replay{spawn({"replay", d + "/live.rlrec", "--out", d + "/replayed", "--set",
                      "RUNLENS_PUBLISH=ipc://" + d + "/replay-pub.sock"},
                     d + "/replay.log")};
  CHECK(wait_exit(replay.pid) == 0);
  CHECK(read_file(d + "/replayed/alerts.jsonl") == live);
  CHECK_MESSAGE(read_file(d + "/replay.log").find("2 batches lost") != std::string::npos, read_file(d + "/replay.log"));
  std::filesystem::remove_all(d);
}

TEST_CASE("producers: a step every rank reported is closed as soon as their watermarks pass it, not after lateness") {
  std::string d = scratch_dir("completeness");
  std::string listen = "ipc://" + d + "/in.sock";
  // An hour of lateness and of timeout: only the producers' watermarks can
  // release the step before the run stops.
  std::string pipeline = write_text(d, "p.yaml",
                                    "version: 1\n"
                                    "name: completeness\n"
                                    "settings:\n"
                                    "  lateness: 1h\n"
                                    "sources:\n"
                                    "  telemetry: {type: zmq, bind: \"${RUNLENS_LISTEN}\"}\n"
                                    "operators:\n"
                                    "  join: {type: rank_join, inputs: [telemetry], timeout: 1h}\n"
                                    "sinks:\n"
                                    "  steps: {type: jsonl, inputs: [join], kinds: [step_record], path: \"" +
                                        d + "/steps.jsonl\"}\n");
  Child run{
      spawn({"run", "--pipeline", pipeline, "--out", d + "/out", "--threads", "2", "--set", "RUNLENS_LISTEN=" + listen},
            d + "/run.log")};
  REQUIRE(wait_for([&] { return std::filesystem::exists(d + "/in.sock"); }));
  const int64_t t0 =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  zmq::context_t ctx(1);
  zmq::socket_t to_run(ctx, zmq::socket_type::push);
  to_run.set(zmq::sockopt::linger, 5000);
  to_run.connect(listen);
  // Each rank is a producer, and a batch's watermark is its clock when it was
  // encoded, as the SDK's is when nothing older waits in its rings: ranks 0-2
  // report step 1 and their batches (or heartbeats) leave at t0 + 5 ms; rank
  // 3 reported at t0 + 4 ms, and its batch, leaving last, promises t0 + 6 ms.
  auto send_rank = [&](int rank) {
    std::vector<Record> rows;
    if (rank == 0) rows.push_back(run_start("live-complete", 4, 8, t0));
    int64_t t = t0 + (rank + 1) * 1'000'000;
    rows.push_back(step("live-complete", rank, 1, 100.0, t));
    capnpc::BatchProgress p{"rank-" + std::to_string(rank), 2, t0 + (rank < 3 ? 5'000'000 : 6'000'000), false};
    std::string bytes = capnpc::encode_batch(rows, &p);
    REQUIRE(to_run.send(zmq::buffer(bytes), zmq::send_flags::none));
  };
  // Emitters say hello when they start (their first heartbeat): the
  // collector knows all four producers before any report.
  for (int rank = 0; rank < 4; ++rank) {
    capnpc::BatchProgress hello{"rank-" + std::to_string(rank), 1, t0, false};
    std::string bytes = capnpc::encode_batch(nullptr, 0, &hello);
    REQUIRE(to_run.send(zmq::buffer(bytes), zmq::send_flags::none));
  }
  for (int rank = 0; rank < 3; ++rank) send_rank(rank);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(read_file(d + "/steps.jsonl").find("\"step\":1") == std::string::npos);  // rank 3 has not reported
  auto sent = std::chrono::steady_clock::now();
  send_rank(3);
  bool closed = wait_for([&] { return read_file(d + "/steps.jsonl").find("\"step\":1") != std::string::npos; }, 10);
  auto took = std::chrono::steady_clock::now() - sent;
  CHECK(closed);
  CHECK(took < std::chrono::seconds(3));  // no further input, no lateness, no timeout
  kill(run.pid, SIGINT);
  CHECK(wait_exit(run.pid) == 0);
  CHECK(read_file(d + "/out/dead_letter.jsonl").empty());
  std::filesystem::remove_all(d);
}
