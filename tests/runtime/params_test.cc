// Component parameters: durations, typed scalars with their ranges and
// choices, and the Params getters.
#include "runtime/params.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace rt = runlens::runtime;

namespace {

constexpr int64_t kUs = 1'000, kMs = 1'000'000, kS = 1'000'000'000;

// --- durations -------------------------------------------------------------------
TEST_CASE("parse_duration_ns accepts every unit and bare seconds") {
  struct Case {
    const char* text;
    int64_t ns;
  };
  const std::vector<Case> cases = {
      {"10ns", 10},
      {"1500us", 1500 * kUs},
      {"250ms", 250 * kMs},
      {"5s", 5 * kS},
      {"2m", 120 * kS},
      {"1h", 3600 * kS},
      {"0", 0},
      {"0s", 0},
      {"1.5", 1'500'000'000},
      {"0.5ms", 500 * kUs},
      {"1.5h", 5400 * kS},
      {".5s", 500 * kMs},
      {"0.1s", 100 * kMs},
      {"1e3ms", 1 * kS},
      {"3", 3 * kS},
      {"0.0000000015s", 2},  // rounds
      {"9e9s", 9'000'000'000 * kS},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.text));
    CHECK(rt::parse_duration_ns(c.text) == std::optional<int64_t>(c.ns));
  }
}

TEST_CASE("parse_duration_ns rejects what is not a duration") {
  for (const char* text :
       {"",    "s",  "ms",   "abc", "5x",    "5 s", " 5s", "5s ",  "-1s",    "-0.5",  "+5s",   "5S",
        "5Ms", "1d", "5sec", "5ss", "1m30s", "inf", "nan", "infs", "1e300s", "1e10h", "0x10s", "5,5s"}) {
    CAPTURE(std::string(text));
    CHECK(rt::parse_duration_ns(text) == std::nullopt);
  }
}

TEST_CASE("format_duration picks the largest exact unit") {
  struct Case {
    int64_t ns;
    const char* text;
  };
  const std::vector<Case> cases = {
      {0, "0s"},
      {1, "1ns"},
      {999, "999ns"},
      {1500, "1500ns"},
      {kUs, "1us"},
      {1500 * kUs, "1500us"},
      {250 * kMs, "250ms"},
      {kS, "1s"},
      {90 * kS, "90s"},
      {120 * kS, "2m"},
      {3600 * kS, "1h"},
      {5400 * kS, "90m"},
      {7200 * kS, "2h"},
      {kS + 1, "1000000001ns"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.ns);
    CHECK(rt::format_duration(c.ns) == c.text);
  }
}

TEST_CASE("format_duration and parse_duration_ns round-trip") {
  std::vector<int64_t> values = {0, 1, 999, kUs, 1500 * kUs, 250 * kMs, kS, 90 * kS, 120 * kS, 3600 * kS, 5400 * kS};
  std::mt19937_64 rng(42);
  // Up to 2^53 ns (~104 days), where a double still holds every integer.
  std::uniform_int_distribution<int64_t> any(0, int64_t{1} << 53);
  for (int i = 0; i < 2000; ++i) {
    int64_t v = any(rng);
    values.push_back(v);
    values.push_back(v - v % kMs);  // whole milliseconds
    values.push_back(v - v % (60 * kS));
  }
  for (int64_t ns : values) {
    CAPTURE(ns);
    std::string text = rt::format_duration(ns);
    CAPTURE(text);
    CHECK(rt::parse_duration_ns(text) == std::optional<int64_t>(ns));
  }
  // And text -> ns -> text for canonical texts.
  for (const char* text : {"0s", "7ns", "3us", "250ms", "5s", "2m", "1h", "90s", "25h"}) {
    CAPTURE(std::string(text));
    auto ns = rt::parse_duration_ns(text);
    REQUIRE(ns.has_value());
    CHECK(rt::format_duration(*ns) == text);
  }
}

// --- typed scalars ---------------------------------------------------------------
rt::ParamSpec spec(rt::ParamType type, std::optional<double> min = std::nullopt,
                   std::optional<double> max = std::nullopt, std::vector<std::string> choices = {}) {
  rt::ParamSpec s;
  s.name.assign(1, 'p');  // not = "p": GCC 12 warns falsely (-Wrestrict, PR 105329)
  s.type = type;
  s.min = min;
  s.max = max;
  s.choices = std::move(choices);
  return s;
}

struct ScalarCase {
  const char* name;
  rt::ParamSpec spec;
  const char* text;
  std::optional<rt::ParamValue> value;  // nullopt: rejected...
  const char* why;                      // ...with a reason containing this
};

void CheckScalar(const ScalarCase& c) {
  const std::string name = c.name, text = c.text;
  CAPTURE(name);
  CAPTURE(text);
  std::string why;
  auto got = rt::parse_param_scalar(c.spec, c.text, &why);
  CHECK(got == c.value);
  if (c.value) {
    CHECK(why.empty());
  } else {
    CAPTURE(why);
    CHECK(why.find(c.why) != std::string::npos);
  }
}

TEST_CASE("parse_param_scalar parses each type and enforces min, max and choices") {
  using T = rt::ParamType;
  using V = rt::ParamValue;
  const auto i = [](int64_t v) { return std::optional<V>(V(v)); };
  const auto d = [](double v) { return std::optional<V>(V(v)); };
  const auto b = [](bool v) { return std::optional<V>(V(v)); };
  const auto s = [](const char* v) { return std::optional<V>(V(std::string(v))); };
  const std::optional<V> no;
  const std::vector<ScalarCase> cases = {
      // int
      {"int", spec(T::kInt), "42", i(42), ""},
      {"negative int", spec(T::kInt), "-3", i(-3), ""},
      {"int64 max", spec(T::kInt), "9223372036854775807", i(INT64_MAX), ""},
      {"int overflow", spec(T::kInt), "9223372036854775808", no, "expected an integer, got '9223372036854775808'"},
      {"int with a fraction", spec(T::kInt), "1.5", no, "expected an integer, got '1.5'"},
      {"int word", spec(T::kInt), "abc", no, "expected an integer, got 'abc'"},
      {"int empty", spec(T::kInt), "", no, "expected an integer"},
      {"int with space", spec(T::kInt), " 5", no, "expected an integer"},
      {"int hex", spec(T::kInt), "0x10", no, "expected an integer"},
      {"int at min", spec(T::kInt, 1, 10), "1", i(1), ""},
      {"int at max", spec(T::kInt, 1, 10), "10", i(10), ""},
      {"int below min", spec(T::kInt, 1, 10), "0", no, "must be at least 1"},
      {"int above max", spec(T::kInt, 1, 10), "11", no, "must be at most 10"},
      // number
      {"number", spec(T::kDouble), "2.5", d(2.5), ""},
      {"number from an int", spec(T::kDouble), "3", d(3.0), ""},
      {"number exponent", spec(T::kDouble), "1e-3", d(0.001), ""},
      {"number nan", spec(T::kDouble), "nan", no, "expected a number, got 'nan'"},
      {"number inf", spec(T::kDouble), "inf", no, "expected a number"},
      {"number comma", spec(T::kDouble), "1,5", no, "expected a number"},
      {"number word", spec(T::kDouble), "x", no, "expected a number, got 'x'"},
      {"number at min", spec(T::kDouble, 0, 1), "0", d(0.0), ""},
      {"number below min", spec(T::kDouble, 0, 1), "-0.001", no, "must be at least 0"},
      {"number above max", spec(T::kDouble, 0, 1), "1.0001", no, "must be at most 1"},
      // bool
      {"true", spec(T::kBool), "true", b(true), ""},
      {"yes", spec(T::kBool), "yes", b(true), ""},
      {"on", spec(T::kBool), "on", b(true), ""},
      {"false", spec(T::kBool), "false", b(false), ""},
      {"no", spec(T::kBool), "no", b(false), ""},
      {"off", spec(T::kBool), "off", b(false), ""},
      {"bool 1", spec(T::kBool), "1", no, "expected true or false, got '1'"},
      {"bool maybe", spec(T::kBool), "maybe", no, "expected true or false, got 'maybe'"},
      // duration: min and max are in seconds
      {"duration", spec(T::kDuration), "250ms", i(250 * kMs), ""},
      {"duration bare seconds", spec(T::kDuration), "2", i(2 * kS), ""},
      {"duration bad", spec(T::kDuration), "5 parsecs", no,
       "expected a duration such as 500ms, 5s or 2m, got '5 parsecs'"},
      {"duration negative", spec(T::kDuration), "-1s", no, "expected a duration"},
      {"duration at max", spec(T::kDuration, 0.001, 60), "1m", i(60 * kS), ""},
      {"duration above max", spec(T::kDuration, 0.001, 60), "61s", no, "must be at most 60"},
      {"duration below min", spec(T::kDuration, 0.001, 60), "999us", no, "must be at least 0.001"},
      {"duration at min", spec(T::kDuration, 0.001, 60), "1ms", i(kMs), ""},
      // string
      {"string", spec(T::kString), "anything at all", s("anything at all"), ""},
      {"empty string", spec(T::kString), "", s(""), ""},
      {"choice", spec(T::kString, {}, {}, {"block", "shed"}), "shed", s("shed"), ""},
      {"not a choice", spec(T::kString, {}, {}, {"block", "shed"}), "drop", no,
       "expected one of block, shed, got 'drop'"},
      {"choices are case-sensitive", spec(T::kString, {}, {}, {"block", "shed"}), "Shed", no, "expected one of"},
      // a scalar given for a list of strings is a list of one
      {"list from a scalar", spec(T::kStringList), "a", std::optional<V>(V(std::vector<std::string>{"a"})), ""},
  };
  for (const auto& c : cases) CheckScalar(c);
}

TEST_CASE("param_type_name names each type as the error messages do") {
  using T = rt::ParamType;
  CHECK(rt::param_type_name(T::kInt) == "int");
  CHECK(rt::param_type_name(T::kDouble) == "number");
  CHECK(rt::param_type_name(T::kBool) == "bool");
  CHECK(rt::param_type_name(T::kString) == "string");
  CHECK(rt::param_type_name(T::kDuration) == "duration");
  CHECK(rt::param_type_name(T::kStringList) == "list of strings");
}

// --- Params ------------------------------------------------------------------------
rt::Params sample() {
  rt::Params p;
  p.set("count", int64_t{3}, {"f.yaml", 2, 5}, rt::ParamType::kInt);
  p.set("ratio", 0.25, {"f.yaml", 3, 5}, rt::ParamType::kDouble);
  p.set("loop", true, {"f.yaml", 4, 5}, rt::ParamType::kBool);
  p.set("label", std::string("x"), {"f.yaml", 5, 5}, rt::ParamType::kString);
  p.set("window", int64_t{90 * kS}, {"f.yaml", 6, 5}, rt::ParamType::kDuration);
  p.set("tags", std::vector<std::string>{"a", "b"}, {"f.yaml", 7, 5}, rt::ParamType::kStringList);
  return p;
}

TEST_CASE("Params getters return what was set, where it was set") {
  auto p = sample();
  CHECK(p.get_int("count") == 3);
  CHECK(p.get_double("ratio") == 0.25);
  CHECK(p.get_double("count") == 3.0);  // an int read as a number
  CHECK(p.get_bool("loop"));
  CHECK(p.get_string("label") == "x");
  CHECK(p.get_duration_ns("window") == 90 * kS);
  CHECK(p.get_list("tags") == std::vector<std::string>{"a", "b"});
  CHECK(p.has("count"));
  CHECK_FALSE(p.has("nothing"));
  CHECK(p.where("window").str() == "f.yaml:6:5");
  CHECK(p.where("nothing").line == 0);

  p.set("count", int64_t{4}, {"f.yaml", 9, 1}, rt::ParamType::kInt);  // set again: replaced
  CHECK(p.get_int("count") == 4);
  CHECK(p.where("count").line == 9);
}

TEST_CASE("reading an undeclared parameter is an internal error") {
  rt::Params p;
  CHECK_THROWS_AS(p.get_int("missing"), rt::InternalError);
  CHECK_THROWS_AS(p.get_string("missing"), rt::InternalError);
  CHECK_THROWS_AS(p.get_list("missing"), rt::InternalError);
  try {
    p.get_bool("missing");
  } catch (const rt::InternalError& e) {
    CHECK(std::string(e.what()).find("did not declare: missing") != std::string::npos);
  }
}

TEST_CASE("defaults rendered from options structs read back as the same value") {
  // Numbers: the fewest digits that read back, without an exponent where one is not needed.
  CHECK(rt::number_text(1.5) == "1.5");
  CHECK(rt::number_text(4.0) == "4");
  CHECK(rt::number_text(50.0) == "50");
  CHECK(rt::number_text(1e-4) == "0.0001");
  CHECK(rt::number_text(0.15) == "0.15");
  CHECK(rt::number_text(1e6) == "1000000");
  CHECK(rt::number_text(1e-5) == "1e-05");
  CHECK(rt::number_text(0.1 + 0.2) == "0.30000000000000004");
  CHECK(rt::int_text(67108864) == "67108864");
  CHECK(rt::bool_text(true) == "true");
  CHECK(rt::bool_text(false) == "false");
  CHECK(rt::list_text({}) == "[]");
  CHECK(rt::list_text({"1m:30d", "1h:365d"}) == "[1m:30d, 1h:365d]");
  // Durations as people write them: minutes and hours from two up.
  CHECK(rt::duration_text(0) == "0s");
  CHECK(rt::duration_text(250'000'000) == "250ms");
  CHECK(rt::duration_text(1'000'000'000) == "1s");
  CHECK(rt::duration_text(60'000'000'000) == "60s");
  CHECK(rt::duration_text(90'000'000'000) == "90s");
  CHECK(rt::duration_text(120'000'000'000) == "2m");
  CHECK(rt::duration_text(600'000'000'000) == "10m");
  CHECK(rt::duration_text(3'600'000'000'000) == "60m");
  CHECK(rt::duration_text(7'200'000'000'000) == "2h");
  // Each reads back as the value it renders.
  for (double v : {1.5, 4.0, 1e-4, 0.15, 1e6, 1e-5, 0.1 + 0.2, 88.0, 0.02}) {
    std::string why;
    auto back = rt::parse_param_scalar({.name = "x", .type = rt::ParamType::kDouble}, rt::number_text(v), &why);
    REQUIRE(back);
    CHECK(std::get<double>(*back) == v);
  }
  for (int64_t ns : {int64_t{0}, int64_t{250'000'000}, int64_t{60'000'000'000}, int64_t{7'200'000'000'000}}) {
    CHECK(rt::parse_duration_ns(rt::duration_text(ns)) == ns);
  }
}

TEST_CASE("Params::describe lists the values by name, durations as durations") {
  CHECK(sample().describe() == "count=3, label=x, loop=true, ratio=0.25, tags=[a,b], window=90s");
  CHECK(rt::Params().describe().empty());
}

}  // namespace
