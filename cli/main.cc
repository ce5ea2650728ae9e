// The runlens command line: wires the subcommands (cli/commands.h, one file
// each) and reports what they throw.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "runtime/status.h"

using namespace runlens;

namespace {

// Batches of rows (hundreds of KiB each) are made and freed thousands of
// times a second. glibc's defaults hand such blocks back to the kernel on
// free (mmap above 128 KiB, trimming the heap's top and the threads' arenas)
// and take every page again on the next batch: a twelfth of a replay's CPU
// went to page faults. Keeping freed memory for reuse costs 10-15 MiB of peak
// RSS (docs/performance.md). An operator's own GLIBC_TUNABLES win.
void keep_freed_memory() {
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return;
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory();
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
