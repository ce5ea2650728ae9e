// The engine: binds the runtime to runlens rows, the built-in components and
// the embedded default pipeline, and runs a pipeline live or as a replay.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "operators/operator.h"
#include "runtime/counters.h"
#include "runtime/pipeline_spec.h"

namespace runlens {

// Every built-in operator, source and sink.
const ops::Registry& builtin_registry();

// The default pipeline, compiled into the binary from pipelines/training-health.yaml.
extern const char* const kDefaultPipelineName;
const std::string& default_pipeline_text();

// Loads `path`, or the embedded default when `path` is empty. `vars` override
// the environment for ${VAR}. Throws runtime::ConfigError.
runtime::PipelineSpec load_pipeline(const std::string& path, const std::map<std::string, std::string>& vars);

struct EngineOptions {
  int threads = 0;                         // 0 = hardware concurrency
  std::vector<std::string> replay_inputs;  // non-empty: replay these instead of the live sources
  double speed = 0;                        // replay pacing, 0 = max
  bool progress = false;                   // replay progress bar
  int64_t batch_size = 0;                  // 0 = the pipeline's setting
  std::string out_dir = "out";             // RUNLENS_OUT, for the dead-letter default
};

struct RunSummary {
  std::vector<runtime::CounterSnapshot> counters;
  uint64_t dead_letters = 0;
  std::string dead_letter_path;
  double seconds = 0;
  uint64_t source_rows = 0;
};

class Engine {
 public:
  Engine(runtime::PipelineSpec spec, EngineOptions options);
  ~Engine();
  // Runs to the end of input (replay) or until stop() (live). Throws
  // runtime::ConfigError for set-up problems, InternalError for bugs.
  RunSummary run();
  // Thread-safe; safe to call from a watcher of a signal flag.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace runlens
