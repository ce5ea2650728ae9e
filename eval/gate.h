// Quality gates: is a candidate model version non-inferior to a baseline on
// the metrics a policy gates (eval/gate_policy.h)? The statistics of
// docs/evaluation.md, "Quality gates", on per-item statistics as the
// aggregator receives them (eval/aggregator.h), so that the service can
// decide from stored items. Pure computation: no I/O, deterministic for a
// policy's bootstrap seed.
//
//  - Paired: both evaluations scored the same items (same dataset hash, same
//    item ids); otherwise the comparison is refused, as a value with its reason.
//  - Per metric, the improvement-oriented difference d (candidate - baseline
//    when higher is better, baseline - candidate when lower is better) and a
//    standard error by one of four methods: paired mean of per-item
//    differences; cluster-robust when the policy names a cluster key; a
//    paired bootstrap (items, or clusters, resampled jointly) for metrics
//    that are not means of items (corpus BLEU, precision/recall/F1,
//    token-weighted ratios); pass@k per problem (the unbiased estimator's
//    per-problem differences).
//  - One-sided bounds at level alpha. A metric is non-inferior when the
//    lower bound of d is >= -margin; PASS needs all (intersection-union
//    test: no correction). A metric is shown inferior when the upper bound
//    of d at its Holm-adjusted level is < -margin; FAIL when any is, or when
//    a hard gate is broken (a safety rate's upper bound above its cap, or an
//    evaluation not COMPLETED or with missing shards). Otherwise INCONCLUSIVE,
//    with the items a larger sample would need.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/gate_policy.h"
#include "eval/registry.h"
#include "eval/suite.h"

namespace runlens::eval {

// One evaluation's side of a comparison.
struct GateSide {
  std::string evaluation_id;
  std::string dataset_hash;
  EvalStatus status = EvalStatus::kCompleted;
  std::vector<int> missing_shards;
  // Per item, in `items` order, the statistics of each metric in
  // GateInput::metrics order (stats_per_item() of each), as in a ShardResult:
  // stats.size() == items.size() * stride. Items may come in any order.
  std::vector<int64_t> items;
  std::vector<double> stats;
};

struct GateInput {
  std::vector<MetricSpec> metrics;  // the suite's metrics, both sides alike
  std::string suite;                // the suite both evaluations ran; checked against the policy's when both are set
  GateSide candidate, baseline;
  // Cluster ids per item, under the cluster key a policy metric names
  // (GatedMetric::cluster): clusters["passage_id"][item] = "p17".
  std::map<std::string, std::map<int64_t, std::string>> clusters;
};

enum class Verdict : uint8_t { kPass, kFail, kInconclusive };
std::string_view verdict_name(Verdict v);  // "PASS", "FAIL", "INCONCLUSIVE"

enum class GateMethod : uint8_t { kPairedMean, kClustered, kBootstrap, kPassAtKPerProblem, kCapOnly };
std::string_view gate_method_name(
    GateMethod m);  // "paired-mean", "clustered", "bootstrap", "pass@k-per-problem", "cap"

struct MetricDecision {
  std::string metric;
  Dimension dimension = Dimension::kQuality;
  Direction direction = Direction::kHigherIsBetter;
  bool hard = false;
  GateMethod method = GateMethod::kPairedMean;
  int64_t n = 0;         // paired items (problems for pass@k, attempts for a jailbreak rate)
  int64_t clusters = 0;  // clustered and cluster bootstrap: the number of clusters
  double candidate = 0, baseline = 0;
  // Improvement-oriented: > 0 means the candidate is better, whatever the direction.
  double difference = 0;
  double std_error = 0;  // of `difference`; NaN when it cannot be estimated (n < 2)
  std::optional<double> margin;
  double alpha = 0;       // the level of the lower bound (the policy's alpha)
  double lower = 0;       // one-sided lower bound of `difference` at `alpha`
  double alpha_holm = 0;  // the Holm-adjusted level of the upper bound
  double upper = 0;       // one-sided upper bound of `difference` at `alpha_holm`
  double p_inferior = 1;  // p-value of "difference >= -margin" (small: shown inferior)
  int64_t bootstrap_replicates = 0;
  uint64_t bootstrap_seed = 0;
  // Safety cap: the candidate's rate over `cap_n` items with `cap_events` events, its upper bound at alpha.
  std::optional<double> cap;
  double cap_upper = 0;
  int64_t cap_n = 0, cap_events = 0;
  std::string cap_bound;  // "clopper-pearson" or "wilson"
  Verdict verdict = Verdict::kInconclusive;
  std::string reason;
  // INCONCLUSIVE: the items (at the observed difference and spread) for which
  // the bound would decide; 0 when no sample size would (difference = -margin).
  int64_t items_needed = 0;
};

struct GateDecision {
  // Non-empty when the evaluations cannot be compared (different datasets or
  // items, a gated metric missing, malformed statistics): no verdict is
  // reached and `verdict` stays INCONCLUSIVE; it never passes.
  std::string refused;
  Verdict verdict = Verdict::kInconclusive;
  bool hard_failure = false;         // FAIL because a hard gate broke (cannot be waived)
  std::vector<std::string> reasons;  // in words, one per failing or undecided metric or check
  std::string policy, policy_version;
  std::string candidate_evaluation, baseline_evaluation;
  double alpha = 0;
  int64_t items = 0;                    // paired items
  std::vector<MetricDecision> metrics;  // in policy order

  // Canonical JSON of the whole decision (what is stored with its inputs).
  std::string to_json() const;
};

GateDecision evaluate_gate(const GatePolicy& policy, const GateInput& input);

// --- the statistics, exposed for tests and for the documentation ----------

double normal_cdf(double x);
double normal_quantile(double p);                // p in (0, 1)
double student_t_quantile(double p, double df);  // p in (0, 1), df > 0
// Regularized incomplete beta I_x(a, b).
double incomplete_beta(double a, double b, double x);
// One-sided upper confidence bounds at level alpha for a binomial rate with `events` of `n`.
double clopper_pearson_upper(int64_t events, int64_t n, double alpha);
double wilson_upper(int64_t events, int64_t n, double alpha);

// Mean of d and its standard error sd(d) / sqrt(n) (sd with n - 1).
struct MeanSe {
  double mean = 0, se = 0;
  int64_t n = 0, groups = 0;
};
MeanSe paired_mean_se(const std::vector<double>& d);
// Cluster-robust standard error of the mean of d: with S_g the sum over
// cluster g of (d_i - mean), se = sqrt(G / (G - 1) * sum_g S_g^2) / n.
MeanSe clustered_mean_se(const std::vector<double>& d, const std::vector<int64_t>& cluster);

// Holm's step-down procedure over p-values: for each, whether it is
// rejected and the level it is compared with (alpha / (K - rank + 1)).
struct HolmStep {
  bool rejected = false;
  double alpha = 0;
};
std::vector<HolmStep> holm(const std::vector<double>& p, double alpha);

}  // namespace runlens::eval
