// The runlens command line: wires the subcommands (cli/commands.h, one file
// each) and reports what they throw.
#include <cstdio>

#include "cli/allocator.h"
#include "cli/commands.h"
#include "runtime/status.h"

using namespace runlens;

int main(int argc, char** argv) {
  cli::tune_allocator(argc, argv);
  CLI::App app{"runlens: streaming observability for large-model training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "runlens 0.1.0");
  const cli::Command commands[] = {
      cli::add_replay(app),    cli::add_run(app),     cli::add_validate(app), cli::add_graph(app),
      cli::add_operators(app), cli::add_convert(app), cli::add_synth(app),    cli::add_serve(app),
      cli::add_report(app),    cli::add_record(app),  cli::add_tail(app),     cli::add_eval(app),
      cli::add_gate(app),      cli::add_explain(app), cli::add_send(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? cli::kExitOk : cli::kExitUsage;
  }
  cli::install_signal_handlers();
  try {
    for (const auto& c : commands) {
      if (c.app->parsed()) return c.run();
    }
  } catch (const runtime::ConfigError& e) {
    for (const auto& d : e.diagnostics()) std::fprintf(stderr, "%s\n", d.str().c_str());
    return cli::kExitUsage;
  } catch (const CLI::ValidationError& e) {
    std::fprintf(stderr, "runlens: %s\n", e.what());
    return cli::kExitUsage;
  } catch (const runtime::InternalError& e) {
    std::fprintf(stderr, "runlens: %s\nThis is a bug in runlens; please report it with the input that caused it.\n",
                 e.what());
    return cli::kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runlens: %s\n", e.what());
    return cli::kExitFailure;
  }
  return cli::kExitOk;
}
