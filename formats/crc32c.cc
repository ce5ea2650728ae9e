#include "formats/crc32c.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace runlens {
namespace {

struct Table {
  uint32_t t[256];
  Table() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
  }
};

uint32_t crc_table(const uint8_t* p, size_t n, uint32_t crc) {
  static const Table table;
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table.t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

#if defined(__x86_64__)
// The register (pre- and post-inversion left to the caller) after `n` bytes,
// one 8-byte word at a time.
__attribute__((target("sse4.2"))) uint32_t crc_hw_run(const uint8_t* p, size_t n, uint32_t reg) {
  uint64_t c = reg;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

// The crc32 instruction takes 3 cycles and starts one a cycle: one chain of
// words uses a third of it. Large inputs go as three chains over consecutive
// lanes of kLane bytes, joined by the CRC's linearity: the register after
// A then B is shift(register after A, |B|) ^ (register of B from 0), where
// shift(x, n) is the register after n zero bytes from x, a linear map of x's
// 32 bits. That map for n = kLane is four tables of 256, built once from its
// 32 basis vectors.
constexpr size_t kLane = 4096;

struct LaneShift {
  uint32_t t[4][256];
  __attribute__((target("sse4.2"))) LaneShift() {
    static const uint8_t zeros[kLane] = {};
    uint32_t basis[32];
    for (int b = 0; b < 32; ++b) basis[b] = crc_hw_run(zeros, kLane, 1u << b);
    for (int j = 0; j < 4; ++j) {
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t x = 0;
        for (int b = 0; b < 8; ++b) {
          if (v & (1u << b)) x ^= basis[8 * j + b];
        }
        t[j][v] = x;
      }
    }
  }
  uint32_t operator()(uint32_t x) const {
    return t[0][x & 0xff] ^ t[1][(x >> 8) & 0xff] ^ t[2][(x >> 16) & 0xff] ^ t[3][x >> 24];
  }
};

__attribute__((target("sse4.2"))) uint32_t crc_hw(const uint8_t* p, size_t n, uint32_t crc) {
  uint32_t reg = ~crc;
  if (n >= 3 * kLane) {
    static const LaneShift shift;
    for (; n >= 3 * kLane; p += 3 * kLane, n -= 3 * kLane) {
      uint64_t a = reg, b = 0, c = 0;
      for (size_t i = 0; i < kLane; i += 8) {
        uint64_t va, vb, vc;
        std::memcpy(&va, p + i, 8);
        std::memcpy(&vb, p + kLane + i, 8);
        std::memcpy(&vc, p + 2 * kLane + i, 8);
        a = _mm_crc32_u64(a, va);
        b = _mm_crc32_u64(b, vb);
        c = _mm_crc32_u64(c, vc);
      }
      reg = shift(shift(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(c);
    }
  }
  return ~crc_hw_run(p, n, reg);
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
#if defined(__x86_64__)
  static const bool hw = __builtin_cpu_supports("sse4.2");
  if (hw) return crc_hw(p, size, crc);
#endif
  return crc_table(p, size, crc);
}

}  // namespace runlens
