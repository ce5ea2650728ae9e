// Rule files: what loading checks (each error at the file:line:col of the
// offending character, inside the YAML scalar), how a tree is walked, and that
// the rules compiled into runlens are those of configs/rules/.
#include "operators/rules/rule_tree.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "operators/root_cause.h"

using namespace runlens;
using namespace runlens::ops;
using namespace runlens::ops::rules;

namespace {

const std::string kSrc = RUNLENS_SOURCE_DIR;

// A valid tree; cases replace one line of it.
const std::string kValid =
    "name: t\n"
    "symptoms: [straggler]\n"
    "priority: 1\n"
    "tree:\n"
    "  if: temp_c >= 88\n"
    "  then: {cause: hardware_throttle, owner: infrastructure, recommendation: \"fix {node}\"}\n"
    "  else: {cause: unknown, owner: infrastructure, recommendation: look}\n";

std::string replace_line(std::string text, int line, const std::string& with) {
  size_t start = 0;
  for (int l = 1; l < line; ++l) start = text.find('\n', start) + 1;
  size_t end = text.find('\n', start);
  return text.replace(start, end - start, with);
}

// The first diagnostic of loading `text` as t.yaml, as "t.yaml:L:C: message".
std::string first_error(const std::vector<RuleFile>& files) {
  try {
    parse_rules(files, root_cause_vocabulary());
  } catch (const runtime::ConfigError& e) {
    const auto& d = e.diagnostics().front();
    return d.where.str() + ": " + d.message;
  }
  return "no error";
}

// An environment with fixed values by signal name and alert counts by kind name.
class MapEnv final : public Environment {
 public:
  std::map<std::string, double> values;
  std::map<std::string, int64_t> counts;
  std::optional<double> signal(int id, Agg) const override {
    auto it = values.find(root_cause_vocabulary().signal_names()[static_cast<size_t>(id)]);
    return it == values.end() ? std::nullopt : std::optional<double>(it->second);
  }
  int64_t count(int kind, Scope) const override {
    auto it = counts.find(root_cause_vocabulary().kind_names()[static_cast<size_t>(kind)]);
    return it == counts.end() ? 0 : it->second;
  }
  std::optional<int64_t> first_step(int) const override { return std::nullopt; }
  int64_t changed(std::string_view) const override { return 0; }
  std::optional<double> attr(std::string_view) const override { return std::nullopt; }
};

std::string tmpdir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("runlens-rules-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace

TEST_CASE("rule files: every error is reported at its file:line:col, inside the scalar") {
  struct Case {
    const char* name;
    int line;  // the line of kValid to replace (0: use `text` as the whole file)
    std::string text;
    std::string expect;  // "t.yaml:L:C: message" prefix
  };
  // clang-format off
  const Case cases[] = {
      {"plain scalar", 5, "  if: temp_c >= 88 and tmp_c > 1",
       "t.yaml:5:24: invalid condition: unknown signal 'tmp_c' (did you mean 'temp_c'?)"},
      {"double-quoted scalar", 5, "  if: \"temp_c >= 88 and tmp_c > 1\"", "t.yaml:5:25: invalid condition: unknown signal 'tmp_c'"},
      {"single-quoted scalar with an escaped quote", 5, "  if: 'temp_c >= 88 and ''x'' > 1'",
       "t.yaml:5:25: invalid condition: unexpected character '''"},
      {"folded plain scalar", 5, "  if: temp_c >= 88 and\n    tmp_c > 1", "t.yaml:6:5: invalid condition: unknown signal 'tmp_c'"},
      {"literal block scalar", 5, "  if: |\n    temp_c >= 88 and tmp_c > 1", "t.yaml:6:22: invalid condition: unknown signal 'tmp_c'"},
      {"end of the expression", 5, "  if: temp_c >=", "t.yaml:5:16: invalid condition: unexpected end of expression"},
      {"chained comparison", 5, "  if: 80 < temp_c < 90", "t.yaml:5:19: invalid condition: comparisons do not chain"},
      {"unknown function", 5, "  if: avg(temp_c) > 80", "t.yaml:5:7: invalid condition: unknown function 'avg'"},
      {"unknown cause", 6, "  then: {cause: hardware_throttel, owner: infrastructure, recommendation: fix}",
       "t.yaml:6:17: unknown cause 'hardware_throttel' (did you mean 'hardware_throttle'?)"},
      {"unknown owner", 6, "  then: {cause: hardware_throttle, owner: infra, recommendation: fix}",
       "t.yaml:6:43: unknown owner 'infra'"},
      {"unknown placeholder", 6, "  then: {cause: unknown, owner: data, recommendation: \"fix {nod} now\"}",
       "t.yaml:6:61: unknown placeholder 'nod' (did you mean 'node'?)"},
      {"unknown placeholder alternative", 6, "  then: {cause: unknown, owner: data, recommendation: \"{temp_c|tmp} C\"}",
       "t.yaml:6:64: unknown placeholder 'tmp'"},
      {"unknown evidence signal", 6, "  then: {cause: unknown, owner: data, recommendation: x, evidence: [temp_c, clock]}",
       "t.yaml:6:77: unknown signal 'clock'"},
      {"missing recommendation", 6, "  then: {cause: unknown, owner: data}", "t.yaml:6:9: missing 'recommendation'"},
      {"unknown key", 2, "symptom: [straggler]", "t.yaml:2:1: unknown key 'symptom' (did you mean 'symptoms'?)"},
      {"unknown symptom kind", 2, "symptoms: [stragler]", "t.yaml:2:12: unknown alert kind 'stragler' (did you mean 'straggler'?)"},
      {"diagnosis is no symptom", 2, "symptoms: [diagnosis]", "t.yaml:2:12: unknown alert kind 'diagnosis'"},
      {"priority not an integer", 3, "priority: high", "t.yaml:3:11: expected an integer"},
      {"missing else", 7, "", "t.yaml:5:3: missing 'else'"},
      {"neither leaf nor decision", 7, "  else: {because: unknown}", "t.yaml:7:9: expected a leaf"},
      {"YAML syntax", 5, "  if: [temp_c", "t.yaml:6:7: YAML syntax error"},
      {"not a mapping", 0, "- a\n- b\n", "t.yaml:1:1: expected a mapping"},
      {"missing tree", 0, "name: t\nsymptoms: [straggler]\npriority: 1\n", "t.yaml:1:1: missing 'tree'"},
  };
  // clang-format on
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    std::string text = c.line ? replace_line(kValid, c.line, c.text) : c.text;
    std::string got = first_error({{"t.yaml", text}});
    CAPTURE(text);
    CHECK(got.substr(0, c.expect.size()) == c.expect);
  }
  CHECK(first_error({{"t.yaml", kValid}}) == "no error");
}

TEST_CASE("rule files: names and symptoms are unique across the files of a set") {
  std::string other = replace_line(kValid, 1, "name: u");
  CHECK(first_error({{"t.yaml", kValid}, {"u.yaml", other}}) ==
        "u.yaml:2:12: symptom 'straggler' is already explained by tree 't' (t.yaml)");
  std::string same = replace_line(kValid, 2, "symptoms: [oom]");
  CHECK(first_error({{"t.yaml", kValid}, {"u.yaml", same}}).find("duplicate tree name 't' (also in t.yaml)") !=
        std::string::npos);
}

TEST_CASE("rule trees: the first case that holds is taken; unknown is not true") {
  std::string text =
      "name: t\nsymptoms: [straggler, thermal_throttle]\npriority: 7\n"
      "tree:\n"
      "  cases:\n"
      "    - if: here(thermal_throttle) or temp_c >= 88\n"
      "      then: {cause: hardware_throttle, owner: infrastructure, recommendation: a}\n"
      "    - if: cpu_pct >= 90\n"
      "      then:\n"
      "        if: present(host_bottleneck)\n"
      "        then: {cause: host_bottleneck, owner: infrastructure, recommendation: b}\n"
      "        else: {cause: host_bottleneck, owner: platform, recommendation: c}\n"
      "  else: {cause: unknown, owner: infrastructure, recommendation: d}\n";
  RuleSet set = parse_rules({{"t.yaml", text}}, root_cause_vocabulary());
  REQUIRE(set.trees.size() == 1);
  const RuleTree& t = set.trees[0];
  CHECK(set.tree_for("thermal_throttle") == 0);
  CHECK(set.tree_for("oom") == -1);
  CHECK(set.symptom_rank("straggler") > set.symptom_rank("thermal_throttle"));  // earlier in the list
  struct Case {
    const char* name;
    std::map<std::string, double> values;
    std::map<std::string, int64_t> counts;
    const char* recommendation;
    const char* path;  // each condition evaluated: t(rue), f(alse) or u(nknown)
  };
  // clang-format off
  const Case cases[] = {
      {"hot GPU", {{"temp_c", 91}}, {}, "a", "t"},
      {"throttle alert", {}, {{"thermal_throttle", 1}}, "a", "t"},
      {"busy host with its alert", {{"temp_c", 70}, {"cpu_pct", 97}}, {{"host_bottleneck", 1}}, "b", "ftt"},
      {"busy host alone", {{"temp_c", 70}, {"cpu_pct", 97}}, {}, "c", "ftf"},
      {"nothing known", {}, {}, "d", "uu"},
      {"nothing wrong", {{"temp_c", 70}, {"cpu_pct", 30}}, {}, "d", "ff"},
  };
  // clang-format on
  for (const auto& c : cases) {
    CAPTURE(c.name);
    MapEnv env;
    env.values = c.values;
    env.counts = c.counts;
    Decision d = t.decide(env);
    REQUIRE(d.leaf != nullptr);
    CHECK(d.leaf->recommendation == c.recommendation);
    std::string path;
    for (const auto& step : d.path) path += !step.value ? 'u' : step.taken ? 't' : 'f';
    CHECK(path == c.path);
  }
}

TEST_CASE("rule directories: missing or empty directories are reported where the pipeline names them") {
  runtime::SourceLocation where{"p.yaml", 9, 12};
  std::string dir = tmpdir("empty");
  for (const auto& [path, message] : std::vector<std::pair<std::string, std::string>>{
           {dir + "/nope", "rules directory not found"}, {dir, "no rule files (*.yaml)"}}) {
    try {
      load_rule_dir(path, root_cause_vocabulary(), where);
      FAIL("expected an error");
    } catch (const runtime::ConfigError& e) {
      CHECK(e.diagnostics().front().where.str() == "p.yaml:9:12");
      CHECK(e.diagnostics().front().message.find(message) != std::string::npos);
    }
  }
  std::ofstream(dir + "/t.yaml") << kValid;
  std::ofstream(dir + "/notes.txt") << "ignored";
  CHECK(load_rule_dir(dir, root_cause_vocabulary(), where).trees.size() == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("load_rules: the same files parse once, a changed or broken file is read again") {
  // A pipeline's components are built twice as it loads (to check, then to
  // run), so root_cause's rule directory is read twice.
  runtime::SourceLocation where{"p.yaml", 3, 5};
  std::string dir = tmpdir("cached");
  std::ofstream(dir + "/t.yaml") << kValid;
  auto first = load_rules(dir, where);
  auto again = load_rules(dir, where);
  CHECK(first == again);
  CHECK(first->trees.size() == 1);
  // Another directory with the same text is parsed again: the cache keys on
  // the files' names too, which errors show...
  std::string other = tmpdir("cached-other");
  std::ofstream(other + "/t.yaml") << kValid;
  auto elsewhere = load_rules(other, where);
  CHECK(elsewhere != first);  // the file's name (shown in errors) differs
  // ...and a file that changed is parsed again.
  std::ofstream(dir + "/t.yaml") << replace_line(kValid, 3, "priority: 2");
  auto changed = load_rules(dir, where);
  CHECK(changed != first);
  CHECK(changed->trees.at(0).priority == 2);
  CHECK(first->trees.at(0).priority == 1);  // a set handed out does not change
  std::ofstream(dir + "/t.yaml") << "not: [valid";
  CHECK_THROWS_AS(load_rules(dir, where), runtime::ConfigError);
  CHECK_THROWS_AS(load_rules(dir, where), runtime::ConfigError);  // an error is never cached
  std::ofstream(dir + "/t.yaml") << kValid;
  auto back = load_rules(dir, where);
  CHECK(back->trees.size() == 1);
  CHECK(load_rules(dir, where) == back);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(other);
}

TEST_CASE("rule templates: placeholders and alternatives") {
  CHECK(template_placeholders("a {x} b {y|z}") == std::vector<std::pair<size_t, std::string>>{{3, "x"}, {9, "y|z"}});
  auto lookup = [](std::string_view n) { return n == "x" ? std::string("1") : "[" + std::string(n) + "]"; };
  CHECK(render_template("a {x} b {y} {", lookup) == "a 1 b [y] {");
}

TEST_CASE("shipped rules: configs/rules loads, and the compiled-in copy is the same") {
  RuleSet disk = load_rule_dir(kSrc + "/configs/rules", root_cause_vocabulary(), {});
  auto built_in = builtin_rules();
  REQUIRE(disk.trees.size() == built_in->trees.size());
  for (size_t i = 0; i < disk.trees.size(); ++i) {
    CAPTURE(disk.trees[i].name);
    CHECK(disk.trees[i].name == built_in->trees[i].name);
    CHECK(disk.trees[i].symptoms == built_in->trees[i].symptoms);
    CHECK(disk.trees[i].priority == built_in->trees[i].priority);
    CHECK(disk.trees[i].leaves.size() == built_in->trees[i].leaves.size());
  }
  // Every training alert kind is explained by one tree; the evaluation kinds
  // are the model-failure tree's (configs/rules/model/, not loaded by
  // root_cause: tests/eval_walk checks it explains them). telemetry_gap and
  // telemetry_shed are the collector's own reports on what reached it and
  // what it shed, not symptoms of the job: no tree explains them (root_cause
  // passes over them; a diagnosis a minute of overload would be noise).
  for (const auto& kind : alert_kinds()) {
    CAPTURE(kind);
    const bool evaluation =
        kind == "benchmark_regression" || kind == "safety_regression" || kind == "latency_regression";
    const bool collector = kind == "telemetry_gap" || kind == "telemetry_shed";
    CHECK((disk.tree_for(kind) >= 0) == (!evaluation && !collector));
  }
  // Each leaf names a cause and an owner of the contract (checked at load) and a recommendation.
  for (const auto& t : disk.trees) {
    for (const auto& l : t.leaves) CHECK(!l.recommendation.empty());
  }
}
