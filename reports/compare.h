// What differs between two runs (spec sections 23 and 42): their inputs
// (config keys, dataset, code, model, world size) marked "changed", their
// outcomes (throughput, MFU, step time, loss, LR) marked as regressions or
// improvements beyond a tolerance, the LR and config changes inside each run,
// and the likely conclusion in the spec's words. Pure functions over store
// rows; GET /v1/runs/compare renders the result (server/compare.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace runlens::report {

// The rows of one run that a comparison reads.
struct ComparedRun {
  store::RunRow run;
  store::RunAggregates aggregates;
  std::vector<store::TimelineEntry> timeline;
  std::vector<store::StoredAlert> alerts;
};

// Reads them from the store. Throws store::StoreError.
ComparedRun read_compared_run(store::Store& s, const store::RunRow& run);

struct ConfigDiff {
  std::string key;
  std::optional<Value> left, right;  // nullopt: the run has no such key
  bool changed = false;
};

struct TextDiff {
  std::string name;  // dataset, codeCommit, model
  std::string left, right;
  bool changed = false;
};

struct MetricDiff {
  std::string name;  // tokensPerSecond, mfu, stepTimeMs, loss, valLoss, learningRate
  std::optional<double> left, right;
  std::optional<double> delta, relative_delta;  // when both are finite; relative_delta rounded to 4 places
  bool changed = false;
  std::string verdict;  // same | changed | improvement | regression | unknown
};

struct RunComparison {
  std::vector<ConfigDiff> config;  // left's keys in order, then right-only keys
  std::vector<TextDiff> inputs;    // dataset, codeCommit, model
  bool world_size_changed = false;
  std::vector<MetricDiff> metrics;
  std::vector<store::TimelineEntry> lr_changes_left, lr_changes_right;
  std::vector<std::string> changed_keys;  // "config.lr", "dataset", "metrics.mfu", ...
  std::vector<std::string> conclusion;
};

// `tolerance`: the relative difference of an outcome that counts as a change (0.02 by default).
RunComparison compare_runs(const ComparedRun& left, const ComparedRun& right, double tolerance);

}  // namespace runlens::report
