// ${VAR:-default} whose default uses another variable, as the shipped
// pipeline writes the store path: ${RUNLENS_DB:-${RUNLENS_OUT:-out}/runlens.db}.
// (runtime/pipeline_spec.cc; these cases belong with tests/runtime's once
// that directory settles.)
#include <doctest/doctest.h>

#include "engine/engine.h"
#include "runtime/pipeline_spec.h"
#include "server/serve.h"

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
  const std::string store = "${RUNLENS_DB:-${RUNLENS_OUT:-out}/runlens.db}";
  CHECK(sub(store, {}) == "out/runlens.db");
  CHECK(sub(store, {{"RUNLENS_OUT", "/tmp/x"}}) == "/tmp/x/runlens.db");
  CHECK(sub(store, {{"RUNLENS_OUT", "/tmp/x"}, {"RUNLENS_DB", "/data/all.db"}}) == "/data/all.db");
  CHECK(sub(store, {{"RUNLENS_DB", ""}, {"RUNLENS_OUT", "o"}}) == "o/runlens.db");  // empty counts as unset
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

TEST_CASE("variables: the shipped pipeline keeps its store at RUNLENS_DB, else in RUNLENS_OUT") {
  auto out_only = load_pipeline("", {{"RUNLENS_OUT", "/tmp/rl-out"}, {"RUNLENS_DB", ""}});
  CHECK(api::store_path_of(out_only) == "/tmp/rl-out/runlens.db");
  auto both = load_pipeline("", {{"RUNLENS_OUT", "/tmp/rl-out"}, {"RUNLENS_DB", "/tmp/shared.db"}});
  CHECK(api::store_path_of(both) == "/tmp/shared.db");
}
