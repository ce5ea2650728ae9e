// SHA-256 (FIPS 180-4), for hashing checkpoint files off the training loop.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace runlens::sdk {

class Sha256 {
 public:
  Sha256() noexcept;
  void Update(const void* data, size_t size) noexcept;
  void Update(std::string_view data) noexcept { Update(data.data(), data.size()); }
  std::array<uint8_t, 32> Digest() noexcept;  // finishes; call once
  std::string HexDigest();                    // lowercase hex of Digest()

 private:
  void Block(const uint8_t* block) noexcept;
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes
};

}  // namespace runlens::sdk
