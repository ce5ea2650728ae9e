#include "operators/ring.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace st = runlens::runtime::state;
using runlens::ops::Ring;

namespace {

struct Point {
  int64_t step = 0;
  double v = 0;
  template <class Io>
  void fields(Io& io) {
    io(step, v);
  }
};

template <class C>
std::string encode(const C& c) {
  st::Writer w;
  st::encode(w, c);
  return w.take();
}

template <class C>
C decode(const std::string& bytes) {
  st::Reader r(bytes, "ring test");
  C c;
  st::decode(r, c);
  r.expect_end();
  return c;
}

std::vector<int64_t> values(const Ring<int64_t>& r) { return {r.begin(), r.end()}; }
std::vector<int64_t> values(const std::deque<int64_t>& d) { return {d.begin(), d.end()}; }

}  // namespace

TEST_CASE("a ring holds what a deque holds through pushes, pops, wraps and growth") {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    Ring<int64_t> ring;
    std::deque<int64_t> model;
    const int ops = 1 + static_cast<int>(rng() % 400);
    for (int i = 0; i < ops; ++i) {
      // Pushes outnumber pops early, then the window holds about steady,
      // so that the head wraps around a full block many times.
      const bool push = model.empty() || rng() % 100 < (i < ops / 3 ? 75u : 50u);
      if (push) {
        const auto v = static_cast<int64_t>(rng() % 1000);
        ring.push_back(v);
        model.push_back(v);
      } else {
        ring.pop_front();
        model.pop_front();
      }
      REQUIRE(ring.size() == model.size());
      REQUIRE(ring.empty() == model.empty());
      if (!model.empty()) {
        REQUIRE(ring.front() == model.front());
        REQUIRE(ring.back() == model.back());
      }
    }
    CHECK(values(ring) == values(model));
    CHECK(std::vector<int64_t>(ring.rbegin(), ring.rend()) == std::vector<int64_t>(model.rbegin(), model.rend()));
    for (size_t i = 0; i < model.size(); ++i) REQUIRE(ring[i] == model[i]);
    // The room is a power of two that holds every value.
    CHECK(ring.capacity() >= ring.size());
    CHECK((ring.capacity() & (ring.capacity() - 1)) == 0);
  }
}

TEST_CASE("a full window of a ring allocates no more room as it slides") {
  Ring<int64_t> ring;
  for (int64_t i = 0; i < 64; ++i) ring.push_back(i);
  const size_t room = ring.capacity();
  CHECK(room == 64);
  for (int64_t i = 64; i < 10'000; ++i) {
    ring.pop_front();
    ring.push_back(i);
  }
  CHECK(ring.capacity() == room);
  CHECK(ring.front() == 10'000 - 64);
  CHECK(ring.back() == 9'999);
  ring.clear();
  CHECK(ring.empty());
  CHECK(ring.capacity() == room);
}

TEST_CASE("a ring's iterators serve the standard algorithms, in order from the oldest") {
  Ring<int64_t> ring;
  for (int64_t i = 0; i < 12; ++i) ring.push_back(i);
  for (int i = 0; i < 7; ++i) ring.pop_front();         // 7..11, starting mid-block
  for (int64_t i = 12; i < 20; ++i) ring.push_back(i);  // wraps: 7..19
  CHECK(values(ring) == std::vector<int64_t>{7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  CHECK(*std::lower_bound(ring.begin(), ring.end(), 15) == 15);
  CHECK(std::lower_bound(ring.begin(), ring.end(), 15) - ring.begin() == 8);
  CHECK(*std::max_element(ring.begin(), ring.end()) == 19);
  CHECK(std::count(ring.begin(), ring.end(), 9) == 1);
  auto it = ring.end();
  --it;
  CHECK(*it == 19);
  CHECK(it[-12] == 7);
  const Ring<int64_t>& view = ring;
  Ring<int64_t>::const_iterator c = ring.begin();  // a mutable iterator converts to a const one
  CHECK(c == view.begin());
  CHECK(view.end() - c == 13);
  *ring.begin() = 70;
  CHECK(ring.front() == 70);
}

TEST_CASE("a ring's state is a deque's state, byte for byte, both ways") {
  std::deque<Point> d;
  Ring<Point> r;
  for (int64_t i = 0; i < 40; ++i) {
    d.push_back({i, 0.5 * double(i)});
    r.push_back({i, 0.5 * double(i)});
    if (i % 3 == 0) {
      d.pop_front();
      r.pop_front();
    }
  }
  const std::string bytes = encode(d);
  CHECK(encode(r) == bytes);
  const Ring<Point> back = decode<Ring<Point>>(bytes);
  REQUIRE(back.size() == d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    CHECK(back[i].step == d[i].step);
    CHECK(back[i].v == d[i].v);
  }
  CHECK(encode(decode<std::deque<Point>>(encode(r))) == bytes);
  CHECK(encode(Ring<Point>{}) == encode(std::deque<Point>{}));
}
