// Errors: locations, diagnostics, ConfigError, internal checks and "did you mean".
#include "runtime/status.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace rt = runlens::runtime;

namespace {

TEST_CASE("SourceLocation and Diagnostic render as file:line:col: error: message (in path)") {
  struct Case {
    rt::Diagnostic d;
    const char* text;
  };
  const std::vector<Case> cases = {
      {{{"p.yaml", 3, 7}, "operators.x", "bad"}, "p.yaml:3:7: error: bad (in operators.x)"},
      {{{"p.yaml", 3, 7}, "", "bad"}, "p.yaml:3:7: error: bad"},
      {{{"p.yaml", 0, 0}, "sources.s", "cannot open"}, "p.yaml: error: cannot open (in sources.s)"},
      {{{"", 2, 1}, "", "bad"}, "<input>:2:1: error: bad"},
      {{{"", 0, 0}, "", "bad"}, "error: bad"},
  };
  for (const auto& c : cases) CHECK(c.d.str() == c.text);
  CHECK(rt::SourceLocation{"f", 1, 2}.str() == "f:1:2");
  CHECK(rt::SourceLocation{}.str() == "<input>");
}

TEST_CASE("ConfigError carries every diagnostic, and what() lists them one per line") {
  rt::ConfigError e({{{"p.yaml", 1, 1}, "a", "first"}, {{"p.yaml", 2, 1}, "b", "second"}});
  REQUIRE(e.diagnostics().size() == 2);
  CHECK(e.diagnostics()[1].message == "second");
  CHECK(std::string(e.what()) == "p.yaml:1:1: error: first (in a)\np.yaml:2:1: error: second (in b)");
}

TEST_CASE("RUNLENS_CHECK throws InternalError saying why, and what failed where") {
  CHECK_NOTHROW(RUNLENS_CHECK(1 + 1 == 2, "arithmetic"));
  try {
    RUNLENS_CHECK(1 + 1 == 3, "arithmetic must hold");
    FAIL("no throw");
  } catch (const rt::InternalError& e) {
    std::string what = e.what();
    CHECK(what.rfind("internal error: arithmetic must hold [1 + 1 == 3 at ", 0) == 0);
    CHECK(what.find("status_test.cc:") != std::string::npos);
  }
  // Evaluated once (a macro argument with a side effect).
  int n = 0;
  RUNLENS_CHECK(++n == 1, "once");
  CHECK(n == 1);
}

TEST_CASE("closest_match suggests a candidate within a small edit distance, or nothing") {
  struct Case {
    const char* name;
    std::vector<std::string> candidates;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"rat", {"count", "rate"}, "rate"},
      {"ratio_treshold", {"ratio_threshold", "ratio"}, "ratio_threshold"},
      {"sink", {"sources", "operators", "sinks"}, "sinks"},
      {"tikcer", {"alarms", "ticker"}, "ticker"},  // a transposition is two edits
      {"xyz", {"rate", "count"}, ""},
      {"anything", {}, ""},
      {"rate", {"rate"}, "rate"},
      {"abcd", {"abxy", "abcx"}, "abcx"},            // the closest, not the first
      {"abcd", {"abcx", "abcy"}, "abcx"},            // a tie: the first
      {"threshold_ratio", {"ratio_threshold"}, ""},  // too far
      {"straggler_ratioo", {"straggler_ratio"}, "straggler_ratio"},
      {"a", {"bcd"}, ""},
  };
  for (const auto& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    CHECK(rt::closest_match(c.name, c.candidates) == c.want);
  }
}

}  // namespace
