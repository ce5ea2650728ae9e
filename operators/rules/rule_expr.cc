#include "operators/rules/rule_expr.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "runtime/status.h"

namespace runlens::ops::rules {

namespace {

constexpr size_t kMaxText = 4096;
constexpr size_t kMaxNodes = 512;
constexpr int kMaxDepth = 256;  // recursion levels; a parenthesis or call costs about 8

enum class Tok : uint8_t { kNumber, kIdent, kOp, kLParen, kRParen, kComma, kEnd };

struct Token {
  Tok type = Tok::kEnd;
  size_t offset = 0;
  std::string text;  // identifier or operator as written
  double number = 0;
};

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

// The functions of the language and what their arguments are.
enum class Fn : uint8_t { kWindow, kMaxMin, kPresent, kKind, kWord, kUnary, kBinary };
struct FnInfo {
  const char* name;
  Fn shape;
  Agg agg;
  Expr::Op op;
  Scope scope;
};
constexpr FnInfo kFunctions[] = {
    {"at", Fn::kWindow, Agg::kAt, Expr::Op::kSignal, Scope::kRun},
    {"baseline", Fn::kWindow, Agg::kBaseline, Expr::Op::kSignal, Scope::kRun},
    {"delta", Fn::kWindow, Agg::kDelta, Expr::Op::kSignal, Scope::kRun},
    {"ratio", Fn::kWindow, Agg::kRatio, Expr::Op::kSignal, Scope::kRun},
    {"recent", Fn::kWindow, Agg::kRecent, Expr::Op::kSignal, Scope::kRun},
    {"max", Fn::kMaxMin, Agg::kMax, Expr::Op::kMax, Scope::kRun},
    {"min", Fn::kMaxMin, Agg::kMin, Expr::Op::kMin, Scope::kRun},
    {"present", Fn::kPresent, Agg::kPresent, Expr::Op::kSignal, Scope::kRun},
    {"count", Fn::kKind, Agg::kAt, Expr::Op::kCount, Scope::kRun},
    {"here", Fn::kKind, Agg::kAt, Expr::Op::kCount, Scope::kHere},
    {"first_step", Fn::kKind, Agg::kAt, Expr::Op::kFirstStep, Scope::kRun},
    {"changed", Fn::kWord, Agg::kAt, Expr::Op::kChanged, Scope::kRun},
    {"config_changed", Fn::kWord, Agg::kAt, Expr::Op::kChanged, Scope::kRun},  // the same as changed()
    {"attr", Fn::kWord, Agg::kAt, Expr::Op::kAttr, Scope::kRun},
    {"abs", Fn::kUnary, Agg::kAt, Expr::Op::kAbs, Scope::kRun},
    {"bits", Fn::kBinary, Agg::kAt, Expr::Op::kBits, Scope::kRun},
    {"coalesce", Fn::kBinary, Agg::kAt, Expr::Op::kCoalesce, Scope::kRun},
};

const FnInfo* find_function(std::string_view name) {
  for (const auto& f : kFunctions) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::vector<std::string> function_names() {
  std::vector<std::string> v;
  for (const auto& f : kFunctions) v.emplace_back(f.name);
  return v;
}

std::string hint(const std::string& name, const std::vector<std::string>& candidates) {
  std::string h = runtime::closest_match(name, candidates);
  return h.empty() ? "" : " (did you mean '" + h + "'?)";
}

struct Failure {
  size_t offset;
  std::string message;
};

}  // namespace

class ExprParser {
 public:
  ExprParser(std::string_view text, const Vocabulary& vocab) : text_(text), vocab_(vocab) {}

  Expr parse() {
    if (text_.size() > kMaxText) throw Failure{kMaxText, "expression too long (at most 4096 characters)"};
    lex();
    if (tokens_.size() == 1) throw Failure{0, "empty expression"};
    expr_.text_ = std::string(text_);
    expr_.root_ = parse_or(0);
    if (peek().type != Tok::kEnd) throw unexpected(peek());
    return std::move(expr_);
  }

 private:
  // --- lexer -------------------------------------------------------------------------
  void lex() {
    size_t i = 0;
    while (i < text_.size()) {
      char c = text_[i];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      Token t;
      t.offset = i;
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i + 1 < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i + 1])))) {
        size_t end = i;
        if (c == '0' && i + 1 < text_.size() && (text_[i + 1] == 'x' || text_[i + 1] == 'X')) {
          end = i + 2;
          while (end < text_.size() && std::isxdigit(static_cast<unsigned char>(text_[end]))) ++end;
          if (end == i + 2) throw Failure{i, "invalid number '" + std::string(text_.substr(i, end - i)) + "'"};
          t.number =
              static_cast<double>(std::strtoull(std::string(text_.substr(i + 2, end - i - 2)).c_str(), nullptr, 16));
        } else {
          while (end < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[end])) || text_[end] == '.'))
            ++end;
          if (end < text_.size() && (text_[end] == 'e' || text_[end] == 'E')) {
            size_t e = end + 1;
            if (e < text_.size() && (text_[e] == '+' || text_[e] == '-')) ++e;
            if (e < text_.size() && std::isdigit(static_cast<unsigned char>(text_[e]))) {
              end = e;
              while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
            }
          }
          std::string num(text_.substr(i, end - i));
          char* stop = nullptr;
          t.number = std::strtod(num.c_str(), &stop);
          if (stop != num.c_str() + num.size()) throw Failure{i, "invalid number '" + num + "'"};
        }
        // "5s" or "90%" reads as a number with a unit, which the language does not have.
        if (end < text_.size() && (ident_char(text_[end]) || text_[end] == '%')) {
          size_t stop = end;
          while (stop < text_.size() && (ident_char(text_[stop]) || text_[stop] == '%')) ++stop;
          throw Failure{i, "invalid number '" + std::string(text_.substr(i, stop - i)) +
                               "' (numbers have no units; write ratios as fractions, e.g. 0.9)"};
        }
        t.type = Tok::kNumber;
        t.text = std::string(text_.substr(i, end - i));
        i = end;
      } else if (ident_start(c)) {
        size_t end = i;
        while (end < text_.size() && ident_char(text_[end])) ++end;
        t.type = Tok::kIdent;
        t.text = std::string(text_.substr(i, end - i));
        i = end;
      } else if (c == '(' || c == ')' || c == ',') {
        t.type = c == '(' ? Tok::kLParen : c == ')' ? Tok::kRParen : Tok::kComma;
        t.text = std::string(1, c);
        ++i;
      } else {
        std::string two(text_.substr(i, std::min<size_t>(2, text_.size() - i)));
        static const char* kTwo[] = {"<=", ">=", "==", "!=", "&&", "||"};
        static const char* kOne = "+-*/<>!";
        t.type = Tok::kOp;
        if (two.size() == 2 &&
            std::find_if(std::begin(kTwo), std::end(kTwo), [&](const char* s) { return two == s; }) != std::end(kTwo)) {
          t.text = two;
          i += 2;
        } else if (std::strchr(kOne, c) != nullptr && c != '\0') {
          t.text = std::string(1, c);
          ++i;
        } else if (c == '=') {
          throw Failure{i, "'=' is not an operator (compare with '==')"};
        } else if (c == '&' || c == '|') {
          throw Failure{i, std::string("'") + c + "' is not an operator (use 'and' / 'or')"};
        } else {
          throw Failure{i, std::string("unexpected character '") + c + "'"};
        }
      }
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.type = Tok::kEnd;
    end.offset = text_.size();
    tokens_.push_back(end);
  }

  // --- parser ------------------------------------------------------------------------
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
  bool is_op(const Token& t, std::initializer_list<const char*> ops) const {
    if (t.type != Tok::kOp && t.type != Tok::kIdent) return false;
    for (const char* o : ops) {
      if (t.text == o) return true;
    }
    return false;
  }
  static Failure unexpected(const Token& t) {
    if (t.type == Tok::kEnd) return Failure{t.offset, "unexpected end of expression"};
    return Failure{t.offset, "unexpected '" + t.text + "'"};
  }
  void expect(Tok type, const char* what) {
    if (peek().type != type) {
      const Token& t = peek();
      throw Failure{t.offset, std::string("expected ") + what +
                                  (t.type == Tok::kEnd ? " before the end" : ", got '" + t.text + "'")};
    }
    ++pos_;
  }

  int add(Expr::Node n, size_t offset) {
    if (expr_.nodes_.size() >= kMaxNodes) throw Failure{offset, "expression too large (at most 512 terms)"};
    expr_.nodes_.push_back(std::move(n));
    return static_cast<int>(expr_.nodes_.size() - 1);
  }
  int binary(Expr::Op op, int a, int b, size_t offset) {
    Expr::Node n;
    n.op = op;
    n.a = a;
    n.b = b;
    return add(std::move(n), offset);
  }
  void enter(int depth, size_t offset) const {
    if (depth > kMaxDepth) throw Failure{offset, "expression nested too deeply"};
  }

  int parse_or(int depth) {
    enter(depth, peek().offset);
    int left = parse_and(depth + 1);
    while (is_op(peek(), {"or", "||"})) {
      size_t at = next().offset;
      left = binary(Expr::Op::kOr, left, parse_and(depth + 1), at);
    }
    return left;
  }
  int parse_and(int depth) {
    int left = parse_not(depth + 1);
    while (is_op(peek(), {"and", "&&"})) {
      size_t at = next().offset;
      left = binary(Expr::Op::kAnd, left, parse_not(depth + 1), at);
    }
    return left;
  }
  int parse_not(int depth) {
    enter(depth, peek().offset);
    if (is_op(peek(), {"not", "!"})) {
      size_t at = next().offset;
      return binary(Expr::Op::kNot, parse_not(depth + 1), -1, at);
    }
    return parse_cmp(depth + 1);
  }
  int parse_cmp(int depth) {
    int left = parse_add(depth + 1);
    static const std::pair<const char*, Expr::Op> kCmp[] = {{"<", Expr::Op::kLt},  {"<=", Expr::Op::kLe},
                                                            {">", Expr::Op::kGt},  {">=", Expr::Op::kGe},
                                                            {"==", Expr::Op::kEq}, {"!=", Expr::Op::kNe}};
    auto cmp_op = [&](const Token& t) -> std::optional<Expr::Op> {
      if (t.type != Tok::kOp) return std::nullopt;
      for (const auto& [s, op] : kCmp) {
        if (t.text == s) return op;
      }
      return std::nullopt;
    };
    if (auto op = cmp_op(peek())) {
      size_t at = next().offset;
      left = binary(*op, left, parse_add(depth + 1), at);
      if (cmp_op(peek())) throw Failure{peek().offset, "comparisons do not chain (write 'a < b and b < c')"};
    }
    return left;
  }
  int parse_add(int depth) {
    int left = parse_mul(depth + 1);
    while (is_op(peek(), {"+", "-"})) {
      const Token& t = next();
      left = binary(t.text == "+" ? Expr::Op::kAdd : Expr::Op::kSub, left, parse_mul(depth + 1), t.offset);
    }
    return left;
  }
  int parse_mul(int depth) {
    int left = parse_unary(depth + 1);
    while (is_op(peek(), {"*", "/"})) {
      const Token& t = next();
      left = binary(t.text == "*" ? Expr::Op::kMul : Expr::Op::kDiv, left, parse_unary(depth + 1), t.offset);
    }
    return left;
  }
  int parse_unary(int depth) {
    enter(depth, peek().offset);
    if (peek().type == Tok::kOp && peek().text == "-") {
      size_t at = next().offset;
      return binary(Expr::Op::kNeg, parse_unary(depth + 1), -1, at);
    }
    if (peek().type == Tok::kOp && peek().text == "+") {
      next();
      return parse_unary(depth + 1);
    }
    return parse_primary(depth + 1);
  }
  int parse_primary(int depth) {
    const Token& t = peek();
    if (t.type == Tok::kNumber) {
      next();
      Expr::Node n;
      n.op = Expr::Op::kNumber;
      n.number = t.number;
      return add(std::move(n), t.offset);
    }
    if (t.type == Tok::kLParen) {
      next();
      int inner = parse_or(depth + 1);
      expect(Tok::kRParen, "')'");
      return inner;
    }
    if (t.type != Tok::kIdent || is_op(t, {"and", "or", "not"})) throw unexpected(t);
    Token name = next();
    if (peek().type == Tok::kLParen) return parse_call(name, depth);
    if (name.text == "true" || name.text == "false") {
      Expr::Node n;
      n.number = name.text == "true" ? 1 : 0;
      return add(std::move(n), name.offset);
    }
    return signal_node(name, Agg::kAt);
  }

  int signal_node(const Token& name, Agg agg) {
    auto id = vocab_.signal(name.text);
    if (!id) {
      if (vocab_.kind(name.text)) {
        throw Failure{name.offset, "'" + name.text + "' is an alert or event kind, not a signal: use present(" +
                                       name.text + "), count(" + name.text + ") or here(" + name.text + ")"};
      }
      if (find_function(name.text))
        throw Failure{name.offset, "'" + name.text + "' is a function: write " + name.text + "(...)"};
      throw Failure{name.offset, "unknown signal '" + name.text + "'" + hint(name.text, vocab_.signal_names())};
    }
    Expr::Node n;
    n.op = Expr::Op::kSignal;
    n.agg = agg;
    n.id = *id;
    return add(std::move(n), name.offset);
  }

  int kind_node(const Token& name, Expr::Op op, Scope scope, const char* fn) {
    auto id = vocab_.kind(name.text);
    if (!id) {
      std::string why = vocab_.signal(name.text)
                            ? "'" + name.text + "' is a signal; " + fn + "() takes an alert or event kind"
                            : "unknown alert or event kind '" + name.text + "'" + hint(name.text, vocab_.kind_names());
      throw Failure{name.offset, why};
    }
    Expr::Node n;
    n.op = op;
    n.scope = scope;
    n.id = *id;
    return add(std::move(n), name.offset);
  }

  Token name_argument(const char* fn, const char* what) {
    const Token& t = peek();
    if (t.type != Tok::kIdent || (peek(1).type != Tok::kRParen && peek(1).type != Tok::kComma)) {
      throw Failure{t.offset, std::string(fn) + "() takes " + what};
    }
    return next();
  }

  int parse_call(const Token& name, int depth) {
    const FnInfo* fn = find_function(name.text);
    if (!fn) {
      std::string why = "unknown function '" + name.text + "'" + hint(name.text, function_names());
      throw Failure{name.offset, why};
    }
    next();  // '('
    int result = -1;
    switch (fn->shape) {
      case Fn::kWindow: {
        Token arg = name_argument(fn->name, "a signal name");
        result = signal_node(arg, fn->agg);
        break;
      }
      case Fn::kPresent: {
        Token arg = name_argument(fn->name, "a signal name or an alert or event kind");
        if (vocab_.signal(arg.text))
          result = signal_node(arg, Agg::kPresent);
        else
          result = kind_node(arg, Expr::Op::kCount, Scope::kRun, fn->name);
        if (result >= 0 && expr_.nodes_[result].op == Expr::Op::kCount) {
          // present(K) is count(K) > 0.
          Expr::Node zero;
          result = binary(Expr::Op::kGt, result, add(zero, arg.offset), arg.offset);
        }
        break;
      }
      case Fn::kKind: {
        Token arg = name_argument(fn->name, "an alert or event kind");
        result = kind_node(arg, fn->op, fn->scope, fn->name);
        break;
      }
      case Fn::kWord: {
        Token arg = name_argument(fn->name, fn->op == Expr::Op::kChanged ? "a config key" : "an attribute name");
        Expr::Node n;
        n.op = fn->op;
        n.word = arg.text;
        result = add(std::move(n), arg.offset);
        break;
      }
      case Fn::kMaxMin: {
        size_t at = peek().offset;
        int first = parse_or(depth + 1);
        if (peek().type == Tok::kComma) {
          next();
          result = binary(fn->op, first, parse_or(depth + 1), at);
        } else {
          Expr::Node& n = expr_.nodes_[first];
          if (n.op != Expr::Op::kSignal || n.agg != Agg::kAt) {
            throw Failure{at, std::string(fn->name) + "() of one argument takes a signal name (the " + fn->name +
                                  " over the window); of two, the " + (fn->agg == Agg::kMax ? "larger" : "smaller")};
          }
          n.agg = fn->agg;
          result = first;
        }
        break;
      }
      case Fn::kUnary: {
        size_t at = peek().offset;
        result = binary(fn->op, parse_or(depth + 1), -1, at);
        break;
      }
      case Fn::kBinary: {
        size_t at = peek().offset;
        int a = parse_or(depth + 1);
        expect(Tok::kComma, (std::string("',' (") + fn->name + "() takes two arguments)").c_str());
        result = binary(fn->op, a, parse_or(depth + 1), at);
        break;
      }
    }
    if (peek().type == Tok::kComma)
      throw Failure{peek().offset, std::string("too many arguments to ") + fn->name + "()"};
    expect(Tok::kRParen, "')'");
    return result;
  }

  std::string_view text_;
  const Vocabulary& vocab_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  Expr expr_;
};

std::optional<Expr> parse_expr(std::string_view text, const Vocabulary& vocab, ParseError* error) {
  try {
    return ExprParser(text, vocab).parse();
  } catch (const Failure& f) {
    if (error) *error = ParseError{std::min(f.offset, text.size()), f.message};
    return std::nullopt;
  }
}

namespace {
std::optional<double> known(double v) {
  if (std::isnan(v)) return std::nullopt;
  return v;
}
}  // namespace

std::optional<double> Expr::eval(const Environment& env) const {
  if (root_ < 0) return std::nullopt;
  return eval_node(root_, env);
}

std::optional<double> Expr::eval_node(int i, const Environment& env) const {
  const Node& n = nodes_[static_cast<size_t>(i)];
  switch (n.op) {
    case Op::kNumber:
      return n.number;
    case Op::kSignal: {
      auto v = env.signal(n.id, n.agg);
      if (n.agg == Agg::kPresent) return v && !std::isnan(*v) ? 1.0 : 0.0;
      return v ? known(*v) : std::nullopt;
    }
    case Op::kCount:
      return static_cast<double>(env.count(n.id, n.scope));
    case Op::kFirstStep: {
      auto s = env.first_step(n.id);
      return s ? std::optional<double>(static_cast<double>(*s)) : std::nullopt;
    }
    case Op::kChanged:
      return static_cast<double>(env.changed(n.word));
    case Op::kAttr: {
      auto v = env.attr(n.word);
      return v ? known(*v) : std::nullopt;
    }
    case Op::kNot: {
      auto a = eval_node(n.a, env);
      if (!a) return std::nullopt;
      return *a == 0 ? 1.0 : 0.0;
    }
    case Op::kNeg: {
      auto a = eval_node(n.a, env);
      return a ? std::optional<double>(-*a) : std::nullopt;
    }
    case Op::kAbs: {
      auto a = eval_node(n.a, env);
      return a ? std::optional<double>(std::fabs(*a)) : std::nullopt;
    }
    case Op::kAnd: {
      auto a = eval_node(n.a, env);
      if (a && *a == 0) return 0.0;
      auto b = eval_node(n.b, env);
      if (b && *b == 0) return 0.0;
      if (!a || !b) return std::nullopt;
      return 1.0;
    }
    case Op::kOr: {
      auto a = eval_node(n.a, env);
      if (a && *a != 0) return 1.0;
      auto b = eval_node(n.b, env);
      if (b && *b != 0) return 1.0;
      if (!a || !b) return std::nullopt;
      return 0.0;
    }
    case Op::kCoalesce: {
      auto a = eval_node(n.a, env);
      return a ? a : eval_node(n.b, env);
    }
    default:
      break;
  }
  auto a = eval_node(n.a, env);
  auto b = eval_node(n.b, env);
  if (!a || !b) return std::nullopt;
  double x = *a, y = *b;
  switch (n.op) {
    case Op::kAdd:
      return known(x + y);
    case Op::kSub:
      return known(x - y);
    case Op::kMul:
      return known(x * y);
    case Op::kDiv:
      return y == 0 ? std::nullopt : known(x / y);
    case Op::kLt:
      return x < y ? 1.0 : 0.0;
    case Op::kLe:
      return x <= y ? 1.0 : 0.0;
    case Op::kGt:
      return x > y ? 1.0 : 0.0;
    case Op::kGe:
      return x >= y ? 1.0 : 0.0;
    case Op::kEq:
      return x == y ? 1.0 : 0.0;
    case Op::kNe:
      return x != y ? 1.0 : 0.0;
    case Op::kMax:
      return std::max(x, y);
    case Op::kMin:
      return std::min(x, y);
    case Op::kBits: {
      if (!std::isfinite(x) || !std::isfinite(y) || std::fabs(x) > 9e18 || std::fabs(y) > 9e18) return std::nullopt;
      return (static_cast<int64_t>(x) & static_cast<int64_t>(y)) != 0 ? 1.0 : 0.0;
    }
    default:
      break;
  }
  RUNLENS_CHECK(false, "every expression operator is evaluated above");
  return std::nullopt;
}

std::vector<int> Expr::signals() const {
  std::vector<int> ids;
  for (const Node& n : nodes_) {
    if (n.op == Op::kSignal && std::find(ids.begin(), ids.end(), n.id) == ids.end()) ids.push_back(n.id);
  }
  return ids;
}

}  // namespace runlens::ops::rules
