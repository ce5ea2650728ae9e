// runlens validate: checks pipeline and evaluation suite files (a file with a
// top-level `suite:` key is a suite); file:line:col for each problem.
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "engine/engine.h"
#include "eval/suite.h"

namespace runlens::cli {

namespace {

struct ValidateFlags {
  std::vector<std::string> files, sets;
};

// Whether the file is an evaluation suite: a YAML mapping with a top-level `suite` key.
bool is_suite_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    YAML::Node root = YAML::Load(ss.str());
    return root.IsMap() && root["suite"];
  } catch (const YAML::Exception&) {
    return false;  // the pipeline loader reports the syntax error with its position
  }
}

int validate(const ValidateFlags& f) {
  auto vars = parse_sets(f.sets);
  int bad = 0;
  for (const auto& file : f.files) {
    try {
      if (is_suite_file(file)) {
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
  auto* sub = app.add_subcommand("validate",
                                 "Check pipeline and evaluation suite files; report file:line:col for each problem");
  sub->add_option("FILE", f->files, "Pipeline or suite files")->required();
  sub->add_option("--set", f->sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  return {sub, [f] { return validate(*f); }};
}

}  // namespace runlens::cli
