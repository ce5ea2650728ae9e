// Real fleets (issue 14): ranks in two speed groups from the first step, a
// jump of two ranks within the slow group, a straggler that gets worse, and
// noise-only runs at 8 and 1024 ranks.
#include "schema/number_format.h"
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {
std::vector<Alert> diagnoses_of(const ScenarioResult& r, const std::string& symptom) {
  std::vector<Alert> out;
  for (const auto& a : r.of("diagnosis")) {
    if (a.symptom == symptom) out.push_back(a);
  }
  return out;
}
}  // namespace

TEST_CASE("scenario: two speed groups from the start are one rank_heterogeneity, not warnings") {
  for (const char* fault : {"speed_groups", "speed_groups:label=1"}) {
    CAPTURE(fault);
    auto r = run_scenario(scenario_options(), {fault});
    CHECK_MESSAGE(r.serious().empty(), (r.serious().empty() ? "" : r.serious().front()));
    auto het = r.of("rank_heterogeneity");
    REQUIRE(het.size() == 1);
    CHECK(het[0].severity == Severity::kInfo);
    CHECK(*het[0].value == doctest::Approx(2.5).epsilon(0.1));
    CHECK(het[0].summary.find("16 ranks (0-15) on") != std::string::npos);
    CHECK(het[0].summary.find("16 ranks (16-31) on") != std::string::npos);
    auto d = diagnoses_of(r, "rank_heterogeneity");
    REQUIRE(d.size() == 1);
    CHECK(d[0].cause == "heterogeneous_fleet");
    CHECK(d[0].owner == "platform");
  }
}

TEST_CASE("scenario: a jump within the slow group is found within 3 steps") {
  auto r = run_scenario(scenario_options(), {"speed_groups:factor=1.8", "straggler:rank=20,from=80,factor=4",
                                             "straggler:rank=27,from=80,factor=4.5"});
  auto stragglers = r.of("straggler");
  REQUIRE(stragglers.size() == 2);
  for (const auto& s : stragglers) {
    CHECK((*s.rank == 20 || *s.rank == 27));
    check_onset(s, 80);
    CHECK(*s.step <= 83);
  }
  auto d = diagnoses_of(r, "straggler");
  REQUIRE(d.size() == 2);
  for (const auto& a : d) CHECK(a.cause == "unknown");
  CHECK(r.of("rank_heterogeneity").size() == 1);
}

TEST_CASE("scenario: a straggler that gets twice as slow is raised again, and its diagnosis follows") {
  auto r = run_scenario(scenario_options(),
                        {"straggler:rank=13,from=60,factor=1.7", "straggler:rank=13,from=90,factor=2.5"});
  auto s = r.of("straggler");
  REQUIRE(s.size() == 1);  // one incident, its latest revision
  check_rank(s[0], 13);
  CHECK(attr_of(s[0], "escalation") == 1);
  CHECK(*s[0].value == doctest::Approx(1.7 * 2.5).epsilon(0.1));
  bool escalated = false;
  for (const auto& p : r.published) {
    if (p.kind == "straggler" && attr_of(p, "escalation") == 1) {
      escalated = true;
      CHECK(*p.step >= 90);
      CHECK(*p.step <= 93);
      break;
    }
  }
  CHECK(escalated);
  // The diagnosis reports the alert's own ratio (one number), the latest one.
  auto d = diagnoses_of(r, "straggler");
  REQUIRE(d.size() == 1);
  CHECK(d[0].summary.find(fmt_num(*s[0].value, "%.2f")) != std::string::npos);
}

TEST_CASE("scenario: noise-only runs raise nothing at 8 and at 1024 ranks") {
  struct Shape {
    int32_t ranks;
    double pauses;
  };
  for (Shape shape : {Shape{8, 0.04}, Shape{1024, 0.04}, Shape{1024, 0.002}}) {
    CAPTURE(shape.ranks);
    CAPTURE(shape.pauses);
    synth::Options o = scenario_options(7);
    o.ranks = shape.ranks;
    o.steps = 120;
    o.gpu_every = 10;
    o.detail = false;
    o.gc_pause_rate = shape.pauses;
    auto r = run_scenario(o, {});
    CHECK_MESSAGE(r.serious().empty(), (r.serious().empty() ? "" : r.serious().front()));
    CHECK(r.of("rank_heterogeneity").empty());
  }
}
