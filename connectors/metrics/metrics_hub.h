// Where the pipeline's metrics meet a scrape: `metrics` sinks publish copies
// of their series (Snapshot) here, the engine hands over its node counters,
// and MetricsServer renders both on GET /metrics. Thread-safe; the mutex is
// held for a pointer swap (publish) or a copy (a scrape), never while the
// pipeline computes, so the pipeline never waits on a scrape.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "connectors/metrics/exposition.h"
#include "runtime/counters.h"

namespace runlens::connectors::metrics {

class MetricsHub {
 public:
  using CounterSource = std::function<std::vector<runtime::CounterSnapshot>()>;

  // A sink's latest series, under its pipeline node id; replaces the last.
  void publish(const std::string& writer, std::shared_ptr<const Snapshot> snapshot);
  // The executor's counters, read at each scrape (atomics, safe while it
  // runs). Null: keep the values read last, so a scrape after the run
  // ended still answers its final counters.
  void set_counters(CounterSource source);
  // The exposition text of everything published and of the counters.
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Snapshot>> snapshots_;
  CounterSource counters_;
  mutable std::vector<runtime::CounterSnapshot> last_counters_;
};

// The health families of the runtime's node counters (rows in and out per
// pipeline node, drops by priority, late rows, dead letters, queue fill,
// producers, lost batches, writer errors).
Snapshot counters_snapshot(const std::vector<runtime::CounterSnapshot>& counters);

}  // namespace runlens::connectors::metrics
