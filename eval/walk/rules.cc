// The model-failure tree's vocabulary and environment (docs/rules.md, "The
// model-failure tree"): signals computed for a pair of model versions, alert
// and event kinds counted over the candidate's run up to its checkpoint.
#include <cmath>
#include <cstdio>

#include "eval/walk/walk.h"
#include "model_rules.h"

namespace runlens::walk {

namespace {

namespace rules = ops::rules;

// Every signal pair_signals() may set (docs/rules.md describes each).
const std::vector<std::string>& signal_list() {
  static const std::vector<std::string> s = {"val_loss",
                                             "baseline_val_loss",
                                             "val_loss_delta",
                                             "val_loss_rel",
                                             "lr",
                                             "baseline_lr",
                                             "lr_ratio",
                                             "lr_step",
                                             "baseline_lr_step",
                                             "config_changes",
                                             "mfu",
                                             "baseline_mfu",
                                             "mfu_ratio",
                                             "step",
                                             "baseline_step",
                                             "training_dataset_changed",
                                             "code_changed",
                                             "dataset_version_changed",
                                             "prompt_version_changed",
                                             "evaluator_version_changed",
                                             "benchmark_version_changed",
                                             "datasets_paired",
                                             "benchmark_delta",
                                             "benchmark_significant",
                                             "benchmarks",
                                             "infra_alerts",
                                             "infra_events",
                                             "incidents"};
  return s;
}

class ModelVocab final : public rules::Vocabulary {
 public:
  ModelVocab() {
    for (const auto& k : rules::alert_kinds()) kinds_.push_back(k);
    for (const auto& k : rules::event_kinds()) {
      if (std::find(kinds_.begin(), kinds_.end(), k) == kinds_.end()) kinds_.push_back(k);
    }
  }
  std::optional<int> signal(std::string_view name) const override { return index(signal_list(), name); }
  std::optional<int> kind(std::string_view name) const override { return index(kinds_, name); }
  std::vector<std::string> signal_names() const override { return signal_list(); }
  std::vector<std::string> kind_names() const override { return kinds_; }

 private:
  static std::optional<int> index(const std::vector<std::string>& v, std::string_view name) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == name) return static_cast<int>(i);
    }
    return std::nullopt;
  }
  std::vector<std::string> kinds_;
};

class PairEnv final : public rules::Environment {
 public:
  explicit PairEnv(const Signals& s) : s_(s) {}
  std::optional<double> signal(int signal, rules::Agg agg) const override {
    auto it = s_.values.find(signal_list()[static_cast<size_t>(signal)]);
    const bool known = it != s_.values.end();
    if (agg == rules::Agg::kPresent) return known ? 1.0 : 0.0;
    // A pair has one value per signal: at, max, min and recent are it; it has no baseline.
    if (agg == rules::Agg::kBaseline || agg == rules::Agg::kDelta || agg == rules::Agg::kRatio) return std::nullopt;
    return known ? std::optional<double>(it->second) : std::nullopt;
  }
  int64_t count(int kind, rules::Scope) const override {
    auto it = s_.health.by_kind.find(model_vocabulary().kind_names()[static_cast<size_t>(kind)]);
    return it == s_.health.by_kind.end() ? 0 : it->second;
  }
  std::optional<int64_t> first_step(int kind) const override {
    auto it = s_.health.first_step.find(model_vocabulary().kind_names()[static_cast<size_t>(kind)]);
    return it == s_.health.first_step.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  int64_t changed(std::string_view key) const override { return s_.changed_keys.count(std::string(key)) ? 1 : 0; }
  std::optional<double> attr(std::string_view) const override { return std::nullopt; }

 private:
  const Signals& s_;
};

// Counts, flags and steps print as integers; other values with four
// significant digits, and a decimal point (lr 1.0, not 1).
bool integral_signal(std::string_view name) {
  return name == "step" || name.ends_with("_step") || name.ends_with("_changed") || name == "config_changes" ||
         name == "datasets_paired" || name == "benchmarks" || name == "infra_alerts" || name == "infra_events" ||
         name == "incidents" || name == "benchmark_significant";
}

std::string number_text(std::string_view name, double v) {
  char buf[64];
  if (integral_signal(name) && std::fabs(v) < 1e15 && v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.4g", v);
  std::string s = buf;
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

const rules::Vocabulary& model_vocabulary() {
  static const ModelVocab v;
  return v;
}

rules::RuleSet parse_model_rules(const std::vector<rules::RuleFile>& files) {
  return rules::parse_rules(files, model_vocabulary());
}

std::shared_ptr<const rules::RuleSet> builtin_model_rules() {
  static const std::shared_ptr<const rules::RuleSet> set = [] {
    std::vector<rules::RuleFile> files;
    for (const auto& f : kEmbeddedModelRules)
      files.push_back({std::string("<built-in configs/rules/model/") + f.name + ">", f.text});
    return std::make_shared<const rules::RuleSet>(parse_model_rules(files));
  }();
  return set;
}

WalkDecision decide(const rules::RuleSet& rules, const Signals& signals, const VersionSide& candidate,
                    const std::string& symptom) {
  WalkDecision out;
  const int t = rules.tree_for(symptom);
  if (t < 0) {
    out.cause = "unknown";
    out.owner = "evaluation";
    out.summary = "no model-failure tree explains " + symptom;
    return out;
  }
  const rules::RuleTree& tree = rules.trees[static_cast<size_t>(t)];
  PairEnv env(signals);
  rules::Decision d = tree.decide(env);
  out.tree = tree.name;
  for (const auto& step : d.path) {
    out.path.push_back({step.condition->expr.text(), !step.value ? "unknown" : step.taken ? "true" : "false"});
  }
  if (!d.leaf) return out;
  const rules::Leaf& leaf = *d.leaf;
  out.cause = leaf.cause;
  out.owner = leaf.owner;
  const std::string run = candidate.run ? candidate.run->run_id : std::string();
  std::function<std::string(std::string_view)> lookup = [&](std::string_view name) -> std::string {
    if (auto bar = name.find('|'); bar != std::string_view::npos) {
      std::string first = lookup(name.substr(0, bar));
      return first != "unknown" ? first : lookup(name.substr(bar + 1));
    }
    if (auto it = signals.values.find(std::string(name)); it != signals.values.end())
      return number_text(name, it->second);
    if (name == "run") return run.empty() ? "unknown" : run;
    if (name == "symptom") return symptom;
    if (name == "where")
      return candidate.version.id() + (candidate.step ? " (step " + std::to_string(*candidate.step) + ")" : "");
    return "unknown";
  };
  out.summary = rules::render_template(leaf.summary, lookup);
  out.recommendation = rules::render_template(leaf.recommendation, lookup);
  for (int id : leaf.evidence) {
    const std::string& name = signal_list()[static_cast<size_t>(id)];
    auto it = signals.values.find(name);
    out.evidence.push_back({name, it == signals.values.end() ? std::nullopt : std::optional<double>(it->second)});
  }
  return out;
}

}  // namespace runlens::walk
