// eval/cache_key: every input changes the key; the way a configuration is
// written (key order, whitespace, number spelling, metric order) does not.
#include "eval/cache_key.h"

#include <doctest/doctest.h>

#include <functional>
#include <set>
#include <string>

#include "eval/suite.h"
#include "formats/sha256.h"

namespace runlens::eval {
namespace {

CacheKeyInputs base() {
  CacheKeyInputs in;
  in.model_version = "llama-x:v142";
  in.checkpoint_hash = std::string(64, '1');
  in.dataset_hash = std::string(64, '2');
  in.evaluator_version = "evaluator-v7";
  in.prompt_template_version = "v12";
  in.prompt_template_hash = std::string(64, '3');
  in.decoding_json = R"({"temperature":0,"max_tokens":2048})";
  in.benchmark = "MMLU";
  in.benchmark_version = "2026-04";
  in.judge_model = "judge";
  in.judge_model_version = "1";
  in.judge_prompt_version = "p1";
  in.judge_prompt_hash = std::string(64, '4');
  in.rubric_version = "r1";
  in.judge_sampling_json = R"({"temperature":0})";
  in.metrics = {R"({"args":{},"k":[],"name":"accuracy"})", R"({"args":{"average":"macro"},"k":[],"name":"f1"})"};
  in.items = ItemRange{0, 14042};
  return in;
}

TEST_CASE("cache key: the canonical encoding is pinned") {
  CacheKeyInputs in = base();
  CHECK(canonical_encoding(in) ==
        "{\"benchmark\":\"MMLU\",\"benchmark_version\":\"2026-04\",\"checkpoint_hash\":\"" + std::string(64, '1') +
            "\",\"dataset_hash\":\"" + std::string(64, '2') +
            "\",\"decoding\":{\"max_tokens\":2048,\"temperature\":0},\"evaluator_version\":\"evaluator-v7\","
            "\"items\":[0,14042],\"judge_model\":\"judge\",\"judge_model_version\":\"1\",\"judge_prompt_hash\":\"" +
            std::string(64, '4') +
            "\",\"judge_prompt_version\":\"p1\",\"judge_sampling\":{\"temperature\":0},\"metrics\":["
            "{\"args\":{\"average\":\"macro\"},\"k\":[],\"name\":\"f1\"},{\"args\":{},\"k\":[],\"name\":\"accuracy\"}],"
            "\"model_version\":\"llama-x:v142\",\"prompt_template_hash\":\"" +
            std::string(64, '3') + "\",\"prompt_template_version\":\"v12\",\"rubric_version\":\"r1\",\"v\":1}");
  CHECK(cache_key(in) == sha256::hex(canonical_encoding(in)));
  CHECK(sha256::is_hex_digest(cache_key(in)));
}

TEST_CASE("cache key: every input changes the key") {
  using Edit = std::function<void(CacheKeyInputs&)>;
  const std::pair<const char*, Edit> edits[] = {
      {"model version (same checkpoint)", [](auto& in) { in.model_version = "llama-y:v142"; }},
      {"checkpoint hash", [](auto& in) { in.checkpoint_hash = std::string(64, '9'); }},
      {"dataset hash", [](auto& in) { in.dataset_hash = std::string(64, '9'); }},
      {"evaluator version", [](auto& in) { in.evaluator_version = "evaluator-v8"; }},
      {"prompt template version", [](auto& in) { in.prompt_template_version = "v13"; }},
      {"prompt template hash", [](auto& in) { in.prompt_template_hash = std::string(64, '9'); }},
      {"decoding temperature", [](auto& in) { in.decoding_json = R"({"temperature":0.7,"max_tokens":2048})"; }},
      {"decoding max_tokens", [](auto& in) { in.decoding_json = R"({"temperature":0,"max_tokens":1024})"; }},
      {"decoding: a new setting",
       [](auto& in) { in.decoding_json = R"({"temperature":0,"max_tokens":2048,"top_p":0.9})"; }},
      {"benchmark", [](auto& in) { in.benchmark = "MMLU-Pro"; }},
      {"benchmark version", [](auto& in) { in.benchmark_version = "2026-05"; }},
      {"judge model", [](auto& in) { in.judge_model = "judge-2"; }},
      {"judge model version", [](auto& in) { in.judge_model_version = "2"; }},
      {"judge prompt version", [](auto& in) { in.judge_prompt_version = "p2"; }},
      {"judge prompt hash", [](auto& in) { in.judge_prompt_hash = std::string(64, '9'); }},
      {"rubric version", [](auto& in) { in.rubric_version = "r2"; }},
      {"judge sampling", [](auto& in) { in.judge_sampling_json = R"({"temperature":0.5})"; }},
      {"a metric more", [](auto& in) { in.metrics.push_back(R"({"args":{},"k":[],"name":"exact_match"})"); }},
      {"a metric less", [](auto& in) { in.metrics.pop_back(); }},
      {"a metric argument", [](auto& in) { in.metrics[1] = R"({"args":{"average":"micro"},"k":[],"name":"f1"})"; }},
      {"item range end", [](auto& in) { in.items.end = 14000; }},
      {"item range begin", [](auto& in) { in.items.begin = 1; }},
  };
  const std::string key0 = cache_key(base());
  std::set<std::string> keys{key0};
  for (const auto& [what, edit] : edits) {
    CacheKeyInputs in = base();
    edit(in);
    CAPTURE(what);
    CHECK(cache_key(in) != key0);
    CHECK(keys.insert(cache_key(in)).second);  // and differs from every other edit
  }
}

TEST_CASE("cache key: field boundaries cannot be shifted (no concatenation ambiguity)") {
  CacheKeyInputs a = base(), b = base();
  a.benchmark = "MMLU";
  a.benchmark_version = "2026-04";
  b.benchmark = "MMLU2026";
  b.benchmark_version = "-04";
  CHECK(cache_key(a) != cache_key(b));
}

TEST_CASE("cache key: key order, whitespace, number spelling and metric order do not matter") {
  CacheKeyInputs a = base(), b = base();
  b.decoding_json = "{ \"max_tokens\" : 2048.0 ,\n  \"temperature\" : -0 }";
  b.judge_sampling_json = "{\"temperature\": 0.0}";
  std::swap(b.metrics[0], b.metrics[1]);
  b.metrics[0] = R"({ "name": "f1", "k": [], "args": { "average": "macro" } })";
  CHECK(cache_key(a) == cache_key(b));
}

TEST_CASE("cache key: bad configurations are errors, not keys") {
  CacheKeyInputs in = base();
  in.decoding_json = "[1]";
  CHECK_THROWS_WITH_AS(cache_key(in), "the decoding configuration must be a JSON object, got array",
                       std::invalid_argument);
  in.decoding_json = R"({"t":1,"t":2})";
  CHECK_THROWS_WITH_AS(cache_key(in), "the decoding configuration: duplicate key 't' at t", std::invalid_argument);
}

const char* kSuiteA = R"(suite: s
benchmark: digits
version: "1"
evaluator: ev-1
dataset: {id: d, version: "1", sha256: 46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a, items: 1000}
prompt: {template: "t", version: v1}
metrics: [accuracy, {f1: {average: macro}}]
decoding: {temperature: 0, max_tokens: 16}
partition_size: 100
priority: P2
workers: {pool: cpu, memory: 1GiB}
)";

// The same suite, written differently: key order, flow vs block style,
// spacing, a default left out, metric order, number spelling (0.0); and a
// different priority and partition size, which do not change scores.
const char* kSuiteB = R"(
priority: P0
partition_size: 250
workers:
  memory: 1GiB
  pool: cpu
decoding:
  max_tokens: 16
  temperature: 0.0
metrics:
  - f1
  - accuracy
prompt:
  version: v1
  template: "t"
dataset:
  items: 1000
  sha256: 46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a
  version: "1"
  id: d
evaluator: ev-1
version: "1"
benchmark: digits
suite: s
)";

TEST_CASE("cache key: from suites, the writing of the YAML does not matter, and the model always does") {
  Suite a = parse_suite(kSuiteA, "a.yaml"), b = parse_suite(kSuiteB, "b.yaml");
  const std::string ck(64, 'c');
  CHECK(cache_key(cache_key_inputs(a, "m:v1", ck)) == cache_key(cache_key_inputs(b, "m:v1", ck)));
  CHECK(cache_key(cache_key_inputs(a, "m:v1", ck)) != cache_key(cache_key_inputs(a, "m:v2", ck)));
  CHECK(cache_key(cache_key_inputs(a, "m:v1", ck)) != cache_key(cache_key_inputs(a, "m:v1", std::string(64, 'd'))));
}

TEST_CASE("cache key: a shard's key depends on its range only, so a grown dataset re-runs only new shards") {
  Suite s = parse_suite(kSuiteA, "a.yaml");
  CacheKeyInputs in = cache_key_inputs(s, "m:v1", std::string(64, 'c'));
  auto old_plan = plan_shards("e-1", 1000, 100);
  auto new_plan = plan_shards("e-2", 1050, 100);  // 50 more items: shard 10 is new
  for (size_t i = 0; i < old_plan.size(); ++i)
    CHECK(shard_cache_key(in, old_plan[i].items) == shard_cache_key(in, new_plan[i].items));
  std::set<std::string> keys;
  for (const auto& sh : new_plan) keys.insert(shard_cache_key(in, sh.items));
  CHECK(keys.size() == new_plan.size());
  CHECK(shard_cache_key(in, in.items) == cache_key(in));
  CHECK(shard_cache_key(in, ItemRange{0, 100}) != cache_key(in));
}

}  // namespace
}  // namespace runlens::eval
