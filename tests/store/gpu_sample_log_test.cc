// The packed log of kept GPU samples (MetricBatch::gpu_samples) against the
// rows pushed into it: the same samples, in the same order, bit for bit,
// whatever fields each has; node and GPU even where their presence bits are
// not set; and the same after it grows, is appended to, copied or moved.
#include "store/gpu_sample_log.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "tests/random_gpu.h"

using namespace runlens;
using store::GpuSampleLog;
using store::GpuSampleRow;
using testing::random_gpu;
using testing::same;

namespace {

std::vector<GpuSampleRow> random_rows(std::mt19937_64& rng, size_t n, int64_t* t) {
  std::vector<GpuSampleRow> rows;
  for (size_t i = 0; i < n; ++i) {
    *t += static_cast<int64_t>(rng() % 3);  // equal times too
    rows.push_back({*t, random_gpu(rng, static_cast<int>(rng() % 3)), rng() % 2 ? "failure" : "recent"});
  }
  return rows;
}

void check_same(const GpuSampleLog& log, const std::vector<GpuSampleRow>& want) {
  REQUIRE(log.size() == want.size());
  CHECK(log.empty() == want.empty());
  size_t i = 0;
  bool all_same = true;
  log.for_each([&](const GpuSampleLog::Entry& e) {
    const bool ok = i < want.size() && e.time_ns() == want[i].time_ns && e.node() == want[i].sample.node &&
                    e.kept_for().str() == want[i].kept_for && same(e.sample(), want[i].sample);
    all_same = all_same && ok;
    ++i;
  });
  CHECK(i == want.size());
  CHECK(all_same);
  const auto rows = log.rows();
  REQUIRE(rows.size() == want.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    all_same = all_same && rows[k].time_ns == want[k].time_ns && rows[k].kept_for == want[k].kept_for &&
               same(rows[k].sample, want[k].sample);
  }
  CHECK(all_same);
}

}  // namespace

TEST_CASE("gpu sample log: samples come back as pushed, with only their fields, as it grows") {
  std::mt19937_64 rng(17);
  int64_t t = 1'000;
  GpuSampleLog log;
  check_same(log, {});
  // Past its first room many times over; with and without room reserved.
  auto rows = random_rows(rng, 30'000, &t);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == 10'000) log.reserve(5);
    log.push_back(rows[i].time_ns, rows[i].sample, Symbol::intern(rows[i].kept_for));
  }
  check_same(log, rows);
  // Smaller than the rows it holds: a DCGM sample of seven fields takes 88 bytes.
  CHECK(log.bytes() < rows.size() * sizeof(GpuSampleRow));
  log.clear();
  check_same(log, {});
  log.push_back(rows[0]);
  check_same(log, {rows[0]});
}

TEST_CASE("gpu sample log: node and GPU come back without their presence bits, absent fields as defaults") {
  Gpu g;
  g.node = Symbol::intern("gpu-node-3");
  g.gpu = 5;  // neither marked present
  g.temp_c = 70;
  g.set_present(Gpu::F::temp_c);
  g.util_pct = 55;  // not marked present: not kept
  GpuSampleLog log;
  log.push_back(7, g, Symbol::intern("failure"));
  const auto rows = log.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].time_ns == 7);
  CHECK(rows[0].kept_for == "failure");
  CHECK(rows[0].sample.node == g.node);
  CHECK(rows[0].sample.gpu == 5);
  CHECK(rows[0].sample.present == g.present);
  CHECK(rows[0].sample.temp_c == 70);
  CHECK(rows[0].sample.util_pct == Gpu().util_pct);

  // NaN, infinities and extreme integers, bit for bit.
  Gpu e;
  e.node = g.node;
  e.util_pct = std::numeric_limits<double>::quiet_NaN(), e.set_present(Gpu::F::util_pct);
  e.temp_c = -std::numeric_limits<double>::infinity(), e.set_present(Gpu::F::temp_c);
  e.mem_used_bytes = std::numeric_limits<int64_t>::min(), e.set_present(Gpu::F::mem_used_bytes);
  e.xid = std::numeric_limits<int64_t>::max(), e.set_present(Gpu::F::xid);
  log.push_back(8, e, Symbol::intern("recent"));
  const auto both = log.rows();
  REQUIRE(both.size() == 2);
  CHECK(same(both[1].sample, e));
}

TEST_CASE("gpu sample log: append moves the samples after its own and leaves the other empty; copies are equal") {
  std::mt19937_64 rng(23);
  int64_t t = 0;
  auto a_rows = random_rows(rng, 700, &t);
  auto b_rows = random_rows(rng, 900, &t);

  GpuSampleLog empty, b(b_rows);
  empty.append(b);  // into an empty log: taken whole
  check_same(empty, b_rows);
  check_same(b, {});

  GpuSampleLog a(a_rows), b2(b_rows);
  a.append(b2);
  auto ab = a_rows;
  ab.insert(ab.end(), b_rows.begin(), b_rows.end());
  check_same(a, ab);
  check_same(b2, {});
  b2.push_back(a_rows[0]);  // still usable
  check_same(b2, {a_rows[0]});

  GpuSampleLog copy(a);
  check_same(copy, ab);
  GpuSampleLog assigned;
  assigned = copy;
  check_same(assigned, ab);
  GpuSampleLog moved(std::move(copy));
  check_same(moved, ab);
  assigned = GpuSampleLog{a_rows[1], a_rows[2]};
  check_same(assigned, {a_rows[1], a_rows[2]});
}

TEST_CASE("gpu sample log: a sample pushed as it lies packed is the same as the sample pushed") {
  std::mt19937_64 rng(29);
  GpuSampleLog from_gpu, from_packed;
  std::vector<char> bytes(gpu_packed::kMaxBytes);
  for (int i = 0; i < 2'000; ++i) {
    Gpu g = random_gpu(rng, i % 3);
    if (i % 7 == 0) g.clear(Gpu::F::gpu);  // absent: the default is read
    if (i % 11 == 0) g.clear(Gpu::F::node), g.node = Symbol();
    if (i % 7 == 0) g.gpu = Gpu().gpu;
    const Symbol why = Symbol::intern(i % 2 ? "failure" : "recent");
    from_gpu.push_back(i, g, why);
    const char* end = gpu_packed::put(bytes.data(), g);
    const gpu_packed::View v{bytes.data(), static_cast<size_t>(end - bytes.data())};
    CHECK(v.n == gpu_packed::bytes(g.present));
    CHECK(v.node() == g.node);
    CHECK(v.gpu() == g.gpu);
    from_packed.push_back(i, g.node, g.gpu, v, why);
  }
  CHECK(from_packed.bytes() == from_gpu.bytes());
  check_same(from_packed, from_gpu.rows());
}

TEST_CASE("gpu sample log: gpu_packed::offset finds each field where the sample was packed, -1 where it has none") {
  std::mt19937_64 rng(1309);
  int64_t t = 0;
  GpuSampleLog log;
  const std::vector<GpuSampleRow> rows = random_rows(rng, 400, &t);
  for (const auto& r : rows) log.push_back(r);
  size_t i = 0;
  log.for_each([&](const GpuSampleLog::Entry& e) {
    const Gpu& g = rows[i++].sample;
    CHECK(gpu_packed::present_at(e.packed()) == g.present);
#define CHECK_AT_(T, name, Camel, req)                                  \
  {                                                                     \
    const int at = gpu_packed::offset(g.present, Gpu::F::name);         \
    if (g.has(Gpu::F::name)) {                                          \
      REQUIRE(at >= 4);                                                 \
      CHECK(std::memcmp(e.packed() + at, &g.name, sizeof g.name) == 0); \
    } else {                                                            \
      CHECK(at == -1);                                                  \
    }                                                                   \
  }
    RUNLENS_GPU_FIELDS(CHECK_AT_)
#undef CHECK_AT_
  });
  CHECK(i == rows.size());
}
