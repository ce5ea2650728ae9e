// eval/registry: MODEL:VERSION ids and the provenance check that keeps a
// result without its provenance out of the store.
#include "eval/registry.h"

#include <doctest/doctest.h>

#include <string>

namespace runlens::eval {
namespace {

TEST_CASE("registry: MODEL:VERSION round trips") {
  for (const char* text : {"llama-x:v142", "a:1", "Model_2.5:2026-04.rc1"}) {
    std::string why;
    auto id = parse_model_version(text, &why);
    REQUIRE_MESSAGE(id.has_value(), why);
    CHECK(id->str() == text);
  }
  std::string why;
  auto id = parse_model_version("llama-x:v142", &why);
  CHECK(id->model == "llama-x");
  CHECK(id->version == "v142");
}

TEST_CASE("registry: MODEL:VERSION errors say what is wrong") {
  const std::string head = "a model version id is MODEL:VERSION (e.g. llama-x:v142), got ";
  struct Case {
    std::string text, expected;
  };
  const Case cases[] = {
      {"v142", head + "'v142': no ':'"},
      {"a:b:c", head + "'a:b:c': more than one ':'"},
      {":v1", head + "':v1': the model is empty"},
      {"llama:", head + "'llama:': the version is empty"},
      {"llama x:v1", head + "'llama x:v1': the model has the character ' ' (allowed: letters, digits, '.', '_', '-')"},
      {"llama:v/1", head + "'llama:v/1': the version has the character '/' (allowed: letters, digits, '.', '_', '-')"},
      {"-llama:v1", head + "'-llama:v1': the model must start with a letter or digit"},
      {"m:" + std::string(129, 'v'),
       head + "'m:" + std::string(129, 'v') + "': the version is longer than 128 characters"},
  };
  for (const auto& c : cases) {
    std::string why;
    CHECK_FALSE(parse_model_version(c.text, &why).has_value());
    CHECK(why == c.expected);
  }
}

EvaluationRun complete_run() {
  EvaluationRun r;
  const std::string h(64, 'a');
  r.evaluation_id = "e-17";
  r.model_id = "llama-x";
  r.model_version = "v142";
  r.checkpoint_id = "checkpoint-820000";
  r.checkpoint_hash = h;
  r.dataset_id = "mmlu";
  r.dataset_version = "2026-04";
  r.dataset_hash = h;
  r.benchmark = "MMLU";
  r.benchmark_version = "2026-04";
  r.prompt_template_version = "v12";
  r.prompt_template_hash = h;
  r.evaluator_version = "evaluator-v7";
  r.temperature = 0;
  r.decoding_json = R"({"max_tokens":2048,"temperature":0})";
  r.code_commit = "177c9c5";
  r.worker_version = "runlens-worker 0.1.0";
  r.library_versions = {{"torch", "2.1.0"}};
  r.cache_key = h;
  r.status = EvalStatus::kCompleted;
  r.started_at = "2026-12-01T09:00:00Z";
  r.completed_at = "2026-12-01T09:05:00Z";
  return r;
}

TEST_CASE("registry: a complete run is writable") {
  CHECK(missing_provenance(complete_run()).empty());
  CHECK(check_writable(complete_run()).empty());
}

TEST_CASE("registry: a result without its provenance cannot be written, and the check names what is missing") {
  EvaluationRun r = complete_run();
  r.checkpoint_hash.clear();
  r.dataset_hash = "abc123";  // not a SHA-256
  r.temperature.reset();
  CHECK(check_writable(r) ==
        "evaluation e-17 cannot be written without its provenance: missing checkpoint_hash, dataset_hash, temperature");

  r = complete_run();
  r.uses_judge = true;
  r.judge_model = "judge-1";
  CHECK(check_writable(r) ==
        "evaluation e-17 cannot be written without its provenance: missing judge_model_version, "
        "judge_prompt_version, judge_prompt_hash, rubric_version");

  r = complete_run();
  r.status = EvalStatus::kCached;
  r.completed_at.clear();
  r.library_versions.clear();
  CHECK(
      check_writable(r) ==
      "evaluation e-17 cannot be written without its provenance: missing library_versions, cached_from, completed_at");

  r = complete_run();
  r.status = EvalStatus::kRunning;
  r.completed_at.clear();  // not needed until the evaluation is terminal
  CHECK(check_writable(r).empty());

  CHECK(check_writable(EvaluationRun{})
            .find("evaluation (no id) cannot be written without its provenance: missing "
                  "evaluation_id, model_id, model_version, checkpoint_id,") == 0);
}

TEST_CASE("registry: status names") {
  CHECK(eval_status_name(EvalStatus::kQueued) == "QUEUED");
  CHECK(eval_status_name(EvalStatus::kRunning) == "RUNNING");
  CHECK(eval_status_name(EvalStatus::kPartial) == "PARTIAL");
  CHECK(eval_status_name(EvalStatus::kCompleted) == "COMPLETED");
  CHECK(eval_status_name(EvalStatus::kFailed) == "FAILED");
  CHECK(eval_status_name(EvalStatus::kCached) == "CACHED");
  CHECK_FALSE(is_terminal(EvalStatus::kRunning));
  CHECK(is_terminal(EvalStatus::kCached));
}

}  // namespace
}  // namespace runlens::eval
