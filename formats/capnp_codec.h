// Records <-> Cap'n Proto `Batch` messages (schema/telemetry.capnp), the unit
// sent over ZeroMQ and stored in recordings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "schema/record.h"

namespace runlens::capnpc {

constexpr uint16_t kSchemaVersion = 1;

// A batch's producer progress (contract v2, docs/telemetry.md): who sent it,
// its sequence number and the producer's watermark. An empty producer is an
// old sender's batch (no progress: the collector's lateness rule applies).
struct BatchProgress {
  std::string producer;
  uint64_t seq = 0;
  int64_t watermark_ns = 0;
  bool final = false;
};

// Encodes the contract rows of `rows` (derived rows are skipped) as one
// message in Cap'n Proto's standard framing, with `progress` when given.
// Returns the bytes.
std::string encode_batch(const Record* rows, size_t n, const BatchProgress* progress = nullptr);
inline std::string encode_batch(const std::vector<Record>& rows, const BatchProgress* progress = nullptr) {
  return encode_batch(rows.data(), rows.size(), progress);
}

struct EventIssue {
  size_t index;  // position of the event in the batch
  std::string reason;
};

// Decodes one message. Good events are appended to `out`; a bad event (a
// required field missing, an unknown event body) is reported in `issues` and
// skipped. Returns false, with `error`, when the message itself is unusable
// (not Cap'n Proto, truncated, a newer incompatible schema version); then
// nothing of it is appended. `progress` (optional) gets the batch's producer
// progress; its producer is empty for an old sender's batch.
bool decode_batch(const void* data, size_t size, std::vector<Record>* out, std::vector<EventIssue>* issues,
                  std::string* error, BatchProgress* progress = nullptr);

}  // namespace runlens::capnpc
