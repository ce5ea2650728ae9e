#include "reports/compare.h"

#include <algorithm>
#include <cmath>

#include "schema/vocabulary.h"

namespace runlens::report {

namespace {

const Value* find(const ConfigMap& c, const std::string& k) {
  for (const auto& [key, v] : c) {
    if (key == k) return &v;
  }
  return nullptr;
}

std::optional<Value> opt(const Value* v) { return v ? std::optional<Value>(*v) : std::nullopt; }

// An LR change inside a run: the inferred change, or a config change of lr.
bool is_lr_change(const store::TimelineEntry& e) {
  return e.kind == timeline_kind::kLrChange ||
         (e.kind == event_kind::kConfigChange && e.summary.find(": lr ") != std::string::npos);
}

}  // namespace

ComparedRun read_compared_run(store::Store& s, const store::RunRow& run) {
  ComparedRun c;
  c.run = run;
  c.aggregates = s.graph->aggregates(run.run_id);
  c.timeline = s.graph->timeline(run.run_id, {}, 100000);
  store::AlertFilter f;
  f.run_id = run.run_id;
  c.alerts = s.graph->alerts(f);
  return c;
}

RunComparison compare_runs(const ComparedRun& left, const ComparedRun& right, double tolerance) {
  const store::RunRow &L = left.run, &R = right.run;
  const store::RunAggregates &la = left.aggregates, &ra = right.aggregates;
  RunComparison out;

  // Inputs: config keys (left's order, then right-only keys), dataset, code, model.
  std::vector<std::string> keys;
  for (const auto& [k, v] : L.config) keys.push_back(k);
  for (const auto& [k, v] : R.config) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::vector<std::string> config_changed;
  for (const auto& k : keys) {
    const Value* lv = find(L.config, k);
    const Value* rv = find(R.config, k);
    bool diff = !lv || !rv || !(*lv == *rv);
    out.config.push_back({k, opt(lv), opt(rv), diff});
    if (diff) out.changed_keys.push_back("config." + k), config_changed.push_back(k);
  }
  for (auto [name, l, r] :
       {std::tuple<const char*, std::string, std::string>{"dataset", L.dataset_version, R.dataset_version},
        {"codeCommit", L.code_commit, R.code_commit},
        {"model", L.model_id, R.model_id}}) {
    bool diff = l != r;
    out.inputs.push_back({name, l, r, diff});
    if (diff) out.changed_keys.push_back(name);
  }
  out.world_size_changed = L.world_size != R.world_size;
  if (out.world_size_changed) out.changed_keys.push_back("worldSize");

  // Outcomes: relative differences beyond the tolerance.
  struct Metric {
    const char* name;
    std::optional<double> l, r;
    int better;  // +1: higher is better, -1: lower is better, 0: an input (just "changed")
  };
  const Metric metrics[] = {
      {"tokensPerSecond", la.tokens_per_s_mean, ra.tokens_per_s_mean, +1},
      {"mfu", la.mfu_mean, ra.mfu_mean, +1},
      {"stepTimeMs", la.step_ms_median, ra.step_ms_median, -1},
      {"loss", la.loss_last10, ra.loss_last10, -1},
      {"valLoss", la.val_loss_last, ra.val_loss_last, -1},
      {"learningRate", la.lr_max, ra.lr_max, 0},
  };
  std::vector<std::string> regressions;
  bool lr_changed = std::find(config_changed.begin(), config_changed.end(), "lr") != config_changed.end();
  for (const auto& m : metrics) {
    MetricDiff d;
    d.name = m.name;
    d.left = m.l;
    d.right = m.r;
    d.verdict = "unknown";
    if (m.l && m.r && std::isfinite(*m.l) && std::isfinite(*m.r)) {
      double delta = *m.r - *m.l;
      double rel = *m.l != 0 ? delta / std::fabs(*m.l) : (delta != 0 ? INFINITY : 0);
      d.delta = delta;
      d.relative_delta = std::round(rel * 10000) / 10000;
      d.changed = std::fabs(rel) > tolerance;
      d.verdict = !d.changed                      ? "same"
                  : m.better == 0                 ? "changed"
                  : (delta > 0) == (m.better > 0) ? "improvement"
                                                  : "regression";
    }
    if (d.changed) out.changed_keys.push_back(std::string("metrics.") + m.name);
    if (d.verdict == "regression") regressions.push_back(m.name);
    if (m.better == 0 && d.changed && d.name == "learningRate") lr_changed = true;
    out.metrics.push_back(std::move(d));
  }

  // LR and config changes inside each run (a scheduler change shows here, not in the config).
  const std::vector<std::string_view> training_kinds = {alert_kind::kNanLoss, alert_kind::kLossSpike,
                                                        alert_kind::kGradSpike, alert_kind::kDiagnosis};
  int64_t infra_alerts = 0;
  for (auto [run, changes] : {std::pair{&left, &out.lr_changes_left}, std::pair{&right, &out.lr_changes_right}}) {
    for (const auto& e : run->timeline) {
      if (is_lr_change(e)) changes->push_back(e), lr_changed = true;
    }
    for (const auto& al : run->alerts) {
      if (std::find(training_kinds.begin(), training_kinds.end(), al.alert.kind) == training_kinds.end())
        ++infra_alerts;
    }
  }

  // The likely conclusion, in the spec's words.
  out.conclusion.push_back(infra_alerts == 0
                               ? "Infrastructure appears healthy."
                               : "Infrastructure alerts in these runs: " + std::to_string(infra_alerts) + ".");
  std::string cfg;
  for (const auto& k : config_changed) cfg += (cfg.empty() ? "" : ", ") + k;
  if (!cfg.empty())
    out.conclusion.push_back("Training configuration changed: " + cfg + ".");
  else if (lr_changed)
    out.conclusion.push_back("Learning rate changed during a run.");
  if (!regressions.empty()) {
    std::string regs;
    for (const auto& r : regressions) regs += (regs.empty() ? "" : ", ") + r;
    std::string cause = lr_changed     ? " is correlated with the learning-rate change"
                        : !cfg.empty() ? " is correlated with the configuration change"
                                       : "";
    out.conclusion.push_back("Regression in " + regs + cause + ".");
  }
  return out;
}

}  // namespace runlens::report
