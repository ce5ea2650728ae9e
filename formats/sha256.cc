#include "formats/sha256.h"

#include <cstring>

namespace runlens::sha256 {

namespace {
constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
}  // namespace

Hasher::Hasher() noexcept
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Hasher::block(std::array<uint32_t, 8>& hs, const uint8_t* p) noexcept {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = (uint32_t(p[4 * i]) << 24) | (uint32_t(p[4 * i + 1]) << 16) | (uint32_t(p[4 * i + 2]) << 8) |
           uint32_t(p[4 * i + 3]);
  }
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = hs[0], b = hs[1], c = hs[2], d = hs[3], e = hs[4], f = hs[5], g = hs[6], h = hs[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = h + S1 + ch + kK[i] + w[i];
    uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = S0 + maj;
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  hs[0] += a, hs[1] += b, hs[2] += c, hs[3] += d, hs[4] += e, hs[5] += f, hs[6] += g, hs[7] += h;
}

void Hasher::update(const void* data, size_t size) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  total_bytes_ += size;
  if (buffered_ > 0) {
    size_t take = std::min(size, 64 - buffered_);
    std::memcpy(buf_.data() + buffered_, p, take);
    buffered_ += take, p += take, size -= take;
    if (buffered_ < 64) return;
    block(h_, buf_.data());
    buffered_ = 0;
  }
  for (; size >= 64; p += 64, size -= 64) block(h_, p);
  std::memcpy(buf_.data(), p, size);
  buffered_ = size;
}

Digest Hasher::digest() const noexcept {
  // The padding (a 1 bit, zeros, then the length in bits, big-endian) goes
  // into copies, so the hasher can take more input afterwards.
  std::array<uint32_t, 8> hs = h_;
  std::array<uint8_t, 64> buf = buf_;
  size_t n = buffered_;
  uint64_t bits = total_bytes_ * 8;
  buf[n++] = 0x80;
  if (n > 56) {
    std::memset(buf.data() + n, 0, 64 - n);
    block(hs, buf.data());
    n = 0;
  }
  std::memset(buf.data() + n, 0, 56 - n);
  for (int i = 0; i < 8; ++i) buf[56 + i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  block(hs, buf.data());
  Digest d;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) d[4 * i + j] = static_cast<uint8_t>(hs[i] >> (24 - 8 * j));
  }
  return d;
}

Digest hash(std::string_view data) {
  Hasher h;
  h.update(data);
  return h.digest();
}

std::string to_hex(const Digest& d) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < d.size(); ++i) s[2 * i] = kHex[d[i] >> 4], s[2 * i + 1] = kHex[d[i] & 15];
  return s;
}

std::string hex(std::string_view data) { return to_hex(hash(data)); }

bool is_hex_digest(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace runlens::sha256
