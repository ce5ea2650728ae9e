// eval/metric: the estimators the aggregator uses, against the published
// cases of the reference implementations (their test files, read, not run)
// and exact rational values.
#include "eval/metric.h"

#include <doctest/doctest.h>

#include <cmath>

namespace runlens::eval {
namespace {

TEST_CASE("pass@k: openai/human-eval test_evaluation.py cases") {
  CHECK(pass_at_k(5, 0, 10) == 0.0);   // zero correct, k > n
  CHECK(pass_at_k(10, 0, 5) == 0.0);   // zero correct, k <= n
  CHECK(pass_at_k(10, 10, 5) == 1.0);  // all correct
  CHECK(pass_at_k(10, 8, 5) == 1.0);   // fewer incorrect than k
  CHECK(pass_at_k(6, 3, 1) == doctest::Approx(0.5).epsilon(1e-15));
}

TEST_CASE("pass@k: against the exact rational 1 - C(n-c,k)/C(n,k), also for n = 10^6") {
  struct Case {
    int64_t n, c, k;
    double exact;  // Python: float(1 - Fraction(comb(n-c, k), comb(n, k)))
  };
  const Case cases[] = {
      {200, 13, 10, 0.49755111473060615},       {1000000, 1000, 100, 0.09521233637707195},
      {1000000, 10, 1000, 0.0099551643871496},  {1000000, 3, 100000, 0.271000243000387},
      {1000000, 100, 10, 0.000999554615959088},
  };
  for (const auto& c : cases) {
    CAPTURE(c.n);
    CAPTURE(c.c);
    CAPTURE(c.k);
    CHECK(std::fabs(pass_at_k(c.n, c.c, c.k) - c.exact) <= 1e-12 * c.exact);
  }
  // Small n: equal to the comb formula for every c and k.
  for (int64_t n = 1; n <= 20; ++n) {
    for (int64_t c = 0; c <= n; ++c) {
      for (int64_t k = 1; k <= n; ++k) {
        double fail = 1;  // C(n-c, k) / C(n, k) as a product of ratios
        if (n - c < k)
          fail = 0;
        else
          for (int64_t i = 0; i < k; ++i) fail *= static_cast<double>(n - c - i) / static_cast<double>(n - i);
        CHECK(pass_at_k(n, c, k) == doctest::Approx(1 - fail).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("corpus BLEU from sufficient statistics: sacreBLEU test_bleu.py cases") {
  // test_scoring: compute_bleu([9, 7, 5, 3], [10, 8, 6, 4], 11, 11) = 0.8375922397 (x 100).
  BleuStats s{{9, 7, 5, 3}, {10, 8, 6, 4}, 11, 11};
  CHECK(std::fabs(corpus_bleu(s) / 100 - 0.8375922397) < 1e-8);
  // test_degenerate_statistics: no matches at all is 0.
  CHECK(corpus_bleu(BleuStats{{0, 0, 0, 0}, {4, 4, 2, 1}, 0, 1}) == 0.0);
  CHECK(corpus_bleu(BleuStats{{0, 0, 0, 0}, {10, 11, 12, 0}, 14, 10}) == 0.0);
  CHECK(corpus_bleu(BleuStats{{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0}) == 0.0);
  // The corpus of test_bleu.py's test_corpus_bleu (48.530827 with the defaults):
  // statistics [14, 7, 5, 3] / [17, 14, 11, 8], hypothesis 17, reference 18.
  CHECK(std::fabs(corpus_bleu(BleuStats{{14, 7, 5, 3}, {17, 14, 11, 8}, 17, 18}) - 48.530827) < 1e-6);
  // exp smoothing: a zero 4-gram count gets 100 / (2 * total).
  const double p[4] = {100.0 * 2 / 4, 100.0 / 3, 100.0 / 2, 100.0 / (2 * 1)};
  (void)p;
  BleuStats z{{2, 1, 1, 0}, {4, 3, 2, 1}, 4, 4};
  CHECK(corpus_bleu(z) ==
        doctest::Approx(std::exp((std::log(50.0) + std::log(100.0 / 3) + std::log(50.0) + std::log(50.0)) / 4)));
  // Brevity penalty: exp(1 - r/c).
  BleuStats b{{4, 3, 2, 1}, {4, 3, 2, 1}, 4, 8};
  CHECK(corpus_bleu(b) == doctest::Approx(100 * std::exp(1 - 2.0)));
}

TEST_CASE("metric vocabulary") {
  CHECK(find_metric("accuracy")->aggregation == Aggregation::kMean);
  CHECK(find_metric("perplexity")->aggregation == Aggregation::kTokenWeighted);
  CHECK(find_metric("bleu")->aggregation == Aggregation::kCorpusBleu);
  CHECK(find_metric("pass@k")->aggregation == Aggregation::kPassAtK);
  CHECK(find_metric("f1")->aggregation == Aggregation::kClassification);
  CHECK(find_metric("judge")->uses_judge);
  CHECK(find_metric("nope") == nullptr);
  CHECK(stats_per_item(Aggregation::kCorpusBleu) == 10);
  CHECK(metric_outputs("pass@k", {1, 10}) == std::vector<std::string>{"pass@1", "pass@10"});
  for (const char* name :
       {"accuracy", "precision", "recall", "f1", "exact_match", "perplexity", "log_probability", "cross_entropy",
        "bleu", "rouge1", "rouge2", "rougeL", "pass@k", "judge", "harmful_response_rate", "jailbreak_success_rate",
        "policy_violation_rate", "refusal_correctness"}) {
    CHECK_MESSAGE(find_metric(name) != nullptr, name);
  }
}

}  // namespace
}  // namespace runlens::eval
