// ${VAR:-default} whose default uses another variable, as the shipped
// pipeline names its store: ${RUNLENS_STORE:-sqlite://${RUNLENS_OUT:-out}/runlens.db}.
// (runtime/pipeline_spec.cc; these cases belong with tests/runtime's once
// that directory settles.)
#include <doctest/doctest.h>

#include "cli/store_option.h"
#include "engine/engine.h"
#include "runtime/pipeline_spec.h"

using namespace runlens;

namespace {

std::string sub(const std::string& text, std::map<std::string, std::string> vars, std::string* why = nullptr) {
  std::string w;
  auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  auto out = runtime::substitute_vars(text, lookup, &w);
  if (why) *why = w;
  return out ? *out : "<error>";
}

}  // namespace

TEST_CASE("variables: a default may use another variable") {
  const std::string store = "${RUNLENS_STORE:-sqlite://${RUNLENS_OUT:-out}/runlens.db}";
  CHECK(sub(store, {}) == "sqlite://out/runlens.db");
  CHECK(sub(store, {{"RUNLENS_OUT", "/tmp/x"}}) == "sqlite:///tmp/x/runlens.db");
  CHECK(sub(store, {{"RUNLENS_OUT", "/tmp/x"}, {"RUNLENS_STORE", "sqlite:///data/all.db"}}) == "sqlite:///data/all.db");
  CHECK(sub(store, {{"RUNLENS_STORE", ""}, {"RUNLENS_OUT", "o"}}) == "sqlite://o/runlens.db");  // empty: unset
  CHECK(sub("a${X:-${Y:-${Z:-deep}}}b", {}) == "adeepb");
  CHECK(sub("${X:-$${Y}}", {}) == "${Y}");  // $$ stays a literal '$' in a default
  CHECK(sub("${X:-{braces}}", {}) == "{braces}");
  // A default that is not used is not expanded (its variables need not exist).
  CHECK(sub("${X:-${UNDEFINED}}", {{"X", "set"}}) == "set");
  std::string why;
  CHECK(sub("${X:-${UNDEFINED}}", {}, &why) == "<error>");
  CHECK(why.find("undefined variable 'UNDEFINED'") != std::string::npos);
  CHECK(sub("${X:-${Y}", {}, &why) == "<error>");
  CHECK(why.find("unterminated") != std::string::npos);
}

TEST_CASE("variables: the shipped pipeline keeps its store at RUNLENS_STORE, else in RUNLENS_OUT") {
  auto out_only = load_pipeline("", {{"RUNLENS_OUT", "/tmp/rl-out"}, {"RUNLENS_STORE", ""}});
  CHECK(cli::pipeline_store_url(out_only) == "sqlite:///tmp/rl-out/runlens.db");
  auto both = load_pipeline("", {{"RUNLENS_OUT", "/tmp/rl-out"}, {"RUNLENS_STORE", "sqlite:///tmp/shared.db"}});
  CHECK(cli::pipeline_store_url(both) == "sqlite:///tmp/shared.db");
}
