// The runlens command line: wires the subcommands (cli/commands.h, one file
// each) and reports what they throw.
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "cli/commands.h"
#include "runtime/status.h"

using namespace runlens;

namespace {

// Batches of rows (hundreds of KiB each) are made and freed thousands of
// times a second. glibc's defaults hand such blocks back to the kernel on
// free (mmap above 128 KiB, trimming the heap's top and the threads' arenas)
// and take every page again on the next batch: a twelfth of a replay's CPU
// went to page faults. Keeping freed memory for reuse costs 10-15 MiB of peak
// RSS. The heap's first touch of each page was still a tenth of a replay's
// CPU (in a VM a fault costs microseconds), so the commands that move rows
// also ask for transparent huge pages on the heap (glibc's hugetlb=1, which
// has no mallopt: glibc reads it at start, so runlens starts itself again
// once with it in GLIBC_TUNABLES (same pid and name), and clears that for
// the processes it starts). docs/cli.md, "Memory allocator settings". An
// operator's own GLIBC_TUNABLES win: then runlens sets nothing.
constexpr const char* kTunables =
    "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456:"
    "glibc.malloc.top_pad=67108864";
constexpr const char* kTunedMark = "RUNLENS_MALLOC_TUNED";

bool moves_rows(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view command = argv[1];
  for (std::string_view c : {"replay", "run", "convert", "record", "send", "synth"}) {
    if (command == c) return true;
  }
  return false;
}

void tune_allocator(int argc, char** argv) {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const bool started_again = std::getenv(kTunedMark) != nullptr;
  unsetenv(kTunedMark);
  if (started_again && tunables != nullptr && std::string_view(tunables) == kTunables) {
    // What this process starts gets glibc's defaults.
    unsetenv("GLIBC_TUNABLES");
    return;
  }
  if (tunables != nullptr) return;
  if (moves_rows(argc, argv)) {
    setenv("GLIBC_TUNABLES", kTunables, 1);
    setenv(kTunedMark, "1", 1);
    // The binary's own path, not /proc/self/exe: the kernel names a process
    // after the file it executes, and ps, pgrep and perf would show "exe".
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = '\0';
      execv(self, argv);
    }
    execv("/proc/self/exe", argv);
    // Not possible here (no /proc): go on without huge pages.
    unsetenv(kTunedMark);
    unsetenv("GLIBC_TUNABLES");
  }
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  tune_allocator(argc, argv);
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
