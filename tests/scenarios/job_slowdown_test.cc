// Several small slowdowns at once (issue 14): four ranks of 32 each 10-30 %
// slower from one step on raise one job_slowdown naming them, with a
// diagnosis; noise, a job-wide slowdown and a straggler raise none.
#include "schema/number_format.h"
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: several ranks 10-30 % slower raise one job_slowdown naming them") {
  for (uint64_t seed : {21, 22, 23}) {
    CAPTURE(seed);
    synth::Options o = scenario_options(seed);
    o.gc_pause_rate = 0.01;
    auto r = run_scenario(o, {"slowdown:rank=13,from=80"});
    auto slow = r.of("job_slowdown");
    REQUIRE(slow.size() == 1);
    const Alert& a = slow[0];
    CAPTURE(a.summary);
    CHECK(a.severity == Severity::kWarning);
    CHECK(!a.rank.has_value());  // run-level: the ranks run on four nodes
    CHECK(a.node.empty());
    check_onset(a, 80);
    MESSAGE("job_slowdown raised at step " << *a.step << " (" << (*a.step - 80) << " steps after the onset)");
    // synth: ranks 13, 20, 27, 2 (every 7th), 1.1, 1.17, 1.23, 1.3 x.
    CHECK(attr_of(a, "ranks") == 4);
    CHECK(attr_of(a, "rank_13") == doctest::Approx(1.10).epsilon(0.04));
    CHECK(attr_of(a, "rank_20") == doctest::Approx(1.167).epsilon(0.04));
    CHECK(attr_of(a, "rank_27") == doctest::Approx(1.233).epsilon(0.04));
    CHECK(attr_of(a, "rank_2") == doctest::Approx(1.30).epsilon(0.04));
    CHECK(*a.value >= 1.1);
    CHECK(*a.value == doctest::Approx(attr_of(a, "after_ms") / attr_of(a, "before_ms")));
    // No other warning: the ranks are no stragglers, the throughput drop is under 25 %.
    CHECK_MESSAGE(r.serious().size() == 1, r.serious().back());
    // Its diagnosis: the same numbers as the alert.
    std::optional<Alert> d;
    for (const auto& x : r.of("diagnosis")) {
      if (x.symptom == "job_slowdown") d = x;
    }
    REQUIRE(d.has_value());
    CAPTURE(d->summary);
    CHECK(d->cause == "unknown");
    CHECK(d->owner == "infrastructure");
    CHECK(!d->rank.has_value());
    CHECK(d->summary.find("rose from " + fmt_num(attr_of(a, "before_ms"), NumberStyle::kDecimals) + " to " +
                          fmt_num(attr_of(a, "after_ms"), NumberStyle::kDecimals) + " ms since step " +
                          std::to_string(static_cast<int64_t>(attr_of(a, "onset_step")))) != std::string::npos);
    for (const char* rank : {"13 (+", "20 (+", "27 (+", "2 (+"}) CHECK(d->summary.find(rank) != std::string::npos);
    CHECK(attr_of(*d, "before_ms") == attr_of(a, "before_ms"));
    CHECK(attr_of(*d, "after_ms") == attr_of(a, "after_ms"));
    CHECK(attr_of(*d, "ranks") == 4);
  }
}

TEST_CASE("scenario: noise, a job-wide slowdown and a straggler raise no job_slowdown") {
  struct Case {
    const char* name;
    int32_t ranks;
    double gc_pause_rate;
    std::vector<std::string> faults;
  };
  const Case cases[] = {
      {"healthy, 8 ranks", 8, 0.002, {}},
      {"noise only, 8 ranks", 8, 0.02, {}},
      {"healthy, 1024 ranks", 1024, 0.002, {}},
      {"noise only, 1024 ranks", 1024, 0.02, {}},
      {"noise only, 32 ranks", 32, 0.02, {}},
      {"every rank slower (config_slowdown)", 32, 0.01, {"config_slowdown:step=80"}},
      {"a 2x straggler", 32, 0.01, {"straggler:rank=13,from=80"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    synth::Options o = scenario_options(31);
    o.ranks = c.ranks;
    o.gc_pause_rate = c.gc_pause_rate;
    if (c.ranks > 64) o.gpu_every = 5, o.detail = false;  // 1024 ranks: step reports only, as the fleet
    auto r = run_scenario(o, c.faults);
    auto slow = r.of("job_slowdown");
    CHECK_MESSAGE(slow.empty(), (slow.empty() ? "" : slow.front().summary));
    if (c.faults.empty() && c.gc_pause_rate < 0.01)
      CHECK_MESSAGE(r.serious().empty(), (r.serious().empty() ? "" : r.serious().front()));
  }
}
