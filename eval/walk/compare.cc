// The comparison of two model versions and the likely conclusion in words
// (spec sections 23 and 52), and the two routes' reading of the store.
#include <cmath>
#include <cstdio>

#include "eval/walk/walk.h"

namespace runlens::walk {

namespace {

std::string num_text(double v) {
  char buf[64];
  if (std::fabs(v) < 1e15 && v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

std::string value_text(const Value& v) { return v.kind == Value::Kind::kNumber ? num_text(v.number) : v.text; }

std::string opt_text(const std::optional<double>& v) { return v ? num_text(*v) : std::string("-"); }

std::string health_sentence(const Health& h, const VersionSide& v, const char* side) {
  std::string run = v.run ? v.run->run_id : std::string("?");
  std::string until = v.step ? " up to step " + std::to_string(*v.step) : std::string();
  if (h.healthy()) return "";
  std::string kinds;
  for (const auto& [k, n] : h.by_kind) {
    if (k == "config_change") continue;
    kinds += (kinds.empty() ? "" : ", ") + k + " x" + std::to_string(n);
  }
  return std::string("Infrastructure was not healthy in the ") + side + "'s run " + run + until + ": " +
         std::to_string(h.infra_alerts) + " infrastructure alert(s), " + std::to_string(h.infra_events) +
         " event(s) (" + kinds + ").";
}

}  // namespace

ModelComparison compare_versions(const VersionSide& baseline, const VersionSide& candidate,
                                 const ops::rules::RuleSet& rules) {
  ModelComparison c;
  c.left = &baseline;
  c.right = &candidate;
  const std::vector<EffectiveKey> lc =
      baseline.run ? effective_config(*baseline.run, baseline.timeline, baseline.step) : std::vector<EffectiveKey>{};
  const std::vector<EffectiveKey> rc = candidate.run
                                           ? effective_config(*candidate.run, candidate.timeline, candidate.step)
                                           : std::vector<EffectiveKey>{};
  auto add = [&](const std::string& key) {
    for (const auto& d : c.config) {
      if (d.key == key) return;
    }
    ConfigKeyDiff d;
    d.key = key;
    if (const EffectiveKey* a = find_key(lc, key)) d.left = *a;
    if (const EffectiveKey* b = find_key(rc, key)) d.right = *b;
    d.changed = !d.left || !d.right || !(d.left->value == d.right->value);
    c.config.push_back(std::move(d));
  };
  for (const auto& k : lc) add(k.key);
  for (const auto& k : rc) add(k.key);
  c.left_val_loss = val_loss_at(baseline.steps, baseline.step);
  c.right_val_loss = val_loss_at(candidate.steps, candidate.step);
  c.left_loss = loss_at(baseline.steps, baseline.step);
  c.right_loss = loss_at(candidate.steps, candidate.step);
  c.left_mfu = mfu_until(baseline.steps, baseline.step);
  c.right_mfu = mfu_until(candidate.steps, candidate.step);
  c.left_health = run_health(baseline.alerts, baseline.incidents, baseline.timeline, baseline.step);
  c.right_health = run_health(candidate.alerts, candidate.incidents, candidate.timeline, candidate.step);
  c.benchmarks = compare_evaluations(baseline.evaluations, candidate.evaluations);
  c.signals = pair_signals(baseline, candidate, c.benchmarks);
  c.decision = decide(rules, c.signals, candidate);

  // The likely conclusion, in the spec's words.
  std::string lh = health_sentence(c.left_health, baseline, "baseline");
  std::string rh = health_sentence(c.right_health, candidate, "candidate");
  if (lh.empty() && rh.empty()) {
    c.conclusion.push_back(candidate.run || baseline.run ? "Infrastructure appears healthy."
                                                         : "No training run is known for either version.");
  } else {
    if (!rh.empty()) c.conclusion.push_back(rh);
    if (!lh.empty()) c.conclusion.push_back(lh);
  }
  std::string changes;
  for (const auto& d : c.config) {
    if (!d.changed) continue;
    std::string s = d.key + " " + (d.left ? value_text(d.left->value) : std::string("(none)")) + " → " +
                    (d.right ? value_text(d.right->value) : std::string("(none)"));
    if (d.right && d.right->step > 0) s += " at step " + std::to_string(d.right->step);
    changes += (changes.empty() ? "" : ", ") + s;
  }
  if (baseline.run && candidate.run) {
    if (baseline.run->dataset_version != candidate.run->dataset_version)
      changes += (changes.empty() ? "" : ", ") + std::string("training dataset ") + baseline.run->dataset_version +
                 " → " + candidate.run->dataset_version;
    c.conclusion.push_back(changes.empty() ? "Training configuration unchanged."
                                           : "Training configuration changed: " + changes + ".");
  }
  if (c.left_val_loss && c.right_val_loss) {
    auto rel = c.signals.values.find("val_loss_rel");
    const bool changed = rel != c.signals.values.end() && std::fabs(rel->second) >= 0.02;
    c.conclusion.push_back("Validation loss " + num_text(*c.left_val_loss) + " → " + num_text(*c.right_val_loss) +
                           (!changed                               ? " (unchanged)."
                            : *c.right_val_loss > *c.left_val_loss ? " (regression)."
                                                                   : " (improvement)."));
  } else {
    c.conclusion.push_back("No validation loss at the checkpoint of " +
                           std::string(c.right_val_loss ? "the baseline." : "the candidate."));
  }
  for (const auto& b : c.benchmarks) {
    if (b.metrics.empty()) continue;
    const MetricComparison& m = b.metrics.front();
    std::string s = b.benchmark + " " + m.metric + " " + opt_text(m.left) + " → " + opt_text(m.right);
    if (m.difference) s += " (" + std::string(*m.difference >= 0 ? "+" : "") + num_text(*m.difference);
    if (m.method == "paired" && m.p_value)
      s += std::string(", p = ") + num_text(*m.p_value) + (m.significant ? ", significant)" : ", not significant)");
    else if (m.difference)
      s += m.method == "unpaired" ? ", not paired: the datasets differ)" : ")";
    std::string changed;
    for (const auto& v : b.versions) {
      if (v.changed && v.name != "datasetHash" && v.name != "promptHash")
        changed += (changed.empty() ? "" : ", ") + v.name + " " + v.left + " → " + v.right;
    }
    if (!changed.empty()) s += "; evaluation changed: " + changed;
    c.conclusion.push_back(s + ".");
  }
  if (!c.decision.cause.empty()) {
    std::string s = "Likely cause: " + c.decision.cause + " (owner " + c.decision.owner + ")";
    if (!c.decision.summary.empty()) s += ": " + c.decision.summary;
    c.conclusion.push_back(s + ".");
  }
  return c;
}

namespace {

// MODEL:VERSION or VERSION (of `model`).
std::pair<std::string, std::string> split_version(const std::string& model, const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return {model, text};
  if (colon == 0 || colon + 1 == text.size())
    throw WalkError{400, "expected VERSION or MODEL:VERSION, got '" + text + "'"};
  return {text.substr(0, colon), text.substr(colon + 1)};
}

void need_evaluations(const VersionSide& v) {
  if (v.evaluations.empty())
    throw WalkError{409, "model version " + v.version.id() +
                             " has no COMPLETED, PARTIAL or CACHED evaluation to compare: evaluate it first"};
}

}  // namespace

std::string model_compare(store::Store& s, const std::string& model, const std::string& left,
                          const std::string& right) {
  auto [lm, lv] = split_version(model, left);
  auto [rm, rv] = split_version(model, right);
  VersionSide l = read_version(s, lm, lv);
  VersionSide r = read_version(s, rm, rv);
  need_evaluations(r);
  need_evaluations(l);
  ModelComparison c = compare_versions(l, r, *builtin_model_rules());
  return model_compare_json(c);
}

std::string model_explain(store::Store& s, const std::string& model, const std::string& version,
                          const std::string& baseline) {
  VersionSide cand = read_version(s, model, version);
  std::string bm = model, bv;
  if (baseline.empty()) {
    bv = production_version(s, model);
    if (bv.empty())
      throw WalkError{
          409, "no baseline named and " + model + " has no production version to compare with: pass baseline=VERSION"};
    if (bv == version)
      throw WalkError{409, model + ":" + version +
                               " is the production version itself: pass baseline=VERSION to compare it with another"};
  } else {
    std::tie(bm, bv) = split_version(model, baseline);
  }
  VersionSide base = read_version(s, bm, bv);
  need_evaluations(cand);
  need_evaluations(base);
  ModelComparison c = compare_versions(base, cand, *builtin_model_rules());
  std::string out = explain_json(c);
  // Say where the baseline came from.
  const std::string from = baseline.empty() ? "production" : "named";
  return "{\"baselineFrom\":\"" + from + "\"," + out.substr(1);
}

}  // namespace runlens::walk
