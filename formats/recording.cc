#include "formats/recording.h"

#include <cerrno>
#include <cstring>

#include "formats/capnp_codec.h"
#include "formats/crc32c.h"

namespace runlens::recording {

namespace {
void put_u16(char* p, uint16_t v) {
  p[0] = static_cast<char>(v & 0xff);
  p[1] = static_cast<char>(v >> 8);
}
void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
}  // namespace

bool has_magic(const void* data, size_t size) {
  return size >= sizeof kMagic && std::memcmp(data, kMagic, sizeof kMagic) == 0;
}

Writer::~Writer() {
  std::string ignored;
  close(&ignored);
}

bool Writer::open(const std::string& path, std::string* error) {
  path_ = path;
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) {
    *error = "cannot create " + path + ": " + std::strerror(errno);
    return false;
  }
  char h[kHeaderBytes] = {};
  std::memcpy(h, kMagic, sizeof kMagic);
  put_u16(h + 8, kFormatVersion);
  put_u16(h + 10, capnpc::kSchemaVersion);
  put_u32(h + 12, 0);
  if (std::fwrite(h, 1, sizeof h, f_) != sizeof h) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  bytes_ = sizeof h;
  return true;
}

bool Writer::write(const std::vector<Record>& rows, std::string* error) {
  uint32_t n = 0;
  for (const auto& r : rows) n += static_cast<int>(r.kind()) < kContractKinds;
  if (n == 0) return true;
  return write_encoded(capnpc::encode_batch(rows), n, error);
}

bool Writer::write_encoded(const std::string& message, uint32_t event_count, std::string* error) {
  if (!f_) return *error = "recording is not open", false;
  char h[kFrameHeaderBytes];
  put_u32(h, kFrameMarker);
  put_u32(h + 4, static_cast<uint32_t>(message.size()));
  put_u32(h + 8, crc32c(message.data(), message.size()));
  put_u32(h + 12, event_count);
  if (std::fwrite(h, 1, sizeof h, f_) != sizeof h ||
      std::fwrite(message.data(), 1, message.size(), f_) != message.size()) {
    *error = "cannot write " + path_ + ": " + std::strerror(errno);
    return false;
  }
  bytes_ += sizeof h + message.size();
  return true;
}

bool Writer::close(std::string* error) {
  if (!f_) return true;
  bool ok = std::fflush(f_) == 0;
  ok &= std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok) *error = "cannot finish " + path_ + ": " + std::strerror(errno);
  return ok;
}

}  // namespace runlens::recording
