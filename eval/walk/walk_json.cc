// The JSON of the walk's routes (docs/api.md, "Model comparison and the
// regression walk"): camelCase like the rest of the API.
#include <cmath>
#include <cstdio>

#include "eval/walk/walk.h"

namespace runlens::walk {

namespace {

using json::Writer;

void opt_num(Writer& w, const char* key, const std::optional<double>& v) {
  w.key(key);
  if (v && std::isfinite(*v))
    w.num(*v);
  else
    w.null();
}

void opt_int(Writer& w, const char* key, const std::optional<int64_t>& v) {
  w.key(key);
  if (v)
    w.integer(*v);
  else
    w.null();
}

void value(Writer& w, const Value& v) {
  if (v.kind == Value::Kind::kNumber && std::isfinite(v.number))
    w.num(v.number);
  else if (v.kind == Value::Kind::kString)
    w.str(v.text);
  else
    w.null();
}

void side_json(Writer& w, const VersionSide& v) {
  w.begin_object().key("modelVersion").str(v.version.id()).key("version").str(v.version.version);
  w.key("status").str(v.version.status).key("checkpointId").str(v.checkpoint_id);
  opt_int(w, "step", v.step);
  w.key("runId").str(v.run ? v.run->run_id : std::string());
  w.key("datasetVersion").str(v.run ? v.run->dataset_version : std::string());
  w.key("evaluations").begin_array();
  for (const auto& e : v.evaluations) w.str(e.record.evaluation_id);
  w.end_array().end_object();
}

void health_json(Writer& w, const Health& h, const VersionSide& v) {
  w.begin_object().key("healthy").boolean(h.healthy());
  opt_int(w, "untilStep", v.step);
  w.key("alerts").integer(h.alerts).key("infraAlerts").integer(h.infra_alerts);
  w.key("incidents").integer(h.incidents).key("infraEvents").integer(h.infra_events);
  w.key("byKind").begin_object();
  for (const auto& [k, n] : h.by_kind) w.key(k).integer(n);
  w.end_object().end_object();
}

void pair_metric(Writer& w, const char* key, const std::optional<double>& l, const std::optional<double>& r) {
  w.key(key).begin_object();
  opt_num(w, "left", l);
  opt_num(w, "right", r);
  opt_num(w, "delta", l && r ? std::optional<double>(*r - *l) : std::nullopt);
  w.end_object();
}

void decision_json(Writer& w, const WalkDecision& d) {
  w.begin_object().key("tree").str(d.tree).key("cause").str(d.cause).key("owner").str(d.owner);
  w.key("summary").str(d.summary).key("recommendation").str(d.recommendation);
  w.key("path").begin_array();
  for (const auto& p : d.path)
    w.begin_object().key("condition").str(p.condition).key("value").str(p.value).end_object();
  w.end_array().key("evidence").begin_array();
  for (const auto& e : d.evidence) {
    w.begin_object().key("signal").str(e.signal);
    opt_num(w, "value", e.value);
    w.end_object();
  }
  w.end_array().end_object();
}

void comparison_members(Writer& w, const ModelComparison& c) {
  w.key("left");
  side_json(w, *c.left);
  w.key("right");
  side_json(w, *c.right);
  const std::string ld = c.left->run ? c.left->run->dataset_version : "",
                    rd = c.right->run ? c.right->run->dataset_version : "";
  w.key("dataset").begin_object().key("left").str(ld).key("right").str(rd).key("changed").boolean(ld != rd);
  w.end_object();
  w.key("config").begin_array();
  for (const auto& d : c.config) {
    w.begin_object().key("key").str(d.key).key("left");
    d.left ? value(w, d.left->value) : (void)w.null();
    opt_int(w, "leftStep", d.left ? std::optional<int64_t>(d.left->step) : std::nullopt);
    w.key("right");
    d.right ? value(w, d.right->value) : (void)w.null();
    opt_int(w, "rightStep", d.right ? std::optional<int64_t>(d.right->step) : std::nullopt);
    w.key("changed").boolean(d.changed).end_object();
  }
  w.end_array();
  w.key("metrics").begin_object();
  pair_metric(w, "mfu", c.left_mfu, c.right_mfu);
  pair_metric(w, "loss", c.left_loss, c.right_loss);
  pair_metric(w, "valLoss", c.left_val_loss, c.right_val_loss);
  w.end_object();
  w.key("benchmarks");
  benchmarks_json(w, c.benchmarks);
  w.key("health").begin_object().key("left");
  health_json(w, c.left_health, *c.left);
  w.key("right");
  health_json(w, c.right_health, *c.right);
  w.end_object();
  w.key("signals").begin_object();
  for (const auto& [k, v] : c.signals.values) w.key(k).num(v);
  w.end_object();
  w.key("changedKeys").begin_object();
  for (const auto& [k, step] : c.signals.changed_keys) w.key(k).integer(step);
  w.end_object();
  w.key("decision");
  decision_json(w, c.decision);
  w.key("conclusion").begin_array();
  for (const auto& s : c.conclusion) w.str(s);
  w.end_array();
}

}  // namespace

void benchmarks_json(Writer& w, const std::vector<BenchmarkComparison>& benchmarks) {
  w.begin_array();
  for (const auto& b : benchmarks) {
    w.begin_object().key("benchmark").str(b.benchmark);
    w.key("leftEvaluation").str(b.left_evaluation).key("rightEvaluation").str(b.right_evaluation);
    w.key("paired").boolean(b.paired).key("note").str(b.note);
    w.key("versions").begin_array();
    for (const auto& v : b.versions) {
      w.begin_object().key("name").str(v.name).key("left").str(v.left).key("right").str(v.right);
      w.key("changed").boolean(v.changed).end_object();
    }
    w.end_array().key("metrics").begin_array();
    for (const auto& m : b.metrics) {
      w.begin_object().key("metric").str(m.metric);
      opt_num(w, "left", m.left);
      opt_num(w, "right", m.right);
      opt_num(w, "difference", m.difference);
      opt_num(w, "stdError", m.std_error);
      opt_num(w, "ciLow", m.ci_low);
      opt_num(w, "ciHigh", m.ci_high);
      opt_num(w, "pValue", m.p_value);
      w.key("significant").boolean(m.significant).key("method").str(m.method).key("n").integer(m.n);
      w.end_object();
    }
    w.end_array().end_object();
  }
  w.end_array();
}

std::string model_compare_json(const ModelComparison& c) {
  std::string out;
  Writer w(&out);
  w.begin_object().key("modelId").str(c.right->version.model_id);
  comparison_members(w, c);
  w.end_object();
  return out;
}

std::string explain_json(const ModelComparison& c) {
  std::string out;
  Writer w(&out);
  const VersionSide& v = *c.right;
  w.begin_object().key("modelVersion").str(v.version.id()).key("baseline").str(c.left->version.id());
  // The walk of spec section 52, one level a line.
  w.key("walk").begin_array();
  auto level = [&](const char* name, const std::string& id, const std::string& summary) {
    w.begin_object().key("level").str(name).key("id").str(id).key("summary").str(summary).end_object();
  };
  level("modelVersion", v.version.id(), "status " + v.version.status);
  for (const auto& e : v.evaluations) {
    std::string s = e.record.benchmark + " " + e.record.status;
    for (const auto& m : e.metrics) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " %s=%.4g", m.name.c_str(), m.value);
      s += buf;
    }
    level("evaluation", e.record.evaluation_id, s);
  }
  level("checkpoint", v.checkpoint_id, v.step ? "step " + std::to_string(*v.step) : "step unknown");
  level("trainingRun", v.run ? v.run->run_id : "",
        v.run ? "status " + v.run->status + ", dataset " + v.run->dataset_version : "no training run recorded");
  std::string diff;
  for (const auto& d : c.config) {
    if (!d.changed) continue;
    auto txt = [](const std::optional<EffectiveKey>& k) {
      if (!k) return std::string("(none)");
      if (k->value.kind == Value::Kind::kString) return k->value.text;
      char buf[48];
      std::snprintf(buf, sizeof buf, "%g", k->value.number);
      return std::string(buf);
    };
    diff += (diff.empty() ? "" : ", ") + d.key + " " + txt(d.left) + " → " + txt(d.right);
    if (d.right && d.right->step > 0) diff += " at step " + std::to_string(d.right->step);
  }
  level("configDiff", c.left->run ? c.left->run->run_id : "",
        diff.empty() ? "no configuration key differs from the baseline's run" : diff);
  const Health& h = c.right_health;
  std::string hs = h.healthy() ? "healthy" : "not healthy";
  hs += ": " + std::to_string(h.infra_alerts) + " infrastructure alert(s), " + std::to_string(h.incidents) +
        " incident(s), " + std::to_string(h.infra_events) + " infrastructure event(s)";
  if (v.step) hs += " up to step " + std::to_string(*v.step);
  level("health", v.run ? v.run->run_id : "", hs);
  level("cause", c.decision.cause, "owner " + c.decision.owner + ": " + c.decision.summary);
  w.end_array();
  comparison_members(w, c);
  w.end_object();
  return out;
}

void write_run_evaluations(Writer& w, store::Store& s, const std::string& left_run, const std::string& right_run) {
  std::vector<store::EvaluationRecord> l, r;
  if (!s.evals) {
    w.key("evaluations").begin_array().end_array();
    return;
  }
  std::map<std::string, std::string> checkpoint_run;  // lineage of evaluations that do not name their run
  for (const auto& e : s.evals->evaluations({})) {
    std::string run = e.run_id;
    if (run.empty() && !e.checkpoint_id.empty()) {
      auto it = checkpoint_run.find(e.checkpoint_id);
      if (it == checkpoint_run.end()) {
        auto c = s.evals->checkpoint(e.checkpoint_id);
        it = checkpoint_run.emplace(e.checkpoint_id, c ? c->run_id : std::string()).first;
      }
      run = it->second;
    }
    if (run.empty()) continue;
    if (run == left_run) l.push_back(e);
    if (run == right_run) r.push_back(e);
  }
  const auto lr = read_results(s, latest_per_benchmark(l)), rr = read_results(s, latest_per_benchmark(r));
  w.key("evaluations");
  benchmarks_json(w, compare_evaluations(lr, rr));
}

}  // namespace runlens::walk
