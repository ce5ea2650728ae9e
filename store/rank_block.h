// The rank rows a store batch keeps at full resolution
// (MetricBatch::rank_steps), a step at a time, packed as the store keeps
// them: one block a step of a run, each rank a fixed 56-byte little-endian
// record in the order the ranks came (docs/storage.md, "Blocks"). A failure
// window keeps every rank of a hundred steps, and the timeline builder keeps
// them on the executor's thread: made as RankStepRows (184 bytes, three
// strings each) and packed again by the store's writer, that was the largest
// of what a failure window and a run's end allocated, and the writer's loop
// over them. Now the builder writes each rank's record into its step's block
// once (docs/performance.md, "Rank rows kept packed").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace runlens::store {

// One rank's step at full resolution, kept inside failure windows and for the
// most recent window of a run.
struct RankStepRow {
  std::string run_id;
  int64_t step = 0;
  int32_t rank = 0;
  std::string node;
  int32_t gpu = -1;
  int64_t time_ns = 0;
  double step_ms = 0, work_ms = 0;
  std::optional<double> comm_ms, data_wait_ms;
  double ratio_to_median = 0;  // work_ms / the step's median work
  std::string kept_for;        // "failure" | "recent"
};

namespace rank_record {

static_assert(sizeof(double) == 8 && sizeof(int32_t) == 4);

// rank i32, gpu i32, presence u32 (1 comm_ms, 2 data_wait_ms), pad u32,
// step_ms, work_ms, comm_ms, data_wait_ms, ratio_to_median f64 (an absent
// comm_ms or data_wait_ms is 0).
constexpr size_t kBytes = 4 * 4 + 5 * 8;
constexpr size_t kRatioAt = 4 * 4 + 4 * 8;  // where the store's ratio reader looks too

// The record of one rank's step at `out` (kBytes of room).
inline void write(char* out, int32_t rank, int32_t gpu, double step_ms, double work_ms, const double* comm_ms,
                  const double* data_wait_ms, double ratio_to_median) {
  const uint32_t present = (comm_ms ? 1u : 0u) | (data_wait_ms ? 2u : 0u);
  const uint32_t pad = 0;
  const double comm = comm_ms ? *comm_ms : 0, wait = data_wait_ms ? *data_wait_ms : 0;
  std::memcpy(out, &rank, 4);
  std::memcpy(out + 4, &gpu, 4);
  std::memcpy(out + 8, &present, 4);
  std::memcpy(out + 12, &pad, 4);
  std::memcpy(out + 16, &step_ms, 8);
  std::memcpy(out + 24, &work_ms, 8);
  std::memcpy(out + 32, &comm, 8);
  std::memcpy(out + 40, &wait, 8);
  std::memcpy(out + kRatioAt, &ratio_to_median, 8);
}

inline void write(char* out, const RankStepRow& r) {
  write(out, r.rank, r.gpu, r.step_ms, r.work_ms, r.comm_ms ? &*r.comm_ms : nullptr,
        r.data_wait_ms ? &*r.data_wait_ms : nullptr, r.ratio_to_median);
}

// The rank's fields of the record at `p` (not its run, step, time, node or
// reason, which are the block's or the run's).
inline RankStepRow read(const char* p) {
  RankStepRow r;
  uint32_t present = 0;
  double comm = 0, wait = 0;
  std::memcpy(&r.rank, p, 4);
  std::memcpy(&r.gpu, p + 4, 4);
  std::memcpy(&present, p + 8, 4);
  std::memcpy(&r.step_ms, p + 16, 8);
  std::memcpy(&r.work_ms, p + 24, 8);
  std::memcpy(&comm, p + 32, 8);
  std::memcpy(&wait, p + 40, 8);
  std::memcpy(&r.ratio_to_median, p + kRatioAt, 8);
  if (present & 1u) r.comm_ms = comm;
  if (present & 2u) r.data_wait_ms = wait;
  return r;
}

}  // namespace rank_record

// A step of a run kept at full resolution: its ranks' records, as the store's
// rank_step_blocks row holds them.
struct RankStepBlock {
  std::string run_id;
  int64_t step = 0;
  int64_t time_ns = 0;
  std::string kept_for;  // "failure" | "recent"
  std::string data;      // rank_record::kBytes a rank

  size_t ranks() const { return data.size() / rank_record::kBytes; }
  // The ranks as rows (no node: the store finds it from the run's allocations).
  std::vector<RankStepRow> rows() const {
    std::vector<RankStepRow> out;
    out.reserve(ranks());
    for (size_t i = 0; i < ranks(); ++i) {
      RankStepRow r = rank_record::read(data.data() + i * rank_record::kBytes);
      r.run_id = run_id;
      r.step = step;
      r.time_ns = time_ns;
      r.kept_for = kept_for;
      out.push_back(std::move(r));
    }
    return out;
  }
};

// Appends `r` to the last block of `blocks` where it is of the same run and
// step, else to a new block of its run, step, time and reason.
inline void append_row(std::vector<RankStepBlock>& blocks, const RankStepRow& r) {
  if (blocks.empty() || blocks.back().step != r.step || blocks.back().run_id != r.run_id)
    blocks.push_back({r.run_id, r.step, r.time_ns, r.kept_for, {}});
  std::string& data = blocks.back().data;
  data.resize(data.size() + rank_record::kBytes);
  rank_record::write(data.data() + data.size() - rank_record::kBytes, r);
}

// Every row of `blocks`, in order.
inline std::vector<RankStepRow> rows_of(const std::vector<RankStepBlock>& blocks) {
  std::vector<RankStepRow> out;
  for (const RankStepBlock& b : blocks) {
    for (RankStepRow& r : b.rows()) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace runlens::store
