// The condition language of root-cause rule trees (configs/rules/*.yaml,
// docs/rules.md): a small, safe expression language, parsed once when the
// rules are loaded and evaluated many times. It has numbers, signal names,
// arithmetic (+ - * /), comparisons (< <= > >= == !=, not chained), and, or,
// not (also &&, ||, !), parentheses and a fixed set of functions; nothing
// else. There is no assignment, no loop, no string and no call outside the
// table below, so evaluating a condition cannot do anything but compute a
// number from the environment it is given.
//
// Values are numbers or unknown (an absent signal, a division by zero, a NaN):
// arithmetic and comparisons with an unknown are unknown; `a and b` is false
// when either side is false, `a or b` true when either is true, otherwise
// unknown; `not unknown` is unknown. A rule branch is taken only when its
// condition is known and non-zero.
//
// Functions (S: a signal name, K: an alert or event kind, W: any word, E: an
// expression):
//   at(S)          S at the symptom's step (a bare S means the same)
//   baseline(S)    median of S over the steps before the incident's onset
//   delta(S)       at(S) - baseline(S)
//   ratio(S)       at(S) / baseline(S)
//   recent(S)      median of S from the onset to the end of the window
//   max(S) min(S)  over the whole window
//   present(S|K)   1 when S has a value at the symptom, or K occurred in the window, else 0
//   count(K)       alerts and events of kind K in the window
//   here(K)        the same, on the symptom's node (and GPU, where both name one) or rank
//   first_step(K)  step of the first K in the window (unknown when none)
//   changed(W)     config_change events for key W at or before the symptom's step
//   config_changed(W)  the same (the model-failure tree's name: W differs between the versions' configs)
//   attr(W)        the symptom alert's attrs entry W
//   abs(E) bits(E, mask) coalesce(E, E) max(E, E) min(E, E)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runlens::ops::rules {

// How a signal is read over the window (the functions above).
enum class Agg : uint8_t { kAt, kBaseline, kDelta, kRatio, kRecent, kMax, kMin, kPresent };
// Where alerts and events are counted: the whole run, or the symptom's place.
enum class Scope : uint8_t { kRun, kHere };

// The names an expression may use, resolved when it is parsed: signals and
// alert/event kinds, each to a small integer the environment understands.
class Vocabulary {
 public:
  virtual ~Vocabulary() = default;
  virtual std::optional<int> signal(std::string_view name) const = 0;
  virtual std::optional<int> kind(std::string_view name) const = 0;
  virtual std::vector<std::string> signal_names() const = 0;  // for "did you mean"
  virtual std::vector<std::string> kind_names() const = 0;
};

// Where values come from when an expression is evaluated.
class Environment {
 public:
  virtual ~Environment() = default;
  virtual std::optional<double> signal(int signal, Agg agg) const = 0;
  virtual int64_t count(int kind, Scope scope) const = 0;
  virtual std::optional<int64_t> first_step(int kind) const = 0;
  virtual int64_t changed(std::string_view key) const = 0;
  virtual std::optional<double> attr(std::string_view name) const = 0;
};

struct ParseError {
  size_t offset = 0;  // into the expression text
  std::string message;
};

// A parsed expression: immutable, cheap to evaluate, safe to share.
class Expr {
 public:
  // Unknown is nullopt; booleans are 1 and 0.
  std::optional<double> eval(const Environment& env) const;
  bool truthy(const Environment& env) const {
    auto v = eval(env);
    return v && *v != 0;
  }
  const std::string& text() const { return text_; }
  // The signals the expression reads, in order of first use (for evidence).
  std::vector<int> signals() const;

  // The parse tree, as an arena of nodes (exposed for the parser).
  enum class Op : uint8_t {
    kNumber,
    kSignal,
    kCount,
    kFirstStep,
    kChanged,
    kAttr,
    kNeg,
    kNot,
    kAdd,
    kSub,
    kMul,
    kDiv,
    kLt,
    kLe,
    kGt,
    kGe,
    kEq,
    kNe,
    kAnd,
    kOr,
    kAbs,
    kBits,
    kCoalesce,
    kMax,
    kMin,
  };
  struct Node {
    Op op = Op::kNumber;
    Agg agg = Agg::kAt;
    Scope scope = Scope::kRun;
    int id = -1;         // signal or kind
    int a = -1, b = -1;  // operands (node indices)
    double number = 0;
    std::string word;  // changed() key, attr() name
  };

 private:
  friend class ExprParser;
  std::optional<double> eval_node(int i, const Environment& env) const;
  std::vector<Node> nodes_;
  int root_ = -1;
  std::string text_;
};

// Parses `text` against `vocab`. On error returns nullopt and fills `error`
// (its offset points at the offending character of `text`).
std::optional<Expr> parse_expr(std::string_view text, const Vocabulary& vocab, ParseError* error);

}  // namespace runlens::ops::rules
