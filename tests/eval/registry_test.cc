// eval/registry: MODEL:VERSION ids and status names (the provenance rule is
// the store's: tests/store/eval_store_test.cc, tests/eval_service/records_test.cc).
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
