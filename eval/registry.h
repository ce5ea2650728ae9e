// The registry's data types (seed sections 16-17, 54): models and their
// versions, checkpoints, datasets and benchmarks with their versions, and
// the EvaluationRun that ties a result to everything needed to reproduce
// it. Pure data and checks; the store keeps them (a later step).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runlens::eval {

// A model version, written `MODEL:VERSION` (e.g. llama-x:v142) wherever one id is needed.
struct ModelVersionId {
  std::string model;
  std::string version;
  std::string str() const { return model + ":" + version; }
  bool operator==(const ModelVersionId&) const = default;
};

// Parses MODEL:VERSION. Each part is 1-128 characters of [A-Za-z0-9._-]
// starting with a letter or digit; nullopt with `why` otherwise, e.g.
// "a model version id is MODEL:VERSION (e.g. llama-x:v142), got 'v142': no ':'".
std::optional<ModelVersionId> parse_model_version(std::string_view text, std::string* why);

struct Model {
  std::string id;  // "llama-x"
  std::string description;
};

struct ModelVersion {
  ModelVersionId id;
  std::string checkpoint_id;  // the checkpoint this version was cut from
};

struct Checkpoint {
  std::string id;            // "checkpoint-820000"
  std::string content_hash;  // SHA-256 of the checkpoint file(s)
  std::string run_id;        // the training run that saved it
  int64_t step = 0;
  std::string parent_id;  // the checkpoint it was resumed or fine-tuned from; empty = none
  std::string uri;        // where it is stored
};

struct Dataset {
  std::string id;
  std::string description;
};

struct DatasetVersion {
  std::string dataset_id;
  std::string version;
  std::string content_hash;  // SHA-256 of the version's content
  int64_t items = 0;
};

struct Benchmark {
  std::string name;  // "MMLU"
};

struct BenchmarkVersion {
  std::string benchmark;
  std::string version;  // "2026-04"
};

// Statuses of an evaluation (the API's `status`).
enum class EvalStatus : uint8_t { kQueued, kRunning, kPartial, kCompleted, kFailed, kCached };
std::string_view eval_status_name(EvalStatus s);  // "QUEUED", ...
bool is_terminal(EvalStatus s);                   // PARTIAL, COMPLETED, FAILED, CACHED

struct MetricResult {
  std::string name;  // "accuracy", "pass@10"
  double value = 0;
  int64_t n = 0;         // items (problems for pass@k) it is over
  double std_error = 0;  // standard error; NaN where it is not defined (corpus BLEU, macro F1, n < 2)
};

// One item's row in the evaluation store: what was asked, what came back and
// how it scored, so that a regression can be traced to items.
struct ItemRecord {
  int64_t item = 0;
  std::string item_hash;                               // SHA-256 of the item as the worker read it
  std::vector<std::pair<std::string, double>> scores;  // metric -> the item's score or statistic
  std::string response_hash;                           // SHA-256 of the model's response
  double latency_ms = 0;
  std::string error;  // empty, or why the item could not be scored
};

// One evaluation with its full provenance (seed section 17 and the issue's
// "Store and provenance" paragraph).
struct EvaluationRun {
  std::string evaluation_id;
  std::string model_id;
  std::string model_version;  // the VERSION part of MODEL:VERSION
  std::string checkpoint_id;
  std::string checkpoint_hash;
  std::string dataset_id;
  std::string dataset_version;
  std::string dataset_hash;
  std::string benchmark;
  std::string benchmark_version;
  std::string suite;
  std::string prompt_template_version;
  std::string prompt_template_hash;
  std::string evaluator_version;
  // LLM-as-a-judge: required when a metric uses the judge.
  bool uses_judge = false;
  std::string judge_model;
  std::string judge_model_version;
  std::string judge_prompt_version;
  std::string judge_prompt_hash;
  std::string rubric_version;
  // Decoding: temperature and the rest of the sampling configuration (canonical JSON).
  std::optional<double> temperature;
  std::string decoding_json;
  std::string code_commit;                              // of the evaluator/worker code
  std::string worker_version;                           // of the worker program
  std::map<std::string, std::string> library_versions;  // e.g. torch -> 2.1.0
  std::string cache_key;
  std::string cached_from;  // the evaluation whose results were reused (status CACHED)
  EvalStatus status = EvalStatus::kQueued;
  std::vector<MetricResult> metrics;
  std::vector<int> missing_shards;  // PARTIAL / FAILED: the shards that did not finish
  std::string started_at;           // RFC 3339 UTC
  std::string completed_at;         // empty while not terminal
};

// The provenance rule (which fields a result cannot be written without) is
// the store's, store::missing_provenance (store/store.h); the service maps an
// EvaluationRun onto the store's row (eval/service/records.h) to check it.

}  // namespace runlens::eval
