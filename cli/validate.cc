// runlens validate: checks pipeline files; file:line:col for each problem.
#include <memory>

#include "cli/commands.h"
#include "engine/engine.h"

namespace runlens::cli {

namespace {

struct ValidateFlags {
  std::vector<std::string> files, sets;
};

int validate(const ValidateFlags& f) {
  auto vars = parse_sets(f.sets);
  int bad = 0;
  for (const auto& file : f.files) {
    try {
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
  auto* sub = app.add_subcommand("validate", "Check pipeline files; report file:line:col for each problem");
  sub->add_option("FILE", f->files, "Pipeline files")->required();
  sub->add_option("--set", f->sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  return {sub, [f] { return validate(*f); }};
}

}  // namespace runlens::cli
