// The blobs of gpu_sample_blocks: a node's GPU samples of one commit, packed
// (docs/storage.md, "Blocks"). Three encodings, the table's `encoding`
// column saying which: 1, fixed-size records (stores before schema version
// 9); 2, columns (versions 9); 3, compact columns (version 10 on, what
// runlens writes). Every one is read. The nine fields kept are util_pct,
// sm_active_pct, temp_c, power_w, sm_clock_mhz (f64) and mem_used_bytes,
// throttle_reasons, xid, ecc_dbe_total (i64), in that order (bit i: field i).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace runlens::store::sqlite {

constexpr int64_t kGpuRecords = 1;
constexpr int64_t kGpuColumns = 2;
constexpr int64_t kGpuCompact = 3;

// Encoding 3 of `rows` (one node's, in time order) into *out (replaced).
void pack_gpu_compact(std::string* out, const std::vector<const GpuSampleRow*>& rows);
// The same, of samples where they lie in a store batch's log (one node's, in
// time order): the bytes are those of their rows, without unpacking them.
void pack_gpu_compact(std::string* out, const std::vector<GpuSampleLog::Entry>& samples);
// Encoding 2, which runlens wrote at schema version 9 (for tests of old blocks).
void pack_gpu_columns(std::string* out, const std::vector<const GpuSampleRow*>& rows);

// Appends the n samples of a block of `encoding` to *out, of `node` and
// `kept_for`. False, with *out as it was, when the bytes do not hold n
// samples of that encoding (or the encoding is unknown): nothing is read
// beyond `data`, whatever its bytes.
bool unpack_gpu_block(int64_t encoding, std::string_view data, int64_t n, Symbol node, const std::string& kept_for,
                      std::vector<GpuSampleRow>* out);

}  // namespace runlens::store::sqlite
