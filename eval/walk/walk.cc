#include "eval/walk/walk.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "eval/gate.h"
#include "formats/json_reader.h"
#include "schema/vocabulary.h"

namespace runlens::walk {

namespace {

bool finite(const std::optional<double>& v) { return v && std::isfinite(*v); }

bool is_event_kind(std::string_view k) {
  for (const auto& t : event_kind::kAll) {
    if (t.name == k) return true;
  }
  return false;
}

bool training_symptom(std::string_view k) {
  return k == alert_kind::kNanLoss || k == alert_kind::kLossSpike || k == alert_kind::kGradSpike;
}

bool evaluation_kind(std::string_view k) {
  return k == alert_kind::kBenchmarkRegression || k == alert_kind::kSafetyRegression ||
         k == alert_kind::kLatencyRegression;
}

bool infra_event(std::string_view k) {
  return k == event_kind::kXid || k == event_kind::kNcclTimeout || k == event_kind::kOom ||
         k == event_kind::kException || k == event_kind::kRestart || k == event_kind::kAbort;
}

bool at_or_before(const std::optional<int64_t>& s, const std::optional<int64_t>& limit) {
  return !limit || !s || *s <= *limit;
}

std::optional<Value> json_value(const json::Value* v) {
  if (!v) return std::nullopt;
  if (v->type == json::Value::Type::kNumber) return Value::of(v->number);
  if (v->type == json::Value::Type::kString) return Value::of(v->text);
  return std::nullopt;
}

const store::MetricValue* find_metric(const std::vector<store::MetricValue>& ms, const std::string& name) {
  for (const auto& m : ms) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::optional<double> score_of(const store::ItemResult& it, const std::string& name) {
  for (const auto& [k, v] : it.scores) {
    if (k == name) return v;
  }
  return std::nullopt;
}

}  // namespace

// --- effective config -------------------------------------------------------------

std::vector<EffectiveKey> effective_config(const store::RunRow& run, const std::vector<store::TimelineEntry>& timeline,
                                           std::optional<int64_t> step) {
  std::vector<EffectiveKey> out;
  for (const auto& [k, v] : run.config) out.push_back({k, v, 0});
  auto set = [&](const std::string& key, const Value& v, int64_t at) {
    for (auto& e : out) {
      if (e.key == key) {
        e.value = v, e.step = at;
        return;
      }
    }
    out.push_back({key, v, at});
  };
  std::vector<const store::TimelineEntry*> changes;
  for (const auto& e : timeline) {
    if (e.kind != event_kind::kConfigChange && e.kind != timeline_kind::kLrChange) continue;
    if (!e.step || (step && *e.step > *step)) continue;
    changes.push_back(&e);
  }
  std::stable_sort(changes.begin(), changes.end(), [](const auto* a, const auto* b) { return *a->step < *b->step; });
  for (const auto* e : changes) {
    json::Value d;
    json::ParseError err;
    if (e->detail_json.empty() || !json::parse(e->detail_json, &d, &err) || d.type != json::Value::Type::kObject)
      continue;
    std::optional<Value> nv = json_value(d.find("new"));
    if (!nv) continue;
    if (e->kind == timeline_kind::kLrChange) {
      set("lr", *nv, *e->step);
    } else if (const json::Value* k = d.find("key"); k && k->type == json::Value::Type::kString && !k->text.empty()) {
      set(k->text, *nv, *e->step);
    }
  }
  return out;
}

const EffectiveKey* find_key(const std::vector<EffectiveKey>& config, const std::string& key) {
  for (const auto& e : config) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

std::optional<double> val_loss_at(const std::vector<store::StepRow>& steps, std::optional<int64_t> step) {
  std::optional<double> out;
  int64_t best = INT64_MIN;
  for (const auto& r : steps) {
    if (!finite(r.stats.val_loss) || (step && r.stats.step > *step) || r.stats.step < best) continue;
    best = r.stats.step;
    out = r.stats.val_loss;
  }
  return out;
}

std::optional<double> mfu_until(const std::vector<store::StepRow>& steps, std::optional<int64_t> step) {
  double sum = 0;
  int64_t n = 0;
  for (const auto& r : steps) {
    if (!finite(r.stats.mfu) || (step && r.stats.step > *step)) continue;
    sum += *r.stats.mfu, ++n;
  }
  return n ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt;
}

std::optional<double> loss_at(const std::vector<store::StepRow>& steps, std::optional<int64_t> step) {
  std::vector<std::pair<int64_t, double>> v;
  for (const auto& r : steps) {
    if (finite(r.stats.loss) && (!step || r.stats.step <= *step)) v.emplace_back(r.stats.step, *r.stats.loss);
  }
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  size_t from = v.size() > 10 ? v.size() - 10 : 0;
  double sum = 0;
  for (size_t i = from; i < v.size(); ++i) sum += v[i].second;
  return sum / static_cast<double>(v.size() - from);
}

// --- health --------------------------------------------------------------------------

Health run_health(const std::vector<store::StoredAlert>& alerts, const std::vector<store::IncidentRow>& incidents,
                  const std::vector<store::TimelineEntry>& timeline, std::optional<int64_t> step) {
  Health h;
  auto note = [&](const std::string& kind, const std::optional<int64_t>& s) {
    ++h.by_kind[kind];
    if (s) {
      auto it = h.first_step.find(kind);
      if (it == h.first_step.end() || *s < it->second) h.first_step[kind] = *s;
    }
  };
  for (const auto& a : alerts) {
    const std::string& k = a.alert.kind;
    if (k == alert_kind::kDiagnosis || evaluation_kind(k) || !at_or_before(a.alert.step, step)) continue;
    ++h.alerts;
    if (!training_symptom(k)) ++h.infra_alerts;
    note(k, a.alert.step);
  }
  for (const auto& i : incidents) {
    if (at_or_before(i.opened_step, step)) ++h.incidents;
  }
  for (const auto& e : timeline) {
    if (!is_event_kind(e.kind) || !at_or_before(e.step, step)) continue;
    if (infra_event(e.kind)) ++h.infra_events;
    note(e.kind, e.step);
  }
  return h;
}

// --- benchmarks ---------------------------------------------------------------------

BenchmarkComparison compare_benchmark(const EvalResult& left, const EvalResult& right) {
  const store::EvaluationRecord &L = left.record, &R = right.record;
  BenchmarkComparison b;
  b.benchmark = L.benchmark;
  b.left_evaluation = L.evaluation_id;
  b.right_evaluation = R.evaluation_id;
  b.paired = !L.dataset_hash.empty() && L.dataset_hash == R.dataset_hash;
  if (!b.paired) {
    b.note = "the evaluations scored different datasets (" + L.dataset_id + "@" + L.dataset_version + " " +
             L.dataset_hash.substr(0, 12) + " vs " + R.dataset_id + "@" + R.dataset_version + " " +
             R.dataset_hash.substr(0, 12) + "): the difference is not paired and no significance is claimed";
  }
  auto field = [&](const char* name, std::string l, std::string r) { b.versions.push_back({name, l, r, l != r}); };
  field("dataset", L.dataset_id + "@" + L.dataset_version, R.dataset_id + "@" + R.dataset_version);
  field("datasetHash", L.dataset_hash, R.dataset_hash);
  field("prompt", L.prompt_template_version, R.prompt_template_version);
  field("promptHash", L.prompt_template_hash, R.prompt_template_hash);
  field("evaluator", L.evaluator_version, R.evaluator_version);
  field("benchmarkVersion", L.benchmark_version, R.benchmark_version);

  std::map<int64_t, const store::ItemResult*> left_items;
  for (const auto& it : left.items) left_items[it.item] = &it;
  for (const auto& lm : left.metrics) {
    const store::MetricValue* rm = find_metric(right.metrics, lm.name);
    if (!rm) continue;
    MetricComparison m;
    m.metric = lm.name;
    m.left = lm.value;
    m.right = rm->value;
    if (std::isfinite(lm.value) && std::isfinite(rm->value)) m.difference = rm->value - lm.value;
    if (b.paired) {
      std::vector<double> d;
      for (const auto& it : right.items) {
        auto li = left_items.find(it.item);
        if (li == left_items.end()) continue;
        auto rs = score_of(it, lm.name), ls = score_of(*li->second, lm.name);
        if (finite(rs) && finite(ls)) d.push_back(*rs - *ls);
      }
      if (d.size() >= 2) {
        eval::MeanSe ms = eval::paired_mean_se(d);
        const double df = static_cast<double>(d.size() - 1);
        const double t = eval::student_t_quantile(0.975, df);
        m.method = "paired";
        m.n = static_cast<int64_t>(d.size());
        m.difference = ms.mean;
        m.std_error = ms.se;
        m.ci_low = ms.mean - t * ms.se;
        m.ci_high = ms.mean + t * ms.se;
        if (ms.se > 0) {
          const double ts = ms.mean / ms.se;
          m.p_value = eval::incomplete_beta(df / 2, 0.5, df / (df + ts * ts));
        } else {
          m.p_value = ms.mean == 0 ? 1.0 : 0.0;
        }
        m.significant = *m.p_value < 0.05;
      } else {
        m.method = "aggregate";
      }
    } else {
      m.method = "unpaired";
      if (lm.std_error && rm->std_error && std::isfinite(*lm.std_error) && std::isfinite(*rm->std_error) &&
          m.difference) {
        m.std_error = std::sqrt(*lm.std_error * *lm.std_error + *rm->std_error * *rm->std_error);
        m.ci_low = *m.difference - 1.959963984540054 * *m.std_error;
        m.ci_high = *m.difference + 1.959963984540054 * *m.std_error;
      }
    }
    b.metrics.push_back(std::move(m));
  }
  return b;
}

std::vector<BenchmarkComparison> compare_evaluations(const std::vector<EvalResult>& left,
                                                     const std::vector<EvalResult>& right) {
  std::vector<BenchmarkComparison> out;
  for (const auto& l : left) {
    for (const auto& r : right) {
      if (r.record.benchmark == l.record.benchmark) out.push_back(compare_benchmark(l, r));
    }
  }
  return out;
}

std::vector<store::EvaluationRecord> latest_per_benchmark(const std::vector<store::EvaluationRecord>& evaluations) {
  std::vector<store::EvaluationRecord> out;
  for (const auto& e : evaluations) {
    if (!store::has_results_status(e.status)) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& o) { return o.benchmark == e.benchmark; });
    if (it == out.end()) {
      out.push_back(e);
    } else if (std::tie(e.created_ns, e.evaluation_id) > std::tie(it->created_ns, it->evaluation_id)) {
      *it = e;
    }
  }
  return out;
}

std::vector<EvalResult> read_results(store::Store& s, const std::vector<store::EvaluationRecord>& evaluations) {
  std::vector<EvalResult> out;
  for (const auto& e : evaluations) {
    EvalResult r;
    r.record = e;
    if (auto v = s.evals->evaluation(e.evaluation_id)) r.metrics = v->metrics;
    r.items = s.evals->items(e.evaluation_id, std::nullopt);
    if (r.items.empty() && e.status == "CACHED" && !e.cached_from.empty())
      r.items = s.evals->items(e.cached_from, std::nullopt);
    out.push_back(std::move(r));
  }
  return out;
}

// --- reading a version ----------------------------------------------------------------

VersionSide read_version(store::Store& s, const std::string& model, const std::string& version) {
  auto mv = s.evals->model_version(model, version);
  if (!mv) throw WalkError{404, "unknown model version '" + model + ":" + version + "'"};
  VersionSide v;
  v.version = mv->version;
  v.evaluations = read_results(s, latest_per_benchmark(mv->evaluations));
  v.checkpoint_id = mv->version.checkpoint_id;
  std::string run_id = mv->version.run_id;
  for (const auto& e : v.evaluations) {
    if (v.checkpoint_id.empty()) v.checkpoint_id = e.record.checkpoint_id;
    if (run_id.empty()) run_id = e.record.run_id;
  }
  if (!v.checkpoint_id.empty()) {
    if (auto c = s.evals->checkpoint(v.checkpoint_id)) {
      v.step = c->step;
      if (run_id.empty()) run_id = c->run_id;
    }
  }
  if (run_id.empty()) return v;
  v.run = s.graph->run(run_id);
  if (!v.run) return v;
  if (!v.step) {
    for (const auto& c : s.graph->checkpoints(run_id)) {
      if (c.checkpoint_id == v.checkpoint_id) v.step = c.step;
    }
  }
  v.timeline = s.graph->timeline(run_id, {}, 100000);
  v.steps = s.graph->steps(run_id, {}, 1000000);
  store::AlertFilter f;
  f.run_id = run_id;
  f.limit = 100000;
  v.alerts = s.graph->alerts(f);
  v.incidents = s.graph->incidents(run_id);
  return v;
}

std::string production_version(store::Store& s, const std::string& model) {
  std::map<std::string, std::string> last_to;
  for (const auto& t : s.evals->transitions(model, "")) last_to[t.model_version] = t.to_status;
  for (const auto& [version, to] : last_to) {
    if (to == "production") return version;
  }
  return {};
}

// --- signals ---------------------------------------------------------------------------

namespace {

std::vector<EffectiveKey> config_of(const VersionSide& v) {
  return v.run ? effective_config(*v.run, v.timeline, v.step) : std::vector<EffectiveKey>{};
}

std::optional<double> number_of(const EffectiveKey* k) {
  if (!k || k->value.kind != Value::Kind::kNumber) return std::nullopt;
  return k->value.number;
}

std::vector<ConfigKeyDiff> diff_configs(const std::vector<EffectiveKey>& l, const std::vector<EffectiveKey>& r) {
  std::vector<ConfigKeyDiff> out;
  auto add = [&](const std::string& key) {
    for (const auto& d : out) {
      if (d.key == key) return;
    }
    ConfigKeyDiff d;
    d.key = key;
    if (const EffectiveKey* a = find_key(l, key)) d.left = *a;
    if (const EffectiveKey* b = find_key(r, key)) d.right = *b;
    d.changed = !d.left || !d.right || !(d.left->value == d.right->value);
    out.push_back(std::move(d));
  };
  for (const auto& k : l) add(k.key);
  for (const auto& k : r) add(k.key);
  return out;
}

}  // namespace

Signals pair_signals(const VersionSide& baseline, const VersionSide& candidate,
                     const std::vector<BenchmarkComparison>& benchmarks) {
  Signals s;
  auto set = [&](const char* name, std::optional<double> v) {
    if (finite(v)) s.values[name] = *v;
  };
  const std::vector<EffectiveKey> bc = config_of(baseline), cc = config_of(candidate);
  int64_t changes = 0;
  for (const auto& d : diff_configs(bc, cc)) {
    if (!d.changed) continue;
    ++changes;
    s.changed_keys[d.key] = d.right ? d.right->step : d.left->step;
  }
  if (baseline.run && candidate.run) set("config_changes", static_cast<double>(changes));

  const auto bvl = val_loss_at(baseline.steps, baseline.step), cvl = val_loss_at(candidate.steps, candidate.step);
  set("val_loss", cvl);
  set("baseline_val_loss", bvl);
  if (bvl && cvl) {
    set("val_loss_delta", *cvl - *bvl);
    if (*bvl != 0) set("val_loss_rel", (*cvl - *bvl) / std::fabs(*bvl));
  }
  const auto blr = number_of(find_key(bc, "lr")), clr = number_of(find_key(cc, "lr"));
  set("lr", clr);
  set("baseline_lr", blr);
  if (blr && clr && *blr != 0) set("lr_ratio", *clr / *blr);
  if (const EffectiveKey* k = find_key(cc, "lr")) set("lr_step", static_cast<double>(k->step));
  if (const EffectiveKey* k = find_key(bc, "lr")) set("baseline_lr_step", static_cast<double>(k->step));
  const auto bm = mfu_until(baseline.steps, baseline.step), cm = mfu_until(candidate.steps, candidate.step);
  set("mfu", cm);
  set("baseline_mfu", bm);
  if (bm && cm && *bm != 0) set("mfu_ratio", *cm / *bm);
  if (candidate.step) set("step", static_cast<double>(*candidate.step));
  if (baseline.step) set("baseline_step", static_cast<double>(*baseline.step));
  if (baseline.run && candidate.run) {
    set("training_dataset_changed", baseline.run->dataset_version != candidate.run->dataset_version ? 1.0 : 0.0);
    set("code_changed", baseline.run->code_commit != candidate.run->code_commit ? 1.0 : 0.0);
  }

  if (!benchmarks.empty()) {
    auto any = [&](const char* field) {
      for (const auto& b : benchmarks) {
        for (const auto& v : b.versions) {
          if (v.name == field && v.changed) return 1.0;
        }
      }
      return 0.0;
    };
    set("dataset_version_changed", std::max(any("dataset"), any("datasetHash")));
    set("prompt_version_changed", std::max(any("prompt"), any("promptHash")));
    set("evaluator_version_changed", any("evaluator"));
    set("benchmark_version_changed", any("benchmarkVersion"));
    bool paired = true;
    std::optional<double> worst;
    bool worst_sig = false;
    for (const auto& b : benchmarks) {
      paired = paired && b.paired;
      if (b.metrics.empty() || !b.metrics.front().difference) continue;
      const MetricComparison& m = b.metrics.front();
      if (!worst || *m.difference < *worst) worst = m.difference, worst_sig = m.significant;
    }
    set("datasets_paired", paired ? 1.0 : 0.0);
    set("benchmark_delta", worst);
    if (worst) set("benchmark_significant", worst_sig ? 1.0 : 0.0);
    set("benchmarks", static_cast<double>(benchmarks.size()));
  }

  s.health = run_health(candidate.alerts, candidate.incidents, candidate.timeline, candidate.step);
  if (candidate.run) {
    set("infra_alerts", static_cast<double>(s.health.infra_alerts));
    set("infra_events", static_cast<double>(s.health.infra_events));
    set("incidents", static_cast<double>(s.health.incidents));
  }
  return s;
}

}  // namespace runlens::walk
