// eval/suite: the suite parser. A valid suite parses to the expected
// values; each broken variant is reported with its message and file:line:col.
#include "eval/suite.h"

#include <doctest/doctest.h>

#include <string>

#include "formats/sha256.h"

namespace runlens::eval {
namespace {

const char* kHash = "46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a";

std::string valid_suite() {
  return std::string(R"(suite: digits-heldout
benchmark: digits
version: "2026-12"
evaluator: evaluator-v1
dataset:
  id: sklearn-digits
  version: "1.2.1"
  sha256: )") +
         kHash + R"(
  items: 360
  first_item: 1437
prompt:
  template: "pixels: {pixels}"
  version: v1
metrics:
  - accuracy
  - f1: {average: micro}
  - pass@k: {k: [10, 1, 5]}
decoding: {temperature: 0, max_tokens: 1}
partition_size: 100
priority: P1
deadline: 2h
max_attempts: 4
workers: {pool: gpu, memory: 2GiB}
)";
}

// Every diagnostic, one per line, as the CLI prints them.
std::string errors_of(const std::string& text) {
  try {
    parse_suite(text, "s.yaml");
  } catch (const runtime::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return s.replace(at, from.size(), to);
}

TEST_CASE("suite: a valid suite parses with defaults filled in") {
  Suite s = parse_suite(valid_suite(), "s.yaml");
  CHECK(s.name == "digits-heldout");
  CHECK(s.benchmark == "digits");
  CHECK(s.version == "2026-12");
  CHECK(s.evaluator_version == "evaluator-v1");
  CHECK(s.dataset.id == "sklearn-digits");
  CHECK(s.dataset.sha256 == kHash);
  CHECK(s.dataset.items == 360);
  CHECK(s.dataset.first_item == 1437);
  CHECK(s.prompt.version == "v1");
  CHECK(s.prompt.sha256 == sha256::hex("pixels: {pixels}"));
  REQUIRE(s.metrics.size() == 3);
  CHECK(s.metrics[0].canonical_json() == R"({"args":{},"k":[],"name":"accuracy"})");
  CHECK(s.metrics[1].canonical_json() == R"({"args":{"average":"micro"},"k":[],"name":"f1"})");
  CHECK(s.metrics[2].k == std::vector<int64_t>{1, 5, 10});
  CHECK(s.metrics[2].outputs() == std::vector<std::string>{"pass@1", "pass@5", "pass@10"});
  CHECK(s.metrics[0].where.str() == "s.yaml:15:5");
  CHECK(s.decoding_json == R"({"max_tokens":1,"temperature":0})");
  CHECK(s.partition_size == 100);
  CHECK(s.priority == Priority::kP1);
  CHECK(s.deadline_s == 7200);
  CHECK(s.max_attempts == 4);
  CHECK(s.workers.pool == Pool::kGpu);
  CHECK(s.workers.memory_mib == 2048);
  CHECK_FALSE(s.judge.has_value());
}

TEST_CASE("suite: metric defaults are part of the metric") {
  Suite s = parse_suite(replace(valid_suite(), "  - f1: {average: micro}\n", "  - f1\n  - bleu\n"), "s.yaml");
  CHECK(s.find_metric("f1")->canonical_json() == R"({"args":{"average":"macro"},"k":[],"name":"f1"})");
  CHECK(s.find_metric("bleu")->canonical_json() ==
        R"({"args":{"lowercase":false,"tokenize":"13a"},"k":[],"name":"bleu"})");
}

TEST_CASE("suite: each error with its message and position") {
  struct Case {
    std::string from, to, expected;
  };
  const Case cases[] = {
      {"partition_size: 100", "partiton_size: 100",
       "s.yaml:19:1: error: unknown key 'partiton_size' in a suite (did you mean 'partition_size'?)\n"
       "s.yaml:1:1: error: missing required key 'partition_size' (an integer) (in partition_size)"},
      {"partition_size: 100", "partition_size: 0",
       "s.yaml:19:17: error: out of range: must be between 1 and 1000000, got 0 (in partition_size)"},
      {"partition_size: 100", "partition_size: many",
       "s.yaml:19:17: error: expected an integer, got 'many' (in partition_size)"},
      {"partition_size: 100", "partition_size: [1, 2]",
       "s.yaml:19:17: error: expected a single value, got a list (in partition_size)"},
      {"priority: P1", "priority: P7",
       "s.yaml:20:11: error: expected P0 (safety certification), P1 (release candidate), P2 (researcher) or P3 "
       "(exploratory), got 'P7' (in priority)"},
      {"  - accuracy\n", "  - acuracy\n",
       "s.yaml:15:5: error: unknown metric 'acuracy' (did you mean 'accuracy'?) (in metrics[0])"},
      {"  - accuracy\n", "  - f1\n", "s.yaml:16:5: error: metric 'f1' is listed twice (in metrics[1])"},
      {"{average: micro}", "{averge: micro}",
       "s.yaml:16:10: error: unknown key 'averge' in 'metrics[1].f1' (did you mean 'average'?) (in metrics[1].f1)"},
      {"{average: micro}", "{average: weighted}",
       "s.yaml:16:19: error: expected one of macro, micro, got 'weighted' (in metrics[1].f1.average)"},
      {"pass@k: {k: [10, 1, 5]}", "pass@k: {k: [10, 0]}",
       "s.yaml:17:22: error: out of range: must be between 1 and 1000000, got 0 (in metrics[2].pass@k.k[1])"},
      {"pass@k: {k: [10, 1, 5]}", "pass@k: {k: [5, 5]}",
       "s.yaml:17:21: error: k = 5 is listed twice (in metrics[2].pass@k.k)"},
      {"  - pass@k: {k: [10, 1, 5]}\n", "  - pass@k\n",
       "s.yaml:17:5: error: metric 'pass@k' needs argument 'k' (the k values, e.g. [1, 5, 10]; each at least 1) (in "
       "metrics[2].pass@k.k)"},
      {"  - accuracy\n", "  - accuracy: {k: 1}\n",
       "s.yaml:15:15: error: metric 'accuracy' takes no arguments (in metrics[0].accuracy)"},
      {std::string("  sha256: ") + kHash, "  sha256: abc123",
       "s.yaml:8:11: error: expected a SHA-256 content hash (64 lowercase hex digits), got 'abc123' (6 characters) (in "
       "dataset.sha256)"},
      {"workers: {pool: gpu, memory: 2GiB}", "workers: {pool: tpu, memory: 2GiB}",
       "s.yaml:23:17: error: expected cpu or gpu, got 'tpu' (in workers.pool)"},
      {"workers: {pool: gpu, memory: 2GiB}", "workers: {pool: gpu, memory: lots}",
       "s.yaml:23:30: error: expected a memory size such as 512MiB or 16GiB, got 'lots' (in workers.memory)"},
      {"workers: {pool: gpu, memory: 2GiB}", "workers: {pool: gpu}",
       "s.yaml:23:10: error: missing required key 'memory' (e.g. 16GiB) (in workers.memory)"},
      {"deadline: 2h", "deadline: soon",
       "s.yaml:21:11: error: expected a duration of at least 1s such as 30m or 2h, got 'soon' (in deadline)"},
      {"max_attempts: 4", "max_attempts: 11",
       "s.yaml:22:15: error: out of range: must be between 1 and 10, got 11 (in max_attempts)"},
      {"decoding: {temperature: 0, max_tokens: 1}", "decoding: {temperature: 3, max_tokens: 1}",
       "s.yaml:18:25: error: out of range: must be between 0 and 2, got 3 (in decoding.temperature)"},
      {"decoding: {temperature: 0, max_tokens: 1}", "decoding: {temperature: 0, temperature: 1}",
       "s.yaml:18:28: error: duplicate key 'temperature' (in decoding.temperature)"},
      {"  template: \"pixels: {pixels}\"\n", "",
       "s.yaml:12:3: error: missing required key 'template' (a string) (in prompt.template)"},
      {"evaluator: evaluator-v1\n", "evaluator: \"\"\n",
       "s.yaml:4:12: error: expected a non-empty string (in evaluator)"},
      {"  - accuracy\n", "  - judge\n",
       "s.yaml:15:5: error: metric 'judge' needs a 'judge' block (model, prompt, rubric) (in judge)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.to);
    CHECK(errors_of(replace(valid_suite(), c.from, c.to)) == c.expected);
  }
}

TEST_CASE("suite: a dataset needs items or a path; several errors are all reported") {
  std::string s = replace(valid_suite(), "  items: 360\n", "");
  CHECK(errors_of(s) == "s.yaml:6:3: error: a dataset needs 'items' (the item count) or 'path' (in dataset)");
  s = replace(replace(valid_suite(), "priority: P1", "priority: high"), "partition_size: 100", "partition_size: -1");
  CHECK(errors_of(s) ==
        "s.yaml:19:17: error: out of range: must be between 1 and 1000000, got -1 (in partition_size)\n"
        "s.yaml:20:11: error: expected P0 (safety certification), P1 (release candidate), P2 (researcher) or P3 "
        "(exploratory), got 'high' (in priority)");
}

TEST_CASE("suite: pass@k needs at least k samples when decoding says how many") {
  std::string s =
      replace(valid_suite(), "decoding: {temperature: 0, max_tokens: 1}", "decoding: {temperature: 0, samples: 5}");
  CHECK(errors_of(s) ==
        "s.yaml:17:5: error: pass@k needs at least k samples per problem: k = 10 but decoding.samples = 5 (in "
        "metrics.pass@k)");
  s = replace(valid_suite(), "decoding: {temperature: 0, max_tokens: 1}", "decoding: {temperature: 0, samples: 10}");
  CHECK(parse_suite(s, "s.yaml").decoding_json == R"({"samples":10,"temperature":0})");
}

TEST_CASE("suite: YAML syntax errors and a non-mapping top level") {
  CHECK(errors_of("suite: [unclosed\n").find("s.yaml:2:1: error: YAML syntax error") == 0);
  CHECK(errors_of("- a\n- b\n") ==
        "s.yaml:1:1: error: expected a mapping with 'suite', 'benchmark', 'dataset', ... at the top level");
}

TEST_CASE("suite: the judge block") {
  std::string judged = replace(valid_suite(), "  - accuracy\n", "  - judge\n") +
                       "judge:\n  model: local-keyword-judge\n  model_version: \"1\"\n  prompt: \"Rate the answer.\"\n"
                       "  prompt_version: p3\n  rubric_version: r2\n  criteria: [correctness, safety]\n"
                       "  scale: [0, 10]\n  sampling: {top_p: 1}\n";
  Suite s = parse_suite(judged, "s.yaml");
  REQUIRE(s.judge.has_value());
  CHECK(s.judge->model == "local-keyword-judge");
  CHECK(s.judge->criteria == std::vector<std::string>{"correctness", "safety"});
  CHECK(s.judge->scale_lo == 0);
  CHECK(s.judge->scale_hi == 10);
  CHECK(s.judge->prompt_sha256 == sha256::hex("Rate the answer."));
  CHECK(s.judge->sampling_json == R"({"top_p":1})");
  CHECK(errors_of(replace(judged, "scale: [0, 10]", "scale: [10, 0]")) ==
        "s.yaml:31:10: error: the lowest score must be below the highest (in judge.scale)");
  CHECK(errors_of(replace(judged, "  rubric_version: r2\n", "")) ==
        "s.yaml:25:3: error: missing required key 'rubric_version' (a string) (in judge.rubric_version)");
  CHECK(errors_of(valid_suite() + "judge: {model: m}\n")
            .find("error: a 'judge' block is given but no metric uses it (add the 'judge' metric) (in judge)") !=
        std::string::npos);
}

TEST_CASE("suite: no input makes the parser throw anything but ConfigError") {
  // Every line deleted, and every value replaced by a list, a mapping, null, an empty string or a nested oddity.
  std::string judged =
      valid_suite() +
      "judge: {model: m, model_version: v, prompt: p, prompt_version: p1, rubric_version: r1, criteria: "
      "[a], scale: [1, 5], sampling: {x: 1}}\n";
  judged = replace(judged, "  - accuracy\n", "  - judge\n");
  std::vector<std::string> lines;
  for (size_t at = 0, nl; at < judged.size(); at = nl + 1) {
    nl = judged.find('\n', at);
    lines.push_back(judged.substr(at, nl - at));
  }
  int parsed = 0, rejected = 0;
  auto attempt = [&](const std::string& text) {
    try {
      parse_suite(text, "fuzz.yaml");
      ++parsed;
    } catch (const runtime::ConfigError& e) {
      CHECK(std::string(e.what()).find("fuzz.yaml") != std::string::npos);
      ++rejected;
    }
  };
  const std::vector<std::string> values = {"[1, 2]", "{a: 1}", "~", "\"\"", "[[{}]]", "{[a]: b}", "-1", "1e999"};
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string without;
    for (size_t j = 0; j < lines.size(); ++j) {
      if (j != i) without += lines[j] + "\n";
    }
    attempt(without);
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    for (const auto& v : values) {
      std::string text;
      for (size_t j = 0; j < lines.size(); ++j)
        text += (j == i ? lines[j].substr(0, colon + 1) + " " + v : lines[j]) + "\n";
      attempt(text);
    }
  }
  CHECK(rejected > 100);
  CHECK(parsed > 0);  // deleting an optional key, e.g. the deadline, still parses
}

TEST_CASE("suite: a dataset whose content no longer matches its version is caught, with where the hash is stated") {
  Suite s = parse_suite(valid_suite(), "s.yaml");
  CHECK(dataset_hash_mismatch(s, kHash).empty());
  CHECK(dataset_hash_mismatch(s, std::string(64, '0')) ==
        "dataset sklearn-digits version 1.2.1 has changed: its content hash is " + std::string(64, '0') +
            ", the suite expects " + kHash + " (at s.yaml:8:11)");
}

TEST_CASE("suite: memory sizes") {
  CHECK(parse_memory_mib("512MiB") == 512);
  CHECK(parse_memory_mib("2GiB") == 2048);
  CHECK(parse_memory_mib("1.5GB") == 1536);
  CHECK(parse_memory_mib("1TiB") == 1024 * 1024);
  CHECK(parse_memory_mib("16 GiB") == 16384);
  CHECK_FALSE(parse_memory_mib("16").has_value());
  CHECK_FALSE(parse_memory_mib("-1GiB").has_value());
  CHECK_FALSE(parse_memory_mib("GiB").has_value());
}

TEST_CASE("suite: priorities") {
  CHECK(parse_priority("P0") == Priority::kP0);
  CHECK(parse_priority("p3") == Priority::kP3);
  CHECK_FALSE(parse_priority("P4").has_value());
  CHECK(priority_meaning(Priority::kP0) == "safety certification");
  CHECK(priority_name(Priority::kP2) == "P2");
}

}  // namespace
}  // namespace runlens::eval
