#include "runtime/params.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace runlens::runtime {

std::string_view param_type_name(ParamType t) {
  switch (t) {
    case ParamType::kInt:
      return "int";
    case ParamType::kDouble:
      return "number";
    case ParamType::kBool:
      return "bool";
    case ParamType::kString:
      return "string";
    case ParamType::kDuration:
      return "duration";
    case ParamType::kStringList:
      return "list of strings";
  }
  return "?";
}

namespace {
bool parse_double(const std::string& s, double* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  auto [p, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && p == e && std::isfinite(*out);
}
bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  auto [p, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && p == e;
}
}  // namespace

std::optional<int64_t> parse_duration_ns(const std::string& text) {
  static const std::pair<const char*, double> kUnits[] = {{"ns", 1},  {"us", 1e3}, {"ms", 1e6},
                                                          {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
  std::string num = text;
  double scale = 1e9;  // bare numbers are seconds
  size_t i = text.size();
  while (i > 0 && std::isalpha(static_cast<unsigned char>(text[i - 1]))) --i;
  if (i < text.size()) {
    std::string unit = text.substr(i);
    bool found = false;
    for (const auto& [u, f] : kUnits) {
      if (unit == u) scale = f, found = true;
    }
    if (!found) return std::nullopt;
    num = text.substr(0, i);
  }
  double v;
  if (!parse_double(num, &v) || v < 0) return std::nullopt;
  double ns = v * scale;
  if (ns > 9.2e18) return std::nullopt;
  return static_cast<int64_t>(std::llround(ns));
}

std::string format_duration(int64_t ns) {
  char buf[64];
  if (ns % 3600000000000LL == 0 && ns != 0)
    std::snprintf(buf, sizeof buf, "%lldh", (long long)(ns / 3600000000000LL));
  else if (ns % 60000000000LL == 0 && ns != 0)
    std::snprintf(buf, sizeof buf, "%lldm", (long long)(ns / 60000000000LL));
  else if (ns % 1000000000LL == 0)
    std::snprintf(buf, sizeof buf, "%llds", (long long)(ns / 1000000000LL));
  else if (ns % 1000000LL == 0)
    std::snprintf(buf, sizeof buf, "%lldms", (long long)(ns / 1000000LL));
  else if (ns % 1000LL == 0)
    std::snprintf(buf, sizeof buf, "%lldus", (long long)(ns / 1000LL));
  else
    std::snprintf(buf, sizeof buf, "%lldns", (long long)ns);
  return buf;
}

std::string int_text(int64_t v) { return std::to_string(v); }

std::string number_text(double v) {
  // The fewest digits that read back as v, written without an exponent where
  // some precision allows it ("50", not "5e+01"; "1e-05" stays).
  auto render = [&](int precision, std::string* out) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    double back;
    *out = buf;
    return parse_double(*out, &back) && back == v;
  };
  std::string shortest, text;
  int p = 1;
  while (p < 17 && !render(p, &shortest)) ++p;
  if (p == 17) render(p, &shortest);
  for (; p <= 17; ++p) {
    if (render(p, &text) && text.find('e') == std::string::npos) return text;
  }
  return shortest;
}

std::string bool_text(bool v) { return v ? "true" : "false"; }

std::string duration_text(int64_t ns) {
  // Whole hours or minutes from two up; below that the next unit down, as
  // people write them: "90s", "60s", "2m", "10m".
  constexpr int64_t kMinute = 60'000'000'000LL, kHour = 60 * kMinute;
  if (ns >= 2 * kHour && ns % kHour == 0) return std::to_string(ns / kHour) + "h";
  if (ns >= 2 * kMinute && ns % kMinute == 0) return std::to_string(ns / kMinute) + "m";
  if (ns >= kMinute && ns % 1'000'000'000LL == 0) return std::to_string(ns / 1'000'000'000LL) + "s";
  return format_duration(ns);
}

std::string list_text(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "]";
}

std::optional<ParamValue> parse_param_scalar(const ParamSpec& spec, const std::string& text, std::string* why) {
  auto range_ok = [&](double v) {
    if (spec.min && v < *spec.min) {
      *why = "must be at least " + std::to_string(*spec.min) + ", got " + text;
      return false;
    }
    if (spec.max && v > *spec.max) {
      *why = "must be at most " + std::to_string(*spec.max) + ", got " + text;
      return false;
    }
    return true;
  };
  switch (spec.type) {
    case ParamType::kInt: {
      int64_t v;
      if (!parse_int(text, &v)) {
        *why = "expected an integer, got '" + text + "'";
        return std::nullopt;
      }
      if (!range_ok(static_cast<double>(v))) return std::nullopt;
      return ParamValue(v);
    }
    case ParamType::kDouble: {
      double v;
      if (!parse_double(text, &v)) {
        *why = "expected a number, got '" + text + "'";
        return std::nullopt;
      }
      if (!range_ok(v)) return std::nullopt;
      return ParamValue(v);
    }
    case ParamType::kBool: {
      if (text == "true" || text == "yes" || text == "on") return ParamValue(true);
      if (text == "false" || text == "no" || text == "off") return ParamValue(false);
      *why = "expected true or false, got '" + text + "'";
      return std::nullopt;
    }
    case ParamType::kDuration: {
      auto ns = parse_duration_ns(text);
      if (!ns) {
        *why = "expected a duration such as 500ms, 5s or 2m, got '" + text + "'";
        return std::nullopt;
      }
      if (!range_ok(static_cast<double>(*ns) / 1e9)) return std::nullopt;
      return ParamValue(*ns);
    }
    case ParamType::kString: {
      if (!spec.choices.empty()) {
        bool ok = false;
        std::string list;
        for (const auto& c : spec.choices) {
          ok |= c == text;
          list += (list.empty() ? "" : ", ") + c;
        }
        if (!ok) {
          *why = "expected one of " + list + ", got '" + text + "'";
          return std::nullopt;
        }
      }
      return ParamValue(text);
    }
    case ParamType::kStringList:
      return ParamValue(std::vector<std::string>{text});
  }
  return std::nullopt;
}

void Params::set(const std::string& name, ParamValue v, SourceLocation where, ParamType type) {
  values_[name] = Entry{std::move(v), std::move(where), type};
}

const ParamValue& Params::at(const std::string& name) const {
  auto it = values_.find(name);
  RUNLENS_CHECK(it != values_.end(), "a component read a parameter it did not declare: " + name);
  return it->second.value;
}

int64_t Params::get_int(const std::string& name) const { return std::get<int64_t>(at(name)); }
double Params::get_double(const std::string& name) const {
  const ParamValue& v = at(name);
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}
bool Params::get_bool(const std::string& name) const { return std::get<bool>(at(name)); }
const std::string& Params::get_string(const std::string& name) const { return std::get<std::string>(at(name)); }
int64_t Params::get_duration_ns(const std::string& name) const { return std::get<int64_t>(at(name)); }
const std::vector<std::string>& Params::get_list(const std::string& name) const {
  return std::get<std::vector<std::string>>(at(name));
}

SourceLocation Params::where(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? SourceLocation{} : it->second.where;
}

std::string Params::describe() const {
  std::string s;
  for (const auto& [name, e] : values_) {
    if (!s.empty()) s += ", ";
    s += name + "=";
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, bool>)
            s += v ? "true" : "false";
          else if constexpr (std::is_same_v<V, std::string>)
            s += v;
          else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
            s += "[";
            for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
            s += "]";
          } else if constexpr (std::is_same_v<V, double>) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%g", v);
            s += buf;
          } else {
            s += e.type == ParamType::kDuration ? format_duration(v) : std::to_string(v);
          }
        },
        e.value);
  }
  return s;
}

}  // namespace runlens::runtime
