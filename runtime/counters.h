// Per-node counters: rows in and out, dropped by priority, late,
// dead-lettered, and queue fill. Updated with relaxed atomics once per batch
// on the hot path; read as snapshots by the end-of-run summary and, later, by
// exporters (Prometheus exposition).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace runlens::runtime {

constexpr int kPriorities = 4;  // P0 (never shed first) .. P3

// A sink's asynchronous writer (runtime/async_writer.h): batches handed to its
// thread, the most that waited at once, pushes that waited for room, batches
// written and writes that failed.
struct WriterCounters {
  std::atomic<uint64_t> queued{0};
  std::atomic<uint64_t> peak{0};
  std::atomic<uint64_t> waits{0};
  std::atomic<uint64_t> written{0};
  std::atomic<uint64_t> errors{0};
};

// A sink that delivers alerts to a remote service from a thread of its own
// (the alertmanager sink): alerts accepted into its bounded queue, posts that
// succeeded and failed (each failure is retried after a backoff), alerts
// dropped from the full queue by severity (info, warning, critical: the least
// severe go first) and alerts still undelivered when the run ended.
struct DeliveryCounters {
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> posts{0};
  std::atomic<uint64_t> post_errors{0};
  std::array<std::atomic<uint64_t>, 3> dropped{};  // by Severity: info, warning, critical
  std::atomic<uint64_t> undelivered{0};
};

// How long after the arrival of its input a sink handled a row: from the
// moment the source received the batch whose watermark released the row (the
// one that completed its evidence) to the moment the sink had processed it
// (the zmq_pub sink publishes in process()). Log-scale buckets of a quarter
// octave from 1 us; lock-free, updated once per released batch of rows.
class LatencyHistogram {
 public:
  static constexpr int kBuckets = 128;
  void record(int64_t ns, uint64_t count);
  struct Summary {
    uint64_t count = 0;
    double p50_us = 0, p99_us = 0, max_us = 0;
  };
  Summary summary() const;

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<int64_t> max_ns_{0};
};

struct NodeCounters {
  std::atomic<uint64_t> in{0};
  std::atomic<uint64_t> out{0};
  std::array<std::atomic<uint64_t>, kPriorities> dropped{};
  std::atomic<uint64_t> late{0};
  std::atomic<uint64_t> dead_lettered{0};
  std::atomic<uint64_t> queue_rows{0};      // rows queued now, over all partitions
  std::atomic<uint64_t> queue_peak{0};      // most rows ever queued in one partition's queue
  std::atomic<uint64_t> queue_capacity{0};  // per partition
  // Sources whose batches declare their producer (docs/pipelines.md, "Event
  // time"): producers holding the watermark now, times one went silent for
  // idle_timeout, and batches lost between producers and this source (gaps
  // in their sequence numbers, counted by the source).
  std::atomic<uint64_t> producers{0};
  std::atomic<uint64_t> producers_idle{0};
  std::atomic<uint64_t> lost_batches{0};
  WriterCounters writer;      // sinks with an asynchronous writer only
  DeliveryCounters delivery;  // sinks that deliver alerts to a remote service only
  LatencyHistogram latency;   // sinks only: arrival of the releasing batch -> row handled

  void add(std::atomic<uint64_t>& c, uint64_t n) { c.fetch_add(n, std::memory_order_relaxed); }
  void raise_peak(uint64_t v) {
    uint64_t cur = queue_peak.load(std::memory_order_relaxed);
    while (v > cur && !queue_peak.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
  }
};

struct CounterSnapshot {
  std::string node;
  std::string type;
  uint64_t in = 0, out = 0, late = 0, dead_lettered = 0;
  std::array<uint64_t, kPriorities> dropped{};
  uint64_t queue_rows = 0, queue_peak = 0, queue_capacity = 0;
  uint64_t producers = 0, producers_idle = 0, lost_batches = 0;
  uint64_t writer_queued = 0, writer_peak = 0, writer_waits = 0, writer_written = 0, writer_errors = 0;
  uint64_t delivery_accepted = 0, delivery_posts = 0, delivery_post_errors = 0, delivery_undelivered = 0;
  std::array<uint64_t, 3> delivery_dropped{};  // info, warning, critical
  LatencyHistogram::Summary latency;
  uint64_t dropped_total() const { return dropped[0] + dropped[1] + dropped[2] + dropped[3]; }
};

CounterSnapshot snapshot(const std::string& node, const std::string& type, const NodeCounters& c);
// A fixed-width table, one row per node, for the end of a replay.
std::string format_counters(const std::vector<CounterSnapshot>& rows);
// One JSON object per node, for tools and tests.
std::string counters_json(const std::vector<CounterSnapshot>& rows);

}  // namespace runlens::runtime
