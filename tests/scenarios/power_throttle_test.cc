// Power capping: rank 6's GPU gets a 450 W limit from step 60; its clock drops
// 1.3x and the power_cap reason is set.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: power capping on one GPU") {
  auto r = run_scenario(scenario_options(), {"power_cap:rank=6,from=60"});
  auto power = r.of("power_throttle");
  REQUIRE(power.size() == 1);
  check_rank(power[0], 6);
  CHECK(*power[0].step >= 60);
  CHECK(*power[0].step <= 60 + kDetectionSteps);
  CHECK(*power[0].threshold == 450);  // the power limit
  CHECK(r.of("thermal_throttle").empty());
  CHECK(r.of("clock_low").empty());
}
