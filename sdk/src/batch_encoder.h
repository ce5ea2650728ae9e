// Turns drained slots into one Cap'n Proto `Batch` message in standard
// single-segment-table framing (what capnp::messageToFlatArray writes), the
// unit one ZeroMQ frame carries. Runs on the exporter thread only.
#pragma once

#include <capnp/common.h>
#include <kj/array.h>

#include <cstddef>
#include <span>
#include <string_view>

#include "runlens/sdk.h"
#include "slot.h"

namespace runlens::sdk {

// A batch's producer progress (contract v2, docs/telemetry.md "Producers").
struct BatchProgress {
  std::string_view producer;
  uint64_t seq = 0;
  int64_t watermark_ns = 0;
  bool final = false;
};

class BatchEncoder {
 public:
  // Keeps a reference: the options outlive the encoder (both belong to the Emitter).
  explicit BatchEncoder(const EmitterOptions& options) : options_(options) {}

  // May throw kj::Exception or std::bad_alloc; the exporter catches, counts
  // and drops the batch.
  kj::Array<capnp::word> Encode(std::span<const Slot> slots, const BatchProgress& progress) const;

 private:
  const EmitterOptions& options_;
};

}  // namespace runlens::sdk
