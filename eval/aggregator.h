// The aggregator: combines one evaluation's shard results into its metrics.
//
// Guarantees (docs/evaluation-service.md):
//  - A shard's result is accepted once. The first valid result wins,
//    whatever its attempt; any later one (a repeat, or a late result of an
//    old attempt) is a duplicate: counted, and nothing changes. Results are
//    idempotent by (evaluation, shard, attempt).
//  - A result is validated as a whole before anything is applied: the
//    evaluation and shard exist; every item id lies in the shard's range and
//    appears exactly once, so the shard is covered exactly; each statistic
//    is finite and in range for its metric. A malformed result is rejected
//    with a reason and never partially applied.
//  - complete() is true only when every item of every shard is covered
//    exactly once; metrics() over an incomplete evaluation are over the
//    items covered so far (their n says how many).
//  - Per metric: value, n and standard error: means of items with the
//    sample sd / sqrt(n); token-weighted metrics (perplexity, cross-entropy,
//    log-probability, bits per byte) from summed log-likelihoods and counts
//    with the delta-method standard error; corpus BLEU from summed
//    sufficient statistics (equal to sacreBLEU's corpus_bleu over all
//    items); pass@k per problem with the unbiased estimator, then the mean
//    over problems; precision/recall/F1 from pooled confusion counts (macro
//    or micro). Results do not depend on the order shards arrive in beyond
//    floating-point rounding of the sums.
//
// Not thread-safe: one aggregator per evaluation, driven by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/registry.h"
#include "eval/shard_plan.h"
#include "eval/suite.h"

namespace runlens::eval {

// What a worker returns for one shard. For each item, in `items` order, the
// statistics of each metric in the suite's order (stats_per_item() of each):
// stats.size() == items.size() * Aggregator::stride().
struct ShardResult {
  std::string evaluation_id;
  int partition = 0;
  int attempt = 1;
  std::string worker;
  std::vector<int64_t> items;
  std::vector<double> stats;
};

enum class Acceptance : uint8_t { kAccepted, kDuplicate, kRejected };

struct AcceptOutcome {
  Acceptance outcome = Acceptance::kRejected;
  std::string reason;  // for kDuplicate and kRejected
};

struct AggregatorCounters {
  int64_t accepted = 0;
  int64_t duplicates = 0;
  int64_t rejected = 0;
  int64_t items = 0;  // items covered
};

class Aggregator {
 public:
  // `judge` gives the judge metric's scale; required when a metric uses the judge.
  Aggregator(std::string evaluation_id, std::vector<MetricSpec> metrics, std::vector<Shard> shards,
             const JudgeSpec* judge = nullptr);
  ~Aggregator();
  Aggregator(Aggregator&&) noexcept;
  Aggregator& operator=(Aggregator&&) noexcept;

  int stride() const { return stride_; }  // statistics per item, over all metrics
  AcceptOutcome accept(const ShardResult& r);
  // What accept() would answer, changing nothing; when the result is valid,
  // `shard_metrics` (if given) gets the metrics of this shard's items alone.
  // The service checks a result this way before it writes it, and accepts it
  // once written.
  AcceptOutcome check(const ShardResult& r, std::vector<MetricResult>* shard_metrics = nullptr) const;

  bool complete() const;
  bool shard_accepted(int partition) const;
  std::vector<int> missing_shards() const;  // not accepted, ascending
  std::vector<MetricResult> metrics() const;
  const AggregatorCounters& counters() const { return counters_; }

 private:
  struct Accum;
  AcceptOutcome validate(const ShardResult& r, std::vector<Accum>* local) const;
  std::vector<MetricResult> metrics_of(const std::vector<Accum>& acc) const;
  std::string evaluation_id_;
  std::vector<MetricSpec> metrics_;
  std::vector<Shard> shards_;
  std::vector<int> offset_;  // each metric's first statistic within an item
  int stride_ = 0;
  double judge_lo_ = 1, judge_hi_ = 5;
  std::vector<int> accepted_attempt_;  // 0 = not accepted
  std::vector<Accum> acc_;
  AggregatorCounters counters_;
};

}  // namespace runlens::eval
