#include "store/sqlite/gpu_blocks.h"

#include <bit>
#include <cstring>
#include <type_traits>
#include <vector>

#include "schema/gpu_packed.h"

namespace runlens::store::sqlite {

namespace {

static_assert(std::endian::native == std::endian::little, "blocks are little-endian");

// The fields a block keeps, bit i for field i.
constexpr int kFields = 9;
constexpr Gpu::F kGpuFields[kFields] = {Gpu::F::util_pct,         Gpu::F::sm_active_pct, Gpu::F::temp_c,
                                        Gpu::F::power_w,          Gpu::F::sm_clock_mhz,  Gpu::F::mem_used_bytes,
                                        Gpu::F::throttle_reasons, Gpu::F::xid,           Gpu::F::ecc_dbe_total};
constexpr int kRealFields = 5;  // the first five are f64, the rest i64

uint32_t presence(const Gpu& g) {
  uint32_t present = 0;
  for (int i = 0; i < kFields; ++i) present |= g.has(kGpuFields[i]) ? 1u << i : 0u;
  return present;
}

// Field i of `g`: where its 8 bytes are (f64 or i64).
template <class G>
std::conditional_t<std::is_const_v<G>, const void*, void*> field_at(G& g, int i) {
  switch (i) {
    case 0:
      return &g.util_pct;
    case 1:
      return &g.sm_active_pct;
    case 2:
      return &g.temp_c;
    case 3:
      return &g.power_w;
    case 4:
      return &g.sm_clock_mhz;
    case 5:
      return &g.mem_used_bytes;
    case 6:
      return &g.throttle_reasons;
    case 7:
      return &g.xid;
    default:
      return &g.ecc_dbe_total;
  }
}
static_assert(sizeof(Gpu::util_pct) == 8 && sizeof(Gpu::mem_used_bytes) == 8, "fields are stored as 8 bytes");

// Field i's value as its 8 stored bytes (0 when the sample lacks it).
uint64_t field_bits(const Gpu& g, int i) {
  uint64_t bits = 0;
  if (g.has(kGpuFields[i])) std::memcpy(&bits, field_at(g, i), 8);
  return bits;
}
void set_field_bits(Gpu& g, int i, uint64_t bits) { std::memcpy(field_at(g, i), &bits, 8); }

// Writes into a buffer sized beforehand.
struct Writer {
  char* p;
  template <class T>
  void fixed(T v) {
    std::memcpy(p, &v, sizeof v);
    p += sizeof v;
  }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      *p++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
  }
};

// Reads within [p, end): every read checks that its bytes are there.
struct Reader {
  const char* p;
  const char* end;
  bool ok = true;
  template <class T>
  T fixed() {
    T v{};
    if (end - p < static_cast<std::ptrdiff_t>(sizeof v)) return ok = false, v;
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end) return ok = false, 0;
      const auto byte = static_cast<uint8_t>(*p++);
      if (shift == 63 && byte > 1) return ok = false, 0;  // past 64 bits
      v |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return v;
    }
    return ok = false, 0;
  }
};

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

size_t varint_size(uint64_t v) { return static_cast<size_t>((std::bit_width(v | 1) + 6) / 7); }

// A row of the block to come, its node and kept_for already known.
GpuSampleRow blank_row(Symbol node, const std::string& kept_for) {
  GpuSampleRow row;
  row.kept_for = kept_for;
  row.sample.node = node;
  row.sample.set_present(Gpu::F::node);
  row.sample.set_present(Gpu::F::gpu);
  return row;
}

// Encoding 1: per sample, time_ns i64, gpu i32, presence u32, then the nine
// fields (f64, then i64).
constexpr size_t kGpuRecord = 8 + 4 + 4 + kFields * 8;

bool unpack_records(std::string_view data, int64_t n, Symbol node, const std::string& kept_for,
                    std::vector<GpuSampleRow>* out) {
  if (n < 0 || data.size() / kGpuRecord < static_cast<uint64_t>(n) ||
      data.size() != static_cast<size_t>(n) * kGpuRecord)
    return false;
  Reader r{data.data(), data.data() + data.size()};
  for (int64_t k = 0; k < n; ++k) {
    GpuSampleRow row = blank_row(node, kept_for);
    row.time_ns = r.fixed<int64_t>();
    row.sample.gpu = r.fixed<int32_t>();
    const auto present = r.fixed<uint32_t>();
    for (int i = 0; i < kFields; ++i) {
      set_field_bits(row.sample, i, r.fixed<uint64_t>());
      if (present & (1u << i)) row.sample.set_present(kGpuFields[i]);
    }
    out->push_back(std::move(row));
  }
  return r.ok;
}

// Encoding 2: any u32, flags u32 (bit 0: presences follow), time_ns i64 x n,
// gpu i32 x n, [presence u32 x n], each field of `any`: n values.
size_t columns_size(size_t n, uint32_t any, bool per_sample) {
  return 8 + n * (8 + 4) + (per_sample ? 4 * n : 0) + static_cast<size_t>(std::popcount(any)) * 8 * n;
}

bool unpack_columns(std::string_view data, int64_t n, Symbol node, const std::string& kept_for,
                    std::vector<GpuSampleRow>* out) {
  // A sample takes at least 12 bytes: a count past the bytes is corrupt (and must not size anything).
  if (n < 0 || static_cast<uint64_t>(n) > data.size()) return false;
  Reader r{data.data(), data.data() + data.size()};
  const auto any = r.fixed<uint32_t>();
  const auto flags = r.fixed<uint32_t>();
  const bool per_sample = flags & 1u;
  if (!r.ok || (any >> kFields) != 0 || (flags >> 1) != 0 ||
      data.size() != columns_size(static_cast<size_t>(n), any, per_sample))
    return false;
  const size_t first = out->size();
  out->resize(first + static_cast<size_t>(n), blank_row(node, kept_for));
  GpuSampleRow* rows = out->data() + first;
  for (int64_t k = 0; k < n; ++k) rows[k].time_ns = r.fixed<int64_t>();
  for (int64_t k = 0; k < n; ++k) rows[k].sample.gpu = r.fixed<int32_t>();
  std::vector<uint32_t> present(static_cast<size_t>(n), any);
  if (per_sample) {
    for (auto& x : present) {
      x = r.fixed<uint32_t>();
      if (x & ~any) return out->resize(first), false;
    }
  }
  for (int i = 0; i < kFields; ++i) {
    if (!(any & (1u << i))) continue;
    for (int64_t k = 0; k < n; ++k) {
      set_field_bits(rows[k].sample, i, r.fixed<uint64_t>());
      if (present[static_cast<size_t>(k)] & (1u << i)) rows[k].sample.set_present(kGpuFields[i]);
    }
  }
  return r.ok ? true : (out->resize(first), false);
}

// Encoding 3: any u32, flags u32 (bit 0: presences follow), constant u32
// (bit i: field i's n values are one, stored once); the first time_ns i64,
// then each next one as a varint of the zigzagged difference to the one
// before; each gpu as a varint of its zigzag; [each presence as a varint];
// each field of `any`: its value once if constant, else n values.
bool unpack_compact(std::string_view data, int64_t n, Symbol node, const std::string& kept_for,
                    std::vector<GpuSampleRow>* out) {
  // A sample takes at least 2 bytes (its time and its GPU): a count past the
  // bytes is corrupt, and must not size anything.
  if (n < 0 || static_cast<uint64_t>(n) > data.size()) return false;
  Reader r{data.data(), data.data() + data.size()};
  const auto any = r.fixed<uint32_t>();
  const auto flags = r.fixed<uint32_t>();
  const auto constant = r.fixed<uint32_t>();
  if (!r.ok || (any >> kFields) != 0 || (flags >> 1) != 0 || (constant & ~any) != 0) return false;
  const bool per_sample = flags & 1u;
  const size_t first = out->size();
  out->resize(first + static_cast<size_t>(n), blank_row(node, kept_for));
  GpuSampleRow* rows = out->data() + first;
  auto fail = [&] {
    out->resize(first);
    return false;
  };
  uint64_t t = 0;
  for (int64_t k = 0; k < n; ++k) {
    t = k == 0 ? static_cast<uint64_t>(r.fixed<int64_t>()) : t + static_cast<uint64_t>(unzigzag(r.varint()));
    rows[k].time_ns = static_cast<int64_t>(t);
  }
  for (int64_t k = 0; k < n; ++k) {
    const int64_t gpu = unzigzag(r.varint());
    if (gpu < INT32_MIN || gpu > INT32_MAX) return fail();
    rows[k].sample.gpu = static_cast<int32_t>(gpu);
  }
  std::vector<uint32_t> present(static_cast<size_t>(n), any);
  if (per_sample) {
    for (auto& x : present) {
      const uint64_t v = r.varint();
      if (v & ~static_cast<uint64_t>(any)) return fail();
      x = static_cast<uint32_t>(v);
    }
  }
  for (int i = 0; i < kFields; ++i) {
    if (!(any & (1u << i))) continue;
    const bool once = constant & (1u << i);
    uint64_t bits = once ? r.fixed<uint64_t>() : 0;
    for (int64_t k = 0; k < n; ++k) {
      if (!once) bits = r.fixed<uint64_t>();
      set_field_bits(rows[k].sample, i, bits);
      if (present[static_cast<size_t>(k)] & (1u << i)) rows[k].sample.set_present(kGpuFields[i]);
    }
  }
  if (!r.ok || r.p != r.end) return fail();
  return true;
}

}  // namespace

void pack_gpu_columns(std::string* out, const std::vector<const GpuSampleRow*>& rows) {
  const size_t n = rows.size();
  uint32_t any = 0;
  bool per_sample = false;
  const uint32_t first = n ? presence(rows[0]->sample) : 0;
  for (const auto* r : rows) {
    const uint32_t present = presence(r->sample);
    any |= present;
    per_sample |= present != first;
  }
  out->resize(columns_size(n, any, per_sample));
  Writer w{out->data()};
  w.fixed(any);
  w.fixed(uint32_t{per_sample ? 1u : 0u});
  for (const auto* r : rows) w.fixed(r->time_ns);
  for (const auto* r : rows) w.fixed(r->sample.gpu);
  if (per_sample) {
    for (const auto* r : rows) w.fixed(presence(r->sample));
  }
  for (int i = 0; i < kFields; ++i) {
    if (!(any & (1u << i))) continue;
    for (const auto* r : rows) w.fixed(field_bits(r->sample, i));
  }
}

namespace {

// A block's samples gathered for the compact encoder: each read once, its
// nine fields as columns (field i of sample k at bits[i * n + k], 0 where the
// sample lacks it).
struct Columns {
  size_t n = 0;
  std::vector<int64_t> time;
  std::vector<int32_t> gpu;
  std::vector<uint32_t> presence;
  std::vector<uint64_t> bits;

  void resize(size_t samples) {
    n = samples;
    time.resize(n);
    gpu.resize(n);
    presence.resize(n);
    bits.resize(n * kFields);  // every element is written
  }
};

void gather(Columns* c, const std::vector<const GpuSampleRow*>& rows) {
  c->resize(rows.size());
  for (size_t k = 0; k < c->n; ++k) {
    const GpuSampleRow& r = *rows[k];
    c->time[k] = r.time_ns;
    c->gpu[k] = r.sample.gpu;
    c->presence[k] = presence(r.sample);
    for (int i = 0; i < kFields; ++i) c->bits[static_cast<size_t>(i) * c->n + k] = field_bits(r.sample, i);
  }
}

// Samples packed in a store batch's log, read where they lie: where a field
// lies follows from the sample's presence bits, worked out once for each set
// of them (a node's samples mostly share one).
void gather(Columns* c, const std::vector<GpuSampleLog::Entry>& samples) {
  c->resize(samples.size());
  uint32_t last_present = 0;
  uint32_t kept = 0;     // presence of the nine, for last_present
  int at[kFields] = {};  // where each lies, or -1
  bool known = false;
  for (size_t k = 0; k < c->n; ++k) {
    const GpuSampleLog::Entry& e = samples[k];
    const char* p = e.packed();
    const uint32_t present = gpu_packed::present_at(p);
    if (!known || present != last_present) {
      known = true;
      last_present = present;
      kept = 0;
      for (int i = 0; i < kFields; ++i) {
        at[i] = gpu_packed::offset(present, kGpuFields[i]);
        if (at[i] >= 0) kept |= 1u << i;
      }
    }
    c->time[k] = e.time_ns();
    c->gpu[k] = e.gpu();
    c->presence[k] = kept;
    for (int i = 0; i < kFields; ++i) {
      uint64_t v = 0;
      if (at[i] >= 0) std::memcpy(&v, p + at[i], 8);
      c->bits[static_cast<size_t>(i) * c->n + k] = v;
    }
  }
}

void pack_compact(std::string* out, const Columns& c) {
  const size_t n = c.n;
  uint32_t any = 0, varying = 0;
  bool per_sample = false;
  const uint32_t first = n ? c.presence[0] : 0;
  size_t size = 12 + (n ? 8 : 0);
  for (size_t k = 0; k < n; ++k) {
    any |= c.presence[k];
    per_sample |= c.presence[k] != first;
    if (k > 0)
      size += varint_size(
          zigzag(static_cast<int64_t>(static_cast<uint64_t>(c.time[k]) - static_cast<uint64_t>(c.time[k - 1]))));
    size += varint_size(zigzag(c.gpu[k]));
  }
  for (int i = 0; i < kFields && n; ++i) {
    const uint64_t* col = &c.bits[static_cast<size_t>(i) * n];
    for (size_t k = 1; k < n; ++k) {
      if (col[k] != col[0]) {
        varying |= 1u << i;
        break;
      }
    }
  }
  if (per_sample) {
    for (size_t k = 0; k < n; ++k) size += varint_size(c.presence[k]);
  }
  const uint32_t constant = any & ~varying;
  size += static_cast<size_t>(std::popcount(constant)) * 8 + static_cast<size_t>(std::popcount(any & varying)) * 8 * n;
  out->resize(size);
  Writer w{out->data()};
  w.fixed(any);
  w.fixed(uint32_t{per_sample ? 1u : 0u});
  w.fixed(constant);
  for (size_t k = 0; k < n; ++k) {
    if (k == 0) {
      w.fixed(c.time[k]);
    } else {
      w.varint(zigzag(static_cast<int64_t>(static_cast<uint64_t>(c.time[k]) - static_cast<uint64_t>(c.time[k - 1]))));
    }
  }
  for (size_t k = 0; k < n; ++k) w.varint(zigzag(c.gpu[k]));
  if (per_sample) {
    for (size_t k = 0; k < n; ++k) w.varint(c.presence[k]);
  }
  for (int i = 0; i < kFields; ++i) {
    if (!(any & (1u << i))) continue;
    const uint64_t* col = &c.bits[static_cast<size_t>(i) * n];
    if (constant & (1u << i)) {
      w.fixed(col[0]);
      continue;
    }
    std::memcpy(w.p, col, 8 * n);
    w.p += 8 * n;
  }
}

// Each thread's columns, kept from block to block (the store's writer packs
// a few hundred a commit).
thread_local Columns tl_columns;

}  // namespace

void pack_gpu_compact(std::string* out, const std::vector<const GpuSampleRow*>& rows) {
  gather(&tl_columns, rows);
  pack_compact(out, tl_columns);
}

void pack_gpu_compact(std::string* out, const std::vector<GpuSampleLog::Entry>& samples) {
  gather(&tl_columns, samples);
  pack_compact(out, tl_columns);
}

bool unpack_gpu_block(int64_t encoding, std::string_view data, int64_t n, Symbol node, const std::string& kept_for,
                      std::vector<GpuSampleRow>* out) {
  const size_t before = out->size();
  bool ok = false;
  switch (encoding) {
    case kGpuRecords:
      ok = unpack_records(data, n, node, kept_for, out);
      break;
    case kGpuColumns:
      ok = unpack_columns(data, n, node, kept_for, out);
      break;
    case kGpuCompact:
      ok = unpack_compact(data, n, node, kept_for, out);
      break;
    default:
      break;
  }
  if (!ok) out->resize(before);
  return ok;
}

}  // namespace runlens::store::sqlite
