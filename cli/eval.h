// The `runlens eval` command group (docs/cli.md): one file per part.
//   cli/eval.cc         the group, and the commands that talk to the service's HTTP API
//                       (submit, show, why, register, promote, and `runlens gate`; cpp-httplib's client)
//   cli/eval_score.cc   score: per-item statistics aggregated offline with eval::Aggregator
//   cli/eval_worker.cc  worker: the instant runner, or exec of the Python worker
// Internal to cli/: main.cc sees only add_eval() and add_gate() (cli/commands.h).
#pragma once

#include <string>
#include <vector>

#include "cli/commands.h"
#include "eval/registry.h"

namespace runlens::cli {

Command add_eval_score(CLI::App& group);
Command add_eval_worker(CLI::App& group);

// The lines `show` and `score` print for metrics: name, value, n and
// standard error, aligned ("-" for a standard error that is not defined).
std::string format_metrics(const std::vector<eval::MetricResult>& metrics);

}  // namespace runlens::cli
