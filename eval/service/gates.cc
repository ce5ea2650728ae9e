// Quality gates and promotion in the evaluation service
// (docs/evaluation-service.md, "Gates and promotion"): policies loaded at
// start, a gate applied to two evaluations' stored per-item statistics, the
// decision stored in quality_gates, and the promotion state machine with its
// audit records (store::GateRow and store::TransitionRecord describe the rows).
#include <algorithm>
#include <chrono>
#include <filesystem>

#include "eval/service/config_files.h"
#include "eval/service/records.h"
#include "eval/service/service.h"
#include "formats/json_reader.h"
#include "formats/json_writer.h"
#include "formats/jsonl_codec.h"
#include "formats/sha256.h"

namespace runlens::eval::service {

namespace fs = std::filesystem;

namespace {

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int status_rank(const std::string& status) {
  if (status.empty() || status == "registered") return 0;
  const auto& s = promotion_statuses();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == status) return static_cast<int>(i);
  }
  return -1;  // retired, rolled_back, or something else
}

// The version of a model now in production, from its audit records (the last
// one moved there and not moved since); "" when none.
std::string production_version(const std::vector<store::TransitionRecord>& model_audit) {
  std::map<std::string, std::string> last_to;
  for (const auto& t : model_audit) last_to[t.model_version] = t.to_status;
  for (const auto& [version, to] : last_to) {
    if (to == "production") return version;
  }
  return {};
}

}  // namespace

void EvalService::load_gates() {
  const std::vector<std::string> files = yaml_files(options_.gate_paths, "gate policy", &gate_problems_);
  for (const auto& f : files) {
    try {
      GatePolicy g = load_gate_policy(f);
      bool dup = false;
      for (const auto& l : gates_) {
        if (l.name == g.name) {
          gate_problems_.push_back(f + ": gate '" + g.name + "' is also defined in " + l.file +
                                   " (the first one is used)");
          dup = true;
        }
      }
      if (!dup) gates_.push_back(std::move(g));
    } catch (const runtime::ConfigError& e) {
      for (const auto& d : e.diagnostics()) gate_problems_.push_back(d.str());
    }
  }
}

std::vector<GateInfo> EvalService::gates() {
  std::vector<GateInfo> out;
  for (const auto& g : gates_) {
    GateInfo i{g.name, g.file, g.version, g.suite, g.description, g.alpha, {}};
    for (const auto& m : g.metrics) i.metrics.push_back(std::string(dimension_name(m.dimension)) + "/" + m.metric);
    out.push_back(std::move(i));
  }
  return out;
}

bool EvalService::gate_side(const std::string& evaluation_id, GateSide* side, const Suite** suite, GateOutcome* out,
                            ClusterIds* clusters) {
  auto v = store_->evals->evaluation(evaluation_id);
  if (!v) {
    out->http_status = 404;
    out->error = "unknown evaluation '" + evaluation_id + "'";
    return false;
  }
  const store::EvaluationRecord& r = v->run;
  const Suite* s = find_suite(r.suite);
  if (!s) {
    out->http_status = 409;
    out->error = "evaluation " + evaluation_id + " ran suite '" + r.suite +
                 "', which this service did not load: its statistics cannot be read";
    return false;
  }
  *suite = s;
  side->evaluation_id = evaluation_id;
  side->dataset_hash = r.dataset_hash;
  side->status = parse_status(r.status).value_or(EvalStatus::kFailed);
  for (const auto& sh : v->shards) {
    if (sh.status != "COMPLETED" && sh.status != "CACHED") side->missing_shards.push_back(sh.shard);
  }
  std::vector<store::ItemResult> items = store_->evals->items(evaluation_id, std::nullopt);
  // A whole-cache hit keeps no items of its own: they are its source's.
  if (items.empty() && r.status == "CACHED" && !r.cached_from.empty())
    items = store_->evals->items(r.cached_from, std::nullopt);
  const std::vector<std::string> names = stat_names(*s);
  side->items.reserve(items.size());
  side->stats.resize(items.size() * names.size());
  for (size_t i = 0; i < items.size(); ++i) {
    side->items.push_back(items[i].item);
    for (const auto& [field, id] : items[i].clusters) (*clusters)[field].emplace(items[i].item, id);
    if (!stats_of(items[i], names, &side->stats[i * names.size()])) {
      out->http_status = 409;
      out->error = "item " + std::to_string(items[i].item) + " of evaluation " + evaluation_id +
                   " lacks the statistics its suite's metrics need";
      return false;
    }
  }
  return true;
}

GateOutcome EvalService::evaluate_gate(const GateRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  return evaluate_gate_locked(request);
}

GateOutcome EvalService::evaluate_gate_locked(const GateRequest& request) {
  GateOutcome out;
  const GatePolicy* policy = nullptr;
  for (const auto& g : gates_) {
    if (g.name == request.policy) policy = &g;
  }
  if (!policy) {
    out.http_status = 404;
    out.error = "unknown gate policy '" + request.policy + "'";
    return out;
  }
  GateRequest req = request;
  if (req.baseline.empty()) {
    // The baseline of a gate is the current production version unless named:
    // its latest COMPLETED or CACHED evaluation of the candidate's suite.
    auto cand = store_->evals->evaluation(req.candidate);
    if (!cand) {
      out.http_status = 404;
      out.error = "unknown evaluation '" + req.candidate + "'";
      return out;
    }
    const std::string model = cand->run.model_id;
    const std::string prod = production_version(store_->evals->transitions(model, ""));
    if (prod.empty()) {
      out.http_status = 409;
      out.error = "no baseline named and " + model + " has no production version to compare with";
      return out;
    }
    int64_t best = -1;
    if (auto pv = store_->evals->model_version(model, prod)) {
      for (const auto& e : pv->evaluations) {
        if (e.suite == cand->run.suite && (e.status == "COMPLETED" || e.status == "CACHED") && e.created_ns > best) {
          best = e.created_ns;
          req.baseline = e.evaluation_id;
        }
      }
    }
    if (req.baseline.empty()) {
      out.http_status = 409;
      out.error = "no baseline named and the production version " + model + ":" + prod +
                  " has no COMPLETED or CACHED evaluation of suite " + cand->run.suite;
      return out;
    }
  }
  GateInput in;
  const Suite* cs = nullptr;
  const Suite* bs = nullptr;
  if (!gate_side(req.candidate, &in.candidate, &cs, &out, &in.clusters)) return out;
  if (!gate_side(req.baseline, &in.baseline, &bs, &out, &in.clusters)) return out;
  // Items stored without a cluster id the policy needs (before schema v5, or
  // before a policy named the field): from the dataset file, when it is still
  // the content both evaluations scored.
  add_dataset_clusters(cs->name, in.candidate.dataset_hash, &in.clusters);
  if (stat_names(*cs) != stat_names(*bs)) {
    out.http_status = 409;
    out.error = "evaluations " + req.candidate + " (suite " + cs->name + ") and " + req.baseline + " (suite " +
                bs->name + ") do not compute the same metrics: they cannot be compared";
    return out;
  }
  in.metrics = cs->metrics;
  in.suite = cs->name;
  out.decision = eval::evaluate_gate(*policy, in);
  if (!out.decision.refused.empty()) {
    out.http_status = 409;
    out.error = out.decision.refused;
    if (std::string p = clusters_problem(cs->name); !p.empty()) out.error += " (" + p + ")";
    return out;
  }
  const int64_t decided = wall_ns();
  out.gate_id = "g-" + sha256::hex(policy->name + "\n" + policy->version + "\n" + req.candidate + "\n" + req.baseline +
                                   "\n" + std::to_string(decided))
                           .substr(0, 16);
  const std::string body = out.decision.to_json();
  out.json = "{\"gateId\":\"" + out.gate_id + "\",\"decidedNs\":" + std::to_string(decided) +
             (body.size() > 2 ? "," + body.substr(1) : std::string("}"));
  auto ev = store_->evals->evaluation(req.candidate);
  const std::string benchmark = ev ? ev->run.benchmark : std::string();
  std::vector<store::GateRow> rows;
  store::GateRow d;
  d.gate_id = out.gate_id;
  d.evaluation_id = req.candidate;
  d.benchmark = benchmark;
  d.decision_json = out.json;
  d.threshold = policy->alpha;
  d.passed = out.decision.verdict == Verdict::kPass;
  d.decided_ns = decided;
  rows.push_back(d);
  for (const auto& m : out.decision.metrics) {
    store::GateRow r;
    r.gate_id = out.gate_id + "/" + m.metric;
    r.evaluation_id = req.candidate;
    r.benchmark = benchmark;
    r.metric = m.metric;
    if (m.margin) {
      r.observed = m.difference;
      r.threshold = -*m.margin;
    } else if (m.cap) {
      r.observed = m.cap_upper;
      r.threshold = *m.cap;
    }
    r.passed = m.verdict == Verdict::kPass;
    r.decided_ns = decided;
    rows.push_back(std::move(r));
  }
  try {
    store_->evals->write_gate_rows(rows);
  } catch (const store::StoreError& e) {
    out.http_status = 503;
    out.error = std::string("the gate decision could not be stored: ") + e.what();
    return out;
  }
  note(req.candidate, "gate " + out.gate_id + " (" + policy->name + " v" + policy->version + ") against " +
                          req.baseline + ": " + std::string(verdict_name(out.decision.verdict)));
  if (out.decision.verdict == Verdict::kFail) {
    GateAlertContext c;
    c.gate_id = out.gate_id;
    c.decided_ns = decided;
    if (ev) c.model_id = ev->run.model_id, c.model_version = ev->run.model_version;
    if (auto bv = store_->evals->evaluation(req.baseline))
      c.baseline_model_version = bv->run.model_id + ":" + bv->run.model_version;
    out.alerts = gate_alerts(out.decision, c);
    raise_alerts(req.candidate, out.alerts);
  }
  return out;
}

void EvalService::raise_alerts(const std::string& evaluation_id, const std::vector<Alert>& alerts) {
  if (alerts.empty()) return;
  store::GraphBatch batch;
  std::vector<std::string> json;
  for (const Alert& a : alerts) {
    store::StoredAlert s;
    s.alert = a;
    jsonl::encode_alert(a, &s.json);
    json.push_back(s.json);
    batch.alerts.push_back(std::move(s));
  }
  std::string kinds;
  for (const Alert& a : alerts) kinds += (kinds.empty() ? "" : ", ") + a.kind + " " + a.alert_id;
  try {
    // INSERT OR REPLACE by alert_id: the same decision taken again updates its alerts.
    store_->graph->write(batch);
  } catch (const store::StoreError& e) {
    note(evaluation_id, std::string("alerts not stored: ") + e.what());
  }
  if (std::string why = alerts_.send(alerts, json); !why.empty()) note(evaluation_id, "alerts: " + why);
  note(evaluation_id, "raised " + kinds);
}

void EvalService::auto_gate(const std::string& evaluation_id) {
  // A store that fails here costs the automatic gate, never the service thread.
  try {
    auto_gate_unguarded(evaluation_id);
  } catch (const store::StoreError& e) {
    note(evaluation_id, std::string("automatic gate stopped: ") + e.what());
  }
}

void EvalService::auto_gate_unguarded(const std::string& evaluation_id) {
  std::optional<store::EvaluationView> v = store_->evals->evaluation(evaluation_id);
  if (!v) return;
  const store::EvaluationRecord& r = v->run;
  bool named = false;
  for (const auto& g : gates_) named |= g.suite == r.suite;
  if (!named || r.model_id.empty()) return;
  const std::string prod = production_version(store_->evals->transitions(r.model_id, ""));
  if (prod.empty()) {
    return note(evaluation_id, "no automatic gate: " + r.model_id + " has no production version to compare with");
  }
  if (prod == r.model_version) return;  // the production version is its own baseline
  for (const auto& g : gates_) {
    if (g.suite != r.suite) continue;
    GateOutcome o = evaluate_gate_locked(GateRequest{g.name, evaluation_id, ""});
    if (!o.error.empty())
      note(evaluation_id, "automatic gate " + g.name + " not applied: " + o.error);
    else
      note(evaluation_id, "automatic gate " + g.name + ": " + o.gate_id + " " +
                              std::string(verdict_name(o.decision.verdict)) +
                              (o.alerts.empty() ? "" : ", " + std::to_string(o.alerts.size()) + " alert(s)"));
  }
}

PromoteOutcome EvalService::promote(const PromoteRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  PromoteOutcome out;
  const std::string who = request.user.empty() ? std::string("anonymous") : request.user;
  const std::string mv = request.model_id + ":" + request.version;
  auto view = store_->evals->model_version(request.model_id, request.version);
  if (!view) {
    out.http_status = 404;
    out.error = "unknown model version '" + mv + "'";
    return out;
  }
  const std::string from = view->version.status.empty() ? std::string("registered") : view->version.status;
  const std::vector<store::TransitionRecord> model_audit = store_->evals->transitions(request.model_id, "");
  int64_t seq = model_audit.empty() ? 0 : model_audit.back().seq;
  std::vector<store::TransitionRecord> rows;
  auto record = [&](const std::string& version, const std::string& f, const std::string& t, const std::string& gate_id,
                    const std::string& reason) {
    store::TransitionRecord r;
    r.model_id = request.model_id;
    r.model_version = version;
    r.seq = ++seq;
    r.from_status = f;
    r.to_status = t;
    r.actor = who;
    r.decided_ns = wall_ns();
    r.gate_id = gate_id;
    r.reason = reason;
    out.audit.push_back(transition_json(r));
    rows.push_back(std::move(r));
  };
  // Where each version of this model last moved, from the audit records.
  std::map<std::string, std::string> last_to;
  for (const auto& t : model_audit) last_to[t.model_version] = t.to_status;
  auto refuse = [&](int status, std::string why) {
    out.http_status = status;
    out.error = std::move(why);
    return out;
  };

  if (request.to == "rollback") {
    if (from != "production") return refuse(409, mv + " is " + from + ", not production: only production rolls back");
    // The previous production version: the one most recently retired by a promotion to production.
    std::string previous;
    for (auto it = model_audit.rbegin(); it != model_audit.rend() && previous.empty(); ++it) {
      if (it->to_status == "retired" && it->model_version != request.version && last_to[it->model_version] == "retired")
        previous = it->model_version;
    }
    if (previous.empty())
      return refuse(409, "no previous production version of " + request.model_id + " to roll back to");
    record(request.version, from, "rolled_back", "", "rollback by " + who);
    record(previous, "retired", "production", "", "rollback of " + mv);
    try {
      store_->evals->set_model_version_status(request.model_id, request.version, "rolled_back");
      store_->evals->set_model_version_status(request.model_id, previous, "production");
      store_->evals->write_transitions(rows);
    } catch (const store::StoreError& e) {
      return refuse(503, std::string("the promotion could not be stored: ") + e.what());
    }
    return out;
  }

  const int to_rank = status_rank(request.to);
  if (to_rank <= 0)
    return refuse(400,
                  "member 'to' must be evaluated, gated, canary, production or rollback, got '" + request.to + "'");
  const int from_rank = status_rank(from);
  if (from_rank < 0 || to_rank != from_rank + 1) {
    const std::string need = to_rank >= 1 ? promotion_statuses()[static_cast<size_t>(to_rank - 1)] : "";
    return refuse(409, "cannot move " + mv + " from " + from + " to " + request.to + ": it must be " +
                           (need == "candidate" ? std::string("a candidate (or registered)") : need) + " first");
  }
  if (request.to == "evaluated") {
    bool done = false;
    for (const auto& e : view->evaluations) done |= e.status == "COMPLETED" || e.status == "CACHED";
    if (!done) return refuse(409, mv + " has no COMPLETED or CACHED evaluation: it cannot be marked evaluated");
  }
  std::string gate_id;
  if (to_rank >= 2) {
    // The gate decision: the one named, else the latest of any evaluation of this version.
    std::optional<store::GateRow> decision;
    if (!request.gate_id.empty()) {
      for (const auto& r : store_->evals->gate_rows(request.gate_id)) {
        if (r.gate_id == request.gate_id && r.metric.empty()) decision = r;
      }
      if (!decision) return refuse(404, "unknown gate decision '" + request.gate_id + "'");
      bool ours = false;
      for (const auto& e : view->evaluations) ours |= e.evaluation_id == decision->evaluation_id;
      if (!ours)
        return refuse(409, "gate decision " + request.gate_id + " gated evaluation " + decision->evaluation_id +
                               ", which is not an evaluation of " + mv);
    } else {
      for (const auto& e : view->evaluations) {
        for (const auto& r : store_->evals->gate_rows_of_evaluation(e.evaluation_id)) {
          if (!r.metric.empty() || r.decision_json.empty()) continue;
          if (!decision || r.decided_ns > decision->decided_ns) decision = r;
        }
      }
      if (!decision) return refuse(409, mv + " has no gate decision: run a gate (POST /v1/gates/evaluate) first");
    }
    gate_id = decision->gate_id;
    out.gate_id = gate_id;
    if (!decision->passed.value_or(false)) {
      json::Value v;
      json::ParseError err;
      std::string verdict = "not PASS";
      if (json::parse(decision->decision_json, &v, &err) && v.type == json::Value::Type::kObject) {
        if (const json::Value* vv = v.find("verdict"); vv && vv->type == json::Value::Type::kString) verdict = vv->text;
        if (const json::Value* rs = v.find("reasons"); rs && rs->type == json::Value::Type::kArray) {
          for (const auto& r : rs->items) {
            if (r.type == json::Value::Type::kString) out.reasons.push_back(r.text);
          }
        }
      }
      return refuse(409, "cannot move " + mv + " to " + request.to + ": gate " + gate_id + " is " + verdict);
    }
  }
  record(request.version, from, request.to, gate_id, "");
  std::string retired;
  if (request.to == "production") {
    for (const auto& [version, to] : last_to) {
      if (to == "production" && version != request.version) retired = version;
    }
    if (!retired.empty()) record(retired, "production", "retired", "", "superseded by " + mv);
  }
  try {
    store_->evals->set_model_version_status(request.model_id, request.version, request.to);
    if (!retired.empty()) store_->evals->set_model_version_status(request.model_id, retired, "retired");
    store_->evals->write_transitions(rows);
  } catch (const store::StoreError& e) {
    return refuse(503, std::string("the promotion could not be stored: ") + e.what());
  }
  return out;
}

}  // namespace runlens::eval::service
