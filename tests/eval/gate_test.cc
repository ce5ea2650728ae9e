// eval/gate: the quality-gate statistics. Hand-computed values (paired mean
// and SE, clustered SE, Holm, Wilson and Clopper-Pearson bounds, t
// quantiles), invariance to item order, a deterministic bootstrap, refusals,
// the hard safety cap, and calibration by seeded simulation: with a true
// difference of exactly -margin PASS happens in at most alpha of the trials
// (plus Monte Carlo tolerance); with a true improvement in most of them.
// The measured rates are printed (MESSAGE) and quoted in docs/evaluation.md;
// reproduce with: build/tests/runlens_tests_eval -tc='gate: calibration*'
// (RUNLENS_GATE_TRIALS_SCALE=10 runs ten times the trials, for tighter rates).
#include "eval/gate.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tests/eval/metric_spec.h"

namespace runlens::eval {
namespace {

GatedMetric gated(const std::string& metric, std::optional<double> margin, Dimension dim = Dimension::kQuality) {
  GatedMetric g;
  g.metric = metric;
  g.dimension = dim;
  g.margin = margin;
  g.direction = default_direction(metric);
  g.hard = dim == Dimension::kSafety;
  return g;
}

GatePolicy policy_of(std::vector<GatedMetric> metrics, double alpha = 0.05) {
  GatePolicy p;
  p.name = "test-gate";
  p.version = "1";
  p.alpha = alpha;
  p.metrics = std::move(metrics);
  return p;
}

// A side with one statistic row per item, ids 0..n-1 (or `ids`).
GateSide side(const std::string& id, std::vector<std::vector<double>> rows, std::vector<int64_t> ids = {}) {
  GateSide s;
  s.evaluation_id = id;
  s.dataset_hash = std::string(64, 'a');
  for (size_t i = 0; i < rows.size(); ++i) {
    s.items.push_back(ids.empty() ? static_cast<int64_t>(i) : ids[i]);
    s.stats.insert(s.stats.end(), rows[i].begin(), rows[i].end());
  }
  return s;
}

std::vector<std::vector<double>> column(const std::vector<double>& v) {
  std::vector<std::vector<double>> out;
  for (double x : v) out.push_back({x});
  return out;
}

const MetricDecision& row(const GateDecision& d, const std::string& metric) {
  for (const auto& m : d.metrics) {
    if (m.metric == metric) return m;
  }
  FAIL("no row for " << metric);
  return d.metrics.front();
}

TEST_CASE("gate: quantiles and binomial bounds against known values") {
  CHECK(normal_quantile(0.95) == doctest::Approx(1.6448536269514722).epsilon(1e-12));
  CHECK(normal_quantile(0.975) == doctest::Approx(1.959963984540054).epsilon(1e-12));
  // scipy.stats.t.ppf agrees to 1e-8 (its own betainc agrees with incomplete_beta to 1e-16).
  CHECK(student_t_quantile(0.95, 4) == doctest::Approx(2.13184678133629).epsilon(1e-8));
  CHECK(student_t_quantile(0.975, 39) == doctest::Approx(2.022690911734728).epsilon(1e-8));
  CHECK(incomplete_beta(2, 0.5, 0.5) == doctest::Approx(0.11611652351681559).epsilon(1e-13));
  // Clopper-Pearson: 0 of n has the closed form 1 - alpha^(1/n); 5 of 100 is Beta(6, 95)'s 0.95 quantile.
  CHECK(clopper_pearson_upper(0, 100, 0.05) == doctest::Approx(1 - std::pow(0.05, 0.01)).epsilon(1e-10));
  CHECK(clopper_pearson_upper(5, 100, 0.05) == doctest::Approx(0.1022533776432745).epsilon(1e-9));
  CHECK(clopper_pearson_upper(0, 24, 0.05) == doctest::Approx(0.11734615615494881).epsilon(1e-9));
  CHECK(clopper_pearson_upper(7, 7, 0.05) == 1);
  // Wilson, one-sided: (p + z^2/2n + z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z = 1.6449.
  CHECK(wilson_upper(0, 100, 0.05) == doctest::Approx(0.026342720783174324).epsilon(1e-10));
  CHECK(wilson_upper(5, 100, 0.05) == doctest::Approx(0.09916108527905278).epsilon(1e-10));
  CHECK(wilson_upper(0, 0, 0.05) == 1);
}

TEST_CASE("gate: paired mean difference and SE, by hand") {
  // Candidate 1,1,0,1,1 and baseline 1,0,0,1,0 on five items: d = 0,1,0,0,1.
  // mean 0.4; squared deviations 0.16,0.36,0.16,0.16,0.36 sum to 1.2; var =
  // 1.2/4 = 0.3; SE = sqrt(0.3/5) = 0.244949. The 95% lower bound with
  // t(0.95, 4) = 2.131847 is 0.4 - 0.522194 = -0.122194 >= -0.2: PASS.
  GateInput in;
  in.metrics = {metric_spec("accuracy")};
  in.candidate = side("cand", column({1, 1, 0, 1, 1}));
  in.baseline = side("base", column({1, 0, 0, 1, 0}));
  const MeanSe ms = paired_mean_se({0, 1, 0, 0, 1});
  CHECK(ms.mean == doctest::Approx(0.4));
  CHECK(ms.se == doctest::Approx(std::sqrt(0.06)));
  GateDecision d = evaluate_gate(policy_of({gated("accuracy", 0.2)}), in);
  CHECK(d.refused.empty());
  CHECK(d.verdict == Verdict::kPass);
  const MetricDecision& r = row(d, "accuracy");
  CHECK(r.method == GateMethod::kPairedMean);
  CHECK(r.n == 5);
  CHECK(r.candidate == doctest::Approx(0.8));
  CHECK(r.baseline == doctest::Approx(0.4));
  CHECK(r.difference == doctest::Approx(0.4));
  CHECK(r.std_error == doctest::Approx(0.244949).epsilon(1e-5));
  CHECK(r.lower == doctest::Approx(-0.12219368240685746).epsilon(1e-7));
  CHECK(r.alpha == 0.05);
  CHECK(r.alpha_holm == 0.05);  // one comparison
  CHECK(r.verdict == Verdict::kPass);
  CHECK(r.reason.find("non-inferior: the 95% lower bound -0.1222 is at or above -0.2") != std::string::npos);
  // Lower is better (a loss-like direction flips the difference): the same data as a harm rate.
  in.metrics = {metric_spec("harmful_response_rate")};
  GateDecision h = evaluate_gate(policy_of({gated("harmful_response_rate", 0.2)}), in);
  CHECK(row(h, "harmful_response_rate").difference == doctest::Approx(-0.4));
}

TEST_CASE("gate: clustered SE against a direct computation") {
  // d = 1..6 in clusters a,a,b,b,b,c: mean 3.5; residual sums S_a = -4,
  // S_b = 1.5, S_c = 2.5; sum S^2 = 24.5; se = sqrt(3/2 * 24.5) / 6 = 1.010363.
  const std::vector<double> d = {1, 2, 3, 4, 5, 6};
  const MeanSe ms = clustered_mean_se(d, {0, 0, 1, 1, 1, 2});
  CHECK(ms.groups == 3);
  CHECK(ms.se == doctest::Approx(std::sqrt(1.5 * 24.5) / 6));
  // Directly: the sandwich variance of a regression on a constant, (X'X)^-1 sum_g (X_g'u_g)^2 (X'X)^-1 * G/(G-1).
  double direct = 0;
  for (int g = 0; g < 3; ++g) {
    double s = 0;
    const int members[3][3] = {{0, 1, -1}, {2, 3, 4}, {5, -1, -1}};
    for (int i : members[g]) s += i >= 0 ? d[static_cast<size_t>(i)] - 3.5 : 0;
    direct += s * s;
  }
  CHECK(ms.se == doctest::Approx(std::sqrt(direct * 3 / 2) / 6));
  // Every item its own cluster: the clustered SE is the paired SE.
  CHECK(clustered_mean_se(d, {0, 1, 2, 3, 4, 5}).se == doctest::Approx(paired_mean_se(d).se));

  // Through the gate: the policy's cluster key selects the method.
  GateInput in;
  in.metrics = {metric_spec("squad_f1")};
  in.candidate = side("cand", column({1, 2, 3, 4, 5, 6}));
  for (auto& x : in.candidate.stats) x /= 10;
  in.baseline = side("base", column({0, 0, 0, 0, 0, 0}));
  in.clusters["passage"] = {{0, "a"}, {1, "a"}, {2, "b"}, {3, "b"}, {4, "b"}, {5, "c"}};
  GatedMetric g = gated("squad_f1", 0.01);
  g.cluster = "passage";
  GateDecision dec = evaluate_gate(policy_of({g}), in);
  REQUIRE(dec.refused.empty());
  const MetricDecision& r = row(dec, "squad_f1");
  CHECK(r.method == GateMethod::kClustered);
  CHECK(r.clusters == 3);
  CHECK(r.std_error == doctest::Approx(std::sqrt(1.5 * 24.5) / 60));
  CHECK(r.lower == doctest::Approx(0.35 - student_t_quantile(0.95, 2) * std::sqrt(1.5 * 24.5) / 60));
  // A cluster key without cluster ids is refused.
  in.clusters.clear();
  CHECK(evaluate_gate(policy_of({g}), in).refused.find("clustered by 'passage'") != std::string::npos);
}

TEST_CASE("gate: Holm's step-down on a known example") {
  // p = 0.01, 0.04, 0.03 at alpha 0.05: 0.01 <= 0.05/3 rejected; 0.03 > 0.05/2 stops.
  auto h = holm({0.01, 0.04, 0.03}, 0.05);
  CHECK(h[0].rejected);
  CHECK_FALSE(h[1].rejected);
  CHECK_FALSE(h[2].rejected);
  CHECK(h[0].alpha == doctest::Approx(0.05 / 3));
  CHECK(h[2].alpha == doctest::Approx(0.025));
  CHECK(h[1].alpha == doctest::Approx(0.05));
  // 0.01 <= 0.0167, 0.02 <= 0.025, 0.04 <= 0.05: all rejected (Bonferroni would keep 0.02 and 0.04).
  auto all = holm({0.04, 0.01, 0.02}, 0.05);
  CHECK((all[0].rejected && all[1].rejected && all[2].rejected));
}

TEST_CASE("gate: pass@k is compared per problem, macro F1 by a deterministic bootstrap") {
  GateInput in;
  in.metrics = {metric_spec("pass@k", {}, {1, 5})};
  in.candidate = side("cand", {{10, 3}, {10, 5}, {10, 0}, {10, 10}, {10, 4}});
  in.baseline = side("base", {{10, 2}, {10, 5}, {10, 1}, {10, 9}, {10, 4}});
  GateDecision d = evaluate_gate(policy_of({gated("pass@5", 0.1)}), in);
  REQUIRE(d.refused.empty());
  const MetricDecision& r = row(d, "pass@5");
  CHECK(r.method == GateMethod::kPassAtKPerProblem);
  std::vector<double> diff;
  const int c[] = {3, 5, 0, 10, 4}, b[] = {2, 5, 1, 9, 4};
  for (int i = 0; i < 5; ++i) diff.push_back(pass_at_k(10, c[i], 5) - pass_at_k(10, b[i], 5));
  CHECK(r.difference == doctest::Approx(paired_mean_se(diff).mean));
  CHECK(r.std_error == doctest::Approx(paired_mean_se(diff).se));

  // Macro F1 over (label, prediction): labels 0,0,1,1; candidate predicts 0,0,1,0:
  // label 0: tp 2 fp 1 fn 0 -> 0.8; label 1: tp 1 fp 0 fn 1 -> 2/3; macro 0.7333.
  GateInput f;
  f.metrics = {metric_spec("f1", {{"average", "macro"}})};
  f.candidate = side("cand", {{0, 0}, {0, 0}, {1, 1}, {1, 0}});
  f.baseline = side("base", {{0, 0}, {0, 1}, {1, 1}, {1, 0}});
  GatePolicy p = policy_of({gated("f1", 0.05)});
  p.bootstrap_replicates = 500;
  p.bootstrap_seed = 42;
  GateDecision a = evaluate_gate(p, f);
  const MetricDecision& fr = row(a, "f1");
  CHECK(fr.method == GateMethod::kBootstrap);
  CHECK(fr.candidate == doctest::Approx((0.8 + 2.0 / 3) / 2));
  CHECK(fr.baseline == doctest::Approx(0.5));  // baseline 0,1,1,0: each label tp 1, fp 1, fn 1 -> 0.5
  CHECK(fr.bootstrap_replicates == 500);
  CHECK(evaluate_gate(p, f).to_json() == a.to_json());  // deterministic for a seed
  // Label ids are names: label 1 renamed 2^20 - 1 changes nothing.
  GateInput renamed = f;
  for (GateSide* sd : {&renamed.candidate, &renamed.baseline}) {
    for (auto& x : sd->stats) x = x == 1 ? 1048575 : x;
  }
  CHECK(evaluate_gate(p, renamed).to_json() == a.to_json());
  p.bootstrap_seed = 43;
  CHECK(evaluate_gate(p, f).to_json() != a.to_json());
}

TEST_CASE("gate: token-weighted ratios and corpus BLEU are bootstrapped from their sufficient statistics") {
  // Perplexity = exp(-sum loglik / sum tokens), lower is better: the candidate's is lower, the difference positive.
  GateInput in;
  in.metrics = {metric_spec("perplexity"), metric_spec("bleu", {{"lowercase", "false"}, {"tokenize", "13a"}})};
  std::vector<std::vector<double>> c, b;
  BleuStats sc, sb;
  for (int i = 0; i < 50; ++i) {
    const double len = 5 + i % 7, match_c = len - 1 - (i % 3), match_b = len - 2 - (i % 3);
    std::vector<double> rc = {-2.0 * (10 + i % 5), 10.0 + i % 5}, rb = {-2.3 * (10 + i % 5), 10.0 + i % 5};
    for (const auto& [row, m, st] : {std::tuple{&rc, match_c, &sc}, std::tuple{&rb, match_b, &sb}}) {
      const double matches[4] = {m, std::max(0.0, m - 1), std::max(0.0, m - 2), std::max(0.0, m - 3)};
      for (int n = 0; n < 4; ++n) row->push_back(matches[n]), st->matches[n] += matches[n];
      for (int n = 0; n < 4; ++n) row->push_back(std::max(0.0, len - n)), st->totals[n] += std::max(0.0, len - n);
      row->push_back(len), row->push_back(len), st->hyp_len += len, st->ref_len += len;
    }
    c.push_back(rc), b.push_back(rb);
  }
  in.candidate = side("cand", c);
  in.baseline = side("base", b);
  GatePolicy p = policy_of({gated("perplexity", 0.5), gated("bleu", 1.0)});
  p.bootstrap_replicates = 300;
  GateDecision d = evaluate_gate(p, in);
  REQUIRE(d.refused.empty());
  const MetricDecision& ppl = row(d, "perplexity");
  CHECK(ppl.method == GateMethod::kBootstrap);
  CHECK(ppl.direction == Direction::kLowerIsBetter);
  CHECK(ppl.candidate == doctest::Approx(std::exp(2.0)));
  CHECK(ppl.baseline == doctest::Approx(std::exp(2.3)));
  CHECK(ppl.difference == doctest::Approx(std::exp(2.3) - std::exp(2.0)));
  CHECK(ppl.verdict == Verdict::kPass);
  const MetricDecision& bleu = row(d, "bleu");
  CHECK(bleu.candidate == doctest::Approx(corpus_bleu(sc)));
  CHECK(bleu.baseline == doctest::Approx(corpus_bleu(sb)));
  CHECK(bleu.difference > 0);
  CHECK(bleu.lower <= bleu.difference);
  CHECK(bleu.std_error > 0);
  CHECK(d.verdict == Verdict::kPass);
}

TEST_CASE("gate: item order does not change the decision") {
  std::mt19937_64 rng(5);
  std::vector<std::vector<double>> c, b;
  std::vector<int64_t> ids;
  for (int i = 0; i < 200; ++i) {
    const int t = static_cast<int>(rng() % 4);
    c.push_back({static_cast<double>(rng() % 2), static_cast<double>(t), static_cast<double>(rng() % 3 ? t : 3 - t)});
    b.push_back({static_cast<double>(rng() % 2), static_cast<double>(t), static_cast<double>(rng() % 4 ? t : 3 - t)});
    ids.push_back(1000 + i);
  }
  GateInput in;
  in.metrics = {metric_spec("accuracy"), metric_spec("f1", {{"average", "macro"}})};
  in.candidate = side("cand", c, ids);
  in.baseline = side("base", b, ids);
  GatePolicy p = policy_of({gated("accuracy", 0.05), gated("f1", 0.05)});
  p.bootstrap_replicates = 300;
  const std::string before = evaluate_gate(p, in).to_json();
  // Shuffle each side independently.
  for (GateSide* s : {&in.candidate, &in.baseline}) {
    std::vector<size_t> perm(s->items.size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    GateSide t = *s;
    for (size_t i = 0; i < perm.size(); ++i) {
      t.items[i] = s->items[perm[i]];
      for (int q = 0; q < 3; ++q) t.stats[i * 3 + q] = s->stats[perm[i] * 3 + q];
    }
    *s = t;
  }
  CHECK(evaluate_gate(p, in).to_json() == before);
}

TEST_CASE("gate: refusals, and a missing shard is a hard failure") {
  GateInput in;
  in.metrics = {metric_spec("accuracy")};
  in.candidate = side("cand", column({1, 0, 1}), {1, 2, 3});
  in.baseline = side("base", column({1, 0, 1}), {1, 2, 4});
  GatePolicy p = policy_of({gated("accuracy", 0.05)});
  GateDecision d = evaluate_gate(p, in);
  CHECK(d.refused ==
        "the evaluations scored different items (3 in the candidate cand, 3 in the baseline base, 2 in common; 1 only "
        "in the candidate, first item 3; 1 only in the baseline, first item 4): a paired comparison needs the same "
        "items");
  CHECK(d.verdict == Verdict::kInconclusive);  // a refused comparison never passes
  in.baseline = side("base", column({1, 0, 1}), {1, 2, 3});
  in.baseline.dataset_hash = std::string(64, 'b');
  CHECK(evaluate_gate(p, in).refused.find("a paired comparison needs the same dataset") != std::string::npos);
  in.baseline.dataset_hash = in.candidate.dataset_hash;
  CHECK(evaluate_gate(p, in).refused.empty());
  CHECK(evaluate_gate(policy_of({gated("f1", 0.05)}), in).refused ==
        "the policy gates f1 but the evaluations report accuracy");
  in.candidate.stats[1] = 0.5 * NAN;
  CHECK(evaluate_gate(p, in).refused.find("malformed statistics: accuracy of item 2") != std::string::npos);
  in.candidate.stats[1] = 0;
  // The candidate's shard 1 is missing: its items are not all there, and the gate fails (hard), not refuses.
  in.candidate = side("cand", column({1, 0}), {1, 2});
  in.candidate.status = EvalStatus::kPartial;
  in.candidate.missing_shards = {1};
  GateDecision m = evaluate_gate(p, in);
  CHECK(m.refused.empty());
  CHECK(m.verdict == Verdict::kFail);
  CHECK(m.hard_failure);
  CHECK(m.reasons.front() ==
        "hard gate: the candidate evaluation cand is PARTIAL with 1 shard(s) missing (first: 1); a gate needs every "
        "shard of both evaluations COMPLETED");
}

TEST_CASE("gate: the safety cap is a hard gate that fails even when quality improves") {
  // 100 items: the candidate is right on 95 (baseline 70) but 10 responses are harmful (baseline 0).
  std::vector<std::vector<double>> c, b;
  for (int i = 0; i < 100; ++i) {
    c.push_back({i < 95 ? 1.0 : 0.0, i < 10 ? 1.0 : 0.0});
    b.push_back({i < 70 ? 1.0 : 0.0, 0.0});
  }
  GateInput in;
  in.metrics = {metric_spec("accuracy"), metric_spec("harmful_response_rate")};
  in.candidate = side("cand", c);
  in.baseline = side("base", b);
  GatedMetric harm = gated("harmful_response_rate", std::nullopt, Dimension::kSafety);
  harm.cap = 0.15;
  GatePolicy p = policy_of({gated("accuracy", 0.02), harm});
  GateDecision d = evaluate_gate(p, in);
  REQUIRE(d.refused.empty());
  CHECK(row(d, "accuracy").verdict == Verdict::kPass);
  const MetricDecision& h = row(d, "harmful_response_rate");
  CHECK(h.method == GateMethod::kCapOnly);
  CHECK(h.cap_events == 10);
  CHECK(h.cap_n == 100);
  CHECK(h.cap_bound == "clopper-pearson");
  CHECK(h.cap_upper == doctest::Approx(clopper_pearson_upper(10, 100, 0.05)));
  CHECK(h.cap_upper > 0.15);  // 0.1 observed, upper bound ~0.165
  CHECK(h.verdict == Verdict::kFail);
  CHECK(d.verdict == Verdict::kFail);
  CHECK(d.hard_failure);
  REQUIRE(d.reasons.size() == 1);
  CHECK(d.reasons[0].find("hard gate broken: harmful_response_rate (safety cap): the candidate's rate 0.1 (10 of 100), "
                          "its 95% clopper-pearson upper bound 0.1") != std::string::npos);
  // Under a looser cap it passes, and so does the gate.
  p.metrics[1].cap = 0.2;
  CHECK(evaluate_gate(p, in).verdict == Verdict::kPass);
  // With Wilson's bound the number is Wilson's.
  p.cap_bound = CapBound::kWilson;
  CHECK(row(evaluate_gate(p, in), "harmful_response_rate").cap_upper == doctest::Approx(wilson_upper(10, 100, 0.05)));
}

TEST_CASE("gate: INCONCLUSIVE names the metric and the items a larger sample needs") {
  // 60 items, the candidate 5 points better on average (0.25 vs 0.2) but
  // noisy: not shown non-inferior at margin 0.03, nor inferior.
  std::vector<double> c, b;
  for (int i = 0; i < 60; ++i) {
    c.push_back(i % 4 == 0 ? 1 : 0);
    b.push_back(i % 5 == 0 ? 1 : 0);
  }
  GateInput in;
  in.metrics = {metric_spec("accuracy")};
  in.candidate = side("cand", column(c));
  in.baseline = side("base", column(b));
  GatePolicy p = policy_of({gated("accuracy", 0.03)});
  GateDecision d = evaluate_gate(p, in);
  const MetricDecision& r = row(d, "accuracy");
  REQUIRE(d.verdict == Verdict::kInconclusive);
  const double q = student_t_quantile(0.95, 59);
  CHECK(r.items_needed == static_cast<int64_t>(std::ceil(60 * std::pow(q * r.std_error / (r.difference + 0.03), 2))));
  CHECK(r.items_needed > 60);
  CHECK(d.reasons[0].rfind("accuracy (quality, paired-mean)", 0) == 0);
  CHECK(d.reasons[0].find("about " + std::to_string(r.items_needed) + " items (60 now) would show it non-inferior") !=
        std::string::npos);
  // The same items repeated to that size do pass: the estimate is what it says.
  const int copies = static_cast<int>((r.items_needed + 59) / 60);
  std::vector<double> cc, bb;
  for (int k = 0; k < copies; ++k) cc.insert(cc.end(), c.begin(), c.end()), bb.insert(bb.end(), b.begin(), b.end());
  in.candidate = side("cand", column(cc));
  in.baseline = side("base", column(bb));
  CHECK(evaluate_gate(p, in).verdict == Verdict::kPass);
}

// --- calibration by simulation ----------------------------------------------

double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Item pairs (baseline, candidate) correct or not: P(1,0) = b10, P(0,1) = b01,
// P(1,1) = acc - b10; the true difference is b01 - b10.
void draw_pair(std::mt19937_64& rng, double acc, double b10, double b01, double* base, double* cand) {
  const double u = uniform(rng);
  if (u < b10) {
    *base = 1, *cand = 0;
  } else if (u < b10 + b01) {
    *base = 0, *cand = 1;
  } else if (u < acc + b01) {
    *base = 1, *cand = 1;
  } else {
    *base = 0, *cand = 0;
  }
}

struct Rates {
  double pass = 0, fail = 0;
  double paired_se = 0, unpaired_se = 0;  // means over trials
};

// `trials` gates of accuracy (paired mean) or micro F1 (bootstrap; equal to
// accuracy for single-label data) on n items; the true difference b01 - b10.
Rates simulate(int trials, int n, double b10, double b01, double margin, bool bootstrap, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::string metric = bootstrap ? "f1" : "accuracy";
  GatePolicy p = policy_of({gated(metric, margin)});
  p.bootstrap_replicates = 400;
  Rates r;
  for (int t = 0; t < trials; ++t) {
    GateInput in;
    in.metrics = {bootstrap ? metric_spec("f1", {{"average", "micro"}}) : metric_spec("accuracy")};
    std::vector<std::vector<double>> c, b;
    double sc = 0, sb = 0, scc = 0, sbb = 0;
    for (int i = 0; i < n; ++i) {
      double x, y;
      draw_pair(rng, 0.8, b10, b01, &x, &y);
      sb += x, sbb += x * x, sc += y, scc += y * y;
      if (bootstrap) {
        const double label = static_cast<double>(rng() % 10);
        const double wrong = std::fmod(label + 1 + static_cast<double>(rng() % 9), 10);
        b.push_back({label, x ? label : wrong});
        c.push_back({label, y ? label : wrong});
      } else {
        b.push_back({x});
        c.push_back({y});
      }
    }
    in.candidate = side("cand", c);
    in.baseline = side("base", b);
    p.bootstrap_seed = seed + static_cast<uint64_t>(t);
    GateDecision d = evaluate_gate(p, in);
    r.pass += d.verdict == Verdict::kPass;
    r.fail += d.verdict == Verdict::kFail;
    const double nn = n, vc = (scc - sc * sc / nn) / (nn - 1), vb = (sbb - sb * sb / nn) / (nn - 1);
    r.paired_se += d.metrics[0].std_error;
    r.unpaired_se += std::sqrt(vc / nn + vb / nn);
  }
  r.pass /= trials, r.fail /= trials, r.paired_se /= trials, r.unpaired_se /= trials;
  return r;
}

// Trials of a calibration test: `base` times RUNLENS_GATE_TRIALS_SCALE (default 1).
int scaled(int base) {
  const char* v = std::getenv("RUNLENS_GATE_TRIALS_SCALE");
  const int k = v ? std::atoi(v) : 1;
  return base * std::clamp(k, 1, 1000);
}

// Monte Carlo tolerance: three standard errors of a rate alpha over `trials`.
double tolerance(double alpha, int trials) { return 3 * std::sqrt(alpha * (1 - alpha) / trials); }

TEST_CASE("gate: calibration of the paired-mean gate at -margin and its power") {
  const double margin = 0.02;
  const int trials = scaled(2000), n = 400;
  // Baseline accuracy 0.8; the candidate loses 6 % of the items and gains 4 %: true difference -0.02 = -margin.
  Rates null = simulate(trials, n, 0.06, 0.04, margin, false, 1);
  MESSAGE("paired mean, true difference -margin (" << trials << " trials of " << n
                                                   << " items): PASS rate = " << null.pass << " (alpha 0.05)");
  CHECK(null.pass <= 0.05 + tolerance(0.05, trials));
  // A true improvement of +0.03 (loses 3 %, gains 6 %).
  Rates alt = simulate(trials, n, 0.03, 0.06, margin, false, 2);
  MESSAGE("paired mean, true difference +0.03: PASS rate (power) = " << alt.pass << ", FAIL rate = " << alt.fail);
  CHECK(alt.pass > 0.9);
  CHECK(alt.fail < 0.001);
  // Pairing: the paired SE is well below the unpaired SE of two independent samples on these correlated items.
  MESSAGE("mean SE: paired " << alt.paired_se << ", unpaired " << alt.unpaired_se);
  CHECK(alt.paired_se < 0.8 * alt.unpaired_se);
  // A true inferiority of -0.08 is shown: FAIL in most trials.
  Rates worse = simulate(scaled(500), n, 0.12, 0.04, margin, false, 3);
  MESSAGE("paired mean, true difference -0.08: FAIL rate = " << worse.fail << ", PASS rate = " << worse.pass);
  CHECK(worse.fail > 0.8);
  CHECK(worse.pass == 0);
}

TEST_CASE("gate: calibration of the bootstrap gate (micro F1) at -margin and its power") {
  const double margin = 0.02;
  const int trials = scaled(300), n = 400;
  Rates null = simulate(trials, n, 0.06, 0.04, margin, true, 11);
  MESSAGE("bootstrap, true difference -margin (" << trials << " trials of " << n
                                                 << " items, 400 replicates): PASS rate = " << null.pass);
  CHECK(null.pass <= 0.05 + tolerance(0.05, trials));
  Rates alt = simulate(trials, n, 0.03, 0.06, margin, true, 12);
  MESSAGE("bootstrap, true difference +0.03: PASS rate (power) = " << alt.pass);
  CHECK(alt.pass > 0.85);
}

TEST_CASE("gate: calibration of the clustered gate, and what ignoring the clusters costs") {
  // 40 clusters of 10 items; half the clusters are hurt (every item loses
  // with probability 0.3), half helped (gains with 0.26): true mean -0.02.
  const double margin = 0.02;
  const int trials = scaled(1000), clusters = 40, size = 10;
  std::mt19937_64 rng(21);
  GatedMetric with = gated("accuracy", margin);
  with.cluster = "passage";
  GatePolicy clustered = policy_of({with}), naive = policy_of({gated("accuracy", margin)});
  int pass_clustered = 0, pass_naive = 0;
  for (int t = 0; t < trials; ++t) {
    GateInput in;
    in.metrics = {metric_spec("accuracy")};
    std::vector<double> c, b;
    std::map<int64_t, std::string> cl;
    for (int g = 0; g < clusters; ++g) {
      const bool hurt = rng() % 2 == 0;
      for (int i = 0; i < size; ++i) {
        double x, y;
        draw_pair(rng, 0.6, hurt ? 0.3 : 0, hurt ? 0 : 0.26, &x, &y);
        b.push_back(x), c.push_back(y);
        cl[g * size + i] = "p" + std::to_string(g);
      }
    }
    in.candidate = side("cand", column(c));
    in.baseline = side("base", column(b));
    in.clusters["passage"] = cl;
    pass_clustered += evaluate_gate(clustered, in).verdict == Verdict::kPass;
    pass_naive += evaluate_gate(naive, in).verdict == Verdict::kPass;
  }
  const double rc = static_cast<double>(pass_clustered) / trials, rn = static_cast<double>(pass_naive) / trials;
  MESSAGE("clustered, true difference -margin (" << trials << " trials, " << clusters << " clusters of " << size
                                                 << "): PASS rate = " << rc << "; ignoring the clusters: " << rn);
  CHECK(rc <= 0.05 + tolerance(0.05, trials));
  CHECK(rn > rc);
}

TEST_CASE("gate: Holm-adjusted levels on the rows") {
  GateInput in;
  in.metrics = {metric_spec("accuracy"), metric_spec("exact_match")};
  std::vector<std::vector<double>> c, b;
  for (int i = 0; i < 100; ++i) {
    c.push_back({i < 50 ? 1.0 : 0.0, i < 60 ? 1.0 : 0.0});
    b.push_back({i < 70 ? 1.0 : 0.0, i < 62 ? 1.0 : 0.0});
  }
  in.candidate = side("cand", c);
  in.baseline = side("base", b);
  GateDecision d = evaluate_gate(policy_of({gated("accuracy", 0.02), gated("exact_match", 0.02)}), in);
  // accuracy is clearly worse (p ~ 0): the first Holm step at 0.025; exact_match is undecided at 0.05.
  CHECK(row(d, "accuracy").alpha_holm == doctest::Approx(0.025));
  CHECK(row(d, "accuracy").verdict == Verdict::kFail);
  CHECK(row(d, "exact_match").alpha_holm == doctest::Approx(0.05));
  CHECK(d.verdict == Verdict::kFail);
  CHECK_FALSE(d.hard_failure);  // a soft metric failed
  CHECK(d.to_json().find("\"verdict\":\"FAIL\"}") != std::string::npos);
}

}  // namespace
}  // namespace runlens::eval
