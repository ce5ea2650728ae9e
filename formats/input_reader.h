// Reads a telemetry file, JSONL or recording, recognised by its content (a
// recording starts with its magic; anything else is read as JSONL). Bad
// lines, bad events and corrupt or truncated frames are dead-lettered with
// their line or byte offset and the reason; reading goes on after them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/capnp_codec.h"
#include "runtime/operator.h"
#include "schema/record.h"

namespace runlens {

// The rows [begin, end) of one call's `rows` that came in one batch declaring
// its producer's progress (a recording of contract v2 senders), and that
// progress. A batch without progress has no segment.
struct ProgressSegment {
  size_t begin = 0, end = 0;
  capnpc::BatchProgress progress;
};

class InputReader {
 public:
  virtual ~InputReader() = default;
  // Opens `path` ("-" = standard input); nullptr and `error` when it cannot be read at all.
  // `decode_threads` 2: a JSONL file of 4 MiB or more is read, split and
  // decoded on a thread of the reader's own as well, up to two calls ahead of
  // the caller, which decodes what that thread has not got to of the call it
  // makes (the rows, their order, the dead letters and their order are the
  // same as with 1).
  static std::unique_ptr<InputReader> open(const std::string& path, std::string* error, int decode_threads = 1);
  // The decode_threads for a reader whose decoding is the critical path: 2 where there is a second core, else 1.
  static int parallel_decode_threads();

  // Appends up to about `max_rows` rows to `rows`, and for each a position
  // token to `positions`, and (when `segments` is given) one segment per
  // batch with producer progress, in order. Returns false once the input is
  // exhausted.
  virtual bool next(std::vector<Record>* rows, std::vector<uint64_t>* positions, size_t max_rows,
                    runtime::DeadLetterSink& dead_letters, const std::string& component,
                    std::vector<ProgressSegment>* segments = nullptr) = 0;
  // "path:LINE" for JSONL, "path@BYTE#EVENT" for recordings.
  virtual std::string describe_position(uint64_t position) const = 0;
  virtual const char* format() const = 0;  // "jsonl" or "recording"
  virtual double progress() const = 0;     // fraction of bytes consumed
  virtual uint64_t dead_lettered() const = 0;
  virtual uint64_t bytes() const = 0;
};

}  // namespace runlens
