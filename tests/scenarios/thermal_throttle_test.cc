// GPU straggler from thermal throttling (spec section 26): rank 13's GPU runs
// hot with its clock halved from step 60, so rank 13 works 2x slower.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: thermal throttling on one GPU") {
  auto r = run_scenario(scenario_options(), {"thermal:rank=13,from=60"});
  auto thermal = r.of("thermal_throttle");
  REQUIRE(thermal.size() == 1);
  check_rank(thermal[0], 13);
  CHECK(*thermal[0].step >= 60);
  CHECK(*thermal[0].step <= 60 + kDetectionSteps);
  CHECK(thermal[0].summary.find("hardware thermal slowdown") != std::string::npos);
  // The slow rank, and the job it holds back.
  auto straggler = r.of("straggler");
  REQUIRE(straggler.size() == 1);
  check_rank(straggler[0], 13);
  check_onset(straggler[0], 60);
  auto drop = r.of("throughput_drop");
  REQUIRE(drop.size() == 1);
  check_onset(drop[0], 60);
  CHECK(r.of("clock_low").empty());  // the clock drop has a reason: thermal
  CHECK(r.of("mfu_drop").empty());   // the other ranks compute as fast as before
}
