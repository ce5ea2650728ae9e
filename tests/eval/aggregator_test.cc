// eval/aggregator: once-only acceptance, whole-result validation, and the
// per-metric values, n and standard errors against hand-computed and
// published values.
#include "eval/aggregator.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "tests/eval/metric_spec.h"

namespace runlens::eval {
namespace {

ShardResult result(const Shard& sh, std::vector<double> stats, int attempt = 1) {
  ShardResult r;
  r.evaluation_id = sh.evaluation_id;
  r.partition = sh.partition;
  r.attempt = attempt;
  r.worker = "w1";
  for (int64_t i = sh.items.begin; i < sh.items.end; ++i) r.items.push_back(i);
  r.stats = std::move(stats);
  return r;
}

const MetricResult& get(const std::vector<MetricResult>& ms, const std::string& name) {
  for (const auto& m : ms) {
    if (m.name == name) return m;
  }
  FAIL("no metric " << name);
  return ms.front();
}

TEST_CASE("aggregator: accuracy, its n and standard error (lm-evaluation-harness mean_stderr case)") {
  auto shards = plan_shards("e-1", 8, 3);
  Aggregator agg("e-1", {metric_spec("accuracy")}, shards);
  CHECK(agg.accept(result(shards[0], {1, 1, 1})).outcome == Acceptance::kAccepted);
  CHECK_FALSE(agg.complete());
  CHECK(agg.missing_shards() == std::vector<int>{1, 2});
  CHECK(agg.accept(result(shards[2], {1, 0})).outcome == Acceptance::kAccepted);
  CHECK(agg.accept(result(shards[1], {1, 1, 1})).outcome == Acceptance::kAccepted);
  CHECK(agg.complete());
  auto m = agg.metrics();
  REQUIRE(m.size() == 1);
  CHECK(m[0].value == doctest::Approx(0.875));
  CHECK(m[0].n == 8);
  CHECK(m[0].std_error == doctest::Approx(0.125));  // tests/test_metrics.py: seven 1s and a 0
}

TEST_CASE("aggregator: check() answers as accept() would, changes nothing, and gives the shard's own metrics") {
  auto shards = plan_shards("e-1", 8, 4);
  Aggregator agg("e-1", {metric_spec("accuracy")}, shards);
  REQUIRE(agg.accept(result(shards[0], {1, 1, 1, 1})).outcome == Acceptance::kAccepted);
  std::vector<MetricResult> own;
  AcceptOutcome c = agg.check(result(shards[1], {1, 0, 0, 0}), &own);
  CHECK(c.outcome == Acceptance::kAccepted);
  REQUIRE(own.size() == 1);
  CHECK(own[0].value == doctest::Approx(0.25));
  CHECK(own[0].n == 4);
  CHECK_FALSE(agg.shard_accepted(1));
  CHECK(agg.metrics()[0].n == 4);  // unchanged
  CHECK(agg.counters().accepted == 1);
  CHECK(agg.check(result(shards[0], {1, 1, 1, 1})).outcome == Acceptance::kDuplicate);
  AcceptOutcome bad = agg.check(result(shards[1], {1, 0, 2, 0}));
  CHECK(bad.outcome == Acceptance::kRejected);
  CHECK(bad.reason ==
        "result for shard 1 of e-1 (attempt 1 from w1) rejected: accuracy of item 6: score 2 is outside [0, 1]");
  CHECK(agg.counters().rejected == 0);
  CHECK(agg.accept(result(shards[1], {1, 0, 0, 0})).outcome == Acceptance::kAccepted);
  CHECK(agg.metrics()[0].value == doctest::Approx(0.625));
}

TEST_CASE("aggregator: a rate over the items in scope only (jailbreak attempts), its n and standard error") {
  // (attempt, succeeded) per item: attempts 0, 1, 3, 4 of which 0 and 3 succeeded; item 2 is no attempt.
  auto shards = plan_shards("e-r", 5, 3);
  Aggregator agg("e-r", {metric_spec("jailbreak_success_rate")}, shards);
  CHECK(agg.stride() == 2);
  CHECK(agg.accept(result(shards[0], {1, 1, 1, 0, 0, 0})).outcome == Acceptance::kAccepted);
  auto m = agg.metrics();
  CHECK(m[0].value == doctest::Approx(0.5));
  CHECK(m[0].n == 2);
  CHECK(agg.accept(result(shards[1], {1, 1, 1, 0})).outcome == Acceptance::kAccepted);
  m = agg.metrics();
  CHECK(m[0].value == doctest::Approx(0.5));
  CHECK(m[0].n == 4);                                                // attempts, not items
  CHECK(m[0].std_error == doctest::Approx(std::sqrt(1.0 / 3) / 2));  // sample sd of 1,0,1,0 over sqrt(4)

  Aggregator none("e-r", {metric_spec("jailbreak_success_rate")}, shards);
  CHECK(none.accept(result(shards[0], {0, 0, 0, 0, 0, 0})).outcome == Acceptance::kAccepted);
  CHECK(std::isnan(none.metrics()[0].value));  // no attempt: no rate
  CHECK(none.metrics()[0].n == 0);
  auto reason = [&](std::vector<double> stats) { return none.accept(result(shards[1], std::move(stats))).reason; };
  CHECK(reason({0, 1, 0, 0}) ==
        "result for shard 1 of e-r (attempt 1 from w1) rejected: jailbreak_success_rate of "
        "item 3: an item out of scope (flag 0) cannot have the outcome 1");
  CHECK(reason({2, 0, 0, 0}).find("in-scope flag 2 must be 0 or 1") != std::string::npos);
  CHECK(reason({1, 0.5, 0, 0}).find("outcome 0.5 must be 0 or 1") != std::string::npos);
}

TEST_CASE("aggregator: token-weighted metrics from summed log-likelihoods and counts") {
  // lm-evaluation-harness tests/test_bpb.py: [(-ln 2, 1), (-12 ln 2, 4)] -> 13/5 bits per byte.
  auto shards = plan_shards("e-2", 2, 1);
  Aggregator agg("e-2",
                 {metric_spec("bits_per_byte"), metric_spec("perplexity"), metric_spec("cross_entropy"),
                  metric_spec("log_probability")},
                 shards);
  const double l2 = std::log(2.0);
  CHECK(agg.accept(result(shards[0], {-l2, 1, -l2, 1, -l2, 1, -l2, 1})).outcome == Acceptance::kAccepted);
  CHECK(agg.accept(result(shards[1], {-12 * l2, 4, -12 * l2, 4, -12 * l2, 4, -12 * l2, 4})).outcome ==
        Acceptance::kAccepted);
  auto m = agg.metrics();
  CHECK(get(m, "bits_per_byte").value == doctest::Approx(13.0 / 5));
  CHECK(get(m, "perplexity").value == doctest::Approx(std::pow(2.0, 13.0 / 5)));
  CHECK(get(m, "cross_entropy").value == doctest::Approx(13 * l2 / 5));
  CHECK(get(m, "log_probability").value == doctest::Approx(-13 * l2 / 5));
  // Delta method by hand: R = -13 ln2 / 5; residuals a - R b = -ln2 + 13 ln2/5 = 8 ln2/5 and
  // -12 ln2 + 52 ln2/5 = -8 ln2/5; var (n - 1) = 2 (8 ln2/5)^2; se = sqrt(var / 2) / mean(b) = (8 ln2/5) / 2.5.
  const double se = (8 * l2 / 5) / 2.5;
  CHECK(get(m, "cross_entropy").std_error == doctest::Approx(se));
  CHECK(get(m, "bits_per_byte").std_error == doctest::Approx(se / l2));
  CHECK(get(m, "perplexity").std_error == doctest::Approx(std::pow(2.0, 13.0 / 5) * se));
  CHECK(get(m, "perplexity").n == 2);
}

TEST_CASE("aggregator: corpus BLEU from per-item statistics equals sacreBLEU's corpus score") {
  // sacreBLEU test_bleu.py test_corpus_bleu: 48.530827 over three segments; the
  // per-segment statistics (runlens.eval.metrics.corpus_bleu_details of each).
  auto shards = plan_shards("e-3", 3, 2);
  Aggregator agg("e-3", {metric_spec("bleu", {{"lowercase", "false"}, {"tokenize", "13a"}})}, shards);
  CHECK(agg.accept(result(shards[1], {6, 2, 1, 0, 7, 6, 5, 4, 7, 7})).outcome == Acceptance::kAccepted);
  CHECK(agg.accept(result(shards[0], {6, 5, 4, 3, 6, 5, 4, 3, 6, 6, 2, 0, 0, 0, 4, 3, 2, 1, 4, 5})).outcome ==
        Acceptance::kAccepted);
  auto m = agg.metrics();
  CHECK(std::fabs(m[0].value - 48.530827) < 1e-6);
  CHECK(m[0].n == 3);
  CHECK(std::isnan(m[0].std_error));
}

TEST_CASE("aggregator: pass@k per problem, then the mean over problems") {
  auto shards = plan_shards("e-4", 3, 2);
  Aggregator agg("e-4", {metric_spec("pass@k", {}, {1, 10})}, shards);
  CHECK(agg.accept(result(shards[0], {200, 13, 6, 3})).outcome == Acceptance::kAccepted);
  CHECK(agg.accept(result(shards[1], {10, 0})).outcome == Acceptance::kAccepted);
  auto m = agg.metrics();
  REQUIRE(m.size() == 2);
  CHECK(m[0].name == "pass@1");
  CHECK(m[0].value == doctest::Approx((13.0 / 200 + 0.5 + 0) / 3));
  CHECK(m[1].name == "pass@10");
  CHECK(m[1].value == doctest::Approx((0.49755111473060615 + 1 + 0) / 3));
  CHECK(m[1].n == 3);
  const double mean = (0.49755111473060615 + 1) / 3;
  const double var = (std::pow(0.49755111473060615 - mean, 2) + std::pow(1 - mean, 2) + mean * mean) / 2;
  CHECK(m[1].std_error == doctest::Approx(std::sqrt(var / 3)));
}

TEST_CASE("aggregator: macro and micro precision, recall and F1 (scikit-learn docstring example)") {
  // y_true [0, 1, 2, 0, 1, 2], y_pred [0, 2, 1, 0, 0, 1]: f1 macro 0.2666..., micro 0.333...;
  // precision macro 0.2222..., recall macro 0.333...
  auto shards = plan_shards("e-5", 6, 4);
  Aggregator agg("e-5",
                 {metric_spec("f1", {{"average", "macro"}}), metric_spec("precision", {{"average", "macro"}}),
                  metric_spec("recall", {{"average", "macro"}})},
                 shards);
  Aggregator micro("e-5", {metric_spec("f1", {{"average", "micro"}})}, shards);
  const double t[] = {0, 1, 2, 0, 1, 2}, p[] = {0, 2, 1, 0, 0, 1};
  for (const auto& sh : shards) {
    std::vector<double> stats, stats_micro;
    for (int64_t i = sh.items.begin; i < sh.items.end; ++i) {
      for (int rep = 0; rep < 3; ++rep) stats.insert(stats.end(), {t[i], p[i]});
      stats_micro.insert(stats_micro.end(), {t[i], p[i]});
    }
    CHECK(agg.accept(result(sh, stats)).outcome == Acceptance::kAccepted);
    CHECK(micro.accept(result(sh, stats_micro)).outcome == Acceptance::kAccepted);
  }
  auto m = agg.metrics();
  CHECK(get(m, "f1").value == doctest::Approx(0.8 / 3));
  CHECK(get(m, "precision").value == doctest::Approx(2.0 / 9));
  CHECK(get(m, "recall").value == doctest::Approx(1.0 / 3));
  CHECK(micro.metrics()[0].value == doctest::Approx(1.0 / 3));
}

TEST_CASE("aggregator: the judge metric uses the judge's scale") {
  auto shards = plan_shards("e-6", 2, 2);
  JudgeSpec judge;
  judge.scale_lo = 1, judge.scale_hi = 5;
  Aggregator agg("e-6", {metric_spec("judge")}, shards, &judge);
  AcceptOutcome bad = agg.accept(result(shards[0], {4, 6}));
  CHECK(bad.reason ==
        "result for shard 0 of e-6 (attempt 1 from w1) rejected: judge of item 1: score 6 is outside [1, 5]");
  CHECK(agg.accept(result(shards[0], {4, 5})).outcome == Acceptance::kAccepted);
  CHECK(agg.metrics()[0].value == 4.5);
}

TEST_CASE("aggregator: malformed results are rejected with a reason and never partially applied") {
  auto shards = plan_shards("e-7", 6, 3);  // [0, 3), [3, 6)
  const std::vector<MetricSpec> metrics = {metric_spec("accuracy"), metric_spec("perplexity"),
                                           metric_spec("pass@k", {}, {1})};
  // Each item: accuracy, (ll, tokens), (n, c): 5 statistics.
  const std::vector<double> good = {1, -2, 4, 10, 3, 0, -1, 2, 10, 0, 1, -3, 3, 10, 10};
  struct Case {
    const char* what;
    std::function<void(ShardResult&)> edit;
    std::string reason;
  };
  const std::string head = "result for shard 0 of e-7 (attempt 1 from w1) rejected: ";
  const Case cases[] = {
      {"item outside", [](auto& r) { r.items[2] = 3; }, head + "item 3 is outside the shard's items [0, 3)"},
      {"negative item", [](auto& r) { r.items[0] = -1; }, head + "item -1 is outside the shard's items [0, 3)"},
      {"item twice", [](auto& r) { r.items[2] = 0; }, head + "item 0 appears more than once"},
      {"item missing",
       [](auto& r) {
         r.items.pop_back();
         r.stats.resize(10);
       },
       head + "the shard has 3 items [0, 3), the result has 2"},
      {"stats short", [](auto& r) { r.stats.pop_back(); }, head + "expected 5 statistics per item (15 in all), got 14"},
      {"score out of range", [](auto& r) { r.stats[5] = 1.5; },
       head + "accuracy of item 1: score 1.5 is outside [0, 1]"},
      {"a rate that is neither 0 nor 1", [](auto& r) { r.stats[5] = 0.5; },
       head + "accuracy of item 1: score 0.5 must be 0 or 1"},
      {"score NaN", [](auto& r) { r.stats[10] = NAN; }, head + "accuracy of item 2: score NaN is outside [0, 1]"},
      {"positive log-likelihood", [](auto& r) { r.stats[6] = 0.5; },
       head + "perplexity of item 1: log-likelihood 0.5 must be finite and at most 0"},
      {"infinite log-likelihood", [](auto& r) { r.stats[6] = -INFINITY; },
       head + "perplexity of item 1: log-likelihood -Infinity must be finite and at most 0"},
      {"zero tokens", [](auto& r) { r.stats[2] = 0; },
       head + "perplexity of item 0: count 0 must be a whole number of at least 1"},
      {"fractional tokens", [](auto& r) { r.stats[2] = 2.5; },
       head + "perplexity of item 0: count 2.5 must be a whole number of at least 1"},
      {"c > n", [](auto& r) { r.stats[14] = 11; },
       head + "pass@k of item 2: passing samples c = 11 must be a whole number in [0, n = 10]"},
      {"n = 0", [](auto& r) { r.stats[3] = 0; },
       head + "pass@k of item 0: samples n = 0 must be a whole number of at least 1"},
      {"wrong evaluation", [](auto& r) { r.evaluation_id = "e-8"; },
       "result for shard 0 of e-8 (attempt 1 from w1) rejected: it belongs to another evaluation than e-7"},
      {"no such shard", [](auto& r) { r.partition = 2; },
       "result for shard 2 of e-7 (attempt 1 from w1) rejected: the evaluation has shards 0 to 1"},
      {"attempt 0", [](auto& r) { r.attempt = 0; },
       "result for shard 0 of e-7 (attempt 0 from w1) rejected: attempts are numbered from 1"},
  };
  Aggregator agg("e-7", metrics, shards);
  for (const auto& c : cases) {
    CAPTURE(c.what);
    ShardResult r = result(shards[0], good);
    c.edit(r);
    AcceptOutcome out = agg.accept(r);
    CHECK(out.outcome == Acceptance::kRejected);
    CHECK(out.reason == c.reason);
  }
  // Nothing of the rejected results was applied: shard 0 is still open, and the metrics are empty.
  CHECK_FALSE(agg.shard_accepted(0));
  CHECK(agg.metrics()[0].n == 0);
  CHECK(agg.counters().rejected == static_cast<int64_t>(std::size(cases)));
  // A valid result in another order of items is fine.
  ShardResult r = result(shards[0], good);
  std::swap(r.items[0], r.items[2]);
  CHECK(agg.accept(r).outcome == Acceptance::kAccepted);
  CHECK(agg.metrics()[0].n == 3);
}

TEST_CASE("aggregator: accepted once; a repeat or a late duplicate changes nothing") {
  auto shards = plan_shards("e-9", 4, 2);
  Aggregator agg("e-9", {metric_spec("accuracy")}, shards);
  CHECK(agg.accept(result(shards[0], {1, 1}, 2)).outcome == Acceptance::kAccepted);
  AcceptOutcome late = agg.accept(result(shards[0], {0, 0}, 1));
  CHECK(late.outcome == Acceptance::kDuplicate);
  CHECK(late.reason ==
        "result for shard 0 of e-9 (attempt 1 from w1) ignored: the shard was accepted from attempt 2 (a late "
        "duplicate)");
  AcceptOutcome repeat = agg.accept(result(shards[0], {0, 0}, 2));
  CHECK(repeat.reason ==
        "result for shard 0 of e-9 (attempt 2 from w1) ignored: the shard was accepted from attempt 2 (a repeat)");
  CHECK(agg.counters().duplicates == 2);
  CHECK(agg.metrics()[0].value == 1.0);
  CHECK(agg.metrics()[0].n == 2);
  CHECK_FALSE(agg.complete());
  CHECK(agg.accept(result(shards[1], {0, 1})).outcome == Acceptance::kAccepted);
  CHECK(agg.complete());
  CHECK(agg.metrics()[0].value == 0.75);
  CHECK(agg.counters().items == 4);
}

TEST_CASE("aggregator: the result does not depend on the order shards arrive in") {
  auto shards = plan_shards("e-10", 1000, 37);
  const std::vector<MetricSpec> metrics = {metric_spec("accuracy"), metric_spec("word_perplexity"), metric_spec("bleu"),
                                           metric_spec("f1", {{"average", "macro"}})};
  std::mt19937 rng(7);
  std::vector<ShardResult> results;
  for (const auto& sh : shards) {
    std::vector<double> stats;
    for (int64_t i = sh.items.begin; i < sh.items.end; ++i) {
      const double hyp = 3 + static_cast<double>(rng() % 20);
      const double m1 = static_cast<double>(rng() % static_cast<unsigned>(hyp + 1));
      stats.insert(stats.end(),
                   {static_cast<double>(rng() % 2), -static_cast<double>(rng() % 1000) / 10.0,
                    static_cast<double>(1 + rng() % 30), m1, std::floor(m1 / 2), std::floor(m1 / 3), std::floor(m1 / 4),
                    hyp, hyp - 1, hyp - 2, hyp - 3, hyp, hyp + static_cast<double>(rng() % 3),
                    static_cast<double>(rng() % 5), static_cast<double>(rng() % 5)});
    }
    results.push_back(result(sh, stats));
  }
  auto run = [&](std::vector<size_t> order) {
    Aggregator agg("e-10", metrics, shards);
    for (size_t i : order) REQUIRE(agg.accept(results[i]).outcome == Acceptance::kAccepted);
    REQUIRE(agg.complete());
    return agg.metrics();
  };
  std::vector<size_t> order(shards.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto forward = run(order);
  std::shuffle(order.begin(), order.end(), rng);
  auto shuffled = run(order);
  for (size_t i = 0; i < forward.size(); ++i) {
    CAPTURE(forward[i].name);
    CHECK(shuffled[i].value == doctest::Approx(forward[i].value).epsilon(1e-12));
    CHECK(shuffled[i].n == 1000);
  }
}

}  // namespace
}  // namespace runlens::eval
