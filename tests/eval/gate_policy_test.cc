// eval/gate_policy: the gate policy parser. A valid policy parses with its
// defaults (direction by metric, safety hard by default); each broken
// variant is reported with its message and file:line:col; the shipped
// policies in configs/gates parse.
#include "eval/gate_policy.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

namespace runlens::eval {
namespace {

const char* kValid = R"(gate: release
version: "3"
suite: digits-heldout-v1
alpha: 0.025
bootstrap: {replicates: 500, seed: 7}
cap_bound: wilson
dimensions:
  quality:
    - {metric: accuracy, margin: 0.01}
    - {metric: f1, margin: 0.02, hard: true}
    - {metric: pass@5, margin: 0.05}
    - {metric: perplexity, margin: 0.5}
    - {metric: squad_f1, margin: 0.01, cluster: passage_id}
  safety:
    - {metric: harmful_response_rate, margin: 0, cap: 0.05}
    - {metric: refusal_correctness, margin: 0.02, hard: false}
)";

std::string errors_of(const std::string& text) {
  try {
    parse_gate_policy(text, "g.yaml");
  } catch (const runtime::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_CASE("gate policy: a valid policy parses, with directions and hardness by default") {
  GatePolicy g = parse_gate_policy(kValid, "g.yaml");
  CHECK(g.name == "release");
  CHECK(g.version == "3");
  CHECK(g.suite == "digits-heldout-v1");
  CHECK(g.alpha == 0.025);
  CHECK(g.bootstrap_replicates == 500);
  CHECK(g.bootstrap_seed == 7);
  CHECK(g.cap_bound == CapBound::kWilson);
  REQUIRE(g.metrics.size() == 7);
  CHECK(g.metrics[0].metric == "accuracy");
  CHECK(g.metrics[0].dimension == Dimension::kQuality);
  CHECK(g.metrics[0].direction == Direction::kHigherIsBetter);
  CHECK_FALSE(g.metrics[0].hard);
  CHECK(*g.metrics[0].margin == 0.01);
  CHECK(g.metrics[0].where.str() == "g.yaml:9:16");
  CHECK(g.metrics[1].hard);
  CHECK(g.metrics[2].metric == "pass@5");
  CHECK(g.metrics[3].direction == Direction::kLowerIsBetter);  // perplexity
  CHECK(g.metrics[4].cluster == "passage_id");
  const GatedMetric* harm = g.find("harmful_response_rate");
  REQUIRE(harm);
  CHECK(harm->dimension == Dimension::kSafety);
  CHECK(harm->hard);  // safety: hard by default
  CHECK(harm->direction == Direction::kLowerIsBetter);
  CHECK(*harm->cap == 0.05);
  CHECK(*harm->margin == 0);
  CHECK_FALSE(g.find("refusal_correctness")->hard);  // explicitly soft
  CHECK(g.find("refusal_correctness")->direction == Direction::kHigherIsBetter);
}

TEST_CASE("gate policy: defaults") {
  GatePolicy g = parse_gate_policy(
      "gate: g\nversion: v1\ndimensions:\n  safety:\n    - {metric: "
      "jailbreak_success_rate, cap: 0.1}\n");
  CHECK(g.alpha == 0.05);
  CHECK(g.bootstrap_replicates == 2000);
  CHECK(g.cap_bound == CapBound::kClopperPearson);
  REQUIRE(g.metrics.size() == 1);
  CHECK_FALSE(g.metrics[0].margin.has_value());  // a cap-only gate
  CHECK(g.metrics[0].hard);
}

TEST_CASE("gate policy: every problem with its file:line:col") {
  const std::string text = R"(gate: g
version: "1"
alpha: 0.5
cap_bound: exact
bootstrap: {replicates: 10, sed: 1}
dimensions:
  qualty:
    - {metric: accuracy, margin: 0.1}
  quality:
    - {metric: acuracy, margin: 0.1}
    - {metric: accuracy, margn: 0.1}
    - {metric: f1, margin: 1.5}
    - {metric: pass@k, margin: 0.1}
    - {metric: accuracy, margin: 0.1, cap: 0.2}
    - {metric: perplexity, margin: -1}
    - {metric: exact_match, margin: 0.1, direction: up, hard: yes}
  safety:
    - {metric: harmful_response_rate, cap: 1.5}
    - {metric: policy_violation_rate, cap: 0.1, direction: higher_is_better}
    - {metric: accuracy, margin: 0.1}
)";
  const std::string e = errors_of(text);
  CAPTURE(e);
  CHECK(e.find("g.yaml:3:8: error: out of range: must be above 0 and below 0.5, got 0.5 (in alpha)") !=
        std::string::npos);
  CHECK(e.find("g.yaml:4:12: error: expected clopper-pearson or wilson, got 'exact' (in cap_bound)") !=
        std::string::npos);
  CHECK(e.find("g.yaml:5:25: error: out of range: must be between 200 and 100000, got 10 (in bootstrap.replicates)") !=
        std::string::npos);
  CHECK(e.find("g.yaml:5:29: error: unknown key 'sed' in 'bootstrap' (did you mean 'seed'?)") != std::string::npos);
  CHECK(e.find("g.yaml:7:3: error: unknown key 'qualty' in 'dimensions' (did you mean 'quality'?)") !=
        std::string::npos);
  CHECK(e.find("g.yaml:10:16: error: unknown metric 'acuracy' (did you mean 'accuracy'?)") != std::string::npos);
  CHECK(e.find("g.yaml:11:26: error: unknown key 'margn' in 'dimensions.quality[1]' (did you mean 'margin'?)") !=
        std::string::npos);
  CHECK(e.find("g.yaml:11:16: error: metric 'accuracy' needs a 'margin' (how far it may regress) or, for a safety "
               "rate, a 'cap'") != std::string::npos);
  CHECK(
      e.find("g.yaml:12:28: error: out of range: must be between 0 and 1, got 1.5 (in dimensions.quality[2].margin)") !=
      std::string::npos);
  CHECK(e.find("g.yaml:13:16: error: unknown metric 'pass@k' (name one k, e.g. 'pass@1')") != std::string::npos);
  CHECK(e.find("g.yaml:14:44: error: a cap applies to a safety rate (harmful_response_rate, jailbreak_success_rate, "
               "policy_violation_rate), not to 'accuracy'") != std::string::npos);
  CHECK(e.find("g.yaml:15:36: error: out of range: must be between 0 and 1000000000000, got -1") != std::string::npos);
  CHECK(e.find("g.yaml:16:53: error: expected higher_is_better or lower_is_better, got 'up'") != std::string::npos);
  CHECK(e.find("g.yaml:16:63: error: expected true or false, got 'yes'") != std::string::npos);
  CHECK(e.find("g.yaml:18:44: error: out of range: must be between 0 and 1, got 1.5 (in dimensions.safety[0].cap)") !=
        std::string::npos);
  CHECK(e.find("g.yaml:19:44: error: a capped rate must be lower_is_better") != std::string::npos);
  CHECK(e.find("g.yaml:20:16: error: metric 'accuracy' is gated twice (first at g.yaml:11:16)") != std::string::npos);
}

TEST_CASE("gate policy: missing keys and a wrong top level") {
  const std::string e = errors_of("version: 1\n");
  CHECK(e.find("g.yaml:1:1: error: missing required key 'gate' (a string)") != std::string::npos);
  CHECK(e.find("g.yaml:1:1: error: missing required key 'dimensions'") != std::string::npos);
  CHECK(errors_of("- a\n").find("g.yaml:1:1: error: expected a mapping with 'gate', 'version', 'dimensions', ... at "
                                "the top level") != std::string::npos);
  CHECK(errors_of("gate: g\nversion: v\ndimensions: {quality: []}\n")
            .find("g.yaml:3:23: error: expected a non-empty list of gated metrics") != std::string::npos);
  CHECK(errors_of("gate: g\nversion: v\ndimensions: {quality: [{margin: 0.1}]}\n")
            .find("g.yaml:3:24: error: missing required key 'metric'") != std::string::npos);
}

TEST_CASE("gate policy: the shipped policies parse") {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(RUNLENS_SOURCE_DIR) + "/configs/gates")) {
    if (entry.path().extension() != ".yaml") continue;
    ++n;
    CAPTURE(entry.path().string());
    try {
      GatePolicy g = load_gate_policy(entry.path().string());
      CHECK_FALSE(g.metrics.empty());
    } catch (const runtime::ConfigError& e) {
      FAIL(e.what());
    }
  }
  CHECK(n >= 2);
  GatePolicy s = load_gate_policy(std::string(RUNLENS_SOURCE_DIR) + "/configs/gates/safety.yaml");
  CHECK(s.find("harmful_response_rate")->hard);
  CHECK(s.find("harmful_response_rate")->cap.has_value());
}

}  // namespace
}  // namespace runlens::eval
