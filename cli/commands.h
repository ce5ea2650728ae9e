// The subcommands of the runlens command line, one file each (cli/NAME.cc);
// cli/main.cc only wires them. Exit codes (docs/cli.md): 0 success; 1 runtime
// failure (I/O, a bug); 2 usage error or invalid pipeline; 3 `--strict` and
// the input had dead letters.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace runlens::cli {

constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitDeadLetters = 3;

// A subcommand, and what runs it once the command line is parsed (its exit
// code). It may throw runtime::ConfigError, CLI::ValidationError and other
// exceptions: main() reports them.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_replay(CLI::App& app);
Command add_run(CLI::App& app);
Command add_validate(CLI::App& app);
Command add_graph(CLI::App& app);
Command add_operators(CLI::App& app);
Command add_convert(CLI::App& app);
Command add_synth(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_report(CLI::App& app);
Command add_record(CLI::App& app);
Command add_tail(CLI::App& app);
Command add_send(CLI::App& app);
Command add_eval(CLI::App& app);     // the `runlens eval` group (cli/eval.h)
Command add_gate(CLI::App& app);     // `runlens gate` (cli/eval.cc: it talks to the service)
Command add_explain(CLI::App& app);  // `runlens explain` (cli/eval.cc: it talks to the service)

// SIGINT/SIGTERM end live commands: install_signal_handlers() sets the flag
// that stop_requested() reads (and ignores SIGPIPE).
void install_signal_handlers();
bool stop_requested();

// --set KEY=VALUE options as pipeline variables. Throws CLI::ValidationError.
std::map<std::string, std::string> parse_sets(const std::vector<std::string>& sets);

bool ends_with(const std::string& s, const std::string& suffix);

}  // namespace runlens::cli
