// Recordings: a file of framed Cap'n Proto batches behind a small header.
// Layout (all integers little-endian; docs/recording-format.md):
//
//   header, 16 bytes:  "RUNLENSR" | u16 format_version=1 | u16 schema_version | u32 reserved=0
//   frame, repeated:   u32 marker "RLNF" | u32 payload_bytes | u32 crc32c(payload) | u32 event_count
//                      | payload: one Batch message in Cap'n Proto standard framing (multiple of 8 bytes)
//
// Frames start 8-byte aligned, so a frame is decoded where it was read. The
// frame marker and checksum let a reader skip a corrupt frame and
// resynchronize at the next one instead of giving up on the rest of the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "schema/record.h"

namespace runlens::recording {

constexpr char kMagic[8] = {'R', 'U', 'N', 'L', 'E', 'N', 'S', 'R'};
constexpr uint16_t kFormatVersion = 1;
constexpr uint32_t kFrameMarker = 0x464E4C52;  // "RLNF" read as little-endian u32
constexpr size_t kHeaderBytes = 16;
constexpr size_t kFrameHeaderBytes = 16;

bool has_magic(const void* data, size_t size);

// One step through the frames of a recording's bytes d[0, n) from `pos`: the
// intact frame there, or the damaged stretch from `pos` to the next plausible
// frame (a frame marker with a sane length, at any offset), or the end. A
// reader loops with pos = next. Every reader of recordings skips damage this
// way, with these reasons (docs/recording-format.md, "Damage").
struct FrameStep {
  enum class Kind { kEnd, kFrame, kDamage };
  Kind kind = Kind::kEnd;
  size_t offset = 0;  // of the frame, or of the damage
  size_t next = 0;    // where the next step starts
  // kFrame: the payload (one Batch message) and the frame header's event count.
  const char* payload = nullptr;
  uint32_t size = 0, events = 0;
  // kDamage: why, and how many bytes were skipped ("...; skipped K bytes").
  std::string reason;
};
FrameStep next_frame(const char* d, size_t n, size_t pos);

// Why a file whose first `n` bytes are d[0, n) is not a recording this runlens
// reads ("truncated recording header (N bytes)", "not a recording (no RUNLENSR
// magic)", "unsupported recording format version N (this runlens reads 1)"),
// or "" when it is. `n` may be less than the file: the first 16 bytes suffice.
std::string header_problem(const char* d, size_t n, uint64_t file_size);

// Steps through a recording's frames, giving next_frame()'s answers over the
// whole file. A regular file is read a window at a time into a buffer the
// cursor reuses (the mapping kept up to 8 MiB more of the file resident;
// docs/performance.md); only damage, rare and judged against the rest of the
// file, is looked at through a mapping of the file.
class FrameCursor {
 public:
  static constexpr size_t kDefaultWindow = 2u << 20;
  // `window` is the bytes read at a time (tests make it small); a longer
  // frame grows the buffer to hold it, up to kMaxWindowedFrame.
  explicit FrameCursor(size_t window = kDefaultWindow) : window_(window) {}
  ~FrameCursor();
  FrameCursor(const FrameCursor&) = delete;
  FrameCursor& operator=(const FrameCursor&) = delete;

  // Reads the regular file `fd` of `size` bytes, which the cursor now owns.
  // False, and `error`, when it cannot be mapped.
  bool open(int fd, uint64_t size, const std::string& path, std::string* error);
  // Steps through d[0, n), which must outlive the cursor.
  void open(const char* d, size_t n);

  // The file's first min(n, size) bytes.
  std::string_view head(size_t n);
  // The step at pos() (a kFrame's payload stays valid until the next call),
  // and pos() moves to its `next`.
  FrameStep next();
  uint64_t pos() const { return pos_; }
  void seek(uint64_t pos) { pos_ = pos; }
  uint64_t size() const { return size_; }
  // How many steps, the end aside, were judged through the mapping: damage,
  // or a frame longer than kMaxWindowedFrame.
  uint64_t mapped_steps() const { return mapped_steps_; }

 private:
  static constexpr size_t kMaxWindowedFrame = 256u << 20;
  // Makes the window hold the file's bytes [pos, pos + n), or up to its end.
  bool cover(uint64_t pos, size_t n);
  bool window_frame(FrameStep* step);

  size_t window_;
  int fd_ = -1;
  const char* whole_ = nullptr;  // the file mapped (for damage), or the bytes in memory
  bool mapped_ = false;
  uint64_t size_ = 0, pos_ = 0;
  std::vector<uint64_t> buf_;  // the window, word-aligned: a frame is decoded in place
  uint64_t base_ = 0;          // the window's offset in the file (a multiple of 8)
  size_t len_ = 0;             // the bytes in it
  uint64_t released_ = 0;      // the mapping before it has been handed back
  uint64_t mapped_steps_ = 0;
};

// Reads a recording's frames as they are stored (header and payload bytes
// untouched), for tools that pass them on (`runlens send`), through a
// FrameCursor. A damaged frame is skipped the way InputReader skips it (the same
// reasons, docs/recording-format.md "Damage"), resynchronizing at the next
// plausible frame, and reported as "PATH@OFFSET: reason; skipped K bytes".
// A damaged payload whose checksum is intact is not looked into: it is passed on.
class FrameReader {
 public:
  struct Frame {
    uint64_t offset = 0;         // of the frame header in the file
    const char* data = nullptr;  // the payload: one Batch message, as stored
    uint32_t size = 0;           // payload bytes
    uint32_t events = 0;         // the frame header's event count
  };

  FrameReader() = default;
  ~FrameReader();
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  // Opens `path` and checks its header. False, and `error` ("PATH: ..." or
  // "PATH@0: ..."), if it cannot be read or is not a recording this runlens reads.
  bool open(const std::string& path, std::string* error);
  // The next intact frame; false at the end of the file. Each damaged stretch
  // skipped on the way appends one message to `damage`.
  bool next(Frame* frame, std::vector<std::string>* damage);
  // Back to the first frame.
  void rewind() { cursor_.seek(kHeaderBytes); }
  uint64_t size() const { return cursor_.size(); }

 private:
  std::string path_;
  FrameCursor cursor_;
};

class Writer {
 public:
  Writer() = default;
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  bool open(const std::string& path, std::string* error);
  // Writes one frame holding `rows` (contract rows only).
  bool write(const std::vector<Record>& rows, std::string* error);
  // Writes one frame from an already encoded Batch message.
  bool write_encoded(const std::string& message, uint32_t event_count, std::string* error);
  bool close(std::string* error);
  uint64_t bytes_written() const { return bytes_; }

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  uint64_t bytes_ = 0;
};

}  // namespace runlens::recording
