// A GPU sample packed into bytes: its presence bits, then only the fields it
// has, each as its bytes (4 for node and GPU, 8 for every other), in the
// order of RUNLENS_GPU_FIELDS. A sample of the seven measurements a DCGM
// exporter typically sends takes 68 bytes this way, 168 as a Gpu. What
// holds many samples for a while packs them: the timeline's window of recent
// samples (timeline/gpu_window.h) and the samples a store batch keeps
// (store/gpu_sample_log.h). Within a process only: native byte order, and
// a node is its symbol.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "schema/record.h"

namespace runlens::gpu_packed {

// More than any sample takes.
inline constexpr size_t kMaxBytes = sizeof(uint32_t) + sizeof(Gpu);

// Node and GPU take 4 bytes each, every other field 8, so a sample's size and
// where a field lies in it are counts of presence bits.
inline constexpr uint32_t kFourByteFields =
    (1u << static_cast<unsigned>(Gpu::F::node)) | (1u << static_cast<unsigned>(Gpu::F::gpu));
inline constexpr uint32_t kFields = (1u << static_cast<unsigned>(Gpu::F::kCount)) - 1u;
#define RUNLENS_GPU_PACKED_WIDTH_(T, name, Camel, req)                                                          \
  static_assert(sizeof(Gpu::name) == (((kFourByteFields >> static_cast<unsigned>(Gpu::F::name)) & 1u) ? 4 : 8), \
                "a packed GPU field is 4 bytes (node, gpu) or 8");
RUNLENS_GPU_FIELDS(RUNLENS_GPU_PACKED_WIDTH_)
#undef RUNLENS_GPU_PACKED_WIDTH_

// Bits set in `v`, inline: without -mpopcnt (Debian's x86-64 baseline),
// std::popcount is a call into libgcc.
inline size_t count_bits(uint32_t v) {
#ifdef __POPCNT__
  return static_cast<size_t>(std::popcount(v));
#else
  v = v - ((v >> 1) & 0x55555555u);
  v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
  return static_cast<size_t>((((v + (v >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24);
#endif
}

// The bytes the fields among `bits` take.
inline size_t width(uint32_t bits) {
  bits &= kFields;
  return 4 * count_bits(bits & kFourByteFields) + 8 * count_bits(bits & ~kFourByteFields);
}

// The bytes of a sample whose presence bits are `present`.
inline size_t bytes(uint32_t present) { return sizeof(uint32_t) + width(present); }

// Where field `f` lies in a sample whose presence bits are `present` (bytes
// from the sample's start), or -1 when it lacks it.
inline int offset(uint32_t present, Gpu::F f) {
  const uint32_t bit = 1u << static_cast<unsigned>(f);
  if (!(present & bit)) return -1;
  return static_cast<int>(sizeof(uint32_t) + width(present & (bit - 1)));
}

// The presence bits of the sample packed at `p`.
inline uint32_t present_at(const char* p) {
  uint32_t present;
  std::memcpy(&present, p, sizeof present);
  return present;
}

// Writes `g` at `p` (room for bytes(g.present)); returns the end.
inline char* put(char* p, const Gpu& g) {
  auto put1 = [&p](const auto& v) {
    std::memcpy(p, &v, sizeof v);
    p += sizeof v;
  };
  put1(g.present);
#define RUNLENS_GPU_PACKED_PUT_(T, name, Camel, req) \
  if (g.has(Gpu::F::name)) put1(g.name);
  RUNLENS_GPU_FIELDS(RUNLENS_GPU_PACKED_PUT_)
#undef RUNLENS_GPU_PACKED_PUT_
  return p;
}

// Reads the sample packed at `p` into `g`, which has its defaults (a field
// the sample lacks keeps its value there); returns the end.
inline const char* get(const char* p, Gpu* g) {
  auto get1 = [&p](auto* v) {
    std::memcpy(v, p, sizeof *v);
    p += sizeof *v;
  };
  get1(&g->present);
#define RUNLENS_GPU_PACKED_GET_(T, name, Camel, req) \
  if (g->has(Gpu::F::name)) get1(&g->name);
  RUNLENS_GPU_FIELDS(RUNLENS_GPU_PACKED_GET_)
#undef RUNLENS_GPU_PACKED_GET_
  return p;
}

// A packed sample read where it lies: its node and GPU (the defaults where
// its presence bits lack them), and its bytes to copy as they are.
struct View {
  const char* p;
  size_t n;  // bytes(present_at(p))

  Symbol node() const {
    Symbol s;
    if (const int at = offset(present_at(p), Gpu::F::node); at >= 0) std::memcpy(&s, p + at, sizeof s);
    return s;
  }
  int32_t gpu() const {
    int32_t g = Gpu().gpu;
    if (const int at = offset(present_at(p), Gpu::F::gpu); at >= 0) std::memcpy(&g, p + at, sizeof g);
    return g;
  }
};

}  // namespace runlens::gpu_packed
