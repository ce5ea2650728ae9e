#include "operators/step_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "tests/operators/operator_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

Record with_tokens(Record r, int64_t tokens) {
  Step s = r.as<Step>();
  s.tokens = tokens;
  s.set_present(Step::F::tokens);
  r.body = s;
  return r;
}

std::vector<const StepStats*> stats_of(const OperatorRun& run) {
  std::vector<const StepStats*> out;
  for (const auto& r : run.out) {
    if (r.kind() == Kind::kStepStats) out.push_back(&r.step_stats());
  }
  return out;
}

// 10 ranks, rank r works 1000 + 100 r ms, 100 ms of collective and 50 ms of data wait.
std::vector<Record> one_step(int64_t t) {
  std::vector<Record> rows;
  for (int32_t r = 0; r < 10; ++r) {
    double work = 1000 + 100 * r;
    rows.push_back(with_tokens(step("r1", r, 1, work + 150, t + r, 100, 50), 4096));
  }
  return rows;
}

}  // namespace

TEST_CASE("step_stats: quantiles, slowest rank, ratios, tokens/s and MFU of one step") {
  auto rs = run_start("r1", 10);
  auto start = std::make_shared<RunStart>(rs.run_start());
  start->gpu_peak_flops = 1e15;
  start->model_flops_per_token = 6e9;
  start->set_present(RunStart::F::gpu_peak_flops);
  start->set_present(RunStart::F::model_flops_per_token);
  rs.body = std::shared_ptr<const RunStart>(start);
  std::vector<Record> rows{rs};
  for (auto& r : one_step(kT0 + kSec)) rows.push_back(r);
  rows.push_back(train("r1", 1, 2.5, kT0 + kSec + 20, 0.8));

  auto join = make_operator("rank_join");
  OperatorRun joined, run;
  run_operator(*join, rows, &joined);
  for (auto& r : rows) {
    if (r.kind() == Kind::kTrain) joined.out.push_back(r);
  }
  run_operator(*make_operator("step_stats"), joined.out, &run);
  auto stats = stats_of(run);
  REQUIRE(stats.size() == 1);
  const StepStats& s = *stats[0];
  CHECK(s.reported == 10);
  CHECK(s.work_min == 1000);
  CHECK(s.work_p50 == 1400);  // nearest rank: the 5th of 10
  CHECK(s.work_p95 == 1900);
  CHECK(s.work_max == 1900);
  CHECK(s.slowest_rank == 9);
  CHECK(s.straggler_ratio == doctest::Approx(1900.0 / 1400.0));
  CHECK(s.step_ms == 2050);
  CHECK(s.tokens == 40960);
  CHECK(*s.tokens_per_s == doctest::Approx(40960 / 2.05));
  CHECK(*s.mfu == doctest::Approx(40960 / 2.05 * 6e9 / (1e15 * 10)));
  CHECK(*s.communication_ratio == doctest::Approx((1.0 / 10) * [] {
    double sum = 0;
    for (int r = 0; r < 10; ++r) sum += 100.0 / (1000 + 100 * r + 150);
    return sum;
  }()));
  CHECK(*s.loss == 2.5);
  CHECK(*s.grad_norm == 0.8);
}

TEST_CASE("step_stats: the train event may come before or after the step, or not at all") {
  struct Case {
    const char* name;
    int64_t train_offset_ns;  // relative to the step's last rank report; INT64_MIN = no train event
    bool has_loss;
  };
  const Case cases[] = {
      {"train before the step completes", -500'000'000, true},
      {"train after the step completes", 2 * kSec, true},
      {"train after train_wait", 20 * kSec, false},
      {"no train event", INT64_MIN, false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    std::vector<Record> rows{run_start("r1", 10)};
    for (auto& r : one_step(kT0 + kSec)) rows.push_back(r);
    auto join = make_operator("rank_join");
    OperatorRun joined, run;
    run_operator(*join, rows, &joined);
    if (c.train_offset_ns != INT64_MIN) joined.out.push_back(train("r1", 1, 3.0, kT0 + kSec + 9 + c.train_offset_ns));
    run_operator(*make_operator("step_stats", "train_wait: 10s"), joined.out, &run);
    auto stats = stats_of(run);
    REQUIRE(stats.size() == 1);
    CHECK(stats[0]->loss.has_value() == c.has_loss);
  }
}

TEST_CASE("step_stats: a failure of the run sends the steps waiting for their train event at once") {
  for (const char* stop : {"oom", "abort", "config_change"}) {
    CAPTURE(stop);
    std::vector<Record> rows{run_start("r1", 10)};
    for (auto& r : one_step(kT0 + kSec)) rows.push_back(r);
    auto join = make_operator("rank_join");
    OperatorRun joined, run;
    run_operator(*join, rows, &joined);
    joined.out.push_back(event(stop, "r1", kT0 + 3 * kSec));
    run_operator(*make_operator("step_stats", "train_wait: 10s"), joined.out, &run);
    REQUIRE(stats_of(run).size() == 1);
    int64_t at = 0;
    for (const auto& r : run.out) {
      if (r.kind() == Kind::kStepStats) at = r.time_ns;
    }
    // A config_change stops nothing: the step waits its train_wait.
    CHECK(at == (std::string(stop) == "config_change" ? kT0 + kSec + 9 + 10 * kSec : kT0 + 3 * kSec));
  }
}

TEST_CASE("step_stats: quantiles are the nearest-rank values of the sorted work times, for any world size") {
  std::mt19937 rng(3);
  for (int32_t world : {1, 2, 3, 10, 19, 20, 21, 100, 1000, 1024}) {
    StepRecord rec;
    rec.run_id = Symbol::intern("r1");
    rec.step = 1;
    rec.world_size = world;
    std::vector<double> work;
    for (int32_t r = 0; r < world; ++r) {
      // Many ties: work times from a small set.
      double w = 1000 + 10 * std::uniform_int_distribution<int>(0, world / 3 + 1)(rng);
      Step s = step("r1", r, 1, w, kT0 + r).as<Step>();
      rec.ranks.push_back(s);
      work.push_back(w);
    }
    std::sort(work.begin(), work.end());
    auto nearest = [&](double q) {
      size_t idx = static_cast<size_t>(std::ceil(q * static_cast<double>(work.size())));
      return work[std::clamp<size_t>(idx, 1, work.size()) - 1];
    };
    StepStats s = ops::compute_step_stats(rec);
    CAPTURE(world);
    CHECK(s.work_min == work.front());
    CHECK(s.work_p50 == nearest(0.50));
    CHECK(s.work_p95 == nearest(0.95));
    CHECK(s.work_p99 == nearest(0.99));
    CHECK(s.work_max == work.back());
  }
}
