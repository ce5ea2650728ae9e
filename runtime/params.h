// Declared parameters of pipeline components and their parsed values.
// Each component type declares its parameters (name, type, default, doc);
// the pipeline parser checks a YAML mapping against them, so a component
// factory only ever sees well-typed values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/status.h"

namespace runlens::runtime {

enum class ParamType { kInt, kDouble, kBool, kString, kDuration, kStringList };
std::string_view param_type_name(ParamType t);  // "int", "number", "bool", "string", "duration", "list of strings"

// Declared with designated initializers, the default rendered from the
// component's options struct so that each default is written once:
//   const StragglerOptions defaults;
//   {.name = "persist_k", .type = ParamType::kInt, .default_value = int_text(defaults.persist_k),
//    .doc = "...", .min = 1, .max = 1e6}
struct ParamSpec {
  // Every member has an initializer, so a declaration names only what it sets.
  std::string name = {};
  ParamType type = ParamType::kString;
  std::optional<std::string> default_value = std::nullopt;  // as written in YAML; none = required
  std::string doc = {};
  std::vector<std::string> choices = {};     // for kString: the allowed values, if limited
  std::optional<double> min = std::nullopt;  // for numbers and durations (seconds)
  std::optional<double> max = std::nullopt;
};

using ParamValue = std::variant<int64_t, double, bool, std::string, std::vector<std::string>>;

// Parses a duration: "250ms", "5s", "2m", "1h", "1500us", "10ns", or a bare
// number of seconds. Returns nanoseconds, or nullopt when it is not one.
std::optional<int64_t> parse_duration_ns(const std::string& text);
std::string format_duration(int64_t ns);

// A value as a user writes it in YAML: for rendering a default from the
// options struct that holds it (ParamSpec::default_value) and for the docs.
std::string int_text(int64_t v);
std::string number_text(double v);  // the shortest %g form that reads back as v: "0.0001", "1.5", "4"
std::string bool_text(bool v);
std::string duration_text(int64_t ns);                     // format_duration: "90s", "10m"
std::string list_text(const std::vector<std::string>& v);  // "[a, b]", "[]"

// Parses one scalar as `type`; nullopt (and `why` filled) when it does not fit.
std::optional<ParamValue> parse_param_scalar(const ParamSpec& spec, const std::string& text, std::string* why);

class Params {
 public:
  void set(const std::string& name, ParamValue v, SourceLocation where, ParamType type = ParamType::kString);

  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  int64_t get_duration_ns(const std::string& name) const;
  const std::vector<std::string>& get_list(const std::string& name) const;
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  SourceLocation where(const std::string& name) const;
  // The effective values, for describing a component (`runlens graph`).
  std::string describe() const;

 private:
  const ParamValue& at(const std::string& name) const;
  struct Entry {
    ParamValue value;
    SourceLocation where;
    ParamType type;
  };
  std::map<std::string, Entry> values_;
};

}  // namespace runlens::runtime
