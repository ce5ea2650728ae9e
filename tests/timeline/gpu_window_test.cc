// The timeline's packed window of GPU samples against a plain deque of
// (time, Gpu): the same samples, in the same order, bit for bit, whatever
// fields each has, across chunk boundaries, with the window emptied and
// filled again; and from a given time on, as a filter over them all would.
#include "timeline/gpu_window.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/random_gpu.h"

using namespace runlens;
using testing::random_gpu;
using testing::same;

namespace {

void check_equal(const timeline::GpuWindow& w, const std::deque<std::pair<int64_t, Gpu>>& want) {
  REQUIRE(w.size() == want.size());
  REQUIRE(w.empty() == want.empty());
  if (!want.empty()) CHECK(w.front_time() == want.front().first);
  size_t i = 0;
  bool all_same = true;
  w.for_each([&](int64_t t, const Gpu& g) {
    all_same = all_same && i < want.size() && t == want[i].first && same(g, want[i].second);
    ++i;
  });
  CHECK(i == want.size());
  CHECK(all_same);
}

// for_each_since(from) gives the samples of time `from` or later, the same as
// a filter over every sample.
void check_since(const timeline::GpuWindow& w, const std::deque<std::pair<int64_t, Gpu>>& want, int64_t from) {
  CAPTURE(from);
  size_t i = 0;
  while (i < want.size() && want[i].first < from) ++i;
  bool all_same = true;
  w.for_each_since(from, [&](int64_t t, const Gpu& g) {
    all_same = all_same && i < want.size() && t == want[i].first && same(g, want[i].second);
    ++i;
  });
  CHECK(i == want.size());
  CHECK(all_same);
  // The same samples as they lie packed: their bytes unpack to them, and
  // their node and GPU read in place.
  size_t j = 0;
  while (j < want.size() && want[j].first < from) ++j;
  w.for_each_packed_since(from, [&](int64_t t, gpu_packed::View v) {
    Gpu g;
    const char* end = gpu_packed::get(v.p, &g);
    all_same = all_same && j < want.size() && t == want[j].first && same(g, want[j].second) &&
               static_cast<size_t>(end - v.p) == v.n && v.node() == g.node && v.gpu() == g.gpu;
    ++j;
  });
  CHECK(j == want.size());
  CHECK(all_same);
}

// Times before, at and after the window's, and of samples across it (some
// of equal times, some starting a chunk).
void check_since_everywhere(const timeline::GpuWindow& w, const std::deque<std::pair<int64_t, Gpu>>& want,
                            std::mt19937_64& rng) {
  check_since(w, want, std::numeric_limits<int64_t>::min());
  check_since(w, want, std::numeric_limits<int64_t>::max());
  if (want.empty()) return;
  check_since(w, want, want.front().first);
  check_since(w, want, want.front().first - 1);
  check_since(w, want, want.back().first);
  check_since(w, want, want.back().first + 1);
  for (int k = 0; k < 8; ++k) {
    const int64_t t = want[rng() % want.size()].first;
    check_since(w, want, t);
    check_since(w, want, t + 1);
  }
}

}  // namespace

TEST_CASE(
    "gpu window: samples come back as pushed, oldest first, with only their fields, across chunks, all or those "
    "since a time") {
  std::mt19937_64 rng(13);
  for (int mode : {0, 1, 2}) {  // required fields only, every field, a random half
    CAPTURE(mode);
    timeline::GpuWindow w;
    std::deque<std::pair<int64_t, Gpu>> ref;
    CHECK(w.empty());
    w.for_each([](int64_t, const Gpu&) { FAIL("an empty window has no samples"); });
    int64_t t = 1'000;
    bool pushed_same = true;
    // Waves of pushes and pops that cross many 256 KiB chunks, emptying the
    // window now and then, as a run's window slides and a new run starts.
    for (int wave = 0; wave < 12; ++wave) {
      const int pushes = static_cast<int>(rng() % 20'000);
      for (int k = 0; k < pushes; ++k) {
        t += static_cast<int64_t>(rng() % 3);  // equal times too
        Gpu g = random_gpu(rng, mode);
        const gpu_packed::View v = w.push_back(t, g);  // where it now lies
        Gpu back;
        gpu_packed::get(v.p, &back);
        pushed_same = pushed_same && v.n == gpu_packed::bytes(g.present) && same(back, g);
        ref.emplace_back(t, g);
      }
      check_equal(w, ref);
      check_since_everywhere(w, ref, rng);
      const size_t pops = wave % 4 == 3 ? ref.size() : rng() % (ref.size() + 1);
      for (size_t k = 0; k < pops; ++k) {
        REQUIRE(w.front_time() == ref.front().first);
        w.pop_front();
        ref.pop_front();
      }
      check_equal(w, ref);
      check_since_everywhere(w, ref, rng);
    }
    CHECK(pushed_same);
  }
}

TEST_CASE("gpu window: NaN and infinities, extreme integers, and the defaults of absent fields") {
  timeline::GpuWindow w;
  std::deque<std::pair<int64_t, Gpu>> ref;
  Gpu g;
  g.node = Symbol::intern("n");
  g.gpu = -1;
  g.set_present(Gpu::F::node);
  g.set_present(Gpu::F::gpu);
  g.util_pct = std::numeric_limits<double>::quiet_NaN();
  g.set_present(Gpu::F::util_pct);
  g.temp_c = -std::numeric_limits<double>::infinity();
  g.set_present(Gpu::F::temp_c);
  g.xid = std::numeric_limits<int64_t>::min();
  g.set_present(Gpu::F::xid);
  g.mem_total_bytes = std::numeric_limits<int64_t>::max();
  g.set_present(Gpu::F::mem_total_bytes);
  w.push_back(std::numeric_limits<int64_t>::min(), g);
  ref.emplace_back(std::numeric_limits<int64_t>::min(), g);
  // A value in an absent field is not kept: the window gives the default back.
  Gpu stale = g;
  stale.power_w = 123.0;  // not marked present
  w.push_back(std::numeric_limits<int64_t>::max(), stale);
  ref.emplace_back(std::numeric_limits<int64_t>::max(), g);
  check_equal(w, ref);
}

TEST_CASE("gpu window: a window that slides keeps its memory bounded, and packs a sparse sample small") {
  std::mt19937_64 rng(7);
  timeline::GpuWindow sparse, full;
  // 1024 GPUs x 200 samples with 2 fields, and with all of them.
  for (int i = 0; i < 204'800; ++i) {
    sparse.push_back(i, random_gpu(rng, 0));
    full.push_back(i, random_gpu(rng, 1));
  }
  // A Gpu is 160 bytes: the sparse window must be far below, the full one not above.
  CHECK(sparse.bytes() < 204'800 * 40);
  CHECK(full.bytes() < 204'800 * (sizeof(Gpu) + 16));
  // Sliding: as many out as in, for many times the window; its chunks are reused.
  const size_t held = full.bytes();
  for (int i = 0; i < 1'000'000; ++i) {
    full.pop_front();
    full.push_back(204'800 + i, random_gpu(rng, 1));
  }
  CHECK(full.size() == 204'800);
  CHECK(full.bytes() <= held + 256 * 1024);
}

TEST_CASE("gpu window: the samples since a time include those of that time in the chunks before") {
  // 10,000 samples of one time fill several 256 KiB chunks: a chunk that
  // starts at `from` does not start the samples of `from`.
  std::mt19937_64 rng(5);
  timeline::GpuWindow w;
  std::deque<std::pair<int64_t, Gpu>> ref;
  for (int64_t t : {10, 20, 30}) {
    for (int k = 0; k < 10'000; ++k) {
      Gpu g = random_gpu(rng, 1);
      w.push_back(t, g);
      ref.emplace_back(t, g);
    }
  }
  REQUIRE(w.bytes() > 4 * 256 * 1024);
  for (int64_t from : {9, 10, 11, 20, 21, 30, 31}) check_since(w, ref, from);
}
