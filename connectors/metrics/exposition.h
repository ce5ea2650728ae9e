// The Prometheus text exposition format 0.0.4 (docs/integrations.md,
// "Prometheus"): metric families with HELP and TYPE once each, series with
// escaped label values, and a series limit that guards cardinality.
//
// A MetricSet is the state of one writer (the `metrics` sink's partition):
// not thread-safe. What a scrape reads is a Snapshot, a copy taken by the
// writer and handed over whole (MetricsHub), so a scrape never touches the
// writer's state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace runlens::connectors::metrics {

enum class MetricType : uint8_t { kGauge, kCounter, kSummary };
std::string_view type_name(MetricType t);

// One metric family: a name (runlens_..., the unit in the name), its type
// and its HELP line. Families are constants of the code that writes them.
struct Family {
  std::string_view name;
  MetricType type;
  std::string_view help;
};

using Labels = std::vector<std::pair<std::string_view, std::string>>;

// `{a="x",b="y"}` with label values escaped (\\, \", \n), or "" for no labels.
std::string label_text(const Labels& labels);
// A label value escaped for the text format (bytes that are not UTF-8
// become U+FFFD, since Prometheus rejects a scrape that is not UTF-8).
std::string escape_label_value(std::string_view v);
// HELP text escaped (\\ and \n).
std::string escape_help(std::string_view v);
// A sample value: integers without a fraction, NaN, +Inf, -Inf, else the
// shortest text that reads back as the same double.
std::string format_value(double v);

// A series: its value (a summary's sum) and a summary's count.
struct Series {
  double value = 0;
  uint64_t count = 0;
};

// A copy of a set's series, rendered at scrape time.
struct Snapshot {
  struct Entry {
    const Family* family;
    std::string labels;  // label_text()
    Series series;
  };
  std::vector<Entry> entries;
};

// Renders families of several snapshots: families sorted by name, each with
// one HELP and one TYPE line, then its series sorted by labels (a series in
// two snapshots: the later one's). Summaries as NAME_sum and NAME_count.
std::string render(const std::vector<const Snapshot*>& snapshots);

class MetricSet {
 public:
  explicit MetricSet(size_t max_series) : max_series_(max_series) {}

  // The series of `family` with `labels`, created at 0 if new; null when
  // creating it would pass the series limit (then counted in refused(),
  // once per distinct series while the set remembers it: it remembers as
  // many refused series as its limit). The pointer stays valid until the
  // series is erased.
  Series* series(const Family& family, const Labels& labels);
  Series* series(const Family& family, const std::string& labels_text);
  void erase(const Family& family, const std::string& labels_text);

  size_t size() const { return series_.size(); }
  // Series erased so far: a writer that was refused a series need not ask
  // again (and pay for the lookup) until this has changed.
  uint64_t erasures() const { return erasures_; }
  size_t max_series() const { return max_series_; }
  uint64_t refused() const { return refused_; }
  Snapshot snapshot() const;

 private:
  struct Key {
    const Family* family;
    std::string labels;
    bool operator==(const Key& o) const { return family == o.family && labels == o.labels; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  size_t max_series_;
  uint64_t refused_ = 0;
  uint64_t erasures_ = 0;
  std::unordered_map<Key, Series, KeyHash> series_;
  std::unordered_set<Key, KeyHash> refused_keys_;
};

}  // namespace runlens::connectors::metrics
