// The condition language of root-cause rules: precedence, three-valued logic,
// the function table, and errors with the offset of the offending character.
#include "operators/rules/rule_expr.h"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>

using namespace runlens::ops::rules;

namespace {

// Signals a (at 2, baseline 1, max 9), b (at 3), temp_c (at 91); c has no value.
class ToyVocab final : public Vocabulary {
 public:
  std::optional<int> signal(std::string_view n) const override { return find(signals_, n); }
  std::optional<int> kind(std::string_view n) const override { return find(kinds_, n); }
  std::vector<std::string> signal_names() const override { return signals_; }
  std::vector<std::string> kind_names() const override { return kinds_; }

 private:
  static std::optional<int> find(const std::vector<std::string>& v, std::string_view n) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == n) return static_cast<int>(i);
    }
    return std::nullopt;
  }
  std::vector<std::string> signals_ = {"a", "b", "c", "temp_c", "lr"};
  std::vector<std::string> kinds_ = {"straggler", "xid", "config_change"};
};

class ToyEnv final : public Environment {
 public:
  std::optional<double> signal(int id, Agg agg) const override {
    ++reads;
    if (id == 2) return std::nullopt;  // c
    double at = id == 0 ? 2 : id == 1 ? 3 : id == 3 ? 91 : 3e-4;
    switch (agg) {
      case Agg::kAt:
      case Agg::kPresent:
        return at;
      case Agg::kBaseline:
        return 1;
      case Agg::kDelta:
        return at - 1;
      case Agg::kRatio:
        return at;
      case Agg::kRecent:
        return at;
      case Agg::kMax:
        return 9;
      case Agg::kMin:
        return -9;
    }
    return std::nullopt;
  }
  int64_t count(int kind, Scope scope) const override {
    if (kind == 0) return scope == Scope::kRun ? 2 : 1;  // two stragglers, one here
    return 0;
  }
  std::optional<int64_t> first_step(int kind) const override {
    return kind == 0 ? std::optional<int64_t>(40) : std::nullopt;
  }
  int64_t changed(std::string_view key) const override { return key == "lr" ? 1 : 0; }
  std::optional<double> attr(std::string_view name) const override {
    return name == "onset_step" ? std::optional<double>(40) : std::nullopt;
  }
  mutable int reads = 0;
};

const ToyVocab kVocab;

std::optional<double> eval(const std::string& text) {
  ParseError e;
  auto expr = parse_expr(text, kVocab, &e);
  REQUIRE_MESSAGE(expr.has_value(), text << ": " << e.message << " at " << e.offset);
  ToyEnv env;
  return expr->eval(env);
}

constexpr double kUnknown = NAN;

}  // namespace

TEST_CASE("rule expressions: precedence, associativity and values") {
  struct Case {
    const char* text;
    double expect;  // NaN: unknown
  };
  // clang-format off
  const Case cases[] = {
      {"1 + 2 * 3", 7},
      {"(1 + 2) * 3", 9},
      {"1 - 2 - 3", -4},  // left-associative
      {"8 / 2 / 2", 2},
      {"-2 * 3", -6},
      {"2 * -3", -6},
      {"- -2", 2},
      {"+4", 4},
      {"1 + 2 < 4", 1},          // arithmetic binds tighter than comparison
      {"not 1 > 2", 1},          // ...which binds tighter than not
      {"not 0 or 1", 1},
      {"1 or 0 and 0", 1},       // and binds tighter than or
      {"(1 or 0) and 0", 0},
      {"not not 3", 1},
      {"1 && 0 || !0", 1},
      {"true and not false", 1},
      {"2 >= 2 and 2 <= 2 and 2 == 2 and 1 != 2", 1},
      {"1e3 > 999", 1},
      {".5 * 2", 1},
      {"0x60", 96},
      {"bits(0x48, 0x40)", 1},
      {"bits(8, 0x60)", 0},
      {"abs(-3)", 3},
      {"max(2, 5) + min(2, 5)", 7},
      {"coalesce(c, 5)", 5},
      {"coalesce(a, 5)", 2},
      // Signals and window functions.
      {"a", 2},
      {"at(a) + b", 5},
      {"baseline(a)", 1},
      {"delta(a)", 1},
      {"ratio(b)", 3},
      {"recent(a)", 2},
      {"max(a)", 9},
      {"min(a)", -9},
      {"temp_c >= 88", 1},
      {"present(a)", 1},
      {"present(c)", 0},
      {"present(straggler)", 1},
      {"present(xid)", 0},
      {"count(straggler)", 2},
      {"here(straggler)", 1},
      {"first_step(straggler)", 40},
      {"first_step(xid)", kUnknown},
      {"changed(lr)", 1},
      {"changed(batch_size)", 0},
      {"attr(onset_step)", 40},
      {"attr(nothing)", kUnknown},
      // Unknown is contagious, except where the other side decides.
      {"c", kUnknown},
      {"c + 1", kUnknown},
      {"c > 1", kUnknown},
      {"not c", kUnknown},
      {"c > 1 or 1", 1},
      {"c > 1 and 0", 0},
      {"c > 1 and 1", kUnknown},
      {"c > 1 or 0", kUnknown},
      {"1 / 0", kUnknown},
      {"max(c, 1)", kUnknown},
  };
  // clang-format on
  for (const auto& c : cases) {
    CAPTURE(c.text);
    auto v = eval(c.text);
    if (std::isnan(c.expect)) {
      CHECK_FALSE(v.has_value());
    } else {
      REQUIRE(v.has_value());
      CHECK(*v == doctest::Approx(c.expect));
    }
  }
}

TEST_CASE("rule expressions: invalid text is rejected with the offset of the offending character") {
  std::string deep(100, '(');
  deep += "1" + std::string(100, ')');
  struct Case {
    std::string text;
    size_t offset;
    const char* message;
  };
  // clang-format off
  const Case cases[] = {
      {"", 0, "empty expression"},
      {"   ", 0, "empty expression"},
      {"a >", 3, "unexpected end of expression"},
      {"a > > b", 4, "unexpected '>'"},
      {"a < b < c", 6, "comparisons do not chain"},
      {"tmp_c > 80", 0, "unknown signal 'tmp_c' (did you mean 'temp_c'?)"},
      {"a = 1", 2, "'=' is not an operator"},
      {"a & b", 2, "'&' is not an operator"},
      {"a $ b", 2, "unexpected character '$'"},
      {"\"a\" > 1", 0, "unexpected character '\"'"},
      {"90% > a", 0, "invalid number '90%'"},
      {"a > 5s", 4, "invalid number '5s'"},
      {"0x", 0, "invalid number '0x'"},
      {"system(a)", 0, "unknown function 'system'"},
      {"cout(straggler)", 0, "unknown function 'cout' (did you mean 'count'?)"},
      {"count(a)", 6, "'a' is a signal"},
      {"count(stragler)", 6, "unknown alert or event kind 'stragler' (did you mean 'straggler'?)"},
      {"straggler > 0", 0, "is an alert or event kind, not a signal"},
      {"at(1)", 3, "at() takes a signal name"},
      {"delta(a + 1)", 6, "delta() takes a signal name"},
      {"max(a + 1)", 4, "max() of one argument takes a signal name"},
      {"bits(a)", 6, "expected ','"},
      {"abs(a, b)", 5, "too many arguments to abs()"},
      {"(a > 1", 6, "expected ')'"},
      {"a > 1)", 5, "unexpected ')'"},
      {"a b", 2, "unexpected 'b'"},
      {"and a", 0, "unexpected 'and'"},
      {"abs", 0, "'abs' is a function"},
      {deep, 0, "nested too deeply"},
  };
  // clang-format on
  for (const auto& c : cases) {
    CAPTURE(c.text);
    ParseError e;
    auto expr = parse_expr(c.text, kVocab, &e);
    CHECK_FALSE(expr.has_value());
    CHECK(e.message.find(c.message) != std::string::npos);
    CAPTURE(e.message);
    if (c.text != deep) CHECK(e.offset == c.offset);
  }
}

TEST_CASE("rule expressions: evaluation only reads the environment, and repeats") {
  ParseError e;
  auto expr = parse_expr("delta(a) > 0 and here(straggler) and changed(lr) > 0", kVocab, &e);
  REQUIRE(expr.has_value());
  ToyEnv env;
  const Environment& read_only = env;  // the interface is const: no writes are possible
  CHECK(expr->truthy(read_only));
  CHECK(expr->truthy(read_only));
  CHECK(env.reads == 2);  // one signal read per evaluation
  CHECK(expr->signals() == std::vector<int>{0});
  CHECK(expr->text() == "delta(a) > 0 and here(straggler) and changed(lr) > 0");
  // No statement, assignment or call outside the function table parses.
  for (const char* attack : {"a = 1", "a; b", "exec(a)", "__import__(os)", "a.b()", "a := 1", "`ls`"}) {
    CAPTURE(attack);
    CHECK_FALSE(parse_expr(attack, kVocab, &e).has_value());
  }
}

TEST_CASE("rule expressions: size limits keep parsing and evaluation bounded") {
  std::string long_sum = "1";
  for (int i = 0; i < 600; ++i) long_sum += " + 1";
  ParseError e;
  CHECK_FALSE(parse_expr(long_sum, kVocab, &e).has_value());
  CHECK(e.message.find("too large") != std::string::npos);
  CHECK_FALSE(parse_expr(std::string(5000, '1'), kVocab, &e).has_value());
  CHECK(e.message.find("too long") != std::string::npos);
}
