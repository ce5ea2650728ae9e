// connectors/crc32c: the recording frame checksum. Checked against published
// CRC-32C vectors and against a plain bitwise reference, for every length
// and alignment the word-at-a-time path distinguishes, for chaining, and
// around the lengths where the three-lane path takes over.
#include "formats/crc32c.h"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

namespace runlens {
namespace {

// Bit by bit, reflected polynomial 0x82F63B78: obviously CRC-32C.
uint32_t reference_crc32c(const uint8_t* p, size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST_CASE("crc32c: published test vectors") {
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i), dec[i] = static_cast<uint8_t>(31 - i);
  struct Case {
    std::string what;
    std::vector<uint8_t> bytes;
    uint32_t crc;
  };
  const std::string digits = "123456789";
  const Case cases[] = {
      {"empty", {}, 0x00000000u},
      {"\"123456789\"", {digits.begin(), digits.end()}, 0xE3069283u},
      // RFC 3720 (iSCSI), appendix B.4.
      {"32 zeros", zeros, 0x8A9136AAu},
      {"32 x 0xff", ones, 0x62A8AB43u},
      {"0..31", inc, 0x46DD794Eu},
      {"31..0", dec, 0x113FDB5Cu},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    CHECK(crc32c(c.bytes.data(), c.bytes.size()) == c.crc);
    CHECK(reference_crc32c(c.bytes.data(), c.bytes.size()) == c.crc);
  }
}

TEST_CASE("crc32c: every length and alignment agrees with the bitwise reference, and chains") {
  std::mt19937 rng(31);
  std::vector<uint8_t> buf(200);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t len = 0; offset + len <= 80; ++len) {
      const uint8_t* p = buf.data() + offset;
      uint32_t want = reference_crc32c(p, len);
      if (crc32c(p, len) != want) FAIL_CHECK("offset ", offset, " length ", len);
      // Any split point: crc(a + b) == crc(b, crc(a)).
      for (size_t split = 0; split <= len; split += 3) {
        if (crc32c(p + split, len - split, crc32c(p, split)) != want) {
          FAIL_CHECK("chaining at ", split, " of offset ", offset, " length ", len);
        }
      }
    }
  }
  // One flipped bit anywhere changes the checksum.
  const uint32_t base = crc32c(buf.data(), buf.size());
  for (size_t i = 0; i < buf.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      buf[i] ^= static_cast<uint8_t>(1u << bit);
      if (crc32c(buf.data(), buf.size()) == base) FAIL_CHECK("bit ", bit, " of byte ", i, " undetected");
      buf[i] ^= static_cast<uint8_t>(1u << bit);
    }
  }
}

TEST_CASE("crc32c: inputs of three 4 KiB lanes and more agree with the bitwise reference, and chain") {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(5 * 3 * 4096 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths;
  for (size_t blocks : {1, 2, 5}) {
    for (int d = -9; d <= 9; ++d) lengths.push_back(blocks * 3 * 4096 + static_cast<size_t>(d));
  }
  for (int i = 0; i < 10; ++i) lengths.push_back(rng() % (buf.size() - 8));
  for (size_t offset : {0, 3}) {
    for (size_t len : lengths) {
      CAPTURE(offset);
      CAPTURE(len);
      const uint8_t* p = buf.data() + offset;
      uint32_t want = reference_crc32c(p, len);
      CHECK(crc32c(p, len) == want);
      // Chained from a prefix that is not a whole lane, and into one that is.
      for (size_t split : {size_t{1}, size_t{4095}, size_t{12288}, len / 2}) {
        if (split > len) continue;
        CHECK(crc32c(p + split, len - split, crc32c(p, split)) == want);
      }
    }
  }
  // A flipped bit in each lane, and at the joins, changes the checksum.
  const size_t len = 2 * 3 * 4096;
  const uint32_t base = crc32c(buf.data(), len);
  for (size_t i :
       {size_t{0}, size_t{4095}, size_t{4096}, size_t{8191}, size_t{8192}, size_t{12287}, size_t{12288}, len - 1}) {
    buf[i] ^= 0x10;
    CHECK(crc32c(buf.data(), len) != base);
    CHECK(crc32c(buf.data(), len) == reference_crc32c(buf.data(), len));
    buf[i] ^= 0x10;
  }
}

}  // namespace
}  // namespace runlens
