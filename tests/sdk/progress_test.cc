// Producer progress (contract v2) as the C++ SDK sends it, read off a real
// ZeroMQ PULL socket: one producer id for the emitter's life, seq 1, 2, ...
// without gaps, a watermark that never goes back and that no later event
// undercuts (threads emitting all priorities into small batches, so P1-P3
// events wait behind later P0 ones), and a final batch at close, last.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <doctest/doctest.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runlens/sdk.h"
#include "schema/telemetry.capnp.h"
#include "tests/sdk/pull.h"

namespace {

using runlens::testing::Pull;

struct Got {
  std::string producer;
  uint64_t seq = 0;
  int64_t watermark = 0;
  bool final = false;
  std::vector<int64_t> times;
};

// Receives batches until a final one (or `limit`).
std::vector<Got> receive(Pull& pull, std::chrono::seconds limit) {
  std::vector<Got> out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline && (out.empty() || !out.back().final)) {
    std::vector<capnp::word> words;
    if (!pull.next(words)) continue;
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()));
    auto b = reader.getRoot<runlens::wire::Batch>();
    Got g;
    g.producer = b.getProducer();
    g.seq = b.getSeq();
    g.watermark = b.getWatermarkNs();
    g.final = b.getFinal();
    for (auto e : b.getEvents()) g.times.push_back(e.getTimeNs());
    out.push_back(std::move(g));
  }
  return out;
}

// Rank 1 of 2 (no run_start or run_end) without host samples: every event is the test's.
runlens::sdk::EmitterOptions rank1_options(const Pull& pull, std::string run_id, std::chrono::milliseconds flush) {
  runlens::sdk::EmitterOptions o;
  o.endpoint = pull.endpoint;
  o.run_id = std::move(run_id);
  o.rank = 1;
  o.world_size = 2;
  o.flush_interval = flush;
  o.host_samples = false;
  return o;
}

}  // namespace

TEST_CASE("sdk progress: producer, seq, a watermark no later event undercuts, and a final batch") {
  Pull pull;
  runlens::sdk::EmitterOptions o;
  o.endpoint = pull.endpoint;
  o.run_id = "cxx-progress";
  o.rank = 3;
  o.world_size = 4;
  o.batch_size = 7;  // small: P0 fills batches while P1-P3 events wait
  o.flush_interval = std::chrono::milliseconds(5);
  o.buffer_capacity = {1 << 14, 1 << 14, 1 << 14, 1 << 14};
  o.host_samples = false;  // its events are counted
  runlens::sdk::Emitter em(std::move(o));
  constexpr int kThreads = 4, kPerThread = 1500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&em, t] {
      for (int i = 0; i < kPerThread; ++i) {
        switch ((i + t) % 4) {
          case 0:  // P0: a non-finite loss
            em.emit(runlens::sdk::Train{.step = i, .loss = std::nan("")});
            break;
          case 1:
            em.emit(runlens::sdk::Step{.step = i, .step_ms = 1.0});
            break;
          case 2:
            em.emit(runlens::sdk::Data{.step = i, .batch_load_ms = 1.0});
            break;
          default:
            em.emit(runlens::sdk::Event{.kind = "debug_note", .step = i});
            break;
        }
        if (i % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(em.close(std::chrono::seconds(20)));
  const auto stats = em.stats();
  auto got = receive(pull, std::chrono::seconds(20));
  REQUIRE(!got.empty());
  CHECK(got.size() == stats.batches_sent);
  // One producer id, naming the run and rank.
  const std::string producer = got[0].producer;
  CHECK(producer.rfind("cxx-progress/3/", 0) == 0);
  uint64_t events = 0;
  int64_t max_wm = INT64_MIN;
  bool reordered = false;  // some event older than one sent before it: P1-P3 behind P0
  int64_t newest = INT64_MIN;
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    CHECK(got[k].producer == producer);
    CHECK(got[k].seq == k + 1);
    CHECK(got[k].final == (k + 1 == got.size()));
    CHECK(got[k].watermark >= max_wm);  // never goes back
    for (int64_t t : got[k].times) {
      // Every event stamped by the SDK is no older than what earlier batches promised.
      if (t < max_wm) FAIL_CHECK("batch " << k << " has an event at " << t << " below the watermark " << max_wm);
      if (t < newest) reordered = true;
      newest = std::max(newest, t);
    }
    max_wm = std::max(max_wm, got[k].watermark);
    events += got[k].times.size();
  }
  CHECK(events == stats.sent);
  CHECK(stats.dropped[0] + stats.dropped[1] + stats.dropped[2] + stats.dropped[3] == 0);
  CHECK(reordered);  // the case the watermark exists for did happen
}

TEST_CASE("sdk progress: an emitter that sends nothing still says it is done, and two emitters are two producers") {
  Pull pull;
  std::string first;
  for (int round = 0; round < 2; ++round) {
    runlens::sdk::EmitterOptions o;
    o.endpoint = pull.endpoint;
    o.run_id = "cxx-quiet";
    o.rank = 1;
    o.world_size = 2;
    o.host_samples = false;  // it must send no event at all
    runlens::sdk::Emitter em(std::move(o));
    const auto before = std::chrono::system_clock::now().time_since_epoch();
    CHECK(em.close(std::chrono::seconds(10)));
    auto got = receive(pull, std::chrono::seconds(10));
    REQUIRE(!got.empty());  // heartbeats, if it lived a flush_interval, then the final batch
    CHECK(got.back().final);
    for (size_t k = 0; k < got.size(); ++k) {
      CHECK(got[k].seq == k + 1);
      CHECK(got[k].times.empty());
      CHECK(got[k].producer == got[0].producer);
    }
    CHECK(got.back().watermark >= std::chrono::duration_cast<std::chrono::nanoseconds>(before).count());
    if (round == 0) first = got[0].producer;
    if (round == 1) CHECK(got[0].producer != first);
  }
}

TEST_CASE("sdk progress: an emitter with nothing to send carries its watermark forward in heartbeats") {
  Pull pull;
  runlens::sdk::Emitter em(rank1_options(pull, "cxx-heartbeat", std::chrono::milliseconds(10)));
  CHECK(em.emit(runlens::sdk::Step{.step = 1, .step_ms = 1.0}));
  const auto reported = std::chrono::system_clock::now().time_since_epoch();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Before close: the emitter's last batch promises past the report without another event.
  auto got = receive(pull, std::chrono::seconds(1));  // not closed: all that came in a second
  REQUIRE(got.size() >= 3);                           // (a hello,) the report, then heartbeats
  size_t events = 0;
  for (const auto& g : got) events += g.times.size();
  CHECK(events == 1);
  CHECK(got.back().times.empty());
  CHECK_FALSE(got.back().final);
  CHECK(got.back().watermark > std::chrono::duration_cast<std::chrono::nanoseconds>(reported).count());
  CHECK(em.close(std::chrono::seconds(5)));
}

TEST_CASE("sdk progress: a checkpoint being hashed holds the watermark at the time of its call") {
  Pull pull;
  const auto dir = std::filesystem::temp_directory_path() / ("runlens-hold-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "big.pt";
  std::string content(48 << 20, 'x');  // tens of milliseconds of hashing: many heartbeats meanwhile
  std::ofstream(file, std::ios::binary).write(content.data(), static_cast<std::streamsize>(content.size()));
  runlens::sdk::Emitter em(rank1_options(pull, "cxx-hold", std::chrono::milliseconds(2)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(em.checkpoint_saved(file.string(), 7));
  CHECK(em.close(std::chrono::seconds(20)));
  auto got = receive(pull, std::chrono::seconds(20));
  REQUIRE(!got.empty());
  CHECK(got.back().final);
  int64_t max_wm = INT64_MIN;
  size_t events = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    for (int64_t t : got[k].times) {
      CHECK(t >= max_wm);
      ++events;
    }
    max_wm = std::max(max_wm, got[k].watermark);
  }
  CHECK(events == 1);     // the checkpoint (rank 1: no run_start or run_end)
  CHECK(got.size() > 3);  // heartbeats were sent while it was hashed, held at its time
  std::filesystem::remove_all(dir);
}

TEST_CASE("sdk progress: hold_watermark holds every batch at its time until release_watermark") {
  Pull pull;
  runlens::sdk::Emitter em(rank1_options(pull, "cxx-hold-api", std::chrono::milliseconds(2)));
  const auto hold = em.hold_watermark();
  REQUIRE(hold.id != 0);
  for (int64_t s = 0; s < 5; ++s) {
    runlens::sdk::Step step;
    step.step = s;
    step.step_ms = 1;
    CHECK(em.emit(step));  // stamped after the hold's time
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Everything sent so far, events and heartbeats, promised nothing past the hold.
  size_t events = 0, batches = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (std::vector<capnp::word> words; events < 5 && std::chrono::steady_clock::now() < deadline;) {
    if (!pull.next(words)) continue;
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()));
    auto b = reader.getRoot<runlens::wire::Batch>();
    CHECK(b.getWatermarkNs() <= hold.time_ns);
    events += b.getEvents().size();
    ++batches;
  }
  CHECK(events == 5);  // the steps went out meanwhile
  CHECK(batches >= 1);
  em.release_watermark(hold.id);
  em.release_watermark(hold.id);  // a second release is harmless
  em.release_watermark(0);        // as is the id of a hold that failed
  // Released: the next heartbeats promise past it (a released hold is
  // forgotten once a pass that saw it released has emptied the rings).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(em.close(std::chrono::seconds(5)));
  auto rest = receive(pull, std::chrono::seconds(10));
  REQUIRE(!rest.empty());
  CHECK(rest.back().final);
  int64_t max_wm = INT64_MIN;
  for (const auto& g : rest) max_wm = std::max(max_wm, g.watermark);
  CHECK(max_wm > hold.time_ns);
}
