// What a source knows of its producers beyond their watermarks (contract v2,
// docs/telemetry.md "Producers"): each producer's sequence numbers. A gap is
// telemetry lost between the producer and the collector; it is counted (the
// source's NodeCounters::lost_batches) and entered into the stream as a
// `telemetry_gap` event of the producer's run, which the telemetry_gaps
// operator turns into the run's alert. Shared by the zmq source (live) and the
// file source (replay of a recording), so that both see the same gaps.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/capnp_codec.h"
#include "runtime/counters.h"
#include "schema/record.h"

namespace runlens::connectors {

class ProducerLedger {
 public:
  // Looks at one decoded batch (`rows` its events, `progress` as decoded).
  // When its seq shows batches lost since the producer's previous batch, appends
  // a telemetry_gap event to `rows` and counts the loss in `counters`. The first
  // batch seen of a producer sets its baseline: what came before it is unknown
  // (sent to an earlier collector, or lost), not counted. Returns the batches lost.
  // A producer's final batch forgets it.
  uint64_t observe(const capnpc::BatchProgress& progress, std::vector<Record>& rows, runtime::NodeCounters& counters);

 private:
  struct Entry {
    uint64_t seq = 0;  // the highest seen
    int64_t watermark_ns = INT64_MIN;
    Symbol run, tenant;
  };
  std::map<std::string, Entry, std::less<>> producers_;
};

}  // namespace runlens::connectors
