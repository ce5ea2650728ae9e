// The Prometheus text format of connectors/metrics/: escaping, one HELP and
// TYPE a family, the series limit, snapshots, the hub and its HTTP server.
#include "connectors/metrics/exposition.h"

#include <doctest/doctest.h>
#include <httplib.h>

#include <cmath>
#include <limits>

#include "connectors/metrics/metrics_hub.h"
#include "connectors/metrics/metrics_server.h"

namespace {

using namespace runlens::connectors::metrics;

constexpr Family kGaugeA{"test_a_celsius", MetricType::kGauge, "A gauge with \\ and\na newline."};
constexpr Family kCounterB{"test_b_total", MetricType::kCounter, "A counter."};
constexpr Family kSummaryC{"test_c_seconds", MetricType::kSummary, "A summary."};

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("label values and HELP text are escaped as the text format says") {
  CHECK(escape_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
  CHECK(escape_help("x\\y\nz \"q\"") == "x\\\\y\\nz \"q\"");
  CHECK(label_text({}) == "");
  CHECK(escape_label_value("gpu-\xE2\x82\xAC") == "gpu-\xE2\x82\xAC");    // UTF-8 is kept
  CHECK(escape_label_value("n\xFF\xC3") == "n\xEF\xBF\xBD\xEF\xBF\xBD");  // the rest becomes U+FFFD
  CHECK(label_text({{"job_id", "j\"1"}, {"node_id", "n\n2"}}) == "{job_id=\"j\\\"1\",node_id=\"n\\n2\"}");
}

TEST_CASE("sample values: integers plain, fractions shortest, NaN and infinities by name") {
  CHECK(format_value(3) == "3");
  CHECK(format_value(-12) == "-12");
  CHECK(format_value(0.1) == "0.1");
  CHECK(format_value(71.5) == "71.5");
  CHECK(format_value(1e20) == "1e+20");
  CHECK(format_value(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
}

TEST_CASE("each family has one HELP and one TYPE line, families and series in order, summaries as _sum and _count") {
  MetricSet a(100), b(100);
  a.series(kGaugeA, {{"gpu_id", "1"}})->value = 70;
  a.series(kGaugeA, {{"gpu_id", "0"}})->value = 71.5;
  b.series(kGaugeA, {{"gpu_id", "2"}})->value = 60;
  b.series(kCounterB, Labels{})->value = 4;
  Series* c = b.series(kSummaryC, {{"op", "all_reduce"}});
  c->value = 0.25;
  c->count = 3;
  Snapshot sa = a.snapshot(), sb = b.snapshot();
  std::string text = render({&sa, &sb});
  CHECK(text ==
        "# HELP test_a_celsius A gauge with \\\\ and\\na newline.\n"
        "# TYPE test_a_celsius gauge\n"
        "test_a_celsius{gpu_id=\"0\"} 71.5\n"
        "test_a_celsius{gpu_id=\"1\"} 70\n"
        "test_a_celsius{gpu_id=\"2\"} 60\n"
        "# HELP test_b_total A counter.\n"
        "# TYPE test_b_total counter\n"
        "test_b_total 4\n"
        "# HELP test_c_seconds A summary.\n"
        "# TYPE test_c_seconds summary\n"
        "test_c_seconds_sum{op=\"all_reduce\"} 0.25\n"
        "test_c_seconds_count{op=\"all_reduce\"} 3\n");
  CHECK(count_of(text, "# TYPE test_a_celsius") == 1);
}

TEST_CASE("the series limit refuses new series, counts each refused series once, and frees room on erase") {
  MetricSet set(2);
  REQUIRE(set.series(kGaugeA, {{"gpu_id", "0"}}) != nullptr);
  REQUIRE(set.series(kGaugeA, {{"gpu_id", "1"}}) != nullptr);
  CHECK(set.series(kGaugeA, {{"gpu_id", "0"}}) != nullptr);  // an existing series is not new
  CHECK(set.series(kGaugeA, {{"gpu_id", "2"}}) == nullptr);
  CHECK(set.refused() == 1);
  CHECK(set.series(kGaugeA, {{"gpu_id", "2"}}) == nullptr);  // the same series again: not counted again
  CHECK(set.refused() == 1);
  CHECK(set.series(kCounterB, Labels{}) == nullptr);
  CHECK(set.refused() == 2);
  CHECK(set.size() == 2);
  set.erase(kGaugeA, label_text({{"gpu_id", "1"}}));
  CHECK(set.size() == 1);
  Series* s = set.series(kGaugeA, {{"gpu_id", "2"}});
  REQUIRE(s != nullptr);
  CHECK(s->value == 0);
  CHECK(set.refused() == 2);
}

TEST_CASE("a snapshot is a copy: counters go on rising in the set, and each snapshot is monotonic after the last") {
  MetricSet set(10);
  Series* c = set.series(kCounterB, Labels{});
  c->value += 2;
  Snapshot first = set.snapshot();
  c->value += 3;
  Snapshot second = set.snapshot();
  REQUIRE(first.entries.size() == 1);
  REQUIRE(second.entries.size() == 1);
  CHECK(first.entries[0].series.value == 2);
  CHECK(second.entries[0].series.value == 5);
  CHECK(second.entries[0].series.value >= first.entries[0].series.value);
}

TEST_CASE("the hub renders the runtime's counters with the sinks' series, and keeps the last counters after a run") {
  MetricsHub hub;
  std::vector<runlens::runtime::CounterSnapshot> counters(1);
  counters[0].node = "telemetry";
  counters[0].type = "zmq";
  counters[0].in = 5;
  counters[0].dropped[2] = 7;
  hub.set_counters([&] { return counters; });
  MetricSet set(10);
  set.series(kGaugeA, {{"gpu_id", "0"}})->value = 71.5;
  hub.publish("metrics", std::make_shared<Snapshot>(set.snapshot()));
  std::string text = hub.render();
  CHECK(text.find("runlens_pipeline_rows_in_total{component=\"telemetry\",type=\"zmq\"} 5\n") != std::string::npos);
  CHECK(text.find("runlens_pipeline_rows_dropped_total{component=\"telemetry\",type=\"zmq\",priority=\"P2\"} 7\n") !=
        std::string::npos);
  CHECK(text.find("test_a_celsius{gpu_id=\"0\"} 71.5\n") != std::string::npos);
  CHECK(count_of(text, "# TYPE runlens_pipeline_rows_in_total counter\n") == 1);
  counters[0].in = 9;
  hub.set_counters(nullptr);  // the run ended: its last counters stay
  counters[0].in = 100;
  CHECK(hub.render().find("runlens_pipeline_rows_in_total{component=\"telemetry\",type=\"zmq\"} 9\n") !=
        std::string::npos);
}

TEST_CASE("an alertmanager sink's delivery counters are exported, drops by severity; other nodes have none") {
  MetricsHub hub;
  std::vector<runlens::runtime::CounterSnapshot> counters(2);
  counters[0].node = "telemetry";
  counters[0].type = "zmq";
  counters[1].node = "pager";
  counters[1].type = "alertmanager";
  counters[1].delivery_accepted = 12;
  counters[1].delivery_posts = 4;
  counters[1].delivery_post_errors = 2;
  counters[1].delivery_dropped = {3, 1, 0};
  counters[1].delivery_undelivered = 5;
  hub.set_counters([&] { return counters; });
  const std::string text = hub.render();
  const std::string l = "{component=\"pager\",type=\"alertmanager\"";
  CHECK(text.find("runlens_alert_delivery_accepted_total" + l + "} 12\n") != std::string::npos);
  CHECK(text.find("runlens_alert_delivery_posts_total" + l + "} 4\n") != std::string::npos);
  CHECK(text.find("runlens_alert_delivery_post_errors_total" + l + "} 2\n") != std::string::npos);
  CHECK(text.find("runlens_alert_delivery_dropped_total" + l + ",severity=\"info\"} 3\n") != std::string::npos);
  CHECK(text.find("runlens_alert_delivery_dropped_total" + l + ",severity=\"warning\"} 1\n") != std::string::npos);
  CHECK(text.find("runlens_alert_delivery_dropped_total" + l + ",severity=\"critical\"} 0\n") != std::string::npos);
  CHECK(text.find("runlens_alert_delivery_undelivered_total" + l + "} 5\n") != std::string::npos);
  CHECK(text.find("runlens_alert_delivery_posts_total{component=\"telemetry\"") == std::string::npos);
  CHECK(count_of(text, "# TYPE runlens_alert_delivery_dropped_total counter\n") == 1);
}

TEST_CASE("GET /metrics answers the hub's text as text/plain version 0.0.4 on a port chosen at run time") {
  auto hub = std::make_shared<MetricsHub>();
  MetricSet set(10);
  set.series(kCounterB, Labels{})->value = 42;
  hub->publish("m", std::make_shared<Snapshot>(set.snapshot()));
  MetricsServer server(hub, "127.0.0.1", 0);
  std::string error;
  REQUIRE(server.start(&error));
  REQUIRE(server.port() > 0);
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/metrics");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->get_header_value("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(res->body.find("test_b_total 42\n") != std::string::npos);
  auto other = client.Get("/other");
  REQUIRE(other);
  CHECK(other->status == 404);
  CHECK(other->body.find("/metrics") != std::string::npos);
  // An address it cannot bind is an error with the address, not a crash.
  MetricsServer bad(hub, "256.256.256.256", 0);
  std::string why;
  CHECK_FALSE(bad.start(&why));
  CHECK(why == "cannot listen on 256.256.256.256:0");
  CHECK(bad.port() == 0);
  server.stop();
}

}  // namespace
