#include "operators/throughput_regression.h"

#include <functional>
#include <random>

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct Shape {
  double step_x = 1;  // the job's wall step time, x the normal 2050 ms
  double work_x = 1;  // the median rank's work time, x the normal 1900 ms
};

struct ThroughputCase {
  const char* name;
  std::function<Shape(int64_t)> at;
  bool with_mfu;
  std::vector<std::pair<const char*, int64_t>> expect;  // alert kind and onset step
};

Shape from(int64_t s, int64_t a, int64_t b, Shape x) { return s >= a && s <= b ? x : Shape{}; }

std::vector<Record> stats_rows(const ThroughputCase& c) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise;
  std::vector<Record> rows;
  int64_t t = kT0;
  const int64_t tokens = 16 * 16384;
  for (int64_t s = 1; s <= 150; ++s) {
    Shape x = c.at(s);
    double jitter = 1 + 0.02 * noise(rng);
    double step_ms = 2050 * x.step_x * jitter, work = 1900 * x.work_x * jitter;
    t += static_cast<int64_t>(step_ms * 1e6);
    std::optional<double> mfu;
    if (c.with_mfu) mfu = 0.4 * 2050 / step_ms;  // wall-clock MFU: proportional to tokens/s
    rows.push_back(stats_row("r1", s, t, 16, tokens, step_ms, work, mfu));
  }
  return rows;
}

}  // namespace

TEST_CASE("throughput_regression: tokens/s and MFU of compute against the run's own baseline") {
  const ThroughputCase cases[] = {
      {"steady", [](int64_t) { return Shape{}; }, true, {}},
      {"a straggler halves throughput; compute is fine",
       [](int64_t s) {
         return from(s, 40, 150, {2, 1});
       },
       true,
       {{"throughput_drop", 40}}},
      {"20 % slower is under the threshold",
       [](int64_t s) {
         return from(s, 40, 150, {1.2, 1});
       },
       true,
       {}},
      {"compute 1.4x slower",
       [](int64_t s) {
         return from(s, 40, 150, {1.4, 1.4});
       },
       true,
       {{"mfu_drop", 40}, {"throughput_drop", 40}}},
      {"compute 1.3x slower: MFU only",
       [](int64_t s) {
         return from(s, 40, 150, {1.3, 1.3});
       },
       true,
       {{"mfu_drop", 40}}},
      {"compute slower, no MFU inputs",
       [](int64_t s) {
         return from(s, 40, 150, {1.4, 1.4});
       },
       false,
       {{"throughput_drop", 40}}},
      {"one-step pauses",
       [](int64_t s) {
         return s % 7 == 0 ? Shape{1.6, 1} : Shape{};
       },
       true,
       {}},
      {"two pauses in a row",
       [](int64_t s) {
         return s == 50 || s == 51 ? Shape{3, 1} : Shape{};
       },
       true,
       {}},
      {"one long stall",
       [](int64_t s) {
         return s == 50 ? Shape{5, 1} : Shape{};
       },
       true,
       {}},
      {"slow, recovered, slow again",
       [](int64_t s) {
         return s >= 90 ? from(s, 90, 150, {2, 1}) : from(s, 40, 60, {2, 1});
       },
       true,
       {{"throughput_drop", 40}, {"throughput_drop", 90}}},
      {"slow from the start: no baseline to compare",
       [](int64_t) {
         return Shape{2, 1};
       },
       true,
       {}},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    OperatorRun run;
    run_operator(*make_operator("throughput_regression"), stats_rows(c), &run);
    auto alerts = run.alerts();
    REQUIRE(alerts.size() == c.expect.size());
    for (size_t i = 0; i < alerts.size(); ++i) {
      CAPTURE(alerts[i].summary);
      CHECK(alerts[i].kind == c.expect[i].first);
      CHECK(attr(alerts[i], "onset_step") == doctest::Approx(c.expect[i].second).epsilon(0.03));
      CHECK(*alerts[i].step > c.expect[i].second);
      CHECK(*alerts[i].step <= c.expect[i].second + 8);
      CHECK(*alerts[i].value < *alerts[i].threshold);
      CHECK(alerts[i].run_id.str() == "r1");
    }
  }
}

TEST_CASE("throughput_regression names a config change since the baseline began") {
  ThroughputCase c{"", [](int64_t s) { return from(s, 40, 150, {1.5, 1.5}); }, true, {}};
  auto rows = stats_rows(c);
  rows.push_back(event_row("config_change", rows[38].time_ns + 1,
                           EventFields().run("r1").step(40).key("activation_checkpointing")));
  OperatorRun run;
  run_operator(*make_operator("throughput_regression"), rows, &run);
  auto alerts = run.alerts();
  REQUIRE(alerts.size() == 2);
  for (const auto& a : alerts) {
    CHECK(attr(a, "config_change_step") == 40);
    CHECK(a.summary.find("config changed (activation_checkpointing) at step 40") != std::string::npos);
  }
}

TEST_CASE("throughput_regression starts over after a restart") {
  ThroughputCase c{"", [](int64_t s) { return from(s, 80, 150, {2, 1}); }, true, {}};
  auto rows = stats_rows(c);
  rows.push_back(event_row("restart", rows[79].time_ns - 1, EventFields().run("r1")));
  OperatorRun run;
  run_operator(*make_operator("throughput_regression"), rows, &run);
  CHECK(run.alerts().empty());  // the slower pace is all the restarted run has seen
}

TEST_CASE("throughput_regression rejects inconsistent parameters") {
  CHECK(config_error("throughput_regression", "min_baseline: 60") ==
        "test.yaml:7:19: error: min_baseline (60) must not exceed baseline_steps (50) (in operators.op)");
  CHECK(config_error("throughput_regression", "throughput_drop: 1.5") ==
        "test.yaml:7:22: error: invalid value for 'throughput_drop': must be at most 0.990000, got 1.5 (in "
        "operators.op.throughput_drop)");
}

TEST_CASE("throughput_regression skips step stats incomplete by shedding") {
  // Steps 40.. lost half their ranks' reports to shedding: half the tokens, not a drop.
  ThroughputCase c{"shed", [](int64_t) { return Shape{}; }, false, {}};
  auto rows = stats_rows(c);
  auto halved = rows, marked = rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    const StepStats& s = rows[i].step_stats();
    if (s.step < 40) continue;
    auto half = std::make_shared<StepStats>(s);
    half->tokens /= 2;
    half->tokens_per_s = *half->tokens_per_s / 2;
    halved[i].body = std::shared_ptr<const StepStats>(half);
    auto shed = std::make_shared<StepStats>(*half);
    shed->shed = true;
    marked[i].body = std::shared_ptr<const StepStats>(shed);
  }
  OperatorRun unmarked, run;
  run_operator(*make_operator("throughput_regression"), halved, &unmarked);
  run_operator(*make_operator("throughput_regression"), marked, &run);
  CHECK(unmarked.alerts("throughput_drop").size() == 1);  // or the test shows nothing
  CHECK(run.alerts().empty());
}
