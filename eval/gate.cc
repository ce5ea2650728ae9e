#include "eval/gate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>

#include "formats/canonical_json.h"
#include "formats/json_writer.h"

namespace runlens::eval {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kMaxLabel = 1 << 20;

std::string num(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

bool integral(double v) { return std::isfinite(v) && std::nearbyint(v) == v; }

// Continued fraction of the incomplete beta (Numerical Recipes' betacf, modified Lentz).
double beta_cf(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEps) break;
  }
  return h;
}

// The root of the increasing function f on [lo, hi] where f(x) = target, by bisection.
template <typename F>
double bisect(F f, double target, double lo, double hi) {
  for (int i = 0; i < 200 && hi - lo > 1e-15 * std::max(1.0, std::fabs(lo)); ++i) {
    const double mid = 0.5 * (lo + hi);
    (f(mid) < target ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double student_t_cdf(double t, double df) {
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t > 0 ? 1 - tail : tail;
}

// The one-sided quantile used for a method: Student's t with `df` degrees of freedom, or the normal when df <= 0.
double quantile(double p, double df) { return df > 0 ? student_t_quantile(p, df) : normal_quantile(p); }
double cdf(double x, double df) { return df > 0 ? student_t_cdf(x, df) : normal_cdf(x); }

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// The type-7 quantile (linear interpolation) of sorted values.
double sorted_quantile(const std::vector<double>& v, double p) {
  if (v.empty()) return kNaN;
  const double h = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kInconclusive:
      return "INCONCLUSIVE";
  }
  return "?";
}

std::string_view gate_method_name(GateMethod m) {
  switch (m) {
    case GateMethod::kPairedMean:
      return "paired-mean";
    case GateMethod::kClustered:
      return "clustered";
    case GateMethod::kBootstrap:
      return "bootstrap";
    case GateMethod::kPassAtKPerProblem:
      return "pass@k-per-problem";
    case GateMethod::kCapOnly:
      return "cap";
  }
  return "?";
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) return p == 0 ? -INFINITY : (p == 1 ? INFINITY : kNaN);
  return bisect(normal_cdf, p, -40, 40);
}

double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double lbt = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double bt = std::exp(lbt);
  if (x < (a + 1) / (a + b + 2)) return bt * beta_cf(a, b, x) / a;
  return 1 - bt * beta_cf(b, a, 1 - x) / b;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) return kNaN;
  double hi = 1;
  while (student_t_cdf(hi, df) < p && hi < 1e12) hi *= 2;
  double lo = -1;
  while (student_t_cdf(lo, df) > p && lo > -1e12) lo *= 2;
  return bisect([df](double t) { return student_t_cdf(t, df); }, p, lo, hi);
}

double clopper_pearson_upper(int64_t events, int64_t n, double alpha) {
  if (n <= 0 || events >= n) return 1;
  // The p at which P(X <= events | n, p) = alpha, i.e. I_p(events + 1, n - events) = 1 - alpha.
  const double a = static_cast<double>(events) + 1, b = static_cast<double>(n - events);
  return bisect([a, b](double p) { return incomplete_beta(a, b, p); }, 1 - alpha, 0, 1);
}

double wilson_upper(int64_t events, int64_t n, double alpha) {
  if (n <= 0) return 1;
  const double z = normal_quantile(1 - alpha), nn = static_cast<double>(n);
  const double p = static_cast<double>(events) / nn, z2 = z * z;
  const double centre = p + z2 / (2 * nn), half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return std::min(1.0, (centre + half) / (1 + z2 / nn));
}

MeanSe paired_mean_se(const std::vector<double>& d) {
  MeanSe r;
  r.n = r.groups = static_cast<int64_t>(d.size());
  if (d.empty()) return {kNaN, kNaN, 0, 0};
  r.mean = std::accumulate(d.begin(), d.end(), 0.0) / static_cast<double>(d.size());
  double ss = 0;
  for (double x : d) ss += (x - r.mean) * (x - r.mean);
  const double n = static_cast<double>(d.size());
  r.se = d.size() < 2 ? kNaN : std::sqrt(ss / (n - 1) / n);
  return r;
}

MeanSe clustered_mean_se(const std::vector<double>& d, const std::vector<int64_t>& cluster) {
  MeanSe r = paired_mean_se(d);
  if (d.empty()) return r;
  int64_t g = 0;
  for (int64_t c : cluster) g = std::max(g, c + 1);
  std::vector<double> s(static_cast<size_t>(g), 0.0);
  std::vector<uint8_t> used(static_cast<size_t>(g), 0);
  for (size_t i = 0; i < d.size(); ++i) {
    s[static_cast<size_t>(cluster[i])] += d[i] - r.mean;
    used[static_cast<size_t>(cluster[i])] = 1;
  }
  const int64_t groups = std::count(used.begin(), used.end(), 1);
  double ss = 0;
  for (double x : s) ss += x * x;
  r.groups = groups;
  const double n = static_cast<double>(d.size()), G = static_cast<double>(groups);
  r.se = groups < 2 ? kNaN : std::sqrt(G / (G - 1) * ss) / n;
  return r;
}

std::vector<HolmStep> holm(const std::vector<double>& p, double alpha) {
  const size_t k = p.size();
  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<HolmStep> out(k);
  bool still = true;
  for (size_t r = 0; r < k; ++r) {
    HolmStep& s = out[order[r]];
    s.alpha = alpha / static_cast<double>(k - r);
    still = still && p[order[r]] <= s.alpha;
    s.rejected = still;
  }
  return out;
}

namespace {

// Both sides' rows, paired: row j of each side is the j-th item in id order.
struct PairedItems {
  std::vector<int64_t> ids;
  std::vector<size_t> cand_row, base_row;
};

// The order of `items` by id; "" or why it is unusable (a repeated id).
std::string sorted_rows(const GateSide& s, const char* which, std::vector<size_t>* rows) {
  rows->resize(s.items.size());
  std::iota(rows->begin(), rows->end(), 0);
  std::sort(rows->begin(), rows->end(), [&](size_t a, size_t b) { return s.items[a] < s.items[b]; });
  for (size_t j = 1; j < rows->size(); ++j) {
    if (s.items[(*rows)[j]] == s.items[(*rows)[j - 1]])
      return std::string("the ") + which + " evaluation " + s.evaluation_id + " lists item " +
             std::to_string(s.items[(*rows)[j]]) + " twice";
  }
  return {};
}

std::string pair_items(const GateInput& in, PairedItems* p) {
  std::vector<size_t> c, b;
  if (auto why = sorted_rows(in.candidate, "candidate", &c); !why.empty()) return why;
  if (auto why = sorted_rows(in.baseline, "baseline", &b); !why.empty()) return why;
  const auto& ci = in.candidate.items;
  const auto& bi = in.baseline.items;
  size_t i = 0, j = 0;
  int64_t only_c = 0, only_b = 0, first_c = -1, first_b = -1;
  while (i < c.size() || j < b.size()) {
    if (j == b.size() || (i < c.size() && ci[c[i]] < bi[b[j]])) {
      if (only_c++ == 0) first_c = ci[c[i]];
      ++i;
    } else if (i == c.size() || bi[b[j]] < ci[c[i]]) {
      if (only_b++ == 0) first_b = bi[b[j]];
      ++j;
    } else {
      p->ids.push_back(ci[c[i]]);
      p->cand_row.push_back(c[i]);
      p->base_row.push_back(b[j]);
      ++i, ++j;
    }
  }
  if (only_c || only_b) {
    std::string why = "the evaluations scored different items (" + std::to_string(c.size()) + " in the candidate " +
                      in.candidate.evaluation_id + ", " + std::to_string(b.size()) + " in the baseline " +
                      in.baseline.evaluation_id + ", " + std::to_string(p->ids.size()) + " in common";
    if (only_c) why += "; " + std::to_string(only_c) + " only in the candidate, first item " + std::to_string(first_c);
    if (only_b) why += "; " + std::to_string(only_b) + " only in the baseline, first item " + std::to_string(first_b);
    return why + "): a paired comparison needs the same items";
  }
  if (p->ids.empty()) return "the evaluations have no items to compare";
  return {};
}

// One gated metric's data: where its statistics are, and how to read them.
struct MetricData {
  const MetricSpec* spec = nullptr;
  int offset = 0;
  int64_t k = 0;                 // pass@K
  std::vector<int64_t> cluster;  // per paired item: its cluster index; empty = none
  // Classification: per paired item the candidate's (true, predicted) and the
  // baseline's, as indices into the `labels` distinct labels present.
  std::vector<uint32_t> dense;
  size_t labels = 0;
};

class Computer {
 public:
  Computer(const GatePolicy& policy, const GateInput& in, const PairedItems& p, int stride)
      : policy_(policy), in_(in), p_(p), stride_(stride) {}

  const double* cand(size_t j, const MetricData& m) const {
    return &in_.candidate.stats[p_.cand_row[j] * stride_ + m.offset];
  }
  const double* base(size_t j, const MetricData& m) const {
    return &in_.baseline.stats[p_.base_row[j] * stride_ + m.offset];
  }

  // "" or the first malformed statistic of a gated metric.
  std::string validate(const MetricData& m) const {
    const Aggregation agg = m.spec->def->aggregation;
    const int w = stats_per_item(agg);
    for (size_t j = 0; j < p_.ids.size(); ++j) {
      for (int side = 0; side < 2; ++side) {
        const double* x = side ? base(j, m) : cand(j, m);
        auto bad = [&](const std::string& what) {
          return m.spec->name + " of item " + std::to_string(p_.ids[j]) + " in the " +
                 (side ? "baseline " + in_.baseline.evaluation_id : "candidate " + in_.candidate.evaluation_id) + ": " +
                 what;
        };
        for (int q = 0; q < w; ++q) {
          if (!std::isfinite(x[q])) return bad("statistic " + std::to_string(q) + " is not finite");
        }
        switch (agg) {
          case Aggregation::kMean:
            break;
          case Aggregation::kTokenWeighted:
            if (x[0] > 0 || !integral(x[1]) || x[1] < 1)
              return bad("expected a log-likelihood <= 0 and a whole count >= 1");
            break;
          case Aggregation::kCorpusBleu:
            for (int q = 0; q < 10; ++q) {
              if (x[q] < 0) return bad("BLEU statistics must be non-negative");
            }
            break;
          case Aggregation::kPassAtK:
            if (!integral(x[0]) || x[0] < 1 || !integral(x[1]) || x[1] < 0 || x[1] > x[0])
              return bad("expected samples n >= 1 and passing c in [0, n]");
            break;
          case Aggregation::kClassification:
            for (int q = 0; q < 2; ++q) {
              if (!integral(x[q]) || x[q] < 0 || x[q] >= kMaxLabel)
                return bad("labels must be whole numbers in [0, 2^20)");
            }
            break;
          case Aggregation::kRate:
            if ((x[0] != 0 && x[0] != 1) || (x[1] != 0 && x[1] != 1) || x[1] > x[0])
              return bad("expected an in-scope flag and an outcome, each 0 or 1, outcome <= flag");
            break;
        }
      }
      if (agg == Aggregation::kRate && cand(j, m)[0] != base(j, m)[0])
        return m.spec->name + ": item " + std::to_string(p_.ids[j]) +
               " is in scope in one evaluation and not in the other (the items differ)";
    }
    return {};
  }

  // A mean-like metric's per-item values (kMean, kRate in scope, pass@K per
  // problem), with the paired items they are over.
  void item_values(const MetricData& m, std::vector<double>* c, std::vector<double>* b,
                   std::vector<size_t>* which) const {
    for (size_t j = 0; j < p_.ids.size(); ++j) {
      const double* x = cand(j, m);
      const double* y = base(j, m);
      switch (m.spec->def->aggregation) {
        case Aggregation::kRate:
          if (x[0] != 1) continue;
          c->push_back(x[1]), b->push_back(y[1]);
          break;
        case Aggregation::kPassAtK:
          c->push_back(pass_at_k(static_cast<int64_t>(x[0]), static_cast<int64_t>(x[1]), m.k));
          b->push_back(pass_at_k(static_cast<int64_t>(y[0]), static_cast<int64_t>(y[1]), m.k));
          break;
        default:
          c->push_back(x[0]), b->push_back(y[0]);
          break;
      }
      which->push_back(j);
    }
  }

  // A non-mean metric (token-weighted, corpus BLEU, classification) over a
  // multiset of paired items; side 0 = candidate.
  double value(const MetricData& m, int side, const std::vector<uint32_t>& idx,
               std::vector<std::array<int64_t, 3>>* confusion) const {
    const std::string& name = m.spec->name;
    switch (m.spec->def->aggregation) {
      case Aggregation::kTokenWeighted: {
        double sa = 0, sb = 0;
        for (uint32_t j : idx) {
          const double* x = side ? base(j, m) : cand(j, m);
          sa += x[0], sb += x[1];
        }
        const double r = sa / sb;
        if (name == "perplexity" || name == "word_perplexity") return std::exp(-r);
        if (name == "cross_entropy") return -r;
        if (name == "bits_per_byte") return -r / std::log(2.0);
        return r;  // log_probability
      }
      case Aggregation::kCorpusBleu: {
        BleuStats s;
        for (uint32_t j : idx) {
          const double* x = side ? base(j, m) : cand(j, m);
          for (int n = 0; n < 4; ++n) s.matches[n] += x[n], s.totals[n] += x[4 + n];
          s.hyp_len += x[8], s.ref_len += x[9];
        }
        return corpus_bleu(s);
      }
      case Aggregation::kClassification: {
        confusion->assign(m.labels, {0, 0, 0});
        for (uint32_t j : idx) {
          const uint32_t t = m.dense[4 * j + 2 * side], p = m.dense[4 * j + 2 * side + 1];
          if (t == p) {
            (*confusion)[t][0]++;
          } else {
            (*confusion)[p][1]++;
            (*confusion)[t][2]++;
          }
        }
        bool micro = false;
        for (const auto& [k, v] : m.spec->args) micro |= k == "average" && v == "micro";
        auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
        auto score = [&](double tp, double fp, double fn) {
          if (name == "precision") return ratio(tp, tp + fp);
          if (name == "recall") return ratio(tp, tp + fn);
          return ratio(2 * tp, 2 * tp + fp + fn);
        };
        double tp = 0, fp = 0, fn = 0, sum = 0;
        int seen = 0;
        for (const auto& c : *confusion) {
          if (c[0] + c[1] + c[2] == 0) continue;
          ++seen;
          tp += static_cast<double>(c[0]), fp += static_cast<double>(c[1]), fn += static_cast<double>(c[2]);
          sum += score(static_cast<double>(c[0]), static_cast<double>(c[1]), static_cast<double>(c[2]));
        }
        if (micro) return score(tp, fp, fn);
        return seen ? sum / seen : kNaN;
      }
      default:
        return kNaN;
    }
  }

  // Classification: each item's labels as dense indices over the labels
  // present (so a label id near 2^20 costs no more than a small one).
  void densify(MetricData* m) const {
    if (m->spec->def->aggregation != Aggregation::kClassification) return;
    std::vector<double> all;
    for (size_t j = 0; j < p_.ids.size(); ++j) {
      for (int q = 0; q < 2; ++q) all.push_back(cand(j, *m)[q]), all.push_back(base(j, *m)[q]);
    }
    std::vector<double> uniq = all;
    std::sort(uniq.begin(), uniq.end());
    uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
    m->labels = uniq.size();
    m->dense.resize(all.size());
    for (size_t j = 0; j < p_.ids.size(); ++j) {
      auto index = [&](double v) {
        return static_cast<uint32_t>(std::lower_bound(uniq.begin(), uniq.end(), v) - uniq.begin());
      };
      m->dense[4 * j + 0] = index(cand(j, *m)[0]), m->dense[4 * j + 1] = index(cand(j, *m)[1]);
      m->dense[4 * j + 2] = index(base(j, *m)[0]), m->dense[4 * j + 3] = index(base(j, *m)[1]);
    }
  }

  // The bootstrap distribution of the improvement-oriented difference (sorted).
  std::vector<double> bootstrap(const MetricData& m, double sign, int64_t* groups) const {
    const size_t n = p_.ids.size();
    std::vector<std::vector<uint32_t>> units;  // what is resampled: items, or the items of each cluster
    if (m.cluster.empty()) {
      units.resize(n);
      for (size_t j = 0; j < n; ++j) units[j] = {static_cast<uint32_t>(j)};
    } else {
      for (size_t j = 0; j < n; ++j) {
        const auto g = static_cast<size_t>(m.cluster[j]);
        if (units.size() <= g) units.resize(g + 1);
        units[g].push_back(static_cast<uint32_t>(j));
      }
    }
    *groups = static_cast<int64_t>(units.size());
    std::vector<std::array<int64_t, 3>> confusion;
    std::mt19937_64 rng(policy_.bootstrap_seed ^ fnv1a(m.spec->name) ^ static_cast<uint64_t>(m.k));
    const uint64_t u = units.size();
    std::vector<double> out;
    out.reserve(static_cast<size_t>(policy_.bootstrap_replicates));
    std::vector<uint32_t> idx;
    idx.reserve(n * 2);
    for (int64_t r = 0; r < policy_.bootstrap_replicates; ++r) {
      idx.clear();
      for (uint64_t q = 0; q < u; ++q) {
        const auto& unit = units[static_cast<size_t>(rng() % u)];  // bias < u / 2^64: negligible
        idx.insert(idx.end(), unit.begin(), unit.end());
      }
      out.push_back(sign * (value(m, 0, idx, &confusion) - value(m, 1, idx, &confusion)));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Everything but the Holm step and the verdict.
  MetricDecision compute(const GatedMetric& g, const MetricData& m, std::vector<double>* boot) const {
    MetricDecision d;
    d.metric = g.metric;
    d.dimension = g.dimension;
    d.direction = g.direction;
    d.hard = g.hard;
    d.margin = g.margin;
    d.cap = g.cap;
    d.alpha = policy_.alpha;
    const double sign = g.direction == Direction::kHigherIsBetter ? 1 : -1;
    const Aggregation agg = m.spec->def->aggregation;
    const bool mean_like = agg == Aggregation::kMean || agg == Aggregation::kRate || agg == Aggregation::kPassAtK;
    if (mean_like) {
      std::vector<double> c, b, diff;
      std::vector<size_t> which;
      item_values(m, &c, &b, &which);
      for (size_t i = 0; i < c.size(); ++i) diff.push_back(sign * (c[i] - b[i]));
      d.n = static_cast<int64_t>(c.size());
      d.candidate = paired_mean_se(c).mean;
      d.baseline = paired_mean_se(b).mean;
      MeanSe ms;
      if (!m.cluster.empty()) {
        // Cluster indices renumbered over the items this metric is over (a rate's items in scope).
        std::vector<int64_t> cl, remap(p_.ids.size() + 1, -1);
        int64_t next = 0;
        for (size_t j : which) {
          int64_t& r = remap[static_cast<size_t>(m.cluster[j])];
          if (r < 0) r = next++;
          cl.push_back(r);
        }
        ms = clustered_mean_se(diff, cl);
        d.method = GateMethod::kClustered;
        d.clusters = ms.groups;
      } else {
        ms = paired_mean_se(diff);
        d.method = agg == Aggregation::kPassAtK ? GateMethod::kPassAtKPerProblem : GateMethod::kPairedMean;
      }
      d.difference = ms.mean;
      d.std_error = ms.se;
      if (g.cap) {
        d.cap_n = d.n;
        for (double x : c) d.cap_events += x == 1;
      }
    } else {
      d.method = GateMethod::kBootstrap;
      d.n = static_cast<int64_t>(p_.ids.size());
      std::vector<uint32_t> all(p_.ids.size());
      std::iota(all.begin(), all.end(), 0);
      std::vector<std::array<int64_t, 3>> confusion;
      d.candidate = value(m, 0, all, &confusion);
      d.baseline = value(m, 1, all, &confusion);
      d.difference = sign * (d.candidate - d.baseline);
      if (g.margin) {
        int64_t groups = 0;
        *boot = bootstrap(m, sign, &groups);
        if (!m.cluster.empty()) d.clusters = groups;
        d.bootstrap_replicates = policy_.bootstrap_replicates;
        d.bootstrap_seed = policy_.bootstrap_seed;
        d.std_error = paired_mean_se(*boot).se * std::sqrt(static_cast<double>(boot->size()));  // sd of replicates
      }
    }
    if (!g.margin) d.method = GateMethod::kCapOnly;
    if (g.cap) {
      d.cap_bound = std::string(cap_bound_name(policy_.cap_bound));
      d.cap_upper = policy_.cap_bound == CapBound::kWilson
                        ? wilson_upper(d.cap_events, d.cap_n, policy_.alpha)
                        : clopper_pearson_upper(d.cap_events, d.cap_n, policy_.alpha);
    }
    return d;
  }

 private:
  const GatePolicy& policy_;
  const GateInput& in_;
  const PairedItems& p_;
  int stride_;
};

// Degrees of freedom of a method's t quantile; 0 = the normal (bootstrap: percentile bounds instead).
double df_of(const MetricDecision& d) {
  if (d.method == GateMethod::kBootstrap) return 0;
  return static_cast<double>((d.method == GateMethod::kClustered ? d.clusters : d.n) - 1);
}

std::string pct(double alpha) { return num(100 * (1 - alpha)) + "%"; }

}  // namespace

GateDecision evaluate_gate(const GatePolicy& policy, const GateInput& in) {
  GateDecision out;
  out.policy = policy.name;
  out.policy_version = policy.version;
  out.candidate_evaluation = in.candidate.evaluation_id;
  out.baseline_evaluation = in.baseline.evaluation_id;
  out.alpha = policy.alpha;
  auto refuse = [&](std::string why) {
    out.refused = std::move(why);
    out.reasons = {"refused: " + out.refused};
    return out;
  };
  if (!policy.suite.empty() && !in.suite.empty() && policy.suite != in.suite)
    return refuse("the policy " + policy.name + " gates suite " + policy.suite + ", the evaluations ran " + in.suite);
  if (in.candidate.dataset_hash != in.baseline.dataset_hash)
    return refuse("the candidate " + in.candidate.evaluation_id + " scored dataset content " +
                  in.candidate.dataset_hash + ", the baseline " + in.baseline.evaluation_id + " scored " +
                  in.baseline.dataset_hash + ": a paired comparison needs the same dataset");
  int stride = 0;
  std::vector<int> offset;
  for (const auto& m : in.metrics) {
    if (!m.def) return refuse("metric " + m.name + " is not resolved (parse the suite first)");
    offset.push_back(stride);
    stride += stats_per_item(m.def->aggregation);
  }
  for (const GateSide* s : {&in.candidate, &in.baseline}) {
    if (s->stats.size() != s->items.size() * static_cast<size_t>(stride))
      return refuse("evaluation " + s->evaluation_id + " has " + std::to_string(s->stats.size()) + " statistics for " +
                    std::to_string(s->items.size()) + " items; its metrics need " + std::to_string(stride) +
                    " per item");
  }

  // Completeness is a hard gate: a missing shard fails, whatever the metrics say.
  for (const auto& [s, which] : {std::pair{&in.candidate, "candidate"}, std::pair{&in.baseline, "baseline"}}) {
    const bool done = s->status == EvalStatus::kCompleted || s->status == EvalStatus::kCached;
    if (!done || !s->missing_shards.empty()) {
      std::string why = std::string("hard gate: the ") + which + " evaluation " + s->evaluation_id + " is " +
                        std::string(eval_status_name(s->status));
      if (!s->missing_shards.empty()) {
        why += " with " + std::to_string(s->missing_shards.size()) +
               " shard(s) missing (first: " + std::to_string(s->missing_shards.front()) + ")";
      }
      out.reasons.push_back(why + "; a gate needs every shard of both evaluations COMPLETED");
      out.hard_failure = true;
      out.verdict = Verdict::kFail;
    }
  }

  PairedItems paired;
  if (std::string why = pair_items(in, &paired); !why.empty()) {
    if (out.hard_failure) {
      out.reasons.push_back("no metric compared: " + why);
      return out;
    }
    return refuse(why);
  }
  out.items = static_cast<int64_t>(paired.ids.size());

  // Resolve each gated metric to its statistics.
  std::vector<MetricData> data;
  for (const auto& g : policy.metrics) {
    MetricData m;
    const bool pass = g.metric.rfind("pass@", 0) == 0;
    for (size_t i = 0; i < in.metrics.size(); ++i) {
      const MetricSpec& s = in.metrics[i];
      if (pass && s.name == "pass@k") {
        for (int64_t k : s.k) {
          if ("pass@" + std::to_string(k) == g.metric) m.spec = &s, m.offset = offset[i], m.k = k;
        }
      } else if (s.name == g.metric) {
        m.spec = &s, m.offset = offset[i];
      }
    }
    if (!m.spec) {
      std::string have;
      for (const auto& s : in.metrics) {
        for (const auto& o : s.outputs()) have += (have.empty() ? "" : ", ") + o;
      }
      return refuse("the policy gates " + g.metric + (g.where.line ? " (at " + g.where.str() + ")" : "") +
                    " but the evaluations report " + have);
    }
    if (!g.cluster.empty()) {
      auto it = in.clusters.find(g.cluster);
      if (it == in.clusters.end())
        return refuse(g.metric + " is clustered by '" + g.cluster + "'" +
                      (g.where.line ? " (at " + g.where.str() + ")" : "") +
                      " but no cluster ids were given under that key");
      std::map<std::string, int64_t> index;
      for (int64_t id : paired.ids) {
        auto c = it->second.find(id);
        if (c == it->second.end())
          return refuse("item " + std::to_string(id) + " has no '" + g.cluster + "' cluster id (" + g.metric + ")");
        auto [pos, inserted] = index.emplace(c->second, static_cast<int64_t>(index.size()));
        m.cluster.push_back(pos->second);
      }
    }
    data.push_back(std::move(m));
  }
  Computer comp(policy, in, paired, stride);
  for (auto& m : data) {
    if (std::string why = comp.validate(m); !why.empty()) return refuse("malformed statistics: " + why);
    comp.densify(&m);
  }

  // Per metric: values, difference, SE; bootstrap distributions kept for the bounds.
  std::vector<std::vector<double>> boots(policy.metrics.size());
  for (size_t i = 0; i < policy.metrics.size(); ++i)
    out.metrics.push_back(comp.compute(policy.metrics[i], data[i], &boots[i]));

  // p-values of "not inferior" for the comparisons, then Holm across them.
  std::vector<size_t> compared;
  std::vector<double> pvals;
  for (size_t i = 0; i < out.metrics.size(); ++i) {
    MetricDecision& d = out.metrics[i];
    if (!d.margin) continue;
    const double delta = *d.margin;
    if (d.method == GateMethod::kBootstrap) {
      const auto& b = boots[i];
      d.p_inferior =
          static_cast<double>(b.end() - std::lower_bound(b.begin(), b.end(), -delta)) / static_cast<double>(b.size());
    } else if (!std::isfinite(d.std_error)) {
      d.p_inferior = 1;
    } else if (d.std_error == 0) {
      d.p_inferior = d.difference < -delta ? 0 : 1;
    } else {
      d.p_inferior = cdf((d.difference + delta) / d.std_error, df_of(d));
    }
    compared.push_back(i);
    pvals.push_back(d.p_inferior);
  }
  const std::vector<HolmStep> steps = holm(pvals, policy.alpha);

  bool any_inconclusive = false;
  for (size_t c = 0; c < compared.size(); ++c) {
    MetricDecision& d = out.metrics[compared[c]];
    const double delta = *d.margin;
    d.alpha_holm = steps[c].alpha;
    const std::string unit = d.method == GateMethod::kPassAtKPerProblem ? " problems" : " items";
    if (d.method == GateMethod::kBootstrap) {
      const auto& b = boots[compared[c]];
      d.lower = sorted_quantile(b, d.alpha);
      d.upper = sorted_quantile(b, 1 - d.alpha_holm);
    } else if (std::isfinite(d.std_error)) {
      d.lower = d.difference - quantile(1 - d.alpha, df_of(d)) * d.std_error;
      d.upper = d.difference + quantile(1 - d.alpha_holm, df_of(d)) * d.std_error;
    } else {
      d.lower = -INFINITY, d.upper = INFINITY;
      d.verdict = Verdict::kInconclusive;
      d.reason =
          d.metric + " is INCONCLUSIVE: " + std::to_string(d.n) + unit + " are too few to estimate a standard error";
      continue;
    }
    const std::string head = d.metric + " (" + std::string(dimension_name(d.dimension)) + ", " +
                             std::string(gate_method_name(d.method)) + "): difference " + num(d.difference) + " (" +
                             num(d.candidate) + " vs " + num(d.baseline) + "), ";
    if (d.lower >= -delta) {
      d.verdict = Verdict::kPass;
      d.reason = head + "non-inferior: the " + pct(d.alpha) + " lower bound " + num(d.lower) + " is at or above -" +
                 num(delta);
    } else if (steps[c].rejected) {
      d.verdict = Verdict::kFail;
      d.reason = head + "inferior: the " + pct(d.alpha_holm) + " upper bound " + num(d.upper) + " (Holm, " +
                 std::to_string(compared.size()) + " metrics) is below -" + num(delta);
    } else {
      d.verdict = Verdict::kInconclusive;
      // The SE shrinks as 1/sqrt(n): at the observed difference and spread,
      // n' = n (q SE / (d + delta))^2 items decide it (q: the side's quantile).
      const double gap = d.difference + delta;
      const double q = gap > 0 ? quantile(1 - d.alpha, df_of(d)) : quantile(1 - d.alpha_holm, df_of(d));
      const double units = static_cast<double>(d.n);
      if (gap != 0 && d.std_error > 0) {
        const double need = std::ceil(units * std::pow(q * d.std_error / gap, 2));
        d.items_needed = need > 9e18 ? INT64_MAX : static_cast<int64_t>(need);
      }
      d.reason = head + "INCONCLUSIVE: the " + pct(d.alpha) + " lower bound " + num(d.lower) + " is below -" +
                 num(delta) + " and the " + pct(d.alpha_holm) + " upper bound " + num(d.upper) + " is not; ";
      if (d.items_needed > 0)
        d.reason += "at the observed difference and spread about " + std::to_string(d.items_needed) + unit + " (" +
                    std::to_string(d.n) + " now) would show it " + (gap > 0 ? "non-inferior" : "inferior");
      else
        d.reason += "the observed difference equals the margin: no sample size would decide it";
    }
  }

  // Caps (hard), and the metric verdicts they change.
  for (auto& d : out.metrics) {
    if (!d.cap) continue;
    const std::string cap_text = d.metric + " (safety cap): the candidate's rate " + num(d.candidate) + " (" +
                                 std::to_string(d.cap_events) + " of " + std::to_string(d.cap_n) + "), its " +
                                 pct(d.alpha) + " " + d.cap_bound + " upper bound " + num(d.cap_upper);
    if (d.cap_upper > *d.cap) {
      d.verdict = Verdict::kFail;
      d.hard = true;
      d.reason = (d.reason.empty() ? "" : d.reason + "; ") + "hard gate broken: " + cap_text + " is above the cap " +
                 num(*d.cap);
    } else {
      if (!d.margin) d.verdict = Verdict::kPass;
      d.reason = (d.reason.empty() ? "" : d.reason + "; ") + cap_text + " is at or below the cap " + num(*d.cap);
    }
  }

  bool any_fail = out.verdict == Verdict::kFail;
  for (const auto& d : out.metrics) {
    if (d.verdict == Verdict::kPass) continue;
    out.reasons.push_back(d.reason);
    if (d.verdict == Verdict::kFail) {
      any_fail = true;
      if (d.hard) out.hard_failure = true;
    } else {
      any_inconclusive = true;
    }
  }
  if (any_fail) {
    out.verdict = Verdict::kFail;
  } else if (any_inconclusive) {
    out.verdict = Verdict::kInconclusive;
  } else {
    out.verdict = Verdict::kPass;
    out.reasons.push_back("every gated metric is non-inferior (" + std::to_string(out.metrics.size()) +
                          " metrics, each at its " + pct(policy.alpha) + " one-sided bound; intersection-union test)");
  }
  return out;
}

std::string GateDecision::to_json() const {
  std::string s;
  json::Writer w(&s);
  w.begin_object();
  w.key("alpha").num(alpha);
  w.key("baselineEvaluation").str(baseline_evaluation);
  w.key("candidateEvaluation").str(candidate_evaluation);
  w.key("hardFailure").boolean(hard_failure);
  w.key("items").integer(items);
  w.key("metrics").begin_array();
  for (const auto& d : metrics) {
    w.begin_object();
    w.key("alpha").num(d.alpha);
    w.key("alphaHolm").num(d.alpha_holm);
    w.key("baseline").num(d.baseline);
    if (d.bootstrap_replicates) {
      w.key("bootstrapReplicates").integer(d.bootstrap_replicates);
      w.key("bootstrapSeed").integer(static_cast<int64_t>(d.bootstrap_seed));
    }
    w.key("candidate").num(d.candidate);
    if (d.cap) {
      w.key("cap").num(*d.cap);
      w.key("capBound").str(d.cap_bound);
      w.key("capEvents").integer(d.cap_events);
      w.key("capN").integer(d.cap_n);
      w.key("capUpper").num(d.cap_upper);
    }
    if (d.clusters) w.key("clusters").integer(d.clusters);
    w.key("difference").num(d.difference);
    w.key("dimension").str(dimension_name(d.dimension));
    w.key("direction").str(direction_name(d.direction));
    w.key("hard").boolean(d.hard);
    w.key("itemsNeeded").integer(d.items_needed);
    w.key("lower").num(d.lower);
    if (d.margin)
      w.key("margin").num(*d.margin);
    else
      w.key("margin").null();
    w.key("method").str(gate_method_name(d.method));
    w.key("metric").str(d.metric);
    w.key("n").integer(d.n);
    w.key("pInferior").num(d.p_inferior);
    w.key("reason").str(d.reason);
    w.key("stdError").num(d.std_error);
    w.key("upper").num(d.upper);
    w.key("verdict").str(verdict_name(d.verdict));
    w.end_object();
  }
  w.end_array();
  w.key("policy").str(policy);
  w.key("policyVersion").str(policy_version);
  w.key("reasons").begin_array();
  for (const auto& r : reasons) w.str(r);
  w.end_array();
  w.key("refused").str(refused);
  w.key("verdict").str(verdict_name(verdict));
  w.end_object();
  return s;
}

}  // namespace runlens::eval
