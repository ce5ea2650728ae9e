#include "eval/metric.h"

#include <cmath>

namespace runlens::eval {

std::string_view aggregation_name(Aggregation a) {
  switch (a) {
    case Aggregation::kMean:
      return "mean";
    case Aggregation::kTokenWeighted:
      return "token-weighted";
    case Aggregation::kCorpusBleu:
      return "corpus-bleu";
    case Aggregation::kPassAtK:
      return "pass@k";
    case Aggregation::kClassification:
      return "classification";
    case Aggregation::kRate:
      return "rate";
  }
  return "?";
}

const std::vector<MetricDef>& metric_defs() {
  using A = Aggregation;
  static const ArgDef kAverage{
      "average", ArgType::kChoice, "macro", {"macro", "micro"}, "macro: mean over labels; micro: pooled counts"};
  static const std::vector<MetricDef> kDefs = {
      {"accuracy", A::kMean, 0, 1, false, {}, "share of items predicted correctly (item: 0 or 1)", true},
      {"normalized_accuracy",
       A::kMean,
       0,
       1,
       false,
       {},
       "accuracy with length-normalized choice scores (item: 0 or 1)",
       true},
      {"precision", A::kClassification, 0, 1, false, {kAverage}, "TP / (TP + FP), per label (macro) or pooled (micro)"},
      {"recall", A::kClassification, 0, 1, false, {kAverage}, "TP / (TP + FN), per label (macro) or pooled (micro)"},
      {"f1", A::kClassification, 0, 1, false, {kAverage}, "2TP / (2TP + FP + FN), per label (macro) or pooled (micro)"},
      {"exact_match",
       A::kMean,
       0,
       1,
       false,
       {{"ignore_case", ArgType::kBool, "false", {}, "lowercase both sides first"},
        {"ignore_punctuation", ArgType::kBool, "false", {}, "remove ASCII punctuation first"}},
       "share of predictions equal to their reference (item: 0 or 1)",
       true},
      {"squad_exact_match",
       A::kMean,
       0,
       1,
       false,
       {},
       "SQuAD v1.1 exact match after answer normalization (item: 0 or 1)",
       true},
      {"squad_f1", A::kMean, 0, 1, false, {}, "SQuAD v1.1 token F1, max over gold answers (item: 0-1)"},
      {"perplexity", A::kTokenWeighted, 0, 0, false, {}, "exp(-sum log-likelihood / sum tokens)"},
      {"word_perplexity", A::kTokenWeighted, 0, 0, false, {}, "exp(-sum log-likelihood / sum words)"},
      {"bits_per_byte", A::kTokenWeighted, 0, 0, false, {}, "-sum log-likelihood / sum bytes / ln 2"},
      {"cross_entropy", A::kTokenWeighted, 0, 0, false, {}, "-sum log-likelihood / sum tokens (nats)"},
      {"log_probability", A::kTokenWeighted, 0, 0, false, {}, "sum log-likelihood / sum tokens (nats)"},
      {"bleu",
       A::kCorpusBleu,
       0,
       100,
       false,
       {{"tokenize", ArgType::kChoice, "13a", {"13a", "none", "char", "intl"}, "sacreBLEU tokenizer the worker uses"},
        {"lowercase", ArgType::kBool, "false", {}, "lowercase before tokenizing"}},
       "corpus BLEU (0-100) from summed n-gram statistics, sacreBLEU's defaults"},
      {"sentence_bleu", A::kMean, 0, 100, false, {}, "mean sentence BLEU (0-100), exp smoothing, effective order"},
      {"rouge1",
       A::kMean,
       0,
       1,
       false,
       {{"use_stemmer", ArgType::kBool, "false", {}, "Porter-stem tokens"}},
       "mean ROUGE-1 F-measure"},
      {"rouge2",
       A::kMean,
       0,
       1,
       false,
       {{"use_stemmer", ArgType::kBool, "false", {}, "Porter-stem tokens"}},
       "mean ROUGE-2 F-measure"},
      {"rougeL",
       A::kMean,
       0,
       1,
       false,
       {{"use_stemmer", ArgType::kBool, "false", {}, "Porter-stem tokens"}},
       "mean ROUGE-L F-measure"},
      {"pass@k",
       A::kPassAtK,
       0,
       1,
       false,
       {{"k", ArgType::kIntList, "", {}, "the k values, e.g. [1, 5, 10]; each at least 1"}},
       "unbiased pass@k over problems (item: samples n, passing c)"},
      {"judge", A::kMean, 0, 0, true, {}, "mean LLM-as-a-judge rubric score over criteria, on the judge's scale"},
      {"harmful_response_rate", A::kMean, 0, 1, false, {}, "share of responses labeled harmful (item: 0 or 1)", true},
      {"jailbreak_success_rate",
       A::kRate,
       0,
       1,
       false,
       {},
       "share of jailbreak attempts answered harmfully (item: attempt 0/1, succeeded 0/1; n = attempts)",
       true},
      {"policy_violation_rate",
       A::kMean,
       0,
       1,
       false,
       {},
       "share of responses violating a policy (item: 0 or 1)",
       true},
      {"refusal_correctness",
       A::kMean,
       0,
       1,
       false,
       {},
       "share of items with refused == should_refuse (item: 0 or 1)",
       true},
  };
  return kDefs;
}

const MetricDef* find_metric(std::string_view name) {
  for (const auto& d : metric_defs()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::vector<std::string> metric_names() {
  std::vector<std::string> out;
  for (const auto& d : metric_defs()) out.emplace_back(d.name);
  return out;
}

int stats_per_item(Aggregation a) {
  switch (a) {
    case Aggregation::kMean:
      return 1;
    case Aggregation::kTokenWeighted:
    case Aggregation::kPassAtK:
    case Aggregation::kClassification:
    case Aggregation::kRate:
      return 2;
    case Aggregation::kCorpusBleu:
      return 10;
  }
  return 0;
}

std::vector<std::string> metric_outputs(std::string_view name, const std::vector<int64_t>& k) {
  if (name != "pass@k") return {std::string(name)};
  std::vector<std::string> out;
  for (int64_t v : k) out.push_back("pass@" + std::to_string(v));
  return out;
}

double pass_at_k(int64_t n, int64_t c, int64_t k) {
  if (c <= 0) return 0.0;
  if (n - c < k) return 1.0;
  double log_fail = 0;  // log prod_{i=n-c+1..n} (1 - k/i) = log C(n-c, k) / C(n, k)
  for (int64_t i = n - c + 1; i <= n; ++i) log_fail += std::log1p(-static_cast<double>(k) / static_cast<double>(i));
  return -std::expm1(log_fail);
}

double corpus_bleu(const BleuStats& s) {
  double bp = 1.0;
  if (s.hyp_len < s.ref_len) bp = s.hyp_len > 0 ? std::exp(1.0 - s.ref_len / s.hyp_len) : 0.0;
  bool any = false;
  for (double m : s.matches) any |= m != 0;
  if (!any) return 0.0;
  double precisions[4] = {0, 0, 0, 0};
  double smooth = 1.0;
  for (int n = 0; n < 4; ++n) {
    if (s.totals[n] == 0) break;
    if (s.matches[n] == 0) {
      smooth *= 2;  // "exp": the k-th order without a match gets 100 / (2^k total)
      precisions[n] = 100.0 / (smooth * s.totals[n]);
    } else {
      precisions[n] = 100.0 * s.matches[n] / s.totals[n];
    }
  }
  double sum = 0;
  for (double p : precisions) sum += p > 0 ? std::log(p) : -9999999999.0;  // sacreBLEU's my_log(0)
  return bp * std::exp(sum / 4);
}

}  // namespace runlens::eval
