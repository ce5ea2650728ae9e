#include "formats/recording.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
uint32_t get_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
}  // namespace

FrameReader::~FrameReader() {
  if (data_ && size_ > 0) munmap(const_cast<char*>(data_), size_);
}

bool FrameReader::open(const std::string& path, std::string* error) {
  path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return *error = "cannot open " + path + ": " + std::strerror(errno), false;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = "cannot read " + path + ": " + (S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
    ::close(fd);
    return false;
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < kHeaderBytes) {
    ::close(fd);
    size_ = 0;
    *error = path + "@0: truncated recording header (" + std::to_string(st.st_size) + " bytes)";
    return false;
  }
  void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int mmap_errno = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    size_ = 0;
    return *error = "cannot map " + path + ": " + std::strerror(mmap_errno), false;
  }
  data_ = static_cast<const char*>(p);
  madvise(p, size_, MADV_SEQUENTIAL);
  if (!has_magic(data_, size_)) return *error = path + "@0: not a recording (no RUNLENSR magic)", false;
  uint16_t fmt;
  std::memcpy(&fmt, data_ + 8, 2);
  if (fmt != kFormatVersion) {
    *error = path + "@0: unsupported recording format version " + std::to_string(fmt) + " (this runlens reads 1)";
    return false;
  }
  pos_ = kHeaderBytes;
  return true;
}

FrameStep next_frame(const char* d, size_t n, size_t pos) {
  FrameStep step;
  step.offset = pos;
  if (pos >= n) {
    step.next = n;
    return step;
  }
  step.kind = FrameStep::Kind::kDamage;
  if (n - pos < kFrameHeaderBytes) {
    step.reason = "truncated frame header: " + std::to_string(n - pos) + " bytes at the end of the file";
    step.next = n;
    return step;
  }
  uint32_t marker = get_u32(d + pos), len = get_u32(d + pos + 4), crc = get_u32(d + pos + 8);
  size_t payload = pos + kFrameHeaderBytes;
  if (marker != kFrameMarker) {
    step.reason = "corrupt frame: no frame marker";
  } else if (len > n - payload) {
    // Either the file was cut short, or the length is corrupt: look for a
    // later frame before concluding the former.
    step.reason = "truncated frame: header says " + std::to_string(len) + " payload bytes, " +
                  std::to_string(n - payload) + " remain";
  } else if (crc32c(d + payload, len) != crc) {
    step.reason = "corrupt frame: checksum mismatch";
  } else {
    step.kind = FrameStep::Kind::kFrame;
    step.payload = d + payload;
    step.size = len;
    step.events = get_u32(d + pos + 12);
    step.next = payload + len;
    return step;
  }
  // Resynchronize at the next frame marker with a plausible header, at any
  // offset (damage need not keep 8-byte alignment).
  size_t next = pos + 1;
  while (next + kFrameHeaderBytes <= n) {
    const void* hit = std::memchr(d + next, 'R', n - next - kFrameHeaderBytes + 1);
    if (!hit) {
      next = n;
      break;
    }
    next = static_cast<size_t>(static_cast<const char*>(hit) - d);
    if (get_u32(d + next) == kFrameMarker) {
      uint32_t l = get_u32(d + next + 4);
      if (l % 8 == 0 && l <= n - next - kFrameHeaderBytes) break;
    }
    ++next;
  }
  if (next + kFrameHeaderBytes > n) next = n;
  step.reason += "; skipped " + std::to_string(next - pos) + " bytes";
  step.next = next;
  return step;
}

bool FrameReader::next(Frame* frame, std::vector<std::string>* damage) {
  for (;;) {
    FrameStep step = next_frame(data_, size_, pos_);
    pos_ = step.next;
    switch (step.kind) {
      case FrameStep::Kind::kEnd:
        return false;
      case FrameStep::Kind::kDamage:
        damage->push_back(path_ + "@" + std::to_string(step.offset) + ": " + step.reason);
        continue;
      case FrameStep::Kind::kFrame:
        frame->offset = step.offset;
        frame->data = step.payload;
        frame->size = step.size;
        frame->events = step.events;
        return true;
    }
  }
}

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
