// runlens operators: every component type and its parameters; the telemetry
// contract's field table; the vocabulary's tables.
#include <memory>

#include "cli/commands.h"
#include "engine/component_docs.h"
#include "schema/vocabulary.h"

namespace runlens::cli {

namespace {

struct OperatorsFlags {
  bool markdown = false, contract = false, vocabulary = false;
};

}  // namespace

Command add_operators(CLI::App& app) {
  auto f = std::make_shared<OperatorsFlags>();
  auto* sub = app.add_subcommand("operators", "List every component type and its parameters");
  sub->add_flag("--markdown", f->markdown, "Print docs/operators.md");
  sub->add_flag("--contract", f->contract, "Print the telemetry contract's field table (docs/telemetry.md)");
  sub->add_flag("--vocabulary", f->vocabulary, "Print the vocabulary's tables: kinds, causes, owners (docs/alerts.md)");
  return {sub, [f] {
            std::printf("%s", f->contract     ? contract_markdown().c_str()
                              : f->vocabulary ? vocabulary_markdown().c_str()
                              : f->markdown   ? operators_markdown().c_str()
                                              : operators_text().c_str());
            return kExitOk;
          }};
}

}  // namespace runlens::cli
