#include "eval/registry.h"

#include <cmath>

#include "formats/sha256.h"

namespace runlens::eval {

namespace {
bool valid_part_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

bool check_part(std::string_view part, const char* what, std::string_view text, std::string* why) {
  const std::string head = "a model version id is MODEL:VERSION (e.g. llama-x:v142), got '" + std::string(text) + "': ";
  if (part.empty()) {
    *why = head + "the " + what + " is empty";
    return false;
  }
  if (part.size() > 128) {
    *why = head + "the " + what + " is longer than 128 characters";
    return false;
  }
  for (size_t i = 0; i < part.size(); ++i) {
    if (!valid_part_char(part[i])) {
      *why = head + "the " + what + " has the character '" + std::string(1, part[i]) +
             "' (allowed: letters, digits, '.', '_', '-')";
      return false;
    }
  }
  if (part[0] == '.' || part[0] == '_' || part[0] == '-') {
    *why = head + "the " + what + " must start with a letter or digit";
    return false;
  }
  return true;
}
}  // namespace

std::optional<ModelVersionId> parse_model_version(std::string_view text, std::string* why) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    *why = "a model version id is MODEL:VERSION (e.g. llama-x:v142), got '" + std::string(text) + "': no ':'";
    return std::nullopt;
  }
  if (text.find(':', colon + 1) != std::string_view::npos) {
    *why =
        "a model version id is MODEL:VERSION (e.g. llama-x:v142), got '" + std::string(text) + "': more than one ':'";
    return std::nullopt;
  }
  std::string_view model = text.substr(0, colon), version = text.substr(colon + 1);
  if (!check_part(model, "model", text, why) || !check_part(version, "version", text, why)) return std::nullopt;
  return ModelVersionId{std::string(model), std::string(version)};
}

std::string_view eval_status_name(EvalStatus s) {
  switch (s) {
    case EvalStatus::kQueued:
      return "QUEUED";
    case EvalStatus::kRunning:
      return "RUNNING";
    case EvalStatus::kPartial:
      return "PARTIAL";
    case EvalStatus::kCompleted:
      return "COMPLETED";
    case EvalStatus::kFailed:
      return "FAILED";
    case EvalStatus::kCached:
      return "CACHED";
  }
  return "?";
}

bool is_terminal(EvalStatus s) { return s != EvalStatus::kQueued && s != EvalStatus::kRunning; }

std::vector<std::string> missing_provenance(const EvaluationRun& r) {
  std::vector<std::string> missing;
  auto need = [&](const std::string& v, const char* field) {
    if (v.empty()) missing.emplace_back(field);
  };
  auto need_hash = [&](const std::string& v, const char* field) {
    if (!sha256::is_hex_digest(v)) missing.emplace_back(field);
  };
  need(r.evaluation_id, "evaluation_id");
  need(r.model_id, "model_id");
  need(r.model_version, "model_version");
  need(r.checkpoint_id, "checkpoint_id");
  need_hash(r.checkpoint_hash, "checkpoint_hash");
  need(r.dataset_id, "dataset_id");
  need(r.dataset_version, "dataset_version");
  need_hash(r.dataset_hash, "dataset_hash");
  need(r.benchmark, "benchmark");
  need(r.benchmark_version, "benchmark_version");
  need(r.prompt_template_version, "prompt_template_version");
  need_hash(r.prompt_template_hash, "prompt_template_hash");
  need(r.evaluator_version, "evaluator_version");
  if (r.uses_judge) {
    need(r.judge_model, "judge_model");
    need(r.judge_model_version, "judge_model_version");
    need(r.judge_prompt_version, "judge_prompt_version");
    need_hash(r.judge_prompt_hash, "judge_prompt_hash");
    need(r.rubric_version, "rubric_version");
  }
  if (!r.temperature || !std::isfinite(*r.temperature)) missing.emplace_back("temperature");
  need(r.decoding_json, "decoding_json");
  need(r.code_commit, "code_commit");
  need(r.worker_version, "worker_version");
  if (r.library_versions.empty()) missing.emplace_back("library_versions");
  need_hash(r.cache_key, "cache_key");
  if (r.status == EvalStatus::kCached) need(r.cached_from, "cached_from");
  need(r.started_at, "started_at");
  if (is_terminal(r.status)) need(r.completed_at, "completed_at");
  return missing;
}

std::string check_writable(const EvaluationRun& run) {
  std::vector<std::string> missing = missing_provenance(run);
  if (missing.empty()) return {};
  std::string s = "evaluation " + (run.evaluation_id.empty() ? std::string("(no id)") : run.evaluation_id) +
                  " cannot be written without its provenance: missing ";
  for (size_t i = 0; i < missing.size(); ++i) s += (i ? ", " : "") + missing[i];
  return s;
}

}  // namespace runlens::eval
