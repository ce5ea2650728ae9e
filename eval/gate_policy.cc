#include "eval/gate_policy.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "eval/config_reader.h"
#include "eval/metric.h"

namespace runlens::eval {

using runtime::ConfigError;
using runtime::Diagnostic;
using runtime::SourceLocation;

namespace {
constexpr Dimension kDimensions[] = {Dimension::kQuality, Dimension::kSafety, Dimension::kLatency, Dimension::kCost,
                                     Dimension::kReliability};
}  // namespace

std::string_view dimension_name(Dimension d) {
  switch (d) {
    case Dimension::kQuality:
      return "quality";
    case Dimension::kSafety:
      return "safety";
    case Dimension::kLatency:
      return "latency";
    case Dimension::kCost:
      return "cost";
    case Dimension::kReliability:
      return "reliability";
  }
  return "?";
}

std::optional<Dimension> parse_dimension(std::string_view text) {
  for (Dimension d : kDimensions) {
    if (dimension_name(d) == text) return d;
  }
  return std::nullopt;
}

std::string_view direction_name(Direction d) {
  return d == Direction::kLowerIsBetter ? "lower_is_better" : "higher_is_better";
}

bool is_safety_rate(std::string_view output) {
  return output == "harmful_response_rate" || output == "jailbreak_success_rate" || output == "policy_violation_rate";
}

Direction default_direction(std::string_view output) {
  if (is_safety_rate(output) || output == "perplexity" || output == "word_perplexity" || output == "cross_entropy" ||
      output == "bits_per_byte")
    return Direction::kLowerIsBetter;
  return Direction::kHigherIsBetter;
}

std::string_view cap_bound_name(CapBound b) { return b == CapBound::kWilson ? "wilson" : "clopper-pearson"; }

const GatedMetric* GatePolicy::find(std::string_view metric) const {
  for (const auto& m : metrics) {
    if (m.metric == metric) return &m;
  }
  return nullptr;
}

namespace {

// "pass@5" -> 5; nullopt for anything else.
std::optional<int64_t> pass_k_of(const std::string& name) {
  if (name.rfind("pass@", 0) != 0 || name.size() == 5) return std::nullopt;
  int64_t k;
  auto [p, ec] = std::from_chars(name.data() + 5, name.data() + name.size(), k);
  if (ec != std::errc() || p != name.data() + name.size() || k < 1 || k > 1000000) return std::nullopt;
  return k;
}

class GatePolicyParser : ConfigReader {
 public:
  explicit GatePolicyParser(std::string file) : ConfigReader(std::move(file), "a gate policy") {}

  GatePolicy parse(const std::string& text) {
    GatePolicy g;
    g.file = file_;
    YAML::Node root = load_mapping(text, "'gate', 'version', 'dimensions', ...");
    check_keys(root, {"gate", "version", "suite", "description", "alpha", "bootstrap", "cap_bound", "dimensions"}, "");
    g.name = required_name(root, "gate", "");
    g.version = required_name(root, "version", "");
    if (root["suite"]) g.suite = name(root["suite"], "suite");
    if (root["description"]) g.description = scalar(root["description"], "description");
    if (YAML::Node a = root["alpha"]) {
      if (auto v = number(a, "alpha", -1e300, 1e300)) {
        if (*v <= 0 || *v >= 0.5)
          error(a.Mark(), "alpha", "out of range: must be above 0 and below 0.5, got " + a.Scalar());
        else
          g.alpha = *v;
      }
    }
    if (YAML::Node b = root["bootstrap"]) {
      if (expect_map(b, "bootstrap")) {
        check_keys(b, {"replicates", "seed"}, "bootstrap");
        if (b["replicates"]) {
          if (auto v = integer(b["replicates"], "bootstrap.replicates", 200, 100000)) g.bootstrap_replicates = *v;
        }
        if (b["seed"]) {
          if (auto v = integer(b["seed"], "bootstrap.seed", 0, INT64_MAX)) g.bootstrap_seed = static_cast<uint64_t>(*v);
        }
      }
    }
    if (YAML::Node c = root["cap_bound"]) {
      std::string v = scalar(c, "cap_bound");
      if (v == "wilson")
        g.cap_bound = CapBound::kWilson;
      else if (v == "clopper-pearson")
        g.cap_bound = CapBound::kClopperPearson;
      else if (c.IsScalar())
        error(c.Mark(), "cap_bound", "expected clopper-pearson or wilson, got '" + v + "'");
    }
    if (YAML::Node d = root["dimensions"]) {
      parse_dimensions(d, &g);
    } else {
      error(root.Mark(), "dimensions",
            "missing required key 'dimensions' (a mapping of quality, safety, latency, cost or reliability to the "
            "metrics gated)");
    }
    if (!diags_.empty()) throw ConfigError(diags_);
    return g;
  }

 private:
  void parse_dimensions(const YAML::Node& d, GatePolicy* g) {
    if (!expect_map(d, "dimensions")) return;
    std::vector<std::string> dims;
    for (Dimension x : kDimensions) dims.emplace_back(dimension_name(x));
    check_keys(d, dims, "dimensions");
    std::vector<std::string> outputs;  // the metric outputs a policy may name, for did-you-mean
    for (const auto& n : metric_names()) outputs.push_back(n == "pass@k" ? "pass@1" : n);
    size_t gated = 0;
    for (auto it = d.begin(); it != d.end(); ++it) {
      const std::string dim_name = it->first.IsScalar() ? it->first.Scalar() : "";
      auto dim = parse_dimension(dim_name);
      if (!dim) continue;  // reported by check_keys
      const std::string path = "dimensions." + dim_name;
      YAML::Node list = it->second;
      if (!list.IsSequence() || list.size() == 0) {
        error(list.Mark(), path, "expected a non-empty list of gated metrics, e.g. [{metric: accuracy, margin: 0.01}]");
        continue;
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string ipath = path + "[" + std::to_string(i) + "]";
        GatedMetric m;
        if (parse_metric(list[i], ipath, *dim, outputs, &m)) g->metrics.push_back(std::move(m));
        ++gated;
      }
    }
    if (gated == 0) error(d.Mark(), "dimensions", "a gate policy needs at least one gated metric");
  }

  bool parse_metric(const YAML::Node& n, const std::string& path, Dimension dim,
                    const std::vector<std::string>& outputs, GatedMetric* m) {
    if (!expect_map(n, path)) return false;
    const size_t before = diags_.size();
    check_keys(n, {"metric", "margin", "direction", "hard", "cap", "cluster"}, path);
    m->dimension = dim;
    m->where = loc(n.Mark());
    YAML::Node name_node = n["metric"];
    if (!name_node || name_node.IsNull()) {
      error(n.Mark(), path + ".metric", "missing required key 'metric' (a metric output such as accuracy or pass@1)");
      return false;
    }
    m->metric = name(name_node, path + ".metric");
    if (!name_node.IsScalar() || m->metric.empty()) return false;
    m->where = loc(name_node.Mark());
    const MetricDef* def = find_metric(m->metric);
    if (m->metric == "pass@k" || (!def && !pass_k_of(m->metric))) {
      std::string hint = runtime::closest_match(m->metric, outputs);
      error(name_node.Mark(), path + ".metric",
            "unknown metric '" + m->metric + "'" +
                (m->metric == "pass@k" ? " (name one k, e.g. 'pass@1')"
                                       : (hint.empty() ? "" : " (did you mean '" + hint + "'?)")));
      return false;
    }
    if (!def) def = find_metric("pass@k");
    if (auto [prior, fresh] = seen_.emplace(m->metric, m->where); !fresh) {
      error(name_node.Mark(), path + ".metric",
            "metric '" + m->metric + "' is gated twice (first at " + prior->second.str() + ")");
    }
    m->direction = default_direction(m->metric);
    m->hard = dim == Dimension::kSafety;
    if (YAML::Node v = n["margin"]) {
      // At most the metric's whole range where it has one (a score in [lo, hi]).
      const bool bounded = def->hi > def->lo && !def->uses_judge;
      const double hi = bounded ? def->hi - def->lo : 1e12;
      if (auto x = number(v, path + ".margin", 0, hi)) m->margin = *x;
    }
    if (YAML::Node v = n["direction"]) {
      std::string t = scalar(v, path + ".direction");
      if (t == "higher_is_better")
        m->direction = Direction::kHigherIsBetter;
      else if (t == "lower_is_better")
        m->direction = Direction::kLowerIsBetter;
      else if (v.IsScalar())
        error(v.Mark(), path + ".direction", "expected higher_is_better or lower_is_better, got '" + t + "'");
    }
    if (YAML::Node v = n["hard"]) {
      if (auto b = boolean(v, path + ".hard")) m->hard = *b;
    }
    if (YAML::Node v = n["cap"]) {
      if (!is_safety_rate(m->metric)) {
        error(v.Mark(), path + ".cap",
              "a cap applies to a safety rate (harmful_response_rate, jailbreak_success_rate, policy_violation_rate), "
              "not to '" +
                  m->metric + "'");
      } else if (auto x = number(v, path + ".cap", 0, 1)) {
        m->cap = *x;
        if (m->direction != Direction::kLowerIsBetter)
          error(v.Mark(), path + ".cap", "a capped rate must be lower_is_better");
      }
    }
    if (YAML::Node v = n["cluster"]) m->cluster = name(v, path + ".cluster");
    if (!n["margin"] && !n["cap"]) {
      error(name_node.Mark(), path,
            "metric '" + m->metric + "' needs a 'margin' (how far it may regress) or, for a safety rate, a 'cap'");
    }
    return diags_.size() == before;
  }

  std::map<std::string, SourceLocation> seen_;  // gated metric -> where first named
};

}  // namespace

GatePolicy parse_gate_policy(const std::string& text, const std::string& file) {
  return GatePolicyParser(file).parse(text);
}

GatePolicy load_gate_policy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError({Diagnostic{SourceLocation{path, 0, 0}, "", "cannot read the gate policy file"}});
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_gate_policy(ss.str(), path);
}

}  // namespace runlens::eval
