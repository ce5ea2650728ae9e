// The engine: binds the runtime to runlens rows, the built-in components and
// the embedded default pipeline, and runs a pipeline live or as a replay.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "operators/operator.h"
#include "runtime/counters.h"
#include "runtime/pipeline_spec.h"

namespace runlens {

namespace connectors::metrics {
class MetricsHub;
}

// Every built-in operator, source and sink: a new value each call, owned by
// whoever asked (a loaded pipeline, an engine), so that engines in one process
// share no registry.
std::shared_ptr<const ops::Registry> make_builtin_registry();

// The default pipeline, compiled into the binary from pipelines/training-health.yaml.
extern const char* const kDefaultPipelineName;
const std::string& default_pipeline_text();

// Loads `path`, or the embedded default when `path` is empty, against
// `registry` (null: make_builtin_registry()), which the spec keeps alive
// (PipelineSpec::catalog). `vars` override the environment for ${VAR}. Then
// builds every component once, sources and sinks included, so that whatever
// a factory rejects is reported here (and by `runlens validate`) with
// file:line:col. Throws runtime::ConfigError with every problem found.
runtime::PipelineSpec load_pipeline(const std::string& path, const std::map<std::string, std::string>& vars,
                                    std::shared_ptr<const ops::Registry> registry = nullptr);

// The registry a spec was loaded against (a new built-in one when the spec
// does not hold one).
std::shared_ptr<const ops::Registry> registry_of(const runtime::PipelineSpec& spec);

// Graphviz DOT of a loaded pipeline (`runlens graph`): each node's label
// carries the describe() line of its built component and its parameters.
std::string pipeline_dot(const runtime::PipelineSpec& spec);

struct EngineOptions {
  int threads = 0;                         // 0 = hardware concurrency; per engine (its own task arena)
  std::vector<std::string> replay_inputs;  // non-empty: replay these instead of the live sources
  double speed = 0;                        // replay pacing, 0 = max
  bool progress = false;                   // replay progress bar
  int64_t batch_size = 0;                  // 0 = the pipeline's setting
  std::string out_dir = "out";             // RUNLENS_OUT, for the dead-letter default
  // Where `metrics` sinks publish and the node counters are read from while
  // the engine runs (`--metrics-port`); null: metrics sinks are inert.
  std::shared_ptr<connectors::metrics::MetricsHub> metrics;
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
  // Thread-safe, at any time: from a watcher of a signal flag, also before
  // or while run() builds the graph (run() then ends without waiting for
  // input), and after.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace runlens
