#include "formats/prom_text.h"

#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

namespace runlens::prom {

const std::string* Sample::label(std::string_view name) const {
  for (const auto& [k, v] : labels) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::string ParseError::text() const {
  return "line " + std::to_string(line) + ":" + std::to_string(col) + ": " + message;
}

namespace {

bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }
bool blank(char c) { return c == ' ' || c == '\t'; }

// One line being read; columns are 1-based bytes.
class LineReader {
 public:
  LineReader(std::string_view line, int number) : s_(line), number_(number) {}

  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }
  int col() const { return static_cast<int>(i_) + 1; }
  void skip_blanks() {
    while (!at_end() && blank(s_[i_])) ++i_;
  }
  bool fail(ParseError* e, std::string message, int col = 0) const {
    e->line = number_;
    e->col = col ? col : this->col();
    e->message = std::move(message);
    return false;
  }

  // A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), or a label name when `label` (no ':').
  bool name(std::string* out, ParseError* e, bool label = false) {
    size_t start = i_;
    if (at_end() || !name_start(s_[i_]) || (label && s_[i_] == ':'))
      return fail(e, std::string("expected a ") + (label ? "label" : "metric") + " name" + found());
    while (!at_end() && name_char(s_[i_]) && !(label && s_[i_] == ':')) ++i_;
    out->assign(s_.substr(start, i_ - start));
    return true;
  }

  // A token up to the next blank.
  std::string_view token() {
    size_t start = i_;
    while (!at_end() && !blank(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }
  std::string_view rest() const { return s_.substr(std::min(i_, s_.size())); }

  // A double-quoted label value with \\, \" and \n escapes.
  bool quoted(std::string* out, ParseError* e) {
    if (peek() != '"') return fail(e, "expected '\"' to open the label value" + found());
    int open = col();
    ++i_;
    out->clear();
    while (true) {
      if (at_end()) return fail(e, "unterminated label value (opened at col " + std::to_string(open) + ")");
      char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (at_end()) return fail(e, "unterminated label value (opened at col " + std::to_string(open) + ")");
      char x = s_[i_++];
      if (x == '\\')
        out->push_back('\\');
      else if (x == '"')
        out->push_back('"');
      else if (x == 'n')
        out->push_back('\n');
      else
        return fail(e, std::string("invalid escape '\\") + x + "' in a label value (only \\\\, \\\" and \\n)",
                    col() - 2);
    }
  }

  bool expect(char c, ParseError* e) {
    if (peek() != c) return fail(e, std::string("expected '") + c + "'" + found());
    ++i_;
    return true;
  }

  std::string found() const {
    if (at_end()) return ", found the end of the line";
    return std::string(", found '") + s_[i_] + "'";
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
  int number_;
};

// Go's strconv.ParseFloat, as Prometheus reads values: decimal or
// exponent forms, and NaN / Inf / +Inf / -Inf in any case.
bool parse_value(std::string_view t, double* out) {
  if (t.empty()) return false;
  std::string s(t);
  std::string_view body = t;
  bool neg = false;
  if (body[0] == '+' || body[0] == '-') neg = body[0] == '-', body.remove_prefix(1);
  if (body.size() == 3 && strncasecmp(body.data(), "nan", 3) == 0) {
    *out = std::nan("");
    return true;
  }
  if ((body.size() == 3 && strncasecmp(body.data(), "inf", 3) == 0) ||
      (body.size() == 8 && strncasecmp(body.data(), "infinity", 8) == 0)) {
    *out = neg ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  // strtod would also read hex floats and "nan(...)": only digits, '.', exponent here.
  for (char c : body) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' || c == '_')) return false;
  }
  if (body.find('_') != std::string_view::npos) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  if (errno == ERANGE && std::isfinite(v) && v != 0) return false;
  *out = v;  // an overflow reads as +-Inf, as in Go
  return true;
}

bool parse_timestamp(std::string_view t, int64_t* out) {
  if (t.empty()) return false;
  std::string s(t);
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  for (size_t k = i; k < s.size(); ++k) {
    if (s[k] < '0' || s[k] > '9') return false;
  }
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *out = v;
  return true;
}

bool type_of(std::string_view t, MetricType* out) {
  static const std::pair<const char*, MetricType> kTypes[] = {{"counter", MetricType::kCounter},
                                                              {"gauge", MetricType::kGauge},
                                                              {"histogram", MetricType::kHistogram},
                                                              {"summary", MetricType::kSummary},
                                                              {"untyped", MetricType::kUntyped}};
  for (const auto& [name, type] : kTypes) {
    if (t == name) {
      *out = type;
      return true;
    }
  }
  return false;
}

std::string unescape_help(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '\\' || s[i + 1] == 'n')) {
      out.push_back(s[i + 1] == 'n' ? '\n' : '\\');
      ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The families a sample name can belong to: itself, and for the suffixes of
// histograms and summaries, the name without them.
std::vector<std::string_view> families_of(std::string_view name) {
  std::vector<std::string_view> out{name};
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
      out.push_back(name.substr(0, name.size() - suffix.size()));
  }
  return out;
}

}  // namespace

bool parse_text(std::string_view text, Exposition* out, ParseError* error) {
  *out = Exposition{};
  std::set<std::string, std::less<>> sampled;  // families that have had samples
  int number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    LineReader r(line, number);
    r.skip_blanks();
    if (r.at_end()) continue;
    if (r.peek() == '#') {
      r.expect('#', error);
      r.skip_blanks();
      std::string_view keyword = r.token();
      if (keyword != "HELP" && keyword != "TYPE") continue;  // a comment
      r.skip_blanks();
      std::string family;
      if (!r.name(&family, error)) return false;
      if (!r.at_end() && !blank(r.peek())) return r.fail(error, "expected a blank after the metric name" + r.found());
      r.skip_blanks();
      if (keyword == "HELP") {
        if (out->help.count(family)) return r.fail(error, "second HELP line for metric " + family, 1);
        out->help[family] = unescape_help(r.rest());
        continue;
      }
      int at = r.col();
      std::string_view type_text = r.token();
      MetricType type;
      if (!type_of(type_text, &type))
        return r.fail(
            error,
            "unknown metric type '" + std::string(type_text) + "' (counter, gauge, histogram, summary or untyped)", at);
      r.skip_blanks();
      if (!r.at_end()) return r.fail(error, "unexpected text after the metric type");
      if (out->types.count(family)) return r.fail(error, "second TYPE line for metric " + family, 1);
      if (sampled.count(family)) return r.fail(error, "TYPE line for metric " + family + " after its samples", 1);
      out->types[family] = type;
      continue;
    }
    Sample s;
    s.line = number;
    if (!r.name(&s.name, error)) return false;
    int after_name = r.col();
    r.skip_blanks();
    bool spaced = r.col() > after_name;
    if (r.peek() == '{') {
      r.expect('{', error);
      r.skip_blanks();
      while (r.peek() != '}') {
        int at = r.col();
        std::string key, value;
        if (!r.name(&key, error, /*label=*/true)) return false;
        r.skip_blanks();
        if (!r.expect('=', error)) return false;
        r.skip_blanks();
        if (!r.quoted(&value, error)) return false;
        if (s.label(key)) return r.fail(error, "duplicate label '" + key + "'", at);
        s.labels.emplace_back(std::move(key), std::move(value));
        r.skip_blanks();
        if (r.peek() == ',') {
          r.expect(',', error);
          r.skip_blanks();
          continue;
        }
        if (r.peek() != '}') return r.fail(error, "expected ',' or '}' after a label" + r.found());
      }
      r.expect('}', error);
      spaced = r.at_end() || blank(r.peek());
      r.skip_blanks();
    }
    if (!spaced && !r.at_end()) return r.fail(error, "expected a blank before the value" + r.found());
    int at = r.col();
    std::string_view value = r.token();
    if (value.empty()) return r.fail(error, "missing the sample value");
    if (!parse_value(value, &s.value)) return r.fail(error, "invalid sample value '" + std::string(value) + "'", at);
    r.skip_blanks();
    if (!r.at_end()) {
      at = r.col();
      std::string_view ts = r.token();
      int64_t ms;
      if (!parse_timestamp(ts, &ms))
        return r.fail(error, "invalid timestamp '" + std::string(ts) + "' (integer milliseconds)", at);
      s.timestamp_ms = ms;
      r.skip_blanks();
      if (!r.at_end()) return r.fail(error, "unexpected text after the timestamp");
    }
    for (std::string_view f : families_of(s.name)) {
      if (!sampled.count(f)) sampled.emplace(f);
    }
    out->samples.push_back(std::move(s));
  }
  return true;
}

}  // namespace runlens::prom
