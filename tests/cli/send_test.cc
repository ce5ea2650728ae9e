// runlens send: frames arrive byte-identical and in order on a real PULL
// socket; the token bucket's schedule under a simulated clock; damage, bad
// flags, backpressure and Ctrl-C; and `runlens run` fed by `runlens send`
// raises the alerts `runlens replay` raises from the same recording.
#include "cli/send.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "formats/capnp_codec.h"
#include "formats/input_reader.h"
#include "formats/recording.h"
#include "tests/cli/child_process.h"
#include "tests/operators/operator_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

const std::string kBin = RUNLENS_BINARY;
const std::string kSrc = RUNLENS_SOURCE_DIR;

// A synth recording of 64 ranks and 100 steps: 13702 events in 4 frames.
std::string synth(const std::string& dir, const std::string& extra = "") {
  std::string path = dir + "/synth.rlrec";
  auto r = shell(kBin + " synth --ranks 64 --steps 100 --gpu-every 1 " + extra + " --out " + path);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  return path;
}

// The payloads of a recording's frames, as stored.
std::vector<std::string> stored_frames(const std::string& path) {
  recording::FrameReader reader;
  std::string error;
  REQUIRE_MESSAGE(reader.open(path, &error), error);
  std::vector<std::string> out, damage;
  recording::FrameReader::Frame f;
  while (reader.next(&f, &damage)) out.emplace_back(f.data, f.size);
  CHECK(damage.empty());
  return out;
}

// A PULL socket bound on a loopback port chosen now.
struct Pull {
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::pull};
  std::string endpoint;
  explicit Pull(const std::string& at = "tcp://127.0.0.1:*") {
    sock.set(zmq::sockopt::linger, 0);
    sock.bind(at);
    endpoint = sock.get(zmq::sockopt::last_endpoint);
  }
  // Frames until `expect` have come (and 100 ms more, to see any extra one),
  // or none arrives for `quiet_ms`.
  std::vector<std::string> drain(size_t expect, int quiet_ms = 5000) {
    std::vector<std::string> got;
    for (;;) {
      sock.set(zmq::sockopt::rcvtimeo, got.size() >= expect ? 100 : quiet_ms);
      zmq::message_t m;
      if (!sock.recv(m)) break;
      got.emplace_back(static_cast<const char*>(m.data()), m.size());
    }
    return got;
  }
};

// A number from send's --json line.
double json_number(const std::string& log, const std::string& key) {
  size_t at = log.find("\"" + key + "\":");
  REQUIRE_MESSAGE(at != std::string::npos, key << " not in: " << log);
  return std::strtod(log.c_str() + at + key.size() + 3, nullptr);
}

}  // namespace

TEST_CASE("send: a recording's frames arrive on a PULL socket byte-identical and in order") {
  std::string d = scratch_dir("send-frames");
  std::string rec = synth(d);
  std::vector<std::string> expected = stored_frames(rec);
  REQUIRE(expected.size() == 4);
  Pull pull;
  pid_t send = spawn({"send", rec, "--to", pull.endpoint, "--json", "--loops", "2"}, d + "/send.log");
  std::vector<std::string> got = pull.drain(8);
  CHECK(wait_exit(send) == 0);
  std::string log = read_file(d + "/send.log");
  REQUIRE(got.size() == 2 * expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(got[i] == expected[i % expected.size()], "frame " << i);
  CHECK(json_number(log, "frames") == 8);
  CHECK(json_number(log, "events") == 2 * 13702);
  CHECK(json_number(log, "loops") == 2);
  CHECK(log.find("\"interrupted\":false") != std::string::npos);
  CHECK_MESSAGE(log.find("sent 8 frames, 27404 events in ") != std::string::npos, log);
  std::filesystem::remove_all(d);
}

TEST_CASE("send: JSONL is encoded into batches of --batch events, in file order") {
  std::string d = scratch_dir("send-jsonl");
  std::string jsonl = kSrc + "/tests/golden/straggler/input.jsonl";
  std::string error;
  auto reader = InputReader::open(jsonl, &error);
  REQUIRE(reader);
  CollectDeadLetters dl;
  std::vector<Record> rows;
  std::vector<uint64_t> pos;
  while (reader->next(&rows, &pos, 1 << 20, dl, "test")) {
  }
  REQUIRE(dl.letters.empty());
  REQUIRE(rows.size() > 97);
  Pull pull;
  pid_t send = spawn({"send", jsonl, "--to", pull.endpoint, "--batch", "97"}, d + "/send.log");
  size_t frames = (rows.size() + 96) / 97;
  std::vector<std::string> got = pull.drain(frames);
  CHECK(wait_exit(send) == 0);
  REQUIRE(got.size() == frames);
  for (size_t i = 0; i < frames; ++i) {
    CHECK(got[i] == capnpc::encode_batch(rows.data() + i * 97, std::min<size_t>(97, rows.size() - i * 97)));
  }
  CHECK(read_file(d + "/send.log").find("(jsonl)") != std::string::npos);
  std::filesystem::remove_all(d);
}

TEST_CASE("send: the token bucket's schedule, on a simulated clock") {
  using runlens::cli::TokenBucket;
  const int64_t ms = 1'000'000;
  // Drives the bucket as send does: wait what it says, then the frame goes.
  auto go = [](TokenBucket& b, int64_t* now, uint64_t events) {
    int64_t w;
    while ((w = b.wait_ns(*now, events)) > 0) *now += w;
    b.take(*now, events);
    return *now;
  };
  SUBCASE("frame k goes once the events of frames 0..k are earned") {
    TokenBucket b(10'000);  // 10 k events/s; capacity 200 events (20 ms)
    int64_t now = 5 * ms;   // the clock's origin is irrelevant
    for (int k = 0; k < 100; ++k) CHECK(go(b, &now, 100) == 5 * ms + (k + 1) * 10 * ms);
    // 10000 events in exactly 1 s.
    CHECK(now - 5 * ms == 1000 * ms);
  }
  SUBCASE("time blocked is made up only to the capacity, then the pace resumes") {
    TokenBucket b(10'000);
    int64_t now = 0;
    for (int k = 0; k < 10; ++k) go(b, &now, 100);
    CHECK(now == 100 * ms);
    now += 1000 * ms;  // the socket blocked for a second
    // Two frames' worth (200 events = the capacity) go at once, then every 10 ms.
    CHECK(go(b, &now, 100) == 1100 * ms);
    CHECK(go(b, &now, 100) == 1100 * ms);
    CHECK(go(b, &now, 100) == 1110 * ms);
    CHECK(go(b, &now, 100) == 1120 * ms);
  }
  SUBCASE("a frame larger than the capacity goes when its events are earned") {
    TokenBucket b(1'000);  // capacity 20 events
    int64_t now = 0;
    CHECK(go(b, &now, 4096) == 4096 * ms);
    CHECK(go(b, &now, 4096) == 2 * 4096 * ms);
    CHECK(go(b, &now, 10) == 2 * 4096 * ms + 10 * ms);
    CHECK(go(b, &now, 0) == 2 * 4096 * ms + 10 * ms);
  }
  SUBCASE("no one-second window holds more than the rate plus the capacity") {
    TokenBucket b(1'000'000);  // 1 M events/s, capacity 20000 events
    int64_t now = 0;
    std::vector<std::pair<int64_t, uint64_t>> sent;
    uint64_t sizes[] = {4096, 256, 1, 3000, 4096, 17};
    for (int k = 0; k < 3000; ++k) {
      uint64_t n = sizes[k % 6];
      if (k == 700) now += 300 * ms;  // a stall
      sent.emplace_back(go(b, &now, n), n);
    }
    size_t lo = 0;
    uint64_t in_window = 0, most = 0;
    for (size_t hi = 0; hi < sent.size(); ++hi) {
      in_window += sent[hi].second;
      while (sent[hi].first - sent[lo].first >= 1000 * ms) in_window -= sent[lo++].second;
      most = std::max(most, in_window);
    }
    CHECK(most <= 1'000'000 + 20'000 + 4096);
    CHECK(most >= 1'000'000 - 4096);
  }
}

TEST_CASE("send: --rate parses events per second with k, M and G") {
  using runlens::cli::parse_rate;
  CHECK(parse_rate("250000") == 250000.0);
  CHECK(parse_rate("1e6") == 1e6);
  CHECK(parse_rate("1.5M") == 1.5e6);
  CHECK(parse_rate("20k") == 2e4);
  CHECK(parse_rate("2G") == 2e9);
  for (const char* bad : {"", "0", "-5", "M", "fast", "1MM", "nan", "inf", "1e400"}) {
    CHECK_MESSAGE(!parse_rate(bad), bad);
  }
}

// The one timing check of the wall clock: generous bounds, a shared machine.
TEST_CASE("send: --rate paces a recording to about the rate asked") {
  std::string d = scratch_dir("send-rate");
  std::string rec = synth(d);
  Pull pull;
  auto t0 = std::chrono::steady_clock::now();
  pid_t send = spawn({"send", rec, "--to", pull.endpoint, "--rate", "13702", "--json"}, d + "/send.log");
  std::vector<std::string> got = pull.drain(4);
  CHECK(wait_exit(send) == 0);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string log = read_file(d + "/send.log");
  CHECK(got.size() == 4);
  double elapsed = json_number(log, "elapsed_s");
  CHECK_MESSAGE(elapsed >= 0.8, log);
  CHECK_MESSAGE(elapsed <= 1.5, log);
  CHECK(wall >= 0.8);
  CHECK(json_number(log, "target_events_per_s") == 13702);
  CHECK(json_number(log, "events") == 13702);
  std::filesystem::remove_all(d);
}

TEST_CASE("send: damaged frames are named by file and byte offset and skipped; --strict exits 3") {
  std::string d = scratch_dir("send-damage");
  std::string rec = synth(d);
  std::vector<std::string> frames = stored_frames(rec);
  // Flip a payload byte of the second frame.
  std::string bytes = read_file(rec);
  size_t second = recording::kHeaderBytes + recording::kFrameHeaderBytes + frames[0].size();
  bytes[second + recording::kFrameHeaderBytes + 40] ^= 0x5a;
  std::string bad = write_text(d, "bad.rlrec", bytes);
  Pull pull;
  pid_t send = spawn({"send", bad, "--to", pull.endpoint, "--strict"}, d + "/send.log");
  std::vector<std::string> got = pull.drain(3);
  CHECK(wait_exit(send) == 3);
  std::string log = read_file(d + "/send.log");
  CHECK_MESSAGE(log.find(bad + "@" + std::to_string(second) + ": corrupt frame: checksum mismatch; skipped " +
                         std::to_string(recording::kFrameHeaderBytes + frames[1].size()) + " bytes (not sent)") !=
                    std::string::npos,
                log);
  REQUIRE(got.size() == 3);
  CHECK(got[0] == frames[0]);
  CHECK(got[1] == frames[2]);
  CHECK(got[2] == frames[3]);

  // Not a recording one can send: the file and offset 0.
  std::string wrong = write_text(d, "v9.rlrec", std::string("RUNLENSR\x09\x00\x01\x00\x00\x00\x00\x00", 16));
  auto r = shell(kBin + " send " + wrong + " --to " + pull.endpoint);
  CHECK(r.code == 2);
  CHECK_MESSAGE(
      r.output.find(wrong + "@0: unsupported recording format version 9 (this runlens reads 1)") != std::string::npos,
      r.output);
  std::string cut = write_text(d, "cut.rlrec", "RUNLENSR\x01");
  r = shell(kBin + " send " + cut + " --to " + pull.endpoint);
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.output.find(cut + "@0: truncated recording header (9 bytes)") != std::string::npos, r.output);
  r = shell(kBin + " send " + d + "/missing.rlrec --to " + pull.endpoint);
  CHECK(r.code == 2);
  CHECK(r.output.find("cannot open " + d + "/missing.rlrec: No such file or directory") != std::string::npos);
  std::filesystem::remove_all(d);
}

TEST_CASE("send: a bad endpoint or rate is a usage error, exit 2") {
  std::string d = scratch_dir("send-usage");
  std::string rec = synth(d);
  auto r = shell(kBin + " send " + rec + " --to localhost:5555");
  CHECK(r.code == 2);
  CHECK(r.output.find("--to: invalid endpoint 'localhost:5555'") != std::string::npos);
  r = shell(kBin + " send " + rec + " --to tcp://127.0.0.1:x");
  CHECK(r.code == 2);
  CHECK(r.output.find("a tcp address ends in :PORT") != std::string::npos);
  r = shell(kBin + " send " + rec + " --to tcp://127.0.0.1:1 --rate fast");
  CHECK(r.code == 2);
  CHECK(r.output.find("invalid --rate 'fast'") != std::string::npos);
  r = shell(kBin + " send " + rec + " --to tcp://127.0.0.1:1 --rate 1M --burst");
  CHECK(r.code == 2);
  CHECK(r.output.find("--rate excludes --burst") != std::string::npos);
  std::filesystem::remove_all(d);
}

TEST_CASE("send: with no receiver yet it blocks (backpressure), counts the time, and delivers all") {
  std::string d = scratch_dir("send-block");
  std::string rec = synth(d);
  std::string ep = "ipc://" + d + "/in.sock";
  pid_t send = spawn({"send", rec, "--to", ep, "--hwm", "1", "--json"}, d + "/send.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  Pull pull(ep);
  std::vector<std::string> got = pull.drain(4);
  CHECK(wait_exit(send) == 0);
  std::string log = read_file(d + "/send.log");
  CHECK(got == stored_frames(rec));
  CHECK_MESSAGE(json_number(log, "blocked_s") >= 0.5, log);
  std::filesystem::remove_all(d);
}

TEST_CASE("send: Ctrl-C stops it cleanly with the counts so far") {
  std::string d = scratch_dir("send-sigint");
  std::string jsonl = kSrc + "/tests/golden/straggler/input.jsonl";
  Pull pull;
  // 10-event frames at 200 events/s: 20 frames a second, far from the end.
  pid_t send = spawn({"send", jsonl, "--to", pull.endpoint, "--batch", "10", "--rate", "200", "--loops", "0", "--json"},
                     d + "/send.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  kill(send, SIGINT);
  CHECK(wait_exit(send, 10) == 0);
  std::vector<std::string> got = pull.drain(1u << 30, 500);
  std::string log = read_file(d + "/send.log");
  CHECK_MESSAGE(log.find("\"interrupted\":true") != std::string::npos, log);
  CHECK(log.find("interrupted: sent ") != std::string::npos);
  double frames = json_number(log, "frames");
  CHECK(frames >= 1);
  CHECK(static_cast<double>(got.size()) == frames);
  CHECK(json_number(log, "events") == 10 * frames);
  std::filesystem::remove_all(d);
}

TEST_CASE("send: `runlens run` fed by `runlens send` raises the alerts `runlens replay` raises") {
  std::string d = scratch_dir("send-live");
  std::string rec = synth(d, "--fault straggler:rank=5,from=50 --fault nan:step=95");
  auto r = shell(kBin + " replay " + rec + " --quiet --out " + d + "/replayed --set RUNLENS_PUBLISH=ipc://" + d +
                 "/replay-pub.sock");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  std::string expected = read_file(d + "/replayed/alerts.jsonl");
  REQUIRE(expected.find("\"kind\":\"straggler\"") != std::string::npos);
  REQUIRE(expected.find("\"kind\":\"nan_loss\"") != std::string::npos);

  std::string listen = "ipc://" + d + "/in.sock";
  pid_t run = spawn({"run", "--out", d + "/live", "--threads", "2", "--set", "RUNLENS_LISTEN=" + listen, "--set",
                     "RUNLENS_PUBLISH=ipc://" + d + "/alerts.sock"},
                    d + "/run.log");
  REQUIRE(wait_for([&] { return std::filesystem::exists(d + "/in.sock"); }));
  pid_t send = spawn({"send", rec, "--to", listen, "--rate", "50k"}, d + "/send.log");
  CHECK(wait_exit(send) == 0);
  // The straggler is out while the run is live; then stop it, which releases the rest.
  CHECK(wait_for(
      [&] { return read_file(d + "/live/alerts.jsonl").find("\"kind\":\"straggler\"") != std::string::npos; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(run, SIGINT);
  CHECK(wait_exit(run) == 0);
  CHECK_MESSAGE(read_file(d + "/live/alerts.jsonl") == expected, read_file(d + "/run.log"));
  std::filesystem::remove_all(d);
}

TEST_CASE("send: Ctrl-C while the final flush waits on a receiver that does not read ends it at once") {
  std::string d = scratch_dir("send-stuck");
  std::string rec = synth(d);
  zmq::context_t ctx(1);
  zmq::socket_t stuck(ctx, zmq::socket_type::pull);
  stuck.set(zmq::sockopt::linger, 0);
  stuck.set(zmq::sockopt::rcvhwm, 1);
  stuck.bind("tcp://127.0.0.1:*");
  std::string ep = stuck.get(zmq::sockopt::last_endpoint);
  // 400 frames of about 170 KB: far more than the receiver's buffers; all fit the send queue.
  pid_t send = spawn({"send", rec, "--to", ep, "--loops", "100", "--json"}, d + "/send.log");
  // Handing 68 MB to the socket took over a second on a loaded host (349 of 400 frames in the first): wait until send
  // says it is in the final flush.
  REQUIRE(wait_for(
      [&] { return read_file(d + "/send.log").find("400 frames handed to the socket") != std::string::npos; }));
  CHECK(read_file(d + "/send.log").find("\"frames\"") == std::string::npos);  // still flushing
  kill(send, SIGINT);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(wait_exit(send, 10) == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  std::string log = read_file(d + "/send.log");
  CHECK_MESSAGE(log.find("interrupted while flushing; what the socket still held was dropped") != std::string::npos,
                log);
  CHECK(json_number(log, "frames") == 400);
  CHECK(log.find("\"interrupted\":true") != std::string::npos);
  std::filesystem::remove_all(d);
}
