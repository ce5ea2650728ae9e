// Evaluation suites: what one benchmark evaluation of a checkpoint runs
// (configs/eval/*.yaml; the format is in docs/evaluation-service.md). The
// parser checks a suite completely and reports every problem with its
// file:line:col, as the pipeline parser does: unknown keys with a
// did-you-mean, wrong types, values out of range, missing required keys.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eval/metric.h"
#include "runtime/status.h"

namespace runlens::eval {

// Scheduling priority (seed section 44); lower runs first.
enum class Priority : uint8_t { kP0 = 0, kP1 = 1, kP2 = 2, kP3 = 3 };
std::string_view priority_name(Priority p);     // "P0"
std::string_view priority_meaning(Priority p);  // "safety certification"
std::optional<Priority> parse_priority(std::string_view text);

enum class Pool : uint8_t { kCpu, kGpu };
std::string_view pool_name(Pool p);  // "cpu", "gpu"

struct WorkerRequirements {
  Pool pool = Pool::kCpu;
  int64_t memory_mib = 0;  // memory a worker needs for the model and the batch
};

struct DatasetRef {
  std::string id;
  std::string version;
  std::string sha256;                    // the expected content hash of the dataset version
  std::string path;                      // where workers read it; may be empty when items is given
  std::optional<int64_t> items;          // number of items evaluated; none = resolved from the file by the service
  int64_t first_item = 0;                // index of the first evaluated item (a held-out split)
  runtime::SourceLocation sha256_where;  // where the suite states the hash
};

struct PromptTemplate {
  std::string text;
  std::string version;
  std::string sha256;  // computed: SHA-256 of text
};

// A metric with its arguments (defaults filled in), e.g. f1 {average: macro}.
struct MetricSpec {
  std::string name;
  const MetricDef* def = nullptr;
  std::vector<std::pair<std::string, std::string>> args;  // sorted by name; bools as "true"/"false"
  std::vector<int64_t> k;                                 // pass@k: ascending, distinct
  runtime::SourceLocation where;
  std::string canonical_json() const;  // {"args":{...},"k":[...],"name":"..."}
  std::vector<std::string> outputs() const { return metric_outputs(name, k); }
};

struct JudgeSpec {
  std::string model;
  std::string model_version;
  std::string prompt;
  std::string prompt_version;
  std::string prompt_sha256;  // computed
  std::string rubric_version;
  std::vector<std::string> criteria;
  double scale_lo = 1, scale_hi = 5;
  double temperature = 0;
  std::string sampling_json = "{}";  // canonical JSON of the sampling settings
};

struct Suite {
  std::string file;
  std::string name;  // the API's benchmarkSuite
  std::string benchmark;
  std::string version;  // the benchmark version
  std::string evaluator_version;
  DatasetRef dataset;
  PromptTemplate prompt;
  std::vector<MetricSpec> metrics;
  std::string decoding_json = "{}";  // canonical JSON of the decoding configuration
  int64_t partition_size = 0;
  Priority priority = Priority::kP2;
  std::optional<int64_t> deadline_s;  // relative to submission; none = no deadline
  int max_attempts = 3;
  WorkerRequirements workers;
  std::optional<JudgeSpec> judge;
  // MODEL-ID patterns (fnmatch: *, ?, [...]): registering a checkpoint of a
  // model version whose model id matches one creates an evaluation of this suite.
  std::vector<std::string> on_checkpoint;

  // Whether a checkpoint of `model_id` triggers this suite (on_checkpoint).
  bool triggered_by(const std::string& model_id) const;
  const MetricSpec* find_metric(std::string_view name) const;
  // dataset.path, a relative one resolved against the suite file's directory.
  std::string dataset_path() const;
};

// "" when `actual_sha256` (the service hashes the dataset file) is what the
// suite expects; else the error that stops the evaluation before any worker
// runs: "dataset sklearn-digits version 1.2.1 has changed: its content hash
// is 0123..., the suite expects 46ab... (at s.yaml:8:11)".
std::string dataset_hash_mismatch(const Suite& suite, const std::string& actual_sha256);

// Parses one suite; throws runtime::ConfigError with every problem found.
Suite parse_suite(const std::string& text, const std::string& file = "<suite>");
// Reads and parses a suite file (the one place this layer reads a file).
Suite load_suite(const std::string& path);

// "2GiB", "512MiB", "1.5GB", "800MB" -> MiB (GB and MB read as GiB and MiB:
// worker memory is sized in binary units); nullopt when it is none of these.
std::optional<int64_t> parse_memory_mib(const std::string& text);

}  // namespace runlens::eval
