#include "eval/service/records.h"

#include <chrono>
#include <cmath>
#include <ctime>

#include "formats/json_reader.h"
#include "formats/json_writer.h"

namespace runlens::eval::service {

std::string transition_json(const store::TransitionRecord& t) {
  std::string j;
  json::Writer w(&j);
  w.begin_object().key("modelVersion").str(t.model_id + ":" + t.model_version).key("version").str(t.model_version);
  w.key("from").str(t.from_status).key("to").str(t.to_status).key("user").str(t.actor);
  w.key("atNs").integer(t.decided_ns).key("gateId");
  if (t.gate_id.empty())
    w.null();
  else
    w.str(t.gate_id);
  w.key("reason").str(t.reason).end_object();
  return j;
}

store::EvaluationRecord to_record(const EvaluationRun& r) {
  store::EvaluationRecord s;
  s.evaluation_id = r.evaluation_id;
  s.model_id = r.model_id;
  s.model_version = r.model_version;
  s.checkpoint_id = r.checkpoint_id;
  s.checkpoint_hash = r.checkpoint_hash;
  s.dataset_id = r.dataset_id;
  s.dataset_version = r.dataset_version;
  s.dataset_hash = r.dataset_hash;
  s.benchmark = r.benchmark;
  s.benchmark_version = r.benchmark_version;
  s.suite = r.suite;
  s.prompt_template_version = r.prompt_template_version;
  s.prompt_template_hash = r.prompt_template_hash;
  s.evaluator_version = r.evaluator_version;
  s.uses_judge = r.uses_judge;
  s.judge_model = r.judge_model;
  s.judge_model_version = r.judge_model_version;
  s.judge_prompt_version = r.judge_prompt_version;
  s.judge_prompt_hash = r.judge_prompt_hash;
  s.rubric_version = r.rubric_version;
  s.temperature = r.temperature;
  s.decoding_json = r.decoding_json;
  s.code_commit = r.code_commit;
  s.worker_version = r.worker_version;
  s.library_versions.assign(r.library_versions.begin(), r.library_versions.end());
  s.cache_key = r.cache_key;
  s.cached_from = r.cached_from;
  s.status = std::string(eval_status_name(r.status));
  s.started_at = r.started_at;
  s.completed_at = r.completed_at;
  return s;
}

std::optional<EvalStatus> parse_status(const std::string& name) {
  for (EvalStatus s : {EvalStatus::kQueued, EvalStatus::kRunning, EvalStatus::kPartial, EvalStatus::kCompleted,
                       EvalStatus::kFailed, EvalStatus::kCached}) {
    if (eval_status_name(s) == name) return s;
  }
  return std::nullopt;
}

EvaluationRun from_record(const store::EvaluationRecord& s) {
  EvaluationRun r;
  r.evaluation_id = s.evaluation_id;
  r.model_id = s.model_id;
  r.model_version = s.model_version;
  r.checkpoint_id = s.checkpoint_id;
  r.checkpoint_hash = s.checkpoint_hash;
  r.dataset_id = s.dataset_id;
  r.dataset_version = s.dataset_version;
  r.dataset_hash = s.dataset_hash;
  r.benchmark = s.benchmark;
  r.benchmark_version = s.benchmark_version;
  r.suite = s.suite;
  r.prompt_template_version = s.prompt_template_version;
  r.prompt_template_hash = s.prompt_template_hash;
  r.evaluator_version = s.evaluator_version;
  r.uses_judge = s.uses_judge;
  r.judge_model = s.judge_model;
  r.judge_model_version = s.judge_model_version;
  r.judge_prompt_version = s.judge_prompt_version;
  r.judge_prompt_hash = s.judge_prompt_hash;
  r.rubric_version = s.rubric_version;
  r.temperature = s.temperature;
  r.decoding_json = s.decoding_json;
  r.code_commit = s.code_commit;
  r.worker_version = s.worker_version;
  r.library_versions.insert(s.library_versions.begin(), s.library_versions.end());
  r.cache_key = s.cache_key;
  r.cached_from = s.cached_from;
  r.status = parse_status(s.status).value_or(EvalStatus::kQueued);
  r.started_at = s.started_at;
  r.completed_at = s.completed_at;
  return r;
}

std::string check_writable(const EvaluationRun& run) { return store::check_writable(to_record(run)); }

std::vector<store::MetricValue> to_values(const std::vector<MetricResult>& metrics) {
  std::vector<store::MetricValue> out;
  out.reserve(metrics.size());
  for (const MetricResult& m : metrics) {
    store::MetricValue v{m.name, m.value, m.n, std::nullopt};
    if (std::isfinite(m.std_error)) v.std_error = m.std_error;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<MetricResult> from_values(const std::vector<store::MetricValue>& values) {
  std::vector<MetricResult> out;
  for (const auto& v : values) out.push_back(MetricResult{v.name, v.value, v.n, v.std_error.value_or(NAN)});
  return out;
}

std::vector<std::string> stat_names(const Suite& suite) {
  std::vector<std::string> out;
  for (const MetricSpec& m : suite.metrics) {
    const std::string& n = m.name;
    switch (m.def->aggregation) {
      case Aggregation::kMean:
        out.push_back(n);
        break;
      case Aggregation::kTokenWeighted:
        out.push_back(n + ".loglik");
        out.push_back(n + ".count");
        break;
      case Aggregation::kCorpusBleu:
        for (int i = 1; i <= 4; ++i) out.push_back(n + ".match" + std::to_string(i));
        for (int i = 1; i <= 4; ++i) out.push_back(n + ".total" + std::to_string(i));
        out.push_back(n + ".hyp_len");
        out.push_back(n + ".ref_len");
        break;
      case Aggregation::kPassAtK:
        out.push_back(n + ".n");
        out.push_back(n + ".c");
        break;
      case Aggregation::kClassification:
        out.push_back(n + ".label");
        out.push_back(n + ".pred");
        break;
      case Aggregation::kRate:
        out.push_back(n + ".in_scope");
        out.push_back(n + ".outcome");
        break;
    }
  }
  return out;
}

bool stats_of(const store::ItemResult& item, const std::vector<std::string>& names, double* out) {
  const auto& sc = item.scores;
  for (size_t j = 0; j < names.size(); ++j) {
    if (j < sc.size() && sc[j].first == names[j]) {  // stored in order: the usual case
      out[j] = sc[j].second;
      continue;
    }
    bool found = false;
    for (const auto& [k, v] : sc) {
      if (k == names[j]) {
        out[j] = v;
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

double suite_temperature(const Suite& suite) {
  json::Value v;
  json::ParseError err;
  if (json::parse(suite.decoding_json, &v, &err)) {
    if (const json::Value* t = v.find("temperature"); t && t->type == json::Value::Type::kNumber) return t->number;
  }
  return 0;
}

std::string rfc3339_now() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace runlens::eval::service
