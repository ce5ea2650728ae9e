// runlens validate: checks pipeline, evaluation suite and gate policy files
// (a file with a top-level `suite:` key is a suite, one with `gate:` a gate
// policy); file:line:col for each problem.
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "engine/engine.h"
#include "eval/gate_policy.h"
#include "eval/suite.h"

namespace runlens::cli {

namespace {

struct ValidateFlags {
  std::vector<std::string> files, sets;
};

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
      "validate", "Check pipeline, evaluation suite and gate policy files; report file:line:col for each problem");
  sub->add_option("FILE", f->files, "Pipeline, suite or gate policy files")->required();
  sub->add_option("--set", f->sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  return {sub, [f] { return validate(*f); }};
}

}  // namespace runlens::cli
