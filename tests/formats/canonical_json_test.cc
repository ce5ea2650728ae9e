// formats/canonical_json: one encoding per value, whatever the key order,
// whitespace or number spelling; errors for what has no canonical form.
#include "formats/canonical_json.h"

#include <doctest/doctest.h>

#include <string>

namespace runlens {
namespace {

std::string canon(const std::string& text) {
  std::string out, why;
  REQUIRE_MESSAGE(json::canonicalize(text, &out, &why), why);
  return out;
}

std::string canon_error(const std::string& text) {
  std::string out, why;
  CHECK_FALSE(json::canonicalize(text, &out, &why));
  return why;
}

TEST_CASE("canonical json: table of encodings") {
  struct Case {
    const char* in;
    const char* out;
  };
  const Case cases[] = {
      {R"({"b":1,"a":2})", R"({"a":2,"b":1})"},
      {" { \"a\" : [ 1 , 2 ] ,\n\t\"A\" : null } ", R"({"A":null,"a":[1,2]})"},
      {R"({"max_tokens":2048.0})", R"({"max_tokens":2048})"},
      {R"({"x":2.048e3})", R"({"x":2048})"},
      {R"({"x":-0})", R"({"x":0})"},
      {R"({"x":-0.0})", R"({"x":0})"},
      {R"({"x":0.1})", R"({"x":0.1})"},
      {R"({"x":1e-7})", R"({"x":1e-07})"},
      {R"({"x":1e300})", R"({"x":1e+300})"},
      {R"({"x":9007199254740993})", R"({"x":9007199254740993})"},
      {R"({"x":0.30000000000000004})", R"({"x":0.30000000000000004})"},
      {R"({"z":{"d":true,"c":false}})", R"({"z":{"c":false,"d":true}})"},
      {R"(["b","a"])", R"(["b","a"])"},
      {R"({"s":"tab\there \u00e9"})", "{\"s\":\"tab\\there \xc3\xa9\"}"},
      {R"({"b":1,"a":{"y":1,"x":[{"q":1,"p":2}]}})", R"({"a":{"x":[{"p":2,"q":1}],"y":1},"b":1})"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    CHECK(canon(c.in) == c.out);
    CHECK(canon(canon(c.in)) == c.out);  // idempotent
  }
}

TEST_CASE("canonical json: no canonical form for duplicates and non-finite numbers") {
  CHECK(canon_error(R"({"a":1,"a":2})") == "duplicate key 'a' at a");
  CHECK(canon_error(R"({"d":{"t":NaN}})") == "a canonical JSON number must be finite, got NaN at d.t");
  CHECK(canon_error(R"([1,Infinity])") == "a canonical JSON number must be finite, got Infinity at [1]");
  CHECK(canon_error("{").find("invalid JSON at byte") == 0);
}

}  // namespace
}  // namespace runlens
