// A small, strict-but-forgiving JSON reader for telemetry lines.
// Beyond RFC 8259 it accepts the bare tokens NaN, Infinity and -Infinity (as
// Python's json module writes them), because training code emits them. It
// never throws and never crashes on any input: errors come back with the
// byte offset where parsing stopped. Nesting is limited to 64 levels.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runlens::json {

struct Value {
  enum class Type : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  bool integral = false;  // written without fraction or exponent and fits int64
  int64_t integer = 0;
  std::string text;                                    // kString
  std::vector<Value> items;                            // kArray
  std::vector<std::pair<std::string, Value>> members;  // kObject, in input order

  const Value* find(std::string_view key) const;
  std::string_view type_name() const;
};

struct ParseError {
  size_t offset = 0;
  std::string message;
};

// Parses exactly one JSON value (surrounding whitespace allowed).
bool parse(std::string_view text, Value* out, ParseError* err);

}  // namespace runlens::json
