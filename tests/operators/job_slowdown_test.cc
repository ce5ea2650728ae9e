#include "operators/job_slowdown.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "schema/number_format.h"
#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

// A fixed pseudo-normal draw per (rank, step): the sum of four uniforms from
// a hash, scaled to unit variance (no <random> distribution: they differ by
// library).
double noise(int32_t rank, int64_t step) {
  uint64_t z =
      static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(step) * 0xbf58476d1ce4e5b9ull;
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    z += 0x9e3779b97f4a7c15ull;
    uint64_t x = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    sum += static_cast<double>(x >> 11) * 0x1.0p-53;
  }
  return (sum - 2.0) * std::sqrt(3.0);
}

// Each rank's own work: 1900 ms with 3 % noise, times its factor from `from` on,
// and a one-step 1.6x pause of rank (7 * step) % world in every fourth step.
struct Fleet {
  int32_t world = 32;
  int64_t steps = 100;
  int64_t from = 60, to = 1 << 30;
  std::map<int32_t, double> factors;  // rank -> factor from `from` to `to`; rank -1: every rank
  bool pauses = true;
  double work(int32_t r, int64_t s) const {
    double w = 1900 * (1 + 0.03 * noise(r, s));
    if (s >= from && s <= to) {
      if (auto it = factors.find(r); it != factors.end()) w *= it->second;
      if (auto it = factors.find(-1); it != factors.end()) w *= it->second;
    }
    if (pauses && s % 4 == 0 && r == (7 * s) % world) w *= 1.6;
    return w;
  }
};

void run_fleet(const Fleet& f, OperatorRun* run, const std::string& params = "") {
  auto link = make_operator("rank_join");
  OperatorRun joined;
  run_operator(*link, sync_steps("r1", f.world, f.steps, [&](int32_t r, int64_t s) { return f.work(r, s); }), &joined);
  auto def = make_operator("job_slowdown", params);
  run_operator(*def, joined.out, run);
}

}  // namespace

TEST_CASE("job_slowdown names the few ranks slower than their own baselines, run-level") {
  Fleet f;
  f.factors = {{13, 1.30}, {20, 1.23}, {27, 1.17}, {2, 1.10}};
  OperatorRun run;
  run_fleet(f, &run);
  auto alerts = run.alerts("job_slowdown");
  REQUIRE(alerts.size() == 1);
  const Alert& a = alerts[0];
  CAPTURE(a.summary);
  CHECK(a.severity == Severity::kWarning);
  CHECK(!a.rank.has_value());
  CHECK(a.node.empty());
  REQUIRE(a.step.has_value());
  CHECK(*a.step >= 60 + 6);
  CHECK(*a.step <= 60 + 10);
  CHECK(attr(a, "onset_step") == 60);
  CHECK(attr(a, "ranks") == 4);
  // The job's step follows its slowest rank: 1.3 x the work, plus the collective.
  double before = attr(a, "before_ms"), after = attr(a, "after_ms");
  CHECK(before == doctest::Approx(1900 * 1.06 + 110).epsilon(0.03));
  CHECK(*a.value == doctest::Approx(after / before));
  CHECK(*a.value > 1.15);
  CHECK(*a.threshold == doctest::Approx(1.1));
  // Each rank's own after / before, most changed first.
  CHECK(attr(a, "rank_13") == doctest::Approx(1.30).epsilon(0.03));
  CHECK(attr(a, "rank_20") == doctest::Approx(1.23).epsilon(0.03));
  CHECK(attr(a, "rank_27") == doctest::Approx(1.17).epsilon(0.03));
  CHECK(attr(a, "rank_2") == doctest::Approx(1.10).epsilon(0.03));
  std::vector<std::string> order;
  for (const auto& [k, v] : a.attrs) {
    if (k.rfind("rank_", 0) == 0) order.push_back(k);
  }
  CHECK(order == std::vector<std::string>{"rank_13", "rank_20", "rank_27", "rank_2"});
  CHECK(a.summary.find("JOB SLOWDOWN: step time " + fmt_num(before) + " -> " + fmt_num(after) + " ms (+") == 0);
  CHECK(a.summary.find(") since step 60; ranks 13 (+") != std::string::npos);
  CHECK(a.summary.find("%) and 2 (+") != std::string::npos);
  CHECK(a.summary.find("work slower than their own baselines") != std::string::npos);
  // Still slow at the end of the run: no closing revision without a run_end.
  CHECK(run.closed("job_slowdown").empty());
}

TEST_CASE("job_slowdown names the one rank that changed, and closes when the job's level returns") {
  Fleet f;
  f.steps = 120;
  f.to = 90;
  f.factors = {{13, 1.3}};
  OperatorRun run;
  run_fleet(f, &run);
  auto alerts = run.alerts("job_slowdown");
  REQUIRE(alerts.size() == 1);
  const Alert& a = alerts[0];
  CAPTURE(a.summary);
  REQUIRE(a.rank.has_value());
  CHECK(*a.rank == 13);
  CHECK(a.node.str() == "node-1");
  CHECK(*a.gpu == 5);
  CHECK(attr(a, "ranks") == 1);
  CHECK(attr(a, "onset_step") == 60);
  CHECK(attr(a, "rank_13") == doctest::Approx(1.3).epsilon(0.03));
  CHECK(a.summary.find("; rank 13 (node node-1, GPU 5) works 3") != std::string::npos);
  CHECK(a.summary.find("% slower than its own baseline") != std::string::npos);
  auto closed = run.closed("job_slowdown");
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].alert_id == a.alert_id);
  CHECK(closed[0].revision == a.revision + 1);
  REQUIRE(closed[0].step.has_value());
  CHECK(*closed[0].step == *a.step);  // the closing revision keeps the alert's fields
  CHECK(*closed[0].ends_ns > a.time_ns);
}

TEST_CASE("job_slowdown stays silent on noise, job-wide slowdowns and stragglers") {
  struct Case {
    const char* name;
    std::map<int32_t, double> factors;
  };
  const Case cases[] = {
      {"noise and one-step pauses only", {}},
      {"every rank slower (a config change)", {{-1, 1.4}}},
      {"a 2x straggler", {{13, 2.0}}},
      {"a 1.6x straggler", {{13, 1.6}}},
      {"more than half the ranks slower", {{0, 1.2}, {1, 1.2}, {2, 1.2}, {3, 1.2}, {4, 1.2}, {5, 1.2}}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    Fleet f;
    f.world = 8;
    f.factors = c.factors;
    OperatorRun run;
    run_fleet(f, &run);
    CHECK(run.alerts("job_slowdown").empty());
  }
}

TEST_CASE("job_slowdown: the job rising with no rank changed (slower collectives) raises nothing") {
  // Work unchanged, the collective 3x slower from step 60: the job's step rises ~2x.
  std::vector<Record> rows{run_start("r1", 16)};
  int64_t t = kT0 + kSec;
  for (int64_t s = 1; s <= 100; ++s) {
    double slowest = 0;
    for (int32_t r = 0; r < 16; ++r) slowest = std::max(slowest, 1900 * (1 + 0.03 * noise(r, s)));
    double allreduce = s >= 60 ? 2000 : 100;
    t += static_cast<int64_t>((slowest + allreduce) * 1e6);
    for (int32_t r = 0; r < 16; ++r) {
      double w = 1900 * (1 + 0.03 * noise(r, s));
      double comm = slowest - w + allreduce;
      rows.push_back(step("r1", r, s, w + comm + 10, t + r, comm, 10));
    }
  }
  auto link = make_operator("rank_join");
  OperatorRun joined;
  run_operator(*link, rows, &joined);
  OperatorRun run;
  run_operator(*make_operator("job_slowdown"), joined.out, &run);
  CHECK(run.alerts("job_slowdown").empty());
}

TEST_CASE("job_slowdown: a run_end closes the open incident; min_rise is a parameter") {
  Fleet f;
  f.factors = {{13, 1.3}, {20, 1.2}};
  auto link = make_operator("rank_join");
  OperatorRun joined;
  auto rows = sync_steps("r1", f.world, f.steps, [&](int32_t r, int64_t s) { return f.work(r, s); });
  run_operator(*link, rows, &joined);
  RunEnd end;
  end.run_id = Symbol::intern("r1");
  end.set_present(RunEnd::F::run_id);
  Record e;
  e.time_ns = rows.back().time_ns + 5 * kSec;
  e.body = end;
  joined.out.push_back(e);
  OperatorRun run;
  run_operator(*make_operator("job_slowdown"), joined.out, &run);
  REQUIRE(run.alerts("job_slowdown").size() == 1);
  auto closed = run.closed("job_slowdown");
  REQUIRE(closed.size() == 1);
  CHECK(*closed[0].ends_ns == e.time_ns);
  // The job rose ~1.23x: a 30 % threshold does not see it.
  OperatorRun high;
  run_operator(*make_operator("job_slowdown", "min_rise: 0.3"), joined.out, &high);
  CHECK(high.alerts("job_slowdown").empty());
}

TEST_CASE("job_slowdown rejects parameters that cannot work, at their position") {
  CHECK(config_error("job_slowdown", "current_steps: 12") ==
        "test.yaml:7:20: error: current_steps (12) must not exceed baseline_gap (10) (in operators.op)");
  CHECK(config_error("job_slowdown", "min_baseline: 50") ==
        "test.yaml:7:19: error: min_baseline (50) must not exceed baseline_steps (40) (in operators.op)");
  CHECK(config_error("job_slowdown", "max_rank_fraction: 2").find("test.yaml:7:24: error:") == 0);
  CHECK(config_error("job_slowdown", "min_rise: 0.2") == "");
}

TEST_CASE("job_slowdown names the node when every changed rank runs on it, and at most 8 ranks") {
  {
    Fleet f;  // 32 ranks on node-0..node-3: ranks 8, 10, 11 of node-1 slower
    f.factors = {{8, 1.3}, {10, 1.25}, {11, 1.2}};
    OperatorRun run;
    run_fleet(f, &run);
    auto alerts = run.alerts("job_slowdown");
    REQUIRE(alerts.size() == 1);
    CAPTURE(alerts[0].summary);
    CHECK(!alerts[0].rank.has_value());
    CHECK(!alerts[0].gpu.has_value());
    CHECK(alerts[0].node.str() == "node-1");
    CHECK(attr(alerts[0], "ranks") == 3);
    CHECK(alerts[0].summary.find(" and 11 (+") != std::string::npos);
    CHECK(alerts[0].summary.find(", all on node node-1, work slower than their own baselines") != std::string::npos);
  }
  {
    Fleet f;  // 10 of 32 ranks on every node: run-level, 8 named
    for (int32_t r = 0; r < 10; ++r) f.factors[r * 3] = 1.3 - 0.01 * r;
    OperatorRun run;
    run_fleet(f, &run);
    auto alerts = run.alerts("job_slowdown");
    REQUIRE(alerts.size() == 1);
    CAPTURE(alerts[0].summary);
    CHECK(alerts[0].node.empty());
    CHECK(attr(alerts[0], "ranks") == 10);
    int named = 0;
    for (const auto& [k, v] : alerts[0].attrs) named += k.rfind("rank_", 0) == 0;
    CHECK(named == ops::kJobSlowdownNamedRanks);
    CHECK(alerts[0].summary.find(" and 2 more work slower than their own baselines") != std::string::npos);
  }
}
