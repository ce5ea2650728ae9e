// The run comparison of spec sections 23 and 42 (reports/compare.h), as a
// pure function over store rows: no database, no HTTP.
#include "reports/compare.h"

#include <doctest/doctest.h>

using namespace runlens;
using report::ComparedRun;

namespace {

ComparedRun run(const std::string& id, ConfigMap config, double tokens_per_s, double loss) {
  ComparedRun c;
  c.run.run_id = id;
  c.run.dataset_version = "v42";
  c.run.model_id = "llama-x-7b";
  c.run.world_size = 16;
  c.run.config = std::move(config);
  c.aggregates.tokens_per_s_mean = tokens_per_s;
  c.aggregates.mfu_mean = 0.41;
  c.aggregates.step_ms_median = 1900;
  c.aggregates.loss_last10 = loss;
  c.aggregates.lr_max = 3e-4;
  return c;
}

const report::MetricDiff& metric(const report::RunComparison& c, const std::string& name) {
  for (const auto& m : c.metrics) {
    if (m.name == name) return m;
  }
  FAIL("no metric " << name);
  return c.metrics.front();
}

store::StoredAlert alert(const std::string& kind) {
  store::StoredAlert a;
  a.alert.kind = kind;
  return a;
}

}  // namespace

TEST_CASE("compare: the same run twice: nothing changed, infrastructure healthy") {
  auto a = run("a", {{"lr", Value::of(3e-4)}, {"batch", Value::of(512.0)}}, 120000, 2.1);
  auto c = report::compare_runs(a, a, 0.02);
  CHECK(c.changed_keys.empty());
  REQUIRE(c.config.size() == 2);
  CHECK_FALSE(c.config[0].changed);
  CHECK(metric(c, "tokensPerSecond").verdict == "same");
  CHECK(metric(c, "tokensPerSecond").relative_delta == 0.0);
  CHECK(metric(c, "valLoss").verdict == "unknown");  // neither run has one
  CHECK_FALSE(metric(c, "valLoss").delta);
  CHECK(c.conclusion == std::vector<std::string>{"Infrastructure appears healthy."});
}

TEST_CASE("compare: an LR change in the config correlates with the loss regression") {
  auto a = run("a", {{"lr", Value::of(3e-4)}, {"batch", Value::of(512.0)}}, 120000, 2.10);
  auto b = run("b", {{"lr", Value::of(3e-3)}, {"batch", Value::of(512.0)}, {"warmup", Value::of(100.0)}}, 119000, 2.60);
  b.run.code_commit = "abc123";
  b.alerts = {alert("loss_spike"), alert("straggler"), alert("diagnosis")};
  auto c = report::compare_runs(a, b, 0.02);
  REQUIRE(c.config.size() == 3);
  CHECK(c.config[2].key == "warmup");  // right-only keys after left's
  CHECK_FALSE(c.config[2].left);
  CHECK(c.config[2].changed);
  CHECK(c.changed_keys == std::vector<std::string>{"config.lr", "config.warmup", "codeCommit", "metrics.loss"});
  CHECK(metric(c, "tokensPerSecond").verdict == "same");  // -0.8 %: within the tolerance
  CHECK(metric(c, "tokensPerSecond").relative_delta == doctest::Approx(-0.0083));
  CHECK(metric(c, "loss").verdict == "regression");
  CHECK(*metric(c, "loss").delta == doctest::Approx(0.5));
  CHECK(c.conclusion == std::vector<std::string>{
                            "Infrastructure alerts in these runs: 1.",
                            "Training configuration changed: lr, warmup.",
                            "Regression in loss is correlated with the learning-rate change.",
                        });
  // A stricter tolerance sees the throughput drop as a regression too.
  auto strict = report::compare_runs(a, b, 0.001);
  CHECK(metric(strict, "tokensPerSecond").verdict == "regression");
  CHECK(strict.conclusion.back() == "Regression in tokensPerSecond, loss is correlated with the learning-rate change.");
}

TEST_CASE("compare: an LR change inside a run (no config change) is found in its timeline") {
  auto a = run("a", {{"lr", Value::of(3e-4)}}, 120000, 2.1);
  auto b = run("b", {{"lr", Value::of(3e-4)}}, 120000, 2.1);
  store::TimelineEntry lr;
  lr.kind = "lr_change";
  lr.step = 100;
  lr.summary = "LR 0.0003 -> 0.0024";
  store::TimelineEntry other;
  other.kind = "checkpoint";
  b.timeline = {other, lr};
  b.aggregates.step_ms_median = 2400;  // slower: a regression
  auto c = report::compare_runs(a, b, 0.02);
  CHECK(c.lr_changes_left.empty());
  REQUIRE(c.lr_changes_right.size() == 1);
  CHECK(c.lr_changes_right[0].step == 100);
  CHECK(c.conclusion == std::vector<std::string>{
                            "Infrastructure appears healthy.",
                            "Learning rate changed during a run.",
                            "Regression in stepTimeMs is correlated with the learning-rate change.",
                        });
  // A zero on the left makes any change infinitely relative.
  a.aggregates.mfu_mean = 0;
  CHECK(metric(report::compare_runs(a, b, 0.02), "mfu").verdict == "improvement");
}
