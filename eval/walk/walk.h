// The regression walk (spec sections 23, 42, 52 and 60): from a model
// version that got worse down through the run graph to the change that
// caused it. For a candidate and a baseline model version it reads each
// side's evaluations, checkpoint and training run, computes the config each
// checkpoint was trained with (the run's run_start config plus its
// config_change events up to the checkpoint's step), the validation loss at
// the checkpoint, the paired difference of each benchmark both sides
// evaluated, each run's infrastructure health over the steps that produced
// the checkpoint, and the decision of the model-failure rule tree
// (configs/rules/model/, docs/rules.md "The model-failure tree") over
// signals computed for the pair. Pure functions over store rows, except the
// read_* functions, which read them.
//
// GET /v1/models/{id}/compare, GET /v1/models/{id}/versions/{v}/explain
// (eval/service/http.cc) and the evaluations section of GET /v1/runs/compare
// (server/compare.cc) render these (walk_json.cc); `runlens explain` prints
// the explain route's answer (cli/eval.cc).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/json_writer.h"
#include "operators/rules/rule_tree.h"
#include "store/store.h"

namespace runlens::walk {

// A request that cannot be answered: 404 (an unknown model or version), 409
// (nothing to compare: no evaluations, no production version). `message`
// is phrased for the user.
struct WalkError {
  int status = 409;
  std::string message;
};

// --- effective config and validation loss at a checkpoint --------------------------

struct EffectiveKey {
  std::string key;
  Value value;
  int64_t step = 0;  // the step it last changed at or before the checkpoint; 0 = from the start
};

// The run_start config plus the run's config_change entries (and lr_change
// entries, as `lr`) at or before `step` (all of them when `step` is unset),
// in the run_start order, then keys the run added.
std::vector<EffectiveKey> effective_config(const store::RunRow& run, const std::vector<store::TimelineEntry>& timeline,
                                           std::optional<int64_t> step);
const EffectiveKey* find_key(const std::vector<EffectiveKey>& config, const std::string& key);

// The last finite val_loss of the steps at or before `step` (any step when unset).
std::optional<double> val_loss_at(const std::vector<store::StepRow>& steps, std::optional<int64_t> step);
// The mean of the finite mfu of the steps at or before `step`, and the mean of the last 10 finite losses.
std::optional<double> mfu_until(const std::vector<store::StepRow>& steps, std::optional<int64_t> step);
std::optional<double> loss_at(const std::vector<store::StepRow>& steps, std::optional<int64_t> step);

// --- infrastructure health over the steps that produced a checkpoint ------------

struct Health {
  int64_t alerts = 0;        // every alert of the run at or before the step (diagnoses excluded)
  int64_t infra_alerts = 0;  // of those, the ones that are not training symptoms (nan_loss, loss/grad spikes)
  int64_t incidents = 0;
  int64_t infra_events = 0;                   // xid, nccl_timeout, oom, exception, restart, abort
  std::map<std::string, int64_t> by_kind;     // alert and event kinds, counted
  std::map<std::string, int64_t> first_step;  // of each kind
  bool healthy() const { return infra_alerts == 0 && infra_events == 0; }
};

Health run_health(const std::vector<store::StoredAlert>& alerts, const std::vector<store::IncidentRow>& incidents,
                  const std::vector<store::TimelineEntry>& timeline, std::optional<int64_t> step);

// --- benchmarks ------------------------------------------------------------------

// One evaluation with what a comparison reads of it.
struct EvalResult {
  store::EvaluationRecord record;
  std::vector<store::MetricValue> metrics;
  std::vector<store::ItemResult> items;
};

struct MetricComparison {
  std::string metric;
  std::optional<double> left, right;                          // the evaluations' metric values
  std::optional<double> difference;                           // right - left (paired: the mean per-item difference)
  std::optional<double> std_error, ci_low, ci_high, p_value;  // 95 % two-sided, Student t with n - 1 df
  bool significant = false;                                   // paired and p < 0.05
  std::string method;  // "paired" | "unpaired" (datasets differ) | "aggregate" (no per-item scores)
  int64_t n = 0;       // paired items
};

struct VersionField {
  std::string name;  // dataset, datasetHash, prompt, evaluator, benchmarkVersion
  std::string left, right;
  bool changed = false;
};

struct BenchmarkComparison {
  std::string benchmark;
  std::string left_evaluation, right_evaluation;
  bool paired = false;  // same dataset hash
  std::string note;     // why the difference is not paired, when it is not
  std::vector<VersionField> versions;
  std::vector<MetricComparison> metrics;
};

// The paired difference of every metric both evaluations have. When the
// dataset hashes differ the difference is unpaired (metric values and
// standard errors only), marked so, and never significant.
BenchmarkComparison compare_benchmark(const EvalResult& left, const EvalResult& right);
// Benchmarks both sides evaluated (matched by benchmark name; `left`/`right`
// hold at most one evaluation per benchmark), in left's order.
std::vector<BenchmarkComparison> compare_evaluations(const std::vector<EvalResult>& left,
                                                     const std::vector<EvalResult>& right);
// The latest terminal evaluation of each benchmark (by created_ns).
std::vector<store::EvaluationRecord> latest_per_benchmark(const std::vector<store::EvaluationRecord>& evaluations);
// Reads the metrics and items of these evaluations (a CACHED evaluation's items are its source's).
std::vector<EvalResult> read_results(store::Store& s, const std::vector<store::EvaluationRecord>& evaluations);

// --- one model version and the pair ---------------------------------------------

struct VersionSide {
  store::ModelVersionRecord version;
  std::string checkpoint_id;
  std::optional<int64_t> step;  // the checkpoint's step
  std::optional<store::RunRow> run;
  std::vector<store::TimelineEntry> timeline;
  std::vector<store::StepRow> steps;
  std::vector<store::StoredAlert> alerts;
  std::vector<store::IncidentRow> incidents;
  std::vector<EvalResult> evaluations;  // the latest terminal evaluation of each benchmark
};

// Reads a version and what it leads to. Throws WalkError 404 for an unknown
// model version, store::StoreError when the store cannot be read.
VersionSide read_version(store::Store& s, const std::string& model, const std::string& version);
// The model's production version (its audit records), or "" when none.
std::string production_version(store::Store& s, const std::string& model);

// The model-failure tree's signals for a pair (docs/rules.md lists them).
struct Signals {
  std::map<std::string, double> values;         // known values only
  std::map<std::string, int64_t> changed_keys;  // config keys that differ -> the candidate's step of the key
  Health health;                                // the candidate's run
};
Signals pair_signals(const VersionSide& baseline, const VersionSide& candidate,
                     const std::vector<BenchmarkComparison>& benchmarks);

// The rule language's names for the model-failure tree, and the tree compiled in.
const ops::rules::Vocabulary& model_vocabulary();
std::shared_ptr<const ops::rules::RuleSet> builtin_model_rules();
// Parses model-failure rule files (runlens validate). Throws runtime::ConfigError.
ops::rules::RuleSet parse_model_rules(const std::vector<ops::rules::RuleFile>& files);

struct EvidenceItem {
  std::string signal;
  std::optional<double> value;
};
struct PathItem {
  std::string condition;
  std::string value;  // true | false | unknown
};
struct WalkDecision {
  std::string tree, cause, owner, summary, recommendation;
  std::vector<PathItem> path;
  std::vector<EvidenceItem> evidence;
};
// Evaluates the tree of `symptom` (benchmark_regression by default) over the signals.
WalkDecision decide(const ops::rules::RuleSet& rules, const Signals& signals, const VersionSide& candidate,
                    const std::string& symptom = "benchmark_regression");

struct ConfigKeyDiff {
  std::string key;
  std::optional<EffectiveKey> left, right;
  bool changed = false;
};

struct ModelComparison {
  const VersionSide* left = nullptr;   // the baseline
  const VersionSide* right = nullptr;  // the candidate
  std::vector<ConfigKeyDiff> config;
  std::optional<double> left_val_loss, right_val_loss, left_loss, right_loss, left_mfu, right_mfu;
  Health left_health, right_health;
  std::vector<BenchmarkComparison> benchmarks;
  Signals signals;
  WalkDecision decision;
  std::vector<std::string> conclusion;  // the likely conclusion, one sentence a line
};

ModelComparison compare_versions(const VersionSide& baseline, const VersionSide& candidate,
                                 const ops::rules::RuleSet& rules);

// --- JSON (walk_json.cc; docs/api.md) -----------------------------------------------

// The benchmarks of a comparison as a JSON array.
void benchmarks_json(json::Writer& w, const std::vector<BenchmarkComparison>& benchmarks);
// GET /v1/models/{id}/compare's answer.
std::string model_compare_json(const ModelComparison& c);
// GET /v1/models/{id}/versions/{v}/explain's answer: the comparison plus the walk.
std::string explain_json(const ModelComparison& c);
// The `evaluations` section of GET /v1/runs/compare: benchmarks evaluated on
// both runs' checkpoints. Writes a key and an array.
void write_run_evaluations(json::Writer& w, store::Store& s, const std::string& left_run, const std::string& right_run);

// What the two routes do: reads, compares, renders. Throw WalkError.
std::string model_compare(store::Store& s, const std::string& model, const std::string& left, const std::string& right);
// `baseline`: VERSION or MODEL:VERSION; empty = the production version.
std::string model_explain(store::Store& s, const std::string& model, const std::string& version,
                          const std::string& baseline);

}  // namespace runlens::walk
