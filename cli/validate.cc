// runlens validate: checks pipeline, evaluation suite, gate policy and rule
// files (a file with a top-level `suite:` key is a suite, one with `gate:` a
// gate policy, one with `tree:` a rule tree: the model-failure tree when its
// symptoms are evaluation alert kinds, else a root-cause tree);
// file:line:col for each problem.
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "engine/engine.h"
#include "eval/gate_policy.h"
#include "eval/suite.h"
#include "eval/walk/walk.h"
#include "operators/root_cause.h"

namespace runlens::cli {

namespace {

struct ValidateFlags {
  std::vector<std::string> files, sets;
};

std::string read_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether a rule file's symptoms are evaluation alert kinds (the model-failure tree's).
bool model_rule_file(const std::string& text) {
  try {
    YAML::Node s = YAML::Load(text)["symptoms"];
    if (!s || !s.IsSequence()) return false;
    for (const auto& k : s) {
      const std::string kind = k.IsScalar() ? k.Scalar() : "";
      if (kind == "benchmark_regression" || kind == "safety_regression" || kind == "latency_regression") return true;
    }
  } catch (const YAML::Exception&) {
  }
  return false;
}

// Whether the file is a YAML mapping with the top-level key `key` (`suite`: an evaluation suite; `gate`: a gate
// policy).
bool has_top_level_key(const std::string& file, const char* key) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    YAML::Node root = YAML::Load(ss.str());
    return root.IsMap() && root[key];
  } catch (const YAML::Exception&) {
    return false;  // the pipeline loader reports the syntax error with its position
  }
}

int validate(const ValidateFlags& f) {
  auto vars = parse_sets(f.sets);
  int bad = 0;
  for (const auto& file : f.files) {
    try {
      if (has_top_level_key(file, "gate")) {
        auto policy = eval::load_gate_policy(file);
        std::printf("%s: ok (gate %s version %s, %zu metrics)\n", file.c_str(), policy.name.c_str(),
                    policy.version.c_str(), policy.metrics.size());
        continue;
      }
      if (has_top_level_key(file, "tree")) {
        const std::string text = read_text(file);
        const bool model = model_rule_file(text);
        ops::rules::RuleSet set = model ? walk::parse_model_rules({{file, text}})
                                        : ops::rules::parse_rules({{file, text}}, ops::root_cause_vocabulary());
        std::printf("%s: ok (%s rule tree %s, %zu leaves)\n", file.c_str(), model ? "model-failure" : "root-cause",
                    set.trees.at(0).name.c_str(), set.trees.at(0).leaves.size());
        continue;
      }
      if (has_top_level_key(file, "suite")) {
        auto suite = eval::load_suite(file);
        std::printf("%s: ok (suite %s, %zu metrics)\n", file.c_str(), suite.name.c_str(), suite.metrics.size());
        continue;
      }
      auto spec = load_pipeline(file, vars);
      std::printf("%s: ok (%zu components)\n", file.c_str(), spec.components.size());
    } catch (const runtime::ConfigError& e) {
      ++bad;
      for (const auto& d : e.diagnostics()) std::fprintf(stderr, "%s\n", d.str().c_str());
    }
  }
  return bad ? kExitUsage : kExitOk;
}

}  // namespace

Command add_validate(CLI::App& app) {
  auto f = std::make_shared<ValidateFlags>();
  auto* sub = app.add_subcommand(
      "validate",
      "Check pipeline, evaluation suite, gate policy and rule files; report file:line:col for each problem");
  sub->add_option("FILE", f->files, "Pipeline, suite, gate policy or rule files")->required();
  sub->add_option("--set", f->sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  return {sub, [f] { return validate(*f); }};
}

}  // namespace runlens::cli
