#include "eval/aggregator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "formats/canonical_json.h"
#include "runtime/status.h"

namespace runlens::eval {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kMaxLabel = 1 << 20;

// Mean and sum of squared deviations, merged with Chan et al.'s formula.
struct Moments {
  int64_t n = 0;
  double mean = 0, m2 = 0;
  void add(double x) {
    ++n;
    double d = x - mean;
    mean += d / static_cast<double>(n);
    m2 += d * (x - mean);
  }
  void merge(const Moments& o) {
    if (o.n == 0) return;
    if (n == 0) {
      *this = o;
      return;
    }
    const double na = static_cast<double>(n), nb = static_cast<double>(o.n), d = o.mean - mean;
    mean += d * nb / (na + nb);
    m2 += o.m2 + d * d * na * nb / (na + nb);
    n += o.n;
  }
  double stderr_of_mean() const {
    return n < 2 ? kNaN : std::sqrt(m2 / static_cast<double>(n - 1) / static_cast<double>(n));
  }
};

bool integral(double v) { return std::isfinite(v) && std::nearbyint(v) == v; }

std::string num(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  std::string s;
  json::append_canonical_number(&s, v);
  return s;
}
}  // namespace

struct Aggregator::Accum {
  Moments mean;                                      // kMean
  int64_t n = 0;                                     // every kind
  double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;  // kTokenWeighted: a = log-likelihood, b = count
  BleuStats bleu;                                    // kCorpusBleu
  std::vector<Moments> pass;                         // kPassAtK: one per k
  std::vector<std::array<int64_t, 3>> confusion;     // kClassification: per label tp, fp, fn

  void merge(const Accum& o) {
    mean.merge(o.mean);
    n += o.n;
    sa += o.sa, sb += o.sb, saa += o.saa, sbb += o.sbb, sab += o.sab;
    for (int i = 0; i < 4; ++i) bleu.matches[i] += o.bleu.matches[i], bleu.totals[i] += o.bleu.totals[i];
    bleu.hyp_len += o.bleu.hyp_len, bleu.ref_len += o.bleu.ref_len;
    if (pass.size() < o.pass.size()) pass.resize(o.pass.size());
    for (size_t i = 0; i < o.pass.size(); ++i) pass[i].merge(o.pass[i]);
    if (confusion.size() < o.confusion.size()) confusion.resize(o.confusion.size(), {0, 0, 0});
    for (size_t i = 0; i < o.confusion.size(); ++i) {
      for (int j = 0; j < 3; ++j) confusion[i][j] += o.confusion[i][j];
    }
  }
};

Aggregator::Aggregator(std::string evaluation_id, std::vector<MetricSpec> metrics, std::vector<Shard> shards,
                       const JudgeSpec* judge)
    : evaluation_id_(std::move(evaluation_id)), metrics_(std::move(metrics)), shards_(std::move(shards)) {
  for (const auto& m : metrics_) {
    RUNLENS_CHECK(m.def, "an aggregator was built with a metric the suite parser did not resolve: " + m.name);
    RUNLENS_CHECK(!m.def->uses_judge || judge, "the judge metric needs the suite's judge block (the parser checks it)");
    offset_.push_back(stride_);
    stride_ += stats_per_item(m.def->aggregation);
  }
  if (judge) judge_lo_ = judge->scale_lo, judge_hi_ = judge->scale_hi;
  for (size_t i = 0; i < shards_.size(); ++i) {
    RUNLENS_CHECK(shards_[i].partition == static_cast<int>(i), "shards must be given in partition order");
  }
  accepted_attempt_.assign(shards_.size(), 0);
  acc_.resize(metrics_.size());
}

Aggregator::~Aggregator() = default;
Aggregator::Aggregator(Aggregator&&) noexcept = default;
Aggregator& Aggregator::operator=(Aggregator&&) noexcept = default;

AcceptOutcome Aggregator::accept(const ShardResult& r) {
  std::vector<Accum> local;
  AcceptOutcome o = validate(r, &local);
  if (o.outcome == Acceptance::kRejected) {
    counters_.rejected++;
    return o;
  }
  if (o.outcome == Acceptance::kDuplicate) {
    counters_.duplicates++;
    return o;
  }
  for (size_t m = 0; m < metrics_.size(); ++m) acc_[m].merge(local[m]);
  accepted_attempt_[r.partition] = r.attempt;
  counters_.accepted++;
  counters_.items += shards_[r.partition].items.size();
  return o;
}

AcceptOutcome Aggregator::check(const ShardResult& r, std::vector<MetricResult>* shard_metrics) const {
  std::vector<Accum> local;
  AcceptOutcome o = validate(r, &local);
  if (o.outcome == Acceptance::kAccepted && shard_metrics) *shard_metrics = metrics_of(local);
  return o;
}

AcceptOutcome Aggregator::validate(const ShardResult& r, std::vector<Accum>* local_out) const {
  const std::string head = "result for shard " + std::to_string(r.partition) + " of " + r.evaluation_id + " (attempt " +
                           std::to_string(r.attempt) + " from " + r.worker + ")";
  auto reject = [&](const std::string& why) {
    return AcceptOutcome{Acceptance::kRejected, head + " rejected: " + why};
  };
  if (r.evaluation_id != evaluation_id_) return reject("it belongs to another evaluation than " + evaluation_id_);
  if (r.partition < 0 || r.partition >= static_cast<int>(shards_.size()))
    return reject("the evaluation has shards 0 to " + std::to_string(shards_.size() - 1));
  if (r.attempt < 1) return reject("attempts are numbered from 1");
  if (int prior = accepted_attempt_[r.partition]; prior != 0) {
    return AcceptOutcome{Acceptance::kDuplicate, head + " ignored: the shard was accepted from attempt " +
                                                     std::to_string(prior) +
                                                     (prior == r.attempt ? " (a repeat)" : " (a late duplicate)")};
  }
  const ItemRange range = shards_[r.partition].items;
  if (static_cast<int64_t>(r.items.size()) != range.size())
    return reject("the shard has " + std::to_string(range.size()) + " items " + range.str() + ", the result has " +
                  std::to_string(r.items.size()));
  if (r.stats.size() != r.items.size() * static_cast<size_t>(stride_))
    return reject("expected " + std::to_string(stride_) + " statistics per item (" +
                  std::to_string(r.items.size() * stride_) + " in all), got " + std::to_string(r.stats.size()));
  std::vector<uint8_t> seen(static_cast<size_t>(range.size()), 0);
  for (int64_t item : r.items) {
    if (!range.contains(item))
      return reject("item " + std::to_string(item) + " is outside the shard's items " + range.str());
    uint8_t& s = seen[static_cast<size_t>(item - range.begin)];
    if (s) return reject("item " + std::to_string(item) + " appears more than once");
    s = 1;
  }
  // Every id is in range and none repeats, and there are range.size() of them: each item exactly once.

  std::vector<Accum>& local = *local_out;
  local.assign(metrics_.size(), Accum{});
  for (size_t m = 0; m < metrics_.size(); ++m) {
    const MetricSpec& spec = metrics_[m];
    Accum& a = local[m];
    if (spec.def->aggregation == Aggregation::kPassAtK) a.pass.resize(spec.k.size());
    const double lo = spec.def->uses_judge ? judge_lo_ : spec.def->lo;
    const double hi = spec.def->uses_judge ? judge_hi_ : spec.def->hi;
    for (size_t i = 0; i < r.items.size(); ++i) {
      const double* x = &r.stats[i * stride_ + offset_[m]];
      auto bad = [&](const std::string& why) {
        return reject(spec.name + " of item " + std::to_string(r.items[i]) + ": " + why);
      };
      a.n++;
      switch (spec.def->aggregation) {
        case Aggregation::kMean:
          if (!std::isfinite(x[0]) || x[0] < lo || x[0] > hi)
            return bad("score " + num(x[0]) + " is outside [" + num(lo) + ", " + num(hi) + "]");
          if (spec.def->binary && x[0] != 0 && x[0] != 1) return bad("score " + num(x[0]) + " must be 0 or 1");
          a.mean.add(x[0]);
          break;
        case Aggregation::kTokenWeighted:
          if (!std::isfinite(x[0]) || x[0] > 0)
            return bad("log-likelihood " + num(x[0]) + " must be finite and at most 0");
          if (!integral(x[1]) || x[1] < 1) return bad("count " + num(x[1]) + " must be a whole number of at least 1");
          a.sa += x[0], a.sb += x[1], a.saa += x[0] * x[0], a.sbb += x[1] * x[1], a.sab += x[0] * x[1];
          break;
        case Aggregation::kCorpusBleu: {
          for (int k = 0; k < 10; ++k) {
            if (!integral(x[k]) || x[k] < 0)
              return bad("statistic " + std::to_string(k) + " (" + num(x[k]) + ") must be a non-negative whole number");
          }
          const double hyp = x[8];
          for (int n = 0; n < 4; ++n) {
            if (x[n] > x[4 + n])
              return bad(std::to_string(n + 1) + "-gram matches " + num(x[n]) + " exceed the total " + num(x[4 + n]));
            if (x[4 + n] != std::max(0.0, hyp - n))
              return bad(std::to_string(n + 1) + "-gram total " + num(x[4 + n]) + " does not fit hypothesis length " +
                         num(hyp));
          }
          for (int n = 0; n < 4; ++n) a.bleu.matches[n] += x[n], a.bleu.totals[n] += x[4 + n];
          a.bleu.hyp_len += hyp, a.bleu.ref_len += x[9];
          break;
        }
        case Aggregation::kPassAtK: {
          if (!integral(x[0]) || x[0] < 1)
            return bad("samples n = " + num(x[0]) + " must be a whole number of at least 1");
          if (!integral(x[1]) || x[1] < 0 || x[1] > x[0])
            return bad("passing samples c = " + num(x[1]) + " must be a whole number in [0, n = " + num(x[0]) + "]");
          for (size_t k = 0; k < spec.k.size(); ++k)
            a.pass[k].add(pass_at_k(static_cast<int64_t>(x[0]), static_cast<int64_t>(x[1]), spec.k[k]));
          break;
        }
        case Aggregation::kRate:
          if (x[0] != 0 && x[0] != 1) return bad("in-scope flag " + num(x[0]) + " must be 0 or 1");
          if (x[1] != 0 && x[1] != 1) return bad("outcome " + num(x[1]) + " must be 0 or 1");
          if (x[1] > x[0]) return bad("an item out of scope (flag 0) cannot have the outcome 1");
          if (x[0] == 1) a.mean.add(x[1]);
          break;
        case Aggregation::kClassification: {
          for (int k = 0; k < 2; ++k) {
            if (!integral(x[k]) || x[k] < 0 || x[k] >= kMaxLabel)
              return bad(std::string(k ? "predicted" : "true") + " label " + num(x[k]) +
                         " must be a whole number in [0, 2^20)");
          }
          const auto t = static_cast<size_t>(x[0]), p = static_cast<size_t>(x[1]);
          if (a.confusion.size() <= std::max(t, p)) a.confusion.resize(std::max(t, p) + 1, {0, 0, 0});
          if (t == p) {
            a.confusion[t][0]++;
          } else {
            a.confusion[p][1]++;
            a.confusion[t][2]++;
          }
          break;
        }
      }
    }
  }
  return AcceptOutcome{Acceptance::kAccepted, {}};
}

bool Aggregator::complete() const {
  return std::all_of(accepted_attempt_.begin(), accepted_attempt_.end(), [](int a) { return a != 0; });
}

bool Aggregator::shard_accepted(int partition) const {
  return partition >= 0 && partition < static_cast<int>(shards_.size()) && accepted_attempt_[partition] != 0;
}

std::vector<int> Aggregator::missing_shards() const {
  std::vector<int> out;
  for (size_t i = 0; i < accepted_attempt_.size(); ++i) {
    if (!accepted_attempt_[i]) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<MetricResult> Aggregator::metrics() const { return metrics_of(acc_); }

std::vector<MetricResult> Aggregator::metrics_of(const std::vector<Accum>& acc) const {
  std::vector<MetricResult> out;
  for (size_t m = 0; m < metrics_.size(); ++m) {
    const MetricSpec& spec = metrics_[m];
    const Accum& a = acc[m];
    auto arg = [&](const char* name) -> std::string {
      for (const auto& [k, v] : spec.args) {
        if (k == name) return v;
      }
      return {};
    };
    switch (spec.def->aggregation) {
      case Aggregation::kMean:
        out.push_back({spec.name, a.n ? a.mean.mean : kNaN, a.n, a.mean.stderr_of_mean()});
        break;
      case Aggregation::kTokenWeighted: {
        // R = sum a / sum b; se(R) = sqrt(var(a_i - R b_i) / n) / mean(b), var with n - 1.
        const double r = a.sb > 0 ? a.sa / a.sb : kNaN;
        double se = kNaN;
        if (a.n >= 2 && a.sb > 0) {
          const double ss = std::max(0.0, a.saa - 2 * r * a.sab + r * r * a.sbb);
          const double n = static_cast<double>(a.n);
          se = std::sqrt(ss / (n - 1) / n) / (a.sb / n);
        }
        double value = r, value_se = se;
        if (spec.name == "perplexity" || spec.name == "word_perplexity") {
          value = std::exp(-r), value_se = value * se;
        } else if (spec.name == "cross_entropy") {
          value = -r;
        } else if (spec.name == "bits_per_byte") {
          value = -r / std::log(2.0), value_se = se / std::log(2.0);
        }  // log_probability: R itself
        out.push_back({spec.name, value, a.n, value_se});
        break;
      }
      case Aggregation::kRate:  // over the items in scope only (jailbreak attempts)
        out.push_back({spec.name, a.mean.n ? a.mean.mean : kNaN, a.mean.n, a.mean.stderr_of_mean()});
        break;
      case Aggregation::kCorpusBleu:
        out.push_back({spec.name, a.n ? corpus_bleu(a.bleu) : kNaN, a.n, kNaN});
        break;
      case Aggregation::kPassAtK:
        for (size_t k = 0; k < spec.k.size(); ++k) {
          const Moments mo = k < a.pass.size() ? a.pass[k] : Moments{};
          out.push_back({"pass@" + std::to_string(spec.k[k]), mo.n ? mo.mean : kNaN, mo.n, mo.stderr_of_mean()});
        }
        break;
      case Aggregation::kClassification: {
        const bool micro = arg("average") == "micro";
        int64_t tp = 0, fp = 0, fn = 0;
        double sum = 0;
        int labels = 0;
        auto ratio = [](double num_, double den) { return den > 0 ? num_ / den : 0.0; };  // zero_division = 0
        for (const auto& c : a.confusion) {
          if (c[0] + c[1] + c[2] == 0) continue;  // a label seen in neither y_true nor y_pred
          ++labels;
          tp += c[0], fp += c[1], fn += c[2];
          const double t = static_cast<double>(c[0]), f_p = static_cast<double>(c[1]), f_n = static_cast<double>(c[2]);
          if (spec.name == "precision") sum += ratio(t, t + f_p);
          if (spec.name == "recall") sum += ratio(t, t + f_n);
          if (spec.name == "f1") sum += ratio(2 * t, 2 * t + f_p + f_n);
        }
        double value = labels ? sum / labels : kNaN;
        if (micro) {
          const double t = static_cast<double>(tp), f_p = static_cast<double>(fp), f_n = static_cast<double>(fn);
          if (spec.name == "precision") value = ratio(t, t + f_p);
          if (spec.name == "recall") value = ratio(t, t + f_n);
          if (spec.name == "f1") value = ratio(2 * t, 2 * t + f_p + f_n);
          if (a.n == 0) value = kNaN;
        }
        out.push_back({spec.name, value, a.n, kNaN});
        break;
      }
    }
  }
  return out;
}

}  // namespace runlens::eval
