// The Prometheus text exposition format 0.0.4, as node_exporter and
// dcgm-exporter serve it: `# HELP` and `# TYPE` lines, other comments, and
// samples `name{label="value",...} value [timestamp_ms]` with label values
// escaped (\\, \", \n), values that may be NaN, +Inf or -Inf, and optional
// integer millisecond timestamps. The parser is strict where Prometheus is:
// a second HELP or TYPE line for one family, a TYPE line after the family's
// samples, an unknown type, a bad name, a duplicate label, an unterminated
// string or a trailing token is an error at line:col (1-based), and the
// whole exposition is then rejected (as Prometheus rejects a scrape).
// Families the reader does not know are kept like any other; what to use is
// the reader's choice.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runlens::prom {

enum class MetricType { kUntyped, kCounter, kGauge, kHistogram, kSummary };

struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // as written, unescaped
  double value = 0;
  std::optional<int64_t> timestamp_ms;
  int line = 0;
  // The value of label `name`, or null.
  const std::string* label(std::string_view name) const;
};

struct Exposition {
  std::vector<Sample> samples;              // in the order written
  std::map<std::string, MetricType> types;  // by family name (from TYPE lines)
  std::map<std::string, std::string> help;  // by family name, unescaped
};

struct ParseError {
  int line = 0, col = 0;
  std::string message;
  std::string text() const;  // "line 3:14: ..."
};

// Parses `text` into `out` (cleared first). False with `error` set at the
// first problem; `out` then holds what came before it.
bool parse_text(std::string_view text, Exposition* out, ParseError* error);

}  // namespace runlens::prom
