#include "connectors/metrics/exposition.h"

#include <charconv>
#include <cmath>
#include <functional>

namespace runlens::connectors::metrics {

std::string_view type_name(MetricType t) {
  switch (t) {
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kCounter:
      return "counter";
    case MetricType::kSummary:
      return "summary";
  }
  return "untyped";
}

namespace {
// Length of the valid UTF-8 sequence at s[i], or 0.
size_t utf8_length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  }
  if (n == 2 && c < 0xC2) return 0;                                       // overlong
  if (n == 3 && c == 0xE0 && b(i + 1) < 0xA0) return 0;                   // overlong
  if (n == 3 && c == 0xED && b(i + 1) >= 0xA0) return 0;                  // surrogate
  if (n == 4 && c == 0xF0 && b(i + 1) < 0x90) return 0;                   // overlong
  if (n == 4 && (c > 0xF4 || (c == 0xF4 && b(i + 1) >= 0x90))) return 0;  // past U+10FFFF
  return n;
}
}  // namespace

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size();) {
    char c = v[i];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      // A scrape of text that is not UTF-8 fails whole: invalid bytes become U+FFFD.
      size_t n = utf8_length(v, i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";
        ++i;
        continue;
      }
      out.append(v.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out.push_back(c);
  }
  return out;
}

std::string label_text(const Labels& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out.push_back(',');
    out += labels[i].first;
    out += "=\"";
    out += escape_label_value(labels[i].second);
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::trunc(v) && std::fabs(v) < 9.007199254740992e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string render(const std::vector<const Snapshot*>& snapshots) {
  struct Merged {
    const Family* family = nullptr;
    std::map<std::string_view, Series> series;
  };
  std::map<std::string_view, Merged> families;
  for (const Snapshot* s : snapshots) {
    for (const auto& e : s->entries) {
      auto& m = families[e.family->name];
      if (m.family == nullptr) m.family = e.family;
      m.series[e.labels] = e.series;
    }
  }
  std::string out;
  for (const auto& [name, m] : families) {
    out += "# HELP ";
    out += name;
    out.push_back(' ');
    out += escape_help(m.family->help);
    out += "\n# TYPE ";
    out += name;
    out.push_back(' ');
    out += type_name(m.family->type);
    out.push_back('\n');
    for (const auto& [labels, s] : m.series) {
      if (m.family->type == MetricType::kSummary) {
        out += name;
        out += "_sum";
        out += labels;
        out.push_back(' ');
        out += format_value(s.value);
        out.push_back('\n');
        out += name;
        out += "_count";
        out += labels;
        out.push_back(' ');
        out += std::to_string(s.count);
        out.push_back('\n');
        continue;
      }
      out += name;
      out += labels;
      out.push_back(' ');
      out += format_value(s.value);
      out.push_back('\n');
    }
  }
  return out;
}

size_t MetricSet::KeyHash::operator()(const Key& k) const {
  return std::hash<std::string>()(k.labels) ^ (std::hash<const void*>()(k.family) * 31);
}

Series* MetricSet::series(const Family& family, const Labels& labels) { return series(family, label_text(labels)); }

Series* MetricSet::series(const Family& family, const std::string& labels_text) {
  Key key{&family, labels_text};
  auto it = series_.find(key);
  if (it != series_.end()) return &it->second;
  if (series_.size() >= max_series_) {
    // Each distinct series is counted once while it is remembered; beyond as
    // many as the limit, refusals are not remembered (and not counted again).
    if (refused_keys_.size() < max_series_ && refused_keys_.insert(std::move(key)).second) ++refused_;
    return nullptr;
  }
  refused_keys_.erase(key);
  return &series_.emplace(std::move(key), Series{}).first->second;
}

void MetricSet::erase(const Family& family, const std::string& labels_text) {
  erasures_ += series_.erase(Key{&family, labels_text});
}

Snapshot MetricSet::snapshot() const {
  Snapshot s;
  s.entries.reserve(series_.size());
  for (const auto& [k, v] : series_) s.entries.push_back(Snapshot::Entry{k.family, k.labels, v});
  return s;
}

}  // namespace runlens::connectors::metrics
