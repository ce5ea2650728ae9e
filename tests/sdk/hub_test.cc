// The process's emitters share one exporter thread and one ZeroMQ context
// (sdk/src/hub.h): many emitters cost a few threads, not three each; every
// emitter's batches still arrive, in order, ending with its final batch,
// whether it closes first, among others or last; and a fork child that
// emits gets a hub of its own while the parent's goes on.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runlens/sdk.h"
#include "schema/telemetry.capnp.h"
#include "tests/sdk/pull.h"

namespace {

using runlens::sdk::Emitter;
using runlens::sdk::EmitterOptions;
using runlens::sdk::Step;

using runlens::testing::Pull;

// What one producer sent: its batches' seqs, events (by run/rank and kind) and whether its final batch came.
struct Producer {
  std::vector<uint64_t> seqs;
  std::string run_id;
  int32_t rank = -1;
  int steps = 0, run_starts = 0, run_ends = 0;
  bool final = false;
};

// Receives batches until `finals` producers have sent their final batch (or `limit`).
std::map<std::string, Producer> receive(Pull& pull, size_t finals, std::chrono::seconds limit) {
  std::map<std::string, Producer> out;
  size_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (done < finals && std::chrono::steady_clock::now() < deadline) {
    std::vector<capnp::word> words;
    if (!pull.next(words)) continue;
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()));
    auto b = reader.getRoot<runlens::wire::Batch>();
    Producer& p = out[b.getProducer()];
    p.seqs.push_back(b.getSeq());
    for (auto e : b.getEvents()) {
      switch (e.which()) {
        case runlens::wire::Event::STEP:
          ++p.steps;
          p.run_id = e.getStep().getRunId();
          p.rank = e.getStep().getRank();
          break;
        case runlens::wire::Event::RUN_START:
          ++p.run_starts;
          break;
        case runlens::wire::Event::RUN_END:
          ++p.run_ends;
          break;
        default:
          break;
      }
    }
    if (b.getFinal()) {
      p.final = true;
      ++done;
    }
  }
  return out;
}

// Threads of this process now.
size_t threads() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

std::unique_ptr<Emitter> emitter(const std::string& endpoint, const std::string& run, int rank, int world) {
  EmitterOptions o;
  o.endpoint = endpoint;
  o.run_id = run;
  o.rank = rank;
  o.world_size = world;
  o.flush_interval = std::chrono::milliseconds(10);
  return std::make_unique<Emitter>(std::move(o));
}

void check_complete(const Producer& p, int steps, bool rank0) {
  CHECK(p.final);
  CHECK(p.steps == steps);
  CHECK(p.run_starts == (rank0 ? 1 : 0));
  CHECK(p.run_ends == (rank0 ? 1 : 0));
  for (size_t k = 0; k < p.seqs.size(); ++k) CHECK(p.seqs[k] == k + 1);  // in order, none lost
}

}  // namespace

TEST_CASE("sdk hub: 64 emitters share one exporter thread and one context, and all their batches arrive") {
  Pull pull;
  const size_t before = threads();
  std::vector<std::unique_ptr<Emitter>> ems;
  for (int r = 0; r < 64; ++r) ems.push_back(emitter(pull.endpoint, "hub-many", r, 64));
  // The hub's thread, ZeroMQ's I/O thread and its reaper: three for all 64 (three each before).
  CHECK(threads() - before <= 3);
  for (int step = 0; step < 20; ++step) {
    for (auto& em : ems) CHECK(em->emit(Step{.step = step, .step_ms = 1.0}));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& em : ems) CHECK(em->close(std::chrono::seconds(10)));
  auto got = receive(pull, 64, std::chrono::seconds(10));
  REQUIRE(got.size() == 64);
  for (const auto& [id, p] : got) check_complete(p, 20, p.run_starts > 0);
  // Closed: the hub is gone with its threads.
  ems.clear();
  CHECK(threads() == before);
}

TEST_CASE(
    "sdk hub: an emitter closed among live ones is delivered, and a new emitter after the last close starts a new "
    "hub") {
  Pull pull;
  auto a = emitter(pull.endpoint, "hub-order", 1, 3);
  auto b = emitter(pull.endpoint, "hub-order", 2, 3);
  for (int step = 0; step < 5; ++step) {
    CHECK(a->emit(Step{.step = step, .step_ms = 1.0}));
    CHECK(b->emit(Step{.step = step, .step_ms = 1.0}));
  }
  CHECK(a->close(std::chrono::seconds(5)));
  auto first = receive(pull, 1, std::chrono::seconds(10));  // a's final, while b lives
  bool a_done = false;
  for (const auto& [id, p] : first) {
    if (p.final) {
      a_done = true;
      check_complete(p, 5, false);
    }
  }
  CHECK(a_done);
  CHECK_FALSE(b->stats().closed);
  CHECK(b->close(std::chrono::seconds(5)));
  auto rest = receive(pull, 1, std::chrono::seconds(10));
  size_t finals = 0;
  for (const auto& [id, p] : rest) finals += p.final;
  CHECK(finals == 1);
  // The hub stopped with b; c starts another and works as well.
  auto c = emitter(pull.endpoint, "hub-order", 0, 3);
  for (int step = 0; step < 3; ++step) CHECK(c->emit(Step{.step = step, .step_ms = 1.0}));
  CHECK(c->close(std::chrono::seconds(5)));
  auto last = receive(pull, 1, std::chrono::seconds(10));
  REQUIRE(last.size() == 1);
  check_complete(last.begin()->second, 3, true);
}

TEST_CASE("sdk hub: emitters closed on their own threads while the hub ships the others' batches lose nothing") {
  // A close takes its emitter off the hub and ships the final batch on the
  // closing thread (Hub::Detach), racing the hub's passes over the others:
  // 4 threads emit for 8 emitters each, a step every half millisecond (the
  // hub ships them at its 10 ms ticks), and close them one by one meanwhile,
  // the 4 threads at once.
  Pull pull;
  constexpr int kThreads = 4, kPer = 8, kSteps = 30;
  std::vector<std::unique_ptr<Emitter>> ems;
  for (int r = 0; r < kThreads * kPer; ++r) ems.push_back(emitter(pull.endpoint, "hub-detach", r, kThreads * kPer));
  std::vector<std::thread> threads;
  std::atomic<int> clean{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Emitter j of this thread reports steps 0 to 9 + 2j, then closes; its neighbours go on.
      for (int step = 0; step < kSteps; ++step) {
        for (int j = 0; j < kPer; ++j) {
          Emitter& em = *ems[static_cast<size_t>(t * kPer + j)];
          if (step < 10 + 2 * j) {
            em.emit(Step{.step = step, .step_ms = 1.0});
          } else if (step == 10 + 2 * j && em.close(std::chrono::seconds(10))) {
            ++clean;
          }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(clean.load() == kThreads * kPer);
  auto got = receive(pull, kThreads * kPer, std::chrono::seconds(20));
  REQUIRE(got.size() == static_cast<size_t>(kThreads * kPer));
  for (const auto& [id, p] : got) {
    CAPTURE(id);
    CHECK(p.final);
    CHECK(p.steps == 10 + 2 * (p.rank % kPer));
    for (size_t k = 0; k < p.seqs.size(); ++k) CHECK(p.seqs[k] == k + 1);  // in order, none lost, the final last
  }
  for (auto& em : ems) CHECK(em->stats().closed);
}

TEST_CASE("sdk hub: a fork child's emitter gets its own hub; the parent's emitter goes on") {
  Pull pull;
  auto parent = emitter(pull.endpoint, "hub-fork", 1, 3);
  CHECK(parent->emit(Step{.step = 0, .step_ms = 1.0}));
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child: only what an emitter does, then _exit without destructors
    // (the inherited parent emitter is not touched).
    int code = 0;
    {
      auto child = emitter(pull.endpoint, "hub-fork", 2, 3);
      for (int step = 0; step < 4; ++step) code |= child->emit(Step{.step = step, .step_ms = 1.0}) ? 0 : 1;
      code |= child->close(std::chrono::seconds(5)) ? 0 : 2;
    }
    _exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(parent->emit(Step{.step = 1, .step_ms = 1.0}));
  CHECK(parent->close(std::chrono::seconds(5)));
  auto got = receive(pull, 2, std::chrono::seconds(10));
  REQUIRE(got.size() == 2);
  std::map<int32_t, Producer> by_rank;
  for (const auto& [id, p] : got) by_rank[p.rank] = p;
  REQUIRE(by_rank.count(1) == 1);
  REQUIRE(by_rank.count(2) == 1);
  check_complete(by_rank[1], 2, false);
  check_complete(by_rank[2], 4, false);
}
