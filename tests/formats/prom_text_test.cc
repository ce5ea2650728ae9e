// The Prometheus text format 0.0.4 parser (formats/prom_text.h).
#include "formats/prom_text.h"

#include <doctest/doctest.h>

#include <cmath>

using runlens::prom::Exposition;
using runlens::prom::MetricType;
using runlens::prom::parse_text;
using runlens::prom::ParseError;

namespace {

// The error of `text`, as "line L:C: message".
std::string error_of(const std::string& text) {
  Exposition e;
  ParseError err;
  if (parse_text(text, &e, &err)) return "parsed";
  return err.text();
}

}  // namespace

TEST_CASE("HELP, TYPE, comments, labels and timestamps are read as Prometheus writes them") {
  const std::string text =
      "# A comment that is neither HELP nor TYPE\n"
      "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n"
      "# TYPE node_cpu_seconds_total counter\n"
      "node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 14339.07\n"
      "node_cpu_seconds_total{cpu=\"0\",mode=\"user\",} 9958.04 1700000000123\n"
      "\n"
      "# HELP odd A help with a \\\\ backslash and a\\nnew line\n"
      "# TYPE odd gauge\n"
      "odd{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\"} -1.5e3\n"
      "   spaced_out   {  a = \"1\" , b=\"2\" }   7   -12\n"
      "no_labels 0\r\n"
      "colon:name{} 3\n";
  Exposition e;
  ParseError err;
  REQUIRE_MESSAGE(parse_text(text, &e, &err), err.text());
  REQUIRE(e.samples.size() == 6);
  CHECK(e.types.at("node_cpu_seconds_total") == MetricType::kCounter);
  CHECK(e.types.at("odd") == MetricType::kGauge);
  CHECK(e.help.at("node_cpu_seconds_total") == "Seconds the CPUs spent in each mode.");
  CHECK(e.help.at("odd") == "A help with a \\ backslash and a\nnew line");
  CHECK(e.samples[0].name == "node_cpu_seconds_total");
  CHECK(*e.samples[0].label("mode") == "idle");
  CHECK(e.samples[0].value == doctest::Approx(14339.07));
  CHECK_FALSE(e.samples[0].timestamp_ms.has_value());
  CHECK(e.samples[0].line == 4);
  CHECK(*e.samples[1].timestamp_ms == 1700000000123);  // a trailing comma in the labels is allowed
  CHECK(*e.samples[2].label("path") == "C:\\dir");
  CHECK(*e.samples[2].label("quote") == "say \"hi\"");
  CHECK(*e.samples[2].label("nl") == "a\nb");
  CHECK(e.samples[2].value == -1500);
  CHECK(e.samples[3].name == "spaced_out");
  CHECK(*e.samples[3].label("b") == "2");
  CHECK(*e.samples[3].timestamp_ms == -12);
  CHECK(e.samples[4].labels.empty());
  CHECK(e.samples[5].name == "colon:name");
}

TEST_CASE("NaN and the infinities are values") {
  Exposition e;
  ParseError err;
  REQUIRE(parse_text("a NaN\nb +Inf\nc -Inf\nd nan\ne Inf\nf 1e400\n", &e, &err));
  CHECK(std::isnan(e.samples[0].value));
  CHECK(e.samples[1].value == HUGE_VAL);
  CHECK(e.samples[2].value == -HUGE_VAL);
  CHECK(std::isnan(e.samples[3].value));
  CHECK(e.samples[4].value == HUGE_VAL);
  CHECK(e.samples[5].value == HUGE_VAL);  // an overflow reads as +Inf, as in Go
}

TEST_CASE("malformed lines are errors at line:col") {
  CHECK(error_of("ok 1\nbad{a=\"1\" 2\n") == "line 2:11: expected ',' or '}' after a label, found '2'");
  CHECK(error_of("x{a=\"unterminated} 1\n") == "line 1:21: unterminated label value (opened at col 5)");
  CHECK(error_of("x{a=\"\\t\"} 1\n") == "line 1:6: invalid escape '\\t' in a label value (only \\\\, \\\" and \\n)");
  CHECK(error_of("x{a=1} 1\n") == "line 1:5: expected '\"' to open the label value, found '1'");
  CHECK(error_of("x{1a=\"1\"} 1\n") == "line 1:3: expected a label name, found '1'");
  CHECK(error_of("x{a=\"1\",a=\"2\"} 1\n") == "line 1:9: duplicate label 'a'");
  CHECK(error_of("x 1.2.3\n") == "line 1:3: invalid sample value '1.2.3'");
  CHECK(error_of("x 0x10\n") == "line 1:3: invalid sample value '0x10'");
  CHECK(error_of("x\n") == "line 1:2: missing the sample value");
  CHECK(error_of("x 1 12.5\n") == "line 1:5: invalid timestamp '12.5' (integer milliseconds)");
  CHECK(error_of("x 1 2 3\n") == "line 1:7: unexpected text after the timestamp");
  CHECK(error_of("9x 1\n") == "line 1:1: expected a metric name, found '9'");
  CHECK(error_of("<html>\n") == "line 1:1: expected a metric name, found '<'");
  CHECK(error_of("# TYPE x countr\n") ==
        "line 1:10: unknown metric type 'countr' (counter, gauge, histogram, summary or untyped)");
  CHECK(error_of("# TYPE x gauge extra\n") == "line 1:16: unexpected text after the metric type");
}

TEST_CASE("a family is declared once, before its samples") {
  CHECK(error_of("# TYPE x gauge\nx 1\n# TYPE x gauge\n") == "line 3:1: second TYPE line for metric x");
  CHECK(error_of("# HELP x one\n# HELP x two\n") == "line 2:1: second HELP line for metric x");
  CHECK(error_of("x 1\n# TYPE x gauge\n") == "line 2:1: TYPE line for metric x after its samples");
  // A histogram's samples belong to its family.
  CHECK(error_of("h_bucket{le=\"1\"} 1\n# TYPE h histogram\n") == "line 2:1: TYPE line for metric h after its samples");
  // Unknown families and types are kept for the reader to ignore.
  Exposition e;
  ParseError err;
  REQUIRE(
      parse_text("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 3\nh_sum 1.5\nh_count 3\n# TYPE s summary\n"
                 "s{quantile=\"0.5\"} 2\n# TYPE u untyped\nu 1\n",
                 &e, &err));
  CHECK(e.samples.size() == 5);
  CHECK(e.types.at("h") == MetricType::kHistogram);
  CHECK(e.types.at("s") == MetricType::kSummary);
  CHECK(e.types.at("u") == MetricType::kUntyped);
}

TEST_CASE("any bytes are parsed or refused, never a crash") {
  // Mutations of a valid exposition: bytes replaced, cut short, doubled.
  const std::string base =
      "# HELP x help \\\\ text\n# TYPE x counter\nx{a=\"1\",b=\"q\\\"\\n\"} 1.5e3 1700000000000\ny NaN\nz{} -Inf\n";
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  int parsed = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = base;
    int edits = 1 + static_cast<int>(next() % 4);
    for (int k = 0; k < edits; ++k) {
      size_t at = next() % s.size();
      switch (next() % 3) {
        case 0:
          s[at] = static_cast<char>(next() % 256);
          break;
        case 1:
          s.resize(at);
          break;
        default:
          s.insert(at, s.substr(at, next() % 8));
      }
      if (s.empty()) s = "x";
    }
    Exposition e;
    ParseError err;
    if (parse_text(s, &e, &err)) {
      ++parsed;
    } else {
      ++refused;
      CHECK(err.line >= 1);
      CHECK(err.col >= 1);
      CHECK_FALSE(err.message.empty());
    }
  }
  CHECK(parsed > 0);
  CHECK(refused > 0);
}
