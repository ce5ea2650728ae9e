#include "store/sqlite/gpu_blocks.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "store/gpu_sample_log.h"
#include "store/sqlite/sqlite_store.h"
#include "tests/random_gpu.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using store::GpuSampleRow;
using testing::sql_blob;
using testing::SqliteFile;
namespace sq = store::sqlite;

namespace {

GpuSampleRow sample(int64_t t, int32_t gpu) { return testing::gpu_row("gpu-node-7", t, gpu); }

// What dcgm-exporter reports: noisy util, temperature and power, a clock and
// memory that hold still. 8 GPUs x 14 samples, the GPUs of a time together.
std::vector<GpuSampleRow> dcgm_block(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 1);
  std::vector<GpuSampleRow> rows;
  for (int step = 0; step < 14; ++step) {
    const int64_t t = 1767225608220298101 + step * int64_t{3211285582};
    for (int g = 0; g < 8; ++g) {
      GpuSampleRow r = sample(t, g);
      r.sample.util_pct = 92 + noise(rng), r.sample.set_present(Gpu::F::util_pct);
      r.sample.temp_c = 68 + noise(rng), r.sample.set_present(Gpu::F::temp_c);
      r.sample.power_w = 660 + noise(rng), r.sample.set_present(Gpu::F::power_w);
      r.sample.sm_clock_mhz = 1980, r.sample.set_present(Gpu::F::sm_clock_mhz);
      r.sample.mem_used_bytes = 82678120448, r.sample.set_present(Gpu::F::mem_used_bytes);
      rows.push_back(r);
    }
  }
  return rows;
}

// Every kind of value a block must keep bit for bit, presence varying from
// sample to sample, times out of order and at the ends of int64.
std::vector<GpuSampleRow> odd_block() {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const int64_t times[] = {0, INT64_MAX, INT64_MIN, -5, 7, 7, 1767225608220298101};
  const double values[] = {nan, -0.0, inf, -inf, 1e-310, 92.5, 0.0};
  std::vector<GpuSampleRow> rows;
  for (size_t i = 0; i < std::size(times); ++i) {
    GpuSampleRow r = sample(times[i], i % 2 ? -3 : INT32_MAX - static_cast<int32_t>(i));
    if (i % 3 != 1) r.sample.util_pct = values[i], r.sample.set_present(Gpu::F::util_pct);
    r.sample.sm_active_pct = values[(i + 1) % std::size(values)], r.sample.set_present(Gpu::F::sm_active_pct);
    if (i == 4) r.sample.xid = 79, r.sample.set_present(Gpu::F::xid);
    r.sample.throttle_reasons = INT64_MIN + static_cast<int64_t>(i), r.sample.set_present(Gpu::F::throttle_reasons);
    if (i % 2) r.sample.ecc_dbe_total = -1, r.sample.set_present(Gpu::F::ecc_dbe_total);
    rows.push_back(r);
  }
  return rows;
}

std::vector<const GpuSampleRow*> pointers(const std::vector<GpuSampleRow>& rows) {
  std::vector<const GpuSampleRow*> out;
  for (const auto& r : rows) out.push_back(&r);
  return out;
}

// The nine kept fields, bit for bit (NaN included), and what is present.
void check_same(const std::vector<GpuSampleRow>& got, const std::vector<GpuSampleRow>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    const Gpu& a = got[i].sample;
    const Gpu& b = want[i].sample;
    CHECK(got[i].time_ns == want[i].time_ns);
    CHECK(got[i].kept_for == want[i].kept_for);
    CHECK(a.node == b.node);
    CHECK(a.gpu == b.gpu);
    CHECK(a.present == b.present);
    const double reals_a[] = {a.util_pct, a.sm_active_pct, a.temp_c, a.power_w, a.sm_clock_mhz};
    const double reals_b[] = {b.util_pct, b.sm_active_pct, b.temp_c, b.power_w, b.sm_clock_mhz};
    const Gpu::F real_f[] = {Gpu::F::util_pct, Gpu::F::sm_active_pct, Gpu::F::temp_c, Gpu::F::power_w,
                             Gpu::F::sm_clock_mhz};
    for (int f = 0; f < 5; ++f) {
      if (b.has(real_f[f])) CHECK(std::memcmp(&reals_a[f], &reals_b[f], 8) == 0);
    }
    if (b.has(Gpu::F::mem_used_bytes)) CHECK(a.mem_used_bytes == b.mem_used_bytes);
    if (b.has(Gpu::F::throttle_reasons)) CHECK(a.throttle_reasons == b.throttle_reasons);
    if (b.has(Gpu::F::xid)) CHECK(a.xid == b.xid);
    if (b.has(Gpu::F::ecc_dbe_total)) CHECK(a.ecc_dbe_total == b.ecc_dbe_total);
  }
}

std::vector<GpuSampleRow> unpack(int64_t encoding, const std::string& data, int64_t n) {
  std::vector<GpuSampleRow> out;
  REQUIRE(sq::unpack_gpu_block(encoding, data, n, Symbol::intern("gpu-node-7"), "recent", &out));
  return out;
}

}  // namespace

TEST_CASE("GPU blocks: compact and column encodings give back every sample bit for bit") {
  const std::vector<std::vector<GpuSampleRow>> blocks = {dcgm_block(1), odd_block(), {sample(42, 0)}, {}};
  for (const auto& rows : blocks) {
    CAPTURE(rows.size());
    std::string compact, columns;
    sq::pack_gpu_compact(&compact, pointers(rows));
    sq::pack_gpu_columns(&columns, pointers(rows));
    const auto n = static_cast<int64_t>(rows.size());
    check_same(unpack(sq::kGpuCompact, compact, n), rows);
    check_same(unpack(sq::kGpuColumns, columns, n), rows);
  }
}

// A block's samples as a store batch holds them: packed in its log.
std::vector<store::GpuSampleLog::Entry> entries(const store::GpuSampleLog& log) {
  std::vector<store::GpuSampleLog::Entry> out;
  log.for_each([&](const store::GpuSampleLog::Entry& e) { out.push_back(e); });
  return out;
}

TEST_CASE("GPU blocks: samples encoded where they lie in a batch's log give the bytes their rows give") {
  std::vector<std::vector<GpuSampleRow>> blocks = {dcgm_block(3), odd_block(), {sample(42, 0)}, {}};
  // Random fields present (the same in every sample, or each its own), random
  // values, node and GPU bits present or not (a log keeps both in its header).
  std::mt19937_64 rng(1307);
  for (int mode : {0, 1, 2, 2, 2}) {
    std::vector<GpuSampleRow> rows;
    for (int k = 0; k < 300; ++k) {
      GpuSampleRow r;
      r.time_ns = 1767225608220298101 + k * int64_t{250'000'000};
      r.sample = testing::random_gpu(rng, mode);
      if (k % 7 == 3) r.sample.clear(Gpu::F::gpu);
      if (k % 11 == 5) r.sample.clear(Gpu::F::node);
      r.kept_for = "failure";
      rows.push_back(r);
    }
    blocks.push_back(rows);
  }
  for (const auto& rows : blocks) {
    CAPTURE(rows.size());
    const store::GpuSampleLog log(rows);
    std::string from_rows, from_log;
    sq::pack_gpu_compact(&from_rows, pointers(rows));
    sq::pack_gpu_compact(&from_log, entries(log));
    CHECK(from_log == from_rows);
    check_same(unpack(sq::kGpuCompact, from_log, static_cast<int64_t>(rows.size())),
               unpack(sq::kGpuCompact, from_rows, static_cast<int64_t>(rows.size())));
  }
}

TEST_CASE("GPU blocks: a dcgm-exporter block takes about half the bytes of columns") {
  const auto rows = dcgm_block(2);
  std::string compact, columns;
  sq::pack_gpu_compact(&compact, pointers(rows));
  sq::pack_gpu_columns(&columns, pointers(rows));
  CHECK(columns.size() == 8 + rows.size() * 52);
  // Header 12, the first time 8; per sample a time difference (1 byte within
  // a time, 5 to the next), a GPU (1) and three noisy fields (24); the clock
  // and memory once (16).
  CHECK(compact.size() == 12 + 8 + (rows.size() - 14) * 1 + 13 * 5 + rows.size() * (1 + 24) + 16);
  CHECK(compact.size() * 100 < columns.size() * 55);
}

TEST_CASE("GPU blocks: damaged bytes, a wrong count or an unknown encoding are refused, never misread past the end") {
  const auto rows = odd_block();
  std::string compact;
  sq::pack_gpu_compact(&compact, pointers(rows));
  const auto n = static_cast<int64_t>(rows.size());
  const Symbol node = Symbol::intern("gpu-node-7");
  std::vector<GpuSampleRow> out(1, sample(1, 1));  // what a reader held before stays as it was
  for (int64_t wrong : {int64_t{-1}, int64_t{0}, n - 1, n + 1, int64_t{1} << 40}) {
    CAPTURE(wrong);
    CHECK_FALSE(sq::unpack_gpu_block(sq::kGpuCompact, compact, wrong, node, "recent", &out));
    CHECK(out.size() == 1);
  }
  for (int64_t encoding : {int64_t{0}, int64_t{4}, int64_t{-1}}) {
    CHECK_FALSE(sq::unpack_gpu_block(encoding, compact, n, node, "recent", &out));
  }
  // Every truncation: refused (each copy lives on the heap at its own size).
  for (size_t len = 0; len < compact.size(); ++len) {
    CAPTURE(len);
    std::vector<char> cut(compact.begin(), compact.begin() + static_cast<std::ptrdiff_t>(len));
    CHECK_FALSE(
        sq::unpack_gpu_block(sq::kGpuCompact, std::string_view(cut.data(), cut.size()), n, node, "recent", &out));
    CHECK(out.size() == 1);
  }
  // Every byte changed: refused, or n samples (a value's byte changed is another valid block).
  for (size_t i = 0; i < compact.size(); ++i) {
    for (int bits : {0x01, 0x80, 0xFF}) {
      std::string bad = compact;
      bad[i] = static_cast<char>(bad[i] ^ bits);
      std::vector<GpuSampleRow> got;
      if (sq::unpack_gpu_block(sq::kGpuCompact, bad, n, node, "recent", &got)) {
        CHECK(got.size() == rows.size());
      } else {
        CHECK(got.empty());
      }
    }
  }
  // Extra bytes at the end are not a block of n samples either.
  CHECK_FALSE(sq::unpack_gpu_block(sq::kGpuCompact, compact + std::string(1, '\0'), n, node, "recent", &out));
}

TEST_CASE("GPU blocks: a version-9 store's column blocks read after it is migrated, next to new compact ones") {
  const std::string db = testing::fresh_dir("gpu-blocks") + "/v9.db";
  { sq::open(db, store::OpenMode::kReadWrite, 9); }
  const auto old_rows = dcgm_block(3);
  {
    std::string blob;
    sq::pack_gpu_columns(&blob, pointers(old_rows));
    SqliteFile f(db);
    f.exec(
        "INSERT INTO gpu_sample_blocks (node, first_ns, last_ns, kept_for, samples, data, encoding) "
        "VALUES ('gpu-node-7', " +
        std::to_string(old_rows.front().time_ns) + ", " + std::to_string(old_rows.back().time_ns) + ", 'recent', " +
        std::to_string(old_rows.size()) + ", " + sql_blob(blob) + ", 2)");
  }
  store::Store s = store::open_store("sqlite://" + db);
  CHECK(s.schema_version == sq::kSchemaVersion);
  std::vector<GpuSampleRow> later;
  for (int g = 0; g < 8; ++g) {
    GpuSampleRow r = sample(old_rows.back().time_ns + 1000, g);
    r.sample.temp_c = 70, r.sample.set_present(Gpu::F::temp_c);
    later.push_back(r);
  }
  store::MetricBatch mb;
  mb.gpu_samples = store::GpuSampleLog(later);
  s.metrics->write(mb);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT encoding, samples FROM gpu_sample_blocks ORDER BY first_ns") == "2|112\n3|8\n");
  }
  auto want = old_rows;
  want.insert(want.end(), later.begin(), later.end());
  check_same(s.metrics->gpu_samples({"gpu-node-7"}, INT64_MIN, INT64_MAX), want);
}

TEST_CASE("blocks: one batch's rows go to a block per node and reason, and per run and step") {
  const std::string db = testing::fresh_dir("blocks") + "/s.db";
  store::Store s = store::open_store("sqlite://" + db);
  store::MetricBatch mb;
  // Two nodes, their samples interleaved; each node's samples change reason
  // in the middle of a run of the same node (a failure window opening).
  const char* nodes[] = {"gpu-node-1", "gpu-node-2"};
  const char* reasons[] = {"recent", "recent", "failure", "failure", "recent", "failure"};
  auto reason = [&](int node, int i) { return reasons[node == 0 ? i : 5 - i]; };  // the second node's reversed
  for (int i = 0; i < 6; ++i) {
    for (int n = 0; n < 2; ++n) mb.gpu_samples.push_back(testing::gpu_row(nodes[n], 1000 + i, 0, reason(n, i)));
  }
  // The same step of two runs, one after the other, ranks in order.
  const char* runs[] = {"run-a", "run-b"};
  auto step_ms = [](int run, int32_t rank) { return 100.0 * (run + 1) + rank; };
  for (int k = 0; k < 2; ++k) {
    for (int32_t rank = 0; rank < 3; ++rank) {
      store::RankStepRow r;
      r.run_id = runs[k];
      r.step = 5;
      r.rank = rank;
      r.gpu = rank;
      r.step_ms = step_ms(k, rank);
      r.work_ms = r.step_ms;
      r.ratio_to_median = 1.0;
      r.kept_for = "failure";
      store::append_row(mb.rank_steps, r);
    }
  }
  s.metrics->write(mb);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT node, kept_for, samples FROM gpu_sample_blocks ORDER BY node, kept_for") ==
          "gpu-node-1|failure|3\ngpu-node-1|recent|3\ngpu-node-2|failure|3\ngpu-node-2|recent|3\n");
    CHECK(f.rows("SELECT run_id, step, ranks FROM rank_step_blocks ORDER BY run_id") == "run-a|5|3\nrun-b|5|3\n");
  }
  for (int n = 0; n < 2; ++n) {
    auto got = s.metrics->gpu_samples({nodes[n]}, INT64_MIN, INT64_MAX);  // in no promised order
    std::sort(got.begin(), got.end(), [](const auto& x, const auto& y) { return x.time_ns < y.time_ns; });
    REQUIRE(got.size() == 6);
    for (int i = 0; i < 6; ++i) {
      CAPTURE(n);
      CAPTURE(i);
      CHECK(got[i].time_ns == 1000 + i);
      CHECK(got[i].kept_for == reason(n, i));
    }
  }
  for (int k = 0; k < 2; ++k) {
    auto ranks = s.metrics->rank_steps(runs[k], {}, 10);
    REQUIRE(ranks.size() == 3);
    for (int32_t rank = 0; rank < 3; ++rank) CHECK(ranks[rank].step_ms == step_ms(k, rank));
  }
}

TEST_CASE("a rank's record: every field back as written, the ratio where the store's ratio reader looks") {
  const double comm = 12.5, wait = 3.25;
  for (int present = 0; present < 4; ++present) {
    CAPTURE(present);
    store::RankStepRow r;
    r.rank = 713;
    r.gpu = 5;
    r.step_ms = 2100.5;
    r.work_ms = 1900.25;
    if (present & 1) r.comm_ms = comm;
    if (present & 2) r.data_wait_ms = wait;
    r.ratio_to_median = 1.75;
    char bytes[store::rank_record::kBytes];
    store::rank_record::write(bytes, r);
    const store::RankStepRow back = store::rank_record::read(bytes);
    CHECK(back.rank == 713);
    CHECK(back.gpu == 5);
    CHECK(back.step_ms == 2100.5);
    CHECK(back.work_ms == 1900.25);
    CHECK(back.comm_ms == r.comm_ms);
    CHECK(back.data_wait_ms == r.data_wait_ms);
    CHECK(back.ratio_to_median == 1.75);
    double ratio = 0;
    std::memcpy(&ratio, bytes + store::rank_record::kRatioAt, sizeof ratio);
    CHECK(ratio == 1.75);
  }
}

TEST_CASE("rank rows appended to blocks: a block a step of a run, rows back in order") {
  std::vector<store::RankStepBlock> blocks;
  for (const char* run : {"run-a", "run-b"}) {
    for (int64_t step : {7, 8}) {
      for (int32_t rank = 0; rank < 3; ++rank) {
        store::RankStepRow r;
        r.run_id = run;
        r.step = step;
        r.rank = rank;
        r.time_ns = step * 1000;
        r.step_ms = static_cast<double>(step * 10 + rank);
        r.kept_for = "failure";
        store::append_row(blocks, r);
      }
    }
  }
  REQUIRE(blocks.size() == 4);
  CHECK(blocks[1].run_id == "run-a");
  CHECK(blocks[1].step == 8);
  CHECK(blocks[2].run_id == "run-b");
  CHECK(blocks[2].ranks() == 3);
  const auto rows = store::rows_of(blocks);
  REQUIRE(rows.size() == 12);
  CHECK(rows[4].run_id == "run-a");
  CHECK(rows[4].step == 8);
  CHECK(rows[4].rank == 1);
  CHECK(rows[4].step_ms == 81);
  CHECK(rows[4].time_ns == 8000);
  CHECK(rows[11].run_id == "run-b");
  CHECK(rows[11].kept_for == "failure");
}

TEST_CASE("a batch prepared ahead (on another thread) is stored as the same batch written unprepared") {
  // Two nodes' samples, reasons changing, and rollups of two tiers: a GPU
  // twice in one bucket (the later row wins), and a second batch that merges
  // into a bucket stored already.
  auto batches = [] {
    std::vector<store::MetricBatch> out(2);
    std::vector<GpuSampleRow> rows = dcgm_block(5);
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].kept_for = i % 3 ? "failure" : "recent";
      if (i % 2) rows[i].sample.node = Symbol::intern("gpu-node-3");
    }
    out[0].gpu_samples = store::GpuSampleLog(rows);
    for (int k = 0; k < 2; ++k) {
      for (int64_t res : {int64_t{60'000'000'000}, int64_t{600'000'000'000}}) {
        for (int32_t gpu : {3, 1, 3, 0}) {
          store::GpuRollupRow r;
          r.node = k ? "gpu-node-3" : "gpu-node-7";
          r.gpu = gpu;
          r.resolution_ns = res;
          r.bucket_ns = 1'000 * res;
          r.samples = 4 + gpu + k;
          r.util_pct.add(90 + gpu + k);
          r.temp_c.add(60 + gpu);
          r.xid = gpu == 1 ? 79 : 0;
          out[static_cast<size_t>(k)].gpu_rollups.push_back(r);
        }
      }
    }
    out[1].gpu_rollups.front().node = "gpu-node-7";  // into a bucket the first batch stored
    return out;
  };
  std::string dumps[2];
  for (int prepared = 0; prepared < 2; ++prepared) {
    const std::string db = testing::fresh_dir(prepared ? "prepared" : "unprepared") + "/s.db";
    {
      store::Store s = store::open_store("sqlite://" + db);
      for (store::MetricBatch& mb : batches()) {
        if (prepared) {
          std::thread ahead([&] { mb.prepared = s.metrics->prepare(mb); });
          ahead.join();
          REQUIRE(mb.prepared != nullptr);
        }
        s.metrics->write(mb);
      }
    }
    SqliteFile f(db);
    dumps[prepared] =
        f.rows(
            "SELECT node, first_ns, last_ns, kept_for, samples, encoding, hex(data) FROM gpu_sample_blocks "
            "ORDER BY rowid") +
        f.rows("SELECT resolution_ns, node, bucket_ns, gpus, hex(data) FROM gpu_rollups ORDER BY rowid");
  }
  CHECK(dumps[0].find("gpu-node-3|") != std::string::npos);
  CHECK(dumps[1] == dumps[0]);
}
