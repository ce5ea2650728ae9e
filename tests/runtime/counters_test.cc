// Per-node counters: snapshots, the queue peak under concurrency, and the
// table and JSON renderings.
#include "runtime/counters.h"

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

namespace rt = runlens::runtime;

namespace {

TEST_CASE("a snapshot copies every counter") {
  rt::NodeCounters c;
  c.add(c.in, 10);
  c.add(c.out, 7);
  c.add(c.late, 2);
  c.add(c.dead_lettered, 3);
  for (int p = 0; p < rt::kPriorities; ++p) c.add(c.dropped[static_cast<size_t>(p)], static_cast<uint64_t>(p + 1));
  c.add(c.queue_rows, 5);
  c.raise_peak(9);
  c.queue_capacity.store(16);
  auto s = rt::snapshot("n", "t", c);
  CHECK(s.node == "n");
  CHECK(s.type == "t");
  CHECK(s.in == 10);
  CHECK(s.out == 7);
  CHECK(s.late == 2);
  CHECK(s.dead_lettered == 3);
  CHECK(s.dropped == std::array<uint64_t, 4>{1, 2, 3, 4});
  CHECK(s.dropped_total() == 10);
  CHECK(s.queue_rows == 5);
  CHECK(s.queue_peak == 9);
  CHECK(s.queue_capacity == 16);
}

TEST_CASE("raise_peak keeps the maximum, also when raised from many threads") {
  rt::NodeCounters c;
  c.raise_peak(5);
  c.raise_peak(3);
  CHECK(c.queue_peak == 5);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c, t] {
      for (uint64_t v = 0; v < 20000; ++v) c.raise_peak(v * 4 + static_cast<uint64_t>(t));
    });
  }
  for (auto& t : threads) t.join();
  CHECK(c.queue_peak == 19999 * 4 + 3);
}

TEST_CASE("format_counters prints a header and one row per node") {
  rt::CounterSnapshot a;
  a.node = "src";
  a.type = "toy";
  a.in = 12;
  a.out = 11;
  a.late = 1;
  a.dead_lettered = 1;
  rt::CounterSnapshot b;
  b.node = "op";
  b.type = "sum";
  b.in = 11;
  b.dropped = {0, 1, 2, 3};
  b.queue_peak = 4;
  b.queue_capacity = 8;
  std::string t = rt::format_counters({a, b});
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = t.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(t.substr(at, nl - at));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].find("node") == 0);
  CHECK(lines[0].find("drop.P3") != std::string::npos);
  CHECK(lines[0].find("queue peak/cap") != std::string::npos);
  CHECK(lines[1].rfind("src ", 0) == 0);
  CHECK(lines[1].substr(lines[1].size() - 1) == "-");  // a source has no queue
  CHECK(lines[2].rfind("op ", 0) == 0);
  CHECK(lines[2].find(" 4/8") != std::string::npos);
  CHECK(lines[1].size() == lines[0].size());  // fixed width
  CHECK(lines[2].size() == lines[0].size());
}

TEST_CASE("a sink's asynchronous writer: copied by snapshot, a line below the table, an object in the JSON") {
  rt::NodeCounters c;
  c.add(c.writer.queued, 12);
  c.writer.peak.store(2);
  c.add(c.writer.waits, 3);
  c.add(c.writer.written, 11);
  c.add(c.writer.errors, 1);
  auto s = rt::snapshot("store", "timeline", c);
  CHECK(s.writer_queued == 12);
  CHECK(s.writer_peak == 2);
  CHECK(s.writer_waits == 3);
  CHECK(s.writer_written == 11);
  CHECK(s.writer_errors == 1);
  rt::CounterSnapshot plain;
  plain.node = "op";
  plain.type = "sum";
  std::string t = rt::format_counters({plain, s});
  CHECK(t.substr(t.rfind('\n', t.size() - 2) + 1) ==
        "writer of store: 12 batches queued, peak 2, 3 waits, 11 written, 1 errors\n");
  CHECK(t.find("writer of op") == std::string::npos);  // nodes without a writer: no line
  std::string j = rt::counters_json({s});
  CHECK(j.find(",\"queue_capacity\":0,\"writer\":{\"queued\":12,\"peak\":2,\"waits\":3,\"written\":11,"
               "\"errors\":1}}\n") != std::string::npos);
}

TEST_CASE("counters_json writes one JSON object per node") {
  rt::CounterSnapshot a;
  a.node = "op";
  a.type = "sum";
  a.in = 11;
  a.out = 9;
  a.dropped = {0, 1, 2, 3};
  a.late = 4;
  a.dead_lettered = 5;
  a.queue_peak = 6;
  a.queue_capacity = 8;
  const std::string one =
      "{\"node\":\"op\",\"type\":\"sum\",\"in\":11,\"out\":9,\"dropped\":{\"P0\":0,\"P1\":1,\"P2\":2,\"P3\":3},"
      "\"late\":4,\"dead_lettered\":5,\"queue_peak\":6,\"queue_capacity\":8}\n";
  CHECK(rt::counters_json({a, a}) == one + one);
  CHECK(rt::counters_json({}).empty());
}

}  // namespace

TEST_CASE("the latency histogram's quantiles and maximum are those of what it recorded, within a bucket") {
  rt::NodeCounters c;
  CHECK(c.latency.summary().count == 0);
  CHECK(rt::counters_json({rt::snapshot("n", "t", c)}).find("latency_us") == std::string::npos);
  // 98 rows handled 1 ms after their evidence arrived, one at 5 ms, one at 100 ms.
  c.latency.record(1'000'000, 98);
  c.latency.record(5'000'000, 1);
  c.latency.record(100'000'000, 1);
  auto s = rt::snapshot("alert_stream", "zmq_pub", c).latency;
  CHECK(s.count == 100);
  // A bucket is a quarter octave wide: a value is quoted within 19 % of what was recorded.
  CHECK(s.p50_us == doctest::Approx(1000).epsilon(0.19));
  CHECK(s.p99_us == doctest::Approx(5000).epsilon(0.19));
  CHECK(s.max_us == 100000);
  // A quantile is never quoted above the maximum.
  rt::NodeCounters one;
  one.latency.record(1'500'000, 1);
  auto o = one.latency.summary();
  CHECK(o.p50_us <= o.max_us);
  CHECK(o.p99_us == o.max_us);
  // Below a microsecond (and negative, a clock oddity) lands in the first bucket.
  rt::NodeCounters tiny;
  tiny.latency.record(-5, 1);
  tiny.latency.record(300, 1);
  CHECK(tiny.latency.summary().count == 2);
  CHECK(tiny.latency.summary().p99_us < 1.2);
  std::string json = rt::counters_json({rt::snapshot("alert_stream", "zmq_pub", c)});
  CHECK(json.find(R"("latency_us":{"count":100,"p50":)") != std::string::npos);
  CHECK(json.find(R"("max":100000.0})") != std::string::npos);
  std::string table = rt::format_counters({rt::snapshot("alert_stream", "zmq_pub", c)});
  CHECK(table.find("latency of alert_stream: 100 rows, p50 ") != std::string::npos);
}

TEST_CASE("a delivering sink's counters: accepted, posts, failures, drops by severity, undelivered") {
  rt::NodeCounters c;
  CHECK(rt::counters_json({rt::snapshot("am", "alertmanager", c)}).find("delivery") == std::string::npos);
  c.delivery.accepted = 7;
  c.delivery.posts = 3;
  c.delivery.post_errors = 2;
  c.delivery.dropped[0] = 4;
  c.delivery.dropped[1] = 1;
  c.delivery.undelivered = 2;
  auto s = rt::snapshot("am", "alertmanager", c);
  CHECK(s.delivery_accepted == 7);
  CHECK(s.delivery_dropped == std::array<uint64_t, 3>{4, 1, 0});
  std::string json = rt::counters_json({s});
  CHECK(json.find(R"(,"delivery":{"accepted":7,"posts":3,"post_errors":2,"dropped":{"info":4,"warning":1,)"
                  R"("critical":0},"undelivered":2})") != std::string::npos);
  CHECK(rt::format_counters({s}).find("delivery of am: 7 alerts accepted, 3 posts, 2 failed, dropped 4 info 1 "
                                      "warning 0 critical, 2 undelivered\n") != std::string::npos);
}
