// runlens graph: a pipeline as Graphviz DOT.
#include <memory>

#include "cli/commands.h"
#include "engine/engine.h"

namespace runlens::cli {

namespace {

struct GraphFlags {
  std::string file;
  std::vector<std::string> sets;
};

}  // namespace

Command add_graph(CLI::App& app) {
  auto f = std::make_shared<GraphFlags>();
  auto* sub = app.add_subcommand("graph", "Print a pipeline as Graphviz DOT");
  sub->add_option("FILE", f->file, "Pipeline file (default: the embedded default)");
  sub->add_option("--set", f->sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  return {sub, [f] {
            auto spec = load_pipeline(f->file, parse_sets(f->sets));
            std::printf("%s", pipeline_dot(spec).c_str());
            return kExitOk;
          }};
}

}  // namespace runlens::cli
