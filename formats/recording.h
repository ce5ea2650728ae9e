// Recordings: a file of framed Cap'n Proto batches behind a small header.
// Layout (all integers little-endian; docs/recording-format.md):
//
//   header, 16 bytes:  "RUNLENSR" | u16 format_version=1 | u16 schema_version | u32 reserved=0
//   frame, repeated:   u32 marker "RLNF" | u32 payload_bytes | u32 crc32c(payload) | u32 event_count
//                      | payload: one Batch message in Cap'n Proto standard framing (multiple of 8 bytes)
//
// Frames start 8-byte aligned, so a mapped file is read in place. The frame
// marker and checksum let a reader skip a corrupt frame and resynchronize at
// the next one instead of giving up on the rest of the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
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

// Reads a recording's frames as they are stored (header and payload bytes
// untouched), for tools that pass them on (`runlens send`). The file is mapped,
// not copied. A damaged frame is skipped the way InputReader skips it (the same
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

  // Maps `path` and checks its header. False, and `error` ("PATH: ..." or
  // "PATH@0: ..."), if it cannot be read or is not a recording this runlens reads.
  bool open(const std::string& path, std::string* error);
  // The next intact frame; false at the end of the file. Each damaged stretch
  // skipped on the way appends one message to `damage`.
  bool next(Frame* frame, std::vector<std::string>* damage);
  // Back to the first frame.
  void rewind() { pos_ = kHeaderBytes; }
  uint64_t size() const { return size_; }

 private:
  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = kHeaderBytes;
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
