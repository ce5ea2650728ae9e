// SHA-256 (FIPS 180-4), implemented here rather than taken from OpenSSL's
// libcrypto: the evaluation cache key and the content hashes of checkpoints,
// datasets and prompt templates need only this one digest, and a
// self-contained 150-line implementation keeps the formats layer free of a
// new system dependency (tools/dev's package list, the TSan build). It is
// checked against the FIPS 180-4 / NIST CAVP example vectors
// (tests/formats/sha256_test.cc). Throughput is ~200-400 MB/s, ample for
// cache keys (hundreds of bytes) and hashing the datasets shipped here.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace runlens::sha256 {

using Digest = std::array<uint8_t, 32>;

// Incremental hashing: update() any number of times; digest() is the hash of
// what was given so far (it does not finish the hasher). No dependency and no
// exception: the training SDK hashes checkpoints with it too.
class Hasher {
 public:
  Hasher() noexcept;
  void update(const void* data, size_t size) noexcept;
  void update(std::string_view s) noexcept { update(s.data(), s.size()); }
  Digest digest() const noexcept;

 private:
  static void block(std::array<uint32_t, 8>& h, const uint8_t* p) noexcept;
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

Digest hash(std::string_view data);
std::string to_hex(const Digest& d);     // 64 lowercase hex digits
std::string hex(std::string_view data);  // to_hex(hash(data))

// True for a 64-digit lowercase hexadecimal string (the form content hashes take).
bool is_hex_digest(std::string_view s);

}  // namespace runlens::sha256
