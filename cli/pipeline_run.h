// What `replay` and `run` share: the flags that load a pipeline, and running
// the engine until the input ends or a signal stops it.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace runlens::cli {

struct PipelineFlags {
  std::string pipeline;  // empty: the embedded default
  std::string out_dir = "out";
  std::string store;  // --store URL
  int threads = 0;
  std::vector<std::string> sets;
  std::string counters_json;  // --counters-json FILE: the counters at exit, one JSON object per node
  int metrics_port = -1;      // --metrics-port P: GET /metrics (Prometheus) while the engine runs; 0 picks one
  std::string metrics_host = "127.0.0.1";
};

// --pipeline, --out, --store, --threads, --set, --counters-json, --metrics-port, --metrics-host.
void add_pipeline_flags(CLI::App* sub, PipelineFlags* flags);

// Loads the pipeline with its variables: --set, then RUNLENS_OUT (--out),
// RUNLENS_STORE (cli/store_option.h) and `extra`.
runtime::PipelineSpec load_flagged_pipeline(const std::string& command, const PipelineFlags& flags,
                                            const std::map<std::string, std::string>& extra = {});

// The machine's cores, at least one: what `--threads` means when not given.
int cores();

// Runs `spec` until the input ends or stop_requested(); prints the counters
// unless `quiet`. Returns the exit code (kExitDeadLetters when `strict` and
// there were dead letters).
// With `flags.counters_json`, also writes the counters there at exit; with
// `flags.metrics_port` >= 0, serves GET /metrics while it runs (and prints
// "metrics: http://HOST:PORT/metrics" on standard error).
int run_engine(runtime::PipelineSpec spec, EngineOptions options, bool replay, bool quiet, bool strict,
               const PipelineFlags& flags);

}  // namespace runlens::cli
