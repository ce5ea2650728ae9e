#include "runtime/counters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace runlens::runtime {

namespace {

// Bucket b holds latencies in [2^(b/4), 2^((b+1)/4)) us; bucket 0 also holds
// everything below 1 us.
int bucket_of(int64_t ns) {
  double us = static_cast<double>(ns) / 1000.0;
  if (us < 1.0) return 0;
  int b = static_cast<int>(std::floor(4.0 * std::log2(us)));
  return std::clamp(b, 0, LatencyHistogram::kBuckets - 1);
}

// The geometric middle of a bucket, the value quoted for it.
double bucket_value_us(int b) { return std::exp2((b + 0.5) / 4.0); }

}  // namespace

void LatencyHistogram::record(int64_t ns, uint64_t count) {
  if (count == 0) return;
  if (ns < 0) ns = 0;
  buckets_[static_cast<size_t>(bucket_of(ns))].fetch_add(count, std::memory_order_relaxed);
  int64_t cur = max_ns_.load(std::memory_order_relaxed);
  while (ns > cur && !max_ns_.compare_exchange_weak(cur, ns, std::memory_order_relaxed)) {
  }
}

LatencyHistogram::Summary LatencyHistogram::summary() const {
  std::array<uint64_t, kBuckets> b;
  Summary s;
  for (int i = 0; i < kBuckets; ++i) {
    b[static_cast<size_t>(i)] = buckets_[static_cast<size_t>(i)].load(std::memory_order_relaxed);
    s.count += b[static_cast<size_t>(i)];
  }
  if (s.count == 0) return s;
  s.max_us = static_cast<double>(max_ns_.load(std::memory_order_relaxed)) / 1000.0;
  auto quantile = [&](double q) {
    // The smallest bucket whose cumulative count reaches q of all.
    uint64_t need = static_cast<uint64_t>(std::ceil(q * static_cast<double>(s.count)));
    uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += b[static_cast<size_t>(i)];
      if (seen >= need && seen > 0) return std::min(bucket_value_us(i), s.max_us);
    }
    return s.max_us;
  };
  s.p50_us = quantile(0.50);
  s.p99_us = quantile(0.99);
  return s;
}

CounterSnapshot snapshot(const std::string& node, const std::string& type, const NodeCounters& c) {
  CounterSnapshot s;
  s.node = node;
  s.type = type;
  s.in = c.in.load(std::memory_order_relaxed);
  s.out = c.out.load(std::memory_order_relaxed);
  s.late = c.late.load(std::memory_order_relaxed);
  s.dead_lettered = c.dead_lettered.load(std::memory_order_relaxed);
  for (int p = 0; p < kPriorities; ++p) s.dropped[p] = c.dropped[p].load(std::memory_order_relaxed);
  s.queue_rows = c.queue_rows.load(std::memory_order_relaxed);
  s.queue_peak = c.queue_peak.load(std::memory_order_relaxed);
  s.queue_capacity = c.queue_capacity.load(std::memory_order_relaxed);
  s.producers = c.producers.load(std::memory_order_relaxed);
  s.producers_idle = c.producers_idle.load(std::memory_order_relaxed);
  s.lost_batches = c.lost_batches.load(std::memory_order_relaxed);
  s.writer_queued = c.writer.queued.load(std::memory_order_relaxed);
  s.writer_peak = c.writer.peak.load(std::memory_order_relaxed);
  s.writer_waits = c.writer.waits.load(std::memory_order_relaxed);
  s.writer_written = c.writer.written.load(std::memory_order_relaxed);
  s.writer_errors = c.writer.errors.load(std::memory_order_relaxed);
  s.delivery_accepted = c.delivery.accepted.load(std::memory_order_relaxed);
  s.delivery_posts = c.delivery.posts.load(std::memory_order_relaxed);
  s.delivery_post_errors = c.delivery.post_errors.load(std::memory_order_relaxed);
  s.delivery_undelivered = c.delivery.undelivered.load(std::memory_order_relaxed);
  for (size_t i = 0; i < 3; ++i) s.delivery_dropped[i] = c.delivery.dropped[i].load(std::memory_order_relaxed);
  s.latency = c.latency.summary();
  return s;
}

std::string format_counters(const std::vector<CounterSnapshot>& rows) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-16s %-12s %12s %12s %8s %8s %8s %8s %6s %6s %14s\n", "node", "type", "in", "out",
                "drop.P0", "drop.P1", "drop.P2", "drop.P3", "late", "dead", "queue peak/cap");
  out += line;
  for (const auto& r : rows) {
    char q[40];
    if (r.queue_capacity)
      std::snprintf(q, sizeof q, "%llu/%llu", (unsigned long long)r.queue_peak, (unsigned long long)r.queue_capacity);
    else
      std::snprintf(q, sizeof q, "-");
    std::snprintf(line, sizeof line, "%-16s %-12s %12llu %12llu %8llu %8llu %8llu %8llu %6llu %6llu %14s\n",
                  r.node.c_str(), r.type.c_str(), (unsigned long long)r.in, (unsigned long long)r.out,
                  (unsigned long long)r.dropped[0], (unsigned long long)r.dropped[1], (unsigned long long)r.dropped[2],
                  (unsigned long long)r.dropped[3], (unsigned long long)r.late, (unsigned long long)r.dead_lettered, q);
    out += line;
  }
  // Sources with producers (batches that declare their progress), below the table.
  for (const auto& r : rows) {
    if (r.producers == 0 && r.producers_idle == 0 && r.lost_batches == 0) continue;
    std::snprintf(line, sizeof line, "producers of %s: %llu active, %llu went idle, %llu batches lost\n",
                  r.node.c_str(), (unsigned long long)r.producers, (unsigned long long)r.producers_idle,
                  (unsigned long long)r.lost_batches);
    out += line;
  }
  // Sinks that write on a thread of their own (runtime/async_writer.h), below the table.
  for (const auto& r : rows) {
    if (r.writer_queued == 0) continue;
    std::snprintf(
        line, sizeof line, "writer of %s: %llu batches queued, peak %llu, %llu waits, %llu written, %llu errors\n",
        r.node.c_str(), (unsigned long long)r.writer_queued, (unsigned long long)r.writer_peak,
        (unsigned long long)r.writer_waits, (unsigned long long)r.writer_written, (unsigned long long)r.writer_errors);
    out += line;
  }
  // Sinks that deliver alerts to a service (the alertmanager sink).
  for (const auto& r : rows) {
    if (r.delivery_accepted == 0 && r.delivery_post_errors == 0) continue;
    std::snprintf(line, sizeof line,
                  "delivery of %s: %llu alerts accepted, %llu posts, %llu failed, dropped %llu info %llu warning %llu "
                  "critical, %llu undelivered\n",
                  r.node.c_str(), (unsigned long long)r.delivery_accepted, (unsigned long long)r.delivery_posts,
                  (unsigned long long)r.delivery_post_errors, (unsigned long long)r.delivery_dropped[0],
                  (unsigned long long)r.delivery_dropped[1], (unsigned long long)r.delivery_dropped[2],
                  (unsigned long long)r.delivery_undelivered);
    out += line;
  }
  for (const auto& r : rows) {
    if (r.latency.count == 0) continue;
    std::snprintf(line, sizeof line, "latency of %s: %llu rows, p50 %.3g ms, p99 %.3g ms, max %.3g ms\n",
                  r.node.c_str(), (unsigned long long)r.latency.count, r.latency.p50_us / 1000, r.latency.p99_us / 1000,
                  r.latency.max_us / 1000);
    out += line;
  }
  return out;
}

std::string counters_json(const std::vector<CounterSnapshot>& rows) {
  std::string out;
  char line[512];
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line,
                  "{\"node\":\"%s\",\"type\":\"%s\",\"in\":%llu,\"out\":%llu,\"dropped\":{\"P0\":%llu,\"P1\":%llu,"
                  "\"P2\":%llu,\"P3\":%llu},\"late\":%llu,\"dead_lettered\":%llu,\"queue_peak\":%llu,"
                  "\"queue_capacity\":%llu",
                  r.node.c_str(), r.type.c_str(), (unsigned long long)r.in, (unsigned long long)r.out,
                  (unsigned long long)r.dropped[0], (unsigned long long)r.dropped[1], (unsigned long long)r.dropped[2],
                  (unsigned long long)r.dropped[3], (unsigned long long)r.late, (unsigned long long)r.dead_lettered,
                  (unsigned long long)r.queue_peak, (unsigned long long)r.queue_capacity);
    out += line;
    if (r.producers > 0 || r.producers_idle > 0 || r.lost_batches > 0) {
      std::snprintf(line, sizeof line, ",\"producers\":%llu,\"producers_idle\":%llu,\"lost_batches\":%llu",
                    (unsigned long long)r.producers, (unsigned long long)r.producers_idle,
                    (unsigned long long)r.lost_batches);
      out += line;
    }
    if (r.writer_queued > 0) {
      std::snprintf(line, sizeof line,
                    ",\"writer\":{\"queued\":%llu,\"peak\":%llu,\"waits\":%llu,\"written\":%llu,\"errors\":%llu}",
                    (unsigned long long)r.writer_queued, (unsigned long long)r.writer_peak,
                    (unsigned long long)r.writer_waits, (unsigned long long)r.writer_written,
                    (unsigned long long)r.writer_errors);
      out += line;
    }
    if (r.delivery_accepted > 0 || r.delivery_post_errors > 0) {
      std::snprintf(line, sizeof line,
                    ",\"delivery\":{\"accepted\":%llu,\"posts\":%llu,\"post_errors\":%llu,\"dropped\":{\"info\":%llu,"
                    "\"warning\":%llu,\"critical\":%llu},\"undelivered\":%llu}",
                    (unsigned long long)r.delivery_accepted, (unsigned long long)r.delivery_posts,
                    (unsigned long long)r.delivery_post_errors, (unsigned long long)r.delivery_dropped[0],
                    (unsigned long long)r.delivery_dropped[1], (unsigned long long)r.delivery_dropped[2],
                    (unsigned long long)r.delivery_undelivered);
      out += line;
    }
    if (r.latency.count > 0) {
      std::snprintf(line, sizeof line, ",\"latency_us\":{\"count\":%llu,\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f}",
                    (unsigned long long)r.latency.count, r.latency.p50_us, r.latency.p99_us, r.latency.max_us);
      out += line;
    }
    out += "}\n";
  }
  return out;
}

}  // namespace runlens::runtime
