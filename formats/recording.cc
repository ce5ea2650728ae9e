#include "formats/recording.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

// The intact frame at d[pos, n), if there is one there.
bool intact_frame(const char* d, size_t n, size_t pos, FrameStep* step) {
  if (n - pos < kFrameHeaderBytes || get_u32(d + pos) != kFrameMarker) return false;
  uint32_t len = get_u32(d + pos + 4);
  size_t payload = pos + kFrameHeaderBytes;
  if (len > n - payload || crc32c(d + payload, len) != get_u32(d + pos + 8)) return false;
  step->kind = FrameStep::Kind::kFrame;
  step->offset = pos;
  step->payload = d + payload;
  step->size = len;
  step->events = get_u32(d + pos + 12);
  step->next = payload + len;
  return true;
}

}  // namespace

FrameStep next_frame(const char* d, size_t n, size_t pos) {
  FrameStep step;
  step.offset = pos;
  if (pos >= n) {
    step.next = n;
    return step;
  }
  if (intact_frame(d, n, pos, &step)) return step;
  step.kind = FrameStep::Kind::kDamage;
  if (n - pos < kFrameHeaderBytes) {
    step.reason = "truncated frame header: " + std::to_string(n - pos) + " bytes at the end of the file";
    step.next = n;
    return step;
  }
  uint32_t marker = get_u32(d + pos), len = get_u32(d + pos + 4);
  size_t payload = pos + kFrameHeaderBytes;
  if (marker != kFrameMarker) {
    step.reason = "corrupt frame: no frame marker";
  } else if (len > n - payload) {
    // Either the file was cut short, or the length is corrupt: look for a
    // later frame before concluding the former.
    step.reason = "truncated frame: header says " + std::to_string(len) + " payload bytes, " +
                  std::to_string(n - payload) + " remain";
  } else {
    step.reason = "corrupt frame: checksum mismatch";
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

std::string header_problem(const char* d, size_t n, uint64_t file_size) {
  if (file_size < kHeaderBytes || n < kHeaderBytes) {
    return "truncated recording header (" + std::to_string(file_size) + " bytes)";
  }
  if (!has_magic(d, n)) return "not a recording (no RUNLENSR magic)";
  uint16_t fmt;
  std::memcpy(&fmt, d + 8, 2);
  if (fmt != kFormatVersion) {
    return "unsupported recording format version " + std::to_string(fmt) + " (this runlens reads 1)";
  }
  return {};
}

FrameCursor::~FrameCursor() {
  if (mapped_ && size_ > 0) munmap(const_cast<char*>(whole_), size_);
  if (fd_ >= 0) ::close(fd_);
}

bool FrameCursor::open(int fd, uint64_t size, const std::string& path, std::string* error) {
  fd_ = fd;
  size_ = size;
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  if (size_ > 0) {
    // Mapped, not touched: only a damaged stretch is read through it.
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return *error = "cannot map " + path + ": " + std::strerror(errno), false;
    whole_ = static_cast<const char*>(p);
    mapped_ = true;
  }
  return true;
}

void FrameCursor::open(const char* d, size_t n) {
  whole_ = d;
  size_ = n;
}

std::string_view FrameCursor::head(size_t n) {
  n = static_cast<size_t>(std::min<uint64_t>(n, size_));
  if (fd_ < 0) return {whole_, n};
  if (!cover(0, n)) return {whole_, n};
  return {reinterpret_cast<const char*>(buf_.data()), n};
}

bool FrameCursor::cover(uint64_t pos, size_t n) {
  n = static_cast<size_t>(std::min<uint64_t>(n, size_ - std::min(pos, size_)));
  if (pos >= base_ && pos + n <= base_ + len_) return true;
  const uint64_t base = pos & ~uint64_t{7};
  const size_t want = std::max(window_, static_cast<size_t>(pos - base) + n);
  if (buf_.size() * 8 < want) buf_.resize((want + 7) / 8);
  char* b = reinterpret_cast<char*>(buf_.data());
  // What the window already holds from `base` on moves to the front.
  size_t have = 0;
  if (base >= base_ && base < base_ + len_) {
    have = static_cast<size_t>(base_ + len_ - base);
    std::memmove(b, b + (base - base_), have);
  }
  base_ = base;
  len_ = have;
  const size_t fill = static_cast<size_t>(std::min<uint64_t>(buf_.size() * 8, size_ - base));
  while (len_ < fill) {
    ssize_t got = ::pread(fd_, b + len_, fill - len_, static_cast<off_t>(base + len_));
    if (got > 0) {
      len_ += static_cast<size_t>(got);
    } else if (got < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // the mapping answers for the rest
    }
  }
  return pos + n <= base_ + len_;
}

bool FrameCursor::window_frame(FrameStep* step) {
  if (!cover(pos_, kFrameHeaderBytes)) return false;
  const char* h = reinterpret_cast<const char*>(buf_.data()) + (pos_ - base_);
  if (size_ - pos_ >= kFrameHeaderBytes && get_u32(h) == kFrameMarker) {
    uint64_t frame = kFrameHeaderBytes + uint64_t{get_u32(h + 4)};
    if (frame <= size_ - pos_ && frame <= kMaxWindowedFrame && !cover(pos_, static_cast<size_t>(frame))) return false;
  }
  // (cover() may have moved the buffer.)
  const char* b = reinterpret_cast<const char*>(buf_.data());
  if (!intact_frame(b, len_, static_cast<size_t>(pos_ - base_), step)) return false;
  step->offset += base_;
  step->next += base_;
  return true;
}

FrameStep FrameCursor::next() {
  FrameStep step;
  if (fd_ < 0 || pos_ >= size_ || !window_frame(&step)) {
    // The end, or damage: judged over the whole file, as next_frame() does.
    step = next_frame(whole_, size_, pos_);
    mapped_steps_ += step.kind != FrameStep::Kind::kEnd;
    // Hand back what the damage scan read of the mapping, once well behind.
    constexpr uint64_t kStep = 8u << 20;
    if (mapped_ && step.next >= released_ + 2 * kStep) {
      static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
      uint64_t upto = (step.next - kStep) / page * page;
      madvise(const_cast<char*>(whole_) + released_, upto - released_, MADV_DONTNEED);
      released_ = upto;
    }
  }
  pos_ = step.next;
  return step;
}

FrameReader::~FrameReader() = default;

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
  if (!cursor_.open(fd, static_cast<uint64_t>(st.st_size), path, error)) return false;
  std::string_view head = cursor_.head(kHeaderBytes);
  std::string problem = header_problem(head.data(), head.size(), cursor_.size());
  if (!problem.empty()) return *error = path + "@0: " + problem, false;
  cursor_.seek(kHeaderBytes);
  return true;
}

bool FrameReader::next(Frame* frame, std::vector<std::string>* damage) {
  for (;;) {
    FrameStep step = cursor_.next();
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
