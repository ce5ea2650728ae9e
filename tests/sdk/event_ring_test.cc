// The SDK's priority ring (sdk/src/event_ring.h): FIFO over many laps, full
// reported without blocking, a fresh ring's cells free without ever having
// been written, and concurrent producers losing or duplicating nothing.
#include "sdk/src/event_ring.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using runlens::sdk::EventRing;
using runlens::sdk::Slot;

bool Push(EventRing& ring, int64_t value) {
  return ring.TryPush([&](Slot& s) { s.time_ns = value; });
}

TEST_CASE("event ring: capacity rounds up to a power of two, at least 2") {
  CHECK(EventRing(0).capacity() == 2);
  CHECK(EventRing(5).capacity() == 8);
  CHECK(EventRing(1024).capacity() == 1024);
}

TEST_CASE("event ring: first in, first out over many laps, full at capacity") {
  EventRing ring(8);
  Slot out{};
  CHECK_FALSE(ring.TryPop(out));  // a fresh ring is empty
  int64_t next_in = 0, next_out = 0;
  for (int lap = 0; lap < 50; ++lap) {
    const int fill = 1 + lap % 8;  // partial and whole laps, so positions wrap at every offset
    for (int i = 0; i < fill; ++i) REQUIRE(Push(ring, next_in++));
    if (fill == 8) CHECK_FALSE(Push(ring, -1));  // full: refused at once, nothing overwritten
    for (int i = 0; i < fill; ++i) {
      REQUIRE(ring.TryPop(out));
      CHECK(out.time_ns == next_out++);
    }
    CHECK_FALSE(ring.TryPop(out));
  }
  CHECK(ring.pushed() == static_cast<uint64_t>(next_in));
  CHECK(ring.popped() == static_cast<uint64_t>(next_out));
}

TEST_CASE("event ring: concurrent producers, one consumer: every event once") {
  EventRing ring(64);
  constexpr int kProducers = 4, kEach = 20000;
  std::atomic<int64_t> refused{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kEach; ++i) {
        while (!Push(ring, int64_t{p} * kEach + i)) {
          refused.fetch_add(1, std::memory_order_relaxed);
          std::this_thread::yield();
        }
      }
    });
  }
  std::vector<int64_t> seen;
  std::vector<int64_t> last(kProducers, -1);
  Slot out{};
  while (seen.size() < size_t{kProducers} * kEach) {
    if (!ring.TryPop(out)) continue;
    const auto p = static_cast<size_t>(out.time_ns / kEach);
    REQUIRE(p < last.size());
    CHECK(out.time_ns > last[p]);  // each producer's events stay in its order
    last[p] = out.time_ns;
    seen.push_back(out.time_ns);
  }
  for (auto& t : producers) t.join();
  CHECK_FALSE(ring.TryPop(out));
  std::sort(seen.begin(), seen.end());
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
  CHECK(seen.front() == 0);
  CHECK(seen.back() == int64_t{kProducers} * kEach - 1);
}

}  // namespace
