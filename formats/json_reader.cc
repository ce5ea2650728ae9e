#include "formats/json_reader.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "formats/json_escape.h"

namespace runlens::json {

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string_view Value::type_name() const {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "bool";
    case Type::kNumber:
      return "number";
    case Type::kString:
      return "string";
    case Type::kArray:
      return "array";
    case Type::kObject:
      return "object";
  }
  return "?";
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  bool run(Value* out, ParseError* err) {
    skip_ws();
    if (!value(out, 0)) {
      *err = {pos_, error_};
      return false;
    }
    skip_ws();
    if (pos_ != s_.size()) {
      *err = {pos_, "unexpected text after the JSON value"};
      return false;
    }
    return true;
  }

 private:
  bool fail(const char* msg) {
    if (error_.empty()) error_ = msg;
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool value(Value* v, int depth) {
    if (pos_ >= s_.size()) return fail("unexpected end of input");
    char c = s_[pos_];
    switch (c) {
      case '{':
        return object(v, depth);
      case '[':
        return array(v, depth);
      case '"':
        v->type = Value::Type::kString;
        return string(&v->text);
      case 't':
        if (literal("true")) {
          v->type = Value::Type::kBool;
          v->boolean = true;
          return true;
        }
        return fail("invalid literal");
      case 'f':
        if (literal("false")) {
          v->type = Value::Type::kBool;
          v->boolean = false;
          return true;
        }
        return fail("invalid literal");
      case 'n':
        if (literal("null")) {
          v->type = Value::Type::kNull;
          return true;
        }
        return fail("invalid literal");
      case 'N':
        if (literal("NaN")) {
          v->type = Value::Type::kNumber;
          v->number = std::numeric_limits<double>::quiet_NaN();
          return true;
        }
        return fail("invalid literal");
      case 'I':
        if (literal("Infinity")) {
          v->type = Value::Type::kNumber;
          v->number = std::numeric_limits<double>::infinity();
          return true;
        }
        return fail("invalid literal");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number(v);
        return fail("unexpected character");
    }
  }

  bool number(Value* v) {
    size_t start = pos_;
    if (s_[pos_] == '-') {
      ++pos_;
      if (literal("Infinity")) {
        v->type = Value::Type::kNumber;
        v->number = -std::numeric_limits<double>::infinity();
        return true;
      }
    }
    bool frac = false;
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return fail("invalid number");
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))) {
      return fail("invalid number (leading zero)");
    }
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      frac = true;
      ++pos_;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return fail("invalid number");
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      frac = true;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) return fail("invalid number");
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + pos_;
    v->type = Value::Type::kNumber;
    bool negative = *b == '-';
    if (!frac) {
      auto [p, ec] = std::from_chars(b, e, v->integer);
      if (ec == std::errc() && p == e) {
        v->integral = true;
        // "-0" is an integer 0 but the double -0.0, as the writer writes it.
        v->number = v->integer == 0 && negative ? -0.0 : static_cast<double>(v->integer);
        return true;
      }
    }
    auto [p, ec] = std::from_chars(b, e, v->number);
    if (ec == std::errc::result_out_of_range) {
      // Out of range is overflow (to +-Infinity) or underflow (to +-0 or a
      // denormal); strtod, on this rare path, tells which and rounds right.
      std::string text(b, e);
      v->number = std::strtod(text.c_str(), nullptr);
      return true;
    }
    if (ec != std::errc() || p != e) return fail("invalid number");
    return true;
  }

  bool hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return fail("truncated \\u escape");
    int digits = parse_hex4(s_.data() + pos_, out);
    pos_ += static_cast<size_t>(digits < 4 ? digits + 1 : 4);  // the error's offset is past the bad byte
    return digits == 4 || fail("invalid \\u escape");
  }

  bool string(std::string* out) {
    ++pos_;  // opening quote
    out->clear();
    for (;;) {
      size_t run = pos_;
      while (run < s_.size() && s_[run] != '"' && s_[run] != '\\' && static_cast<unsigned char>(s_[run]) >= 0x20) ++run;
      out->append(s_.data() + pos_, run - pos_);
      pos_ = run;
      if (pos_ >= s_.size()) return fail("unterminated string");
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c != '\\') return fail("control character in string");
      if (++pos_ >= s_.size()) return fail("unterminated string");
      char e = s_[pos_++];
      if (int byte = unescape_simple(e); byte >= 0) {
        out->push_back(static_cast<char>(byte));
        continue;
      }
      if (e != 'u') return fail("invalid escape in string");
      uint32_t cp;
      if (!hex4(&cp)) return false;
      if (cp >= 0xD800 && cp < 0xDC00) {
        uint32_t lo;
        if (!literal("\\u") || !hex4(&lo) || lo < 0xDC00 || lo >= 0xE000) return fail("invalid surrogate pair");
        cp = combine_surrogates(cp, lo);
      } else if (cp >= 0xDC00 && cp < 0xE000) {
        return fail("invalid surrogate pair");
      }
      append_utf8(cp, out);
    }
  }

  // `depth` counts the containers around this one: at most kMaxDepth may nest.
  bool array(Value* v, int depth) {
    if (depth >= kMaxDepth) return fail("nesting too deep");
    ++pos_;
    v->type = Value::Type::kArray;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      v->items.emplace_back();
      if (!value(&v->items.back(), depth + 1)) return false;
      skip_ws();
      if (pos_ >= s_.size()) return fail("unterminated array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or ']' in array");
    }
  }

  bool object(Value* v, int depth) {
    if (depth >= kMaxDepth) return fail("nesting too deep");
    ++pos_;
    v->type = Value::Type::kObject;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a string key in object");
      std::string key;
      if (!string(&key)) return false;
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':' after object key");
      ++pos_;
      skip_ws();
      v->members.emplace_back(std::move(key), Value());
      if (!value(&v->members.back().second, depth + 1)) return false;
      skip_ws();
      if (pos_ >= s_.size()) return fail("unterminated object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or '}' in object");
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

bool parse(std::string_view text, Value* out, ParseError* err) {
  *out = Value();
  return Parser(text).run(out, err);
}

}  // namespace runlens::json
