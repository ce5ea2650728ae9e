// A GPU whose clock is held low with no throttle reason and at a normal
// temperature (application clocks left locked low): rank 13's GPU runs at
// 1980 / 1.6 MHz from step 60, so rank 13 works 1.6x slower.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: a GPU clock held low with no throttle reason") {
  auto r = run_scenario(scenario_options(), {"clock_low:rank=13,from=60"});
  auto low = r.of("clock_low");
  REQUIRE(low.size() == 1);
  check_rank(low[0], 13);
  CHECK(*low[0].step >= 60);
  CHECK(*low[0].step <= 60 + kDetectionSteps);
  CHECK(low[0].summary.find("no throttle reason") != std::string::npos);
  // Not a throttle the GPU reports: neither thermal nor power.
  CHECK(r.of("thermal_throttle").empty());
  CHECK(r.of("power_throttle").empty());
  // The slow rank, and the job it holds back.
  auto straggler = r.of("straggler");
  REQUIRE(straggler.size() == 1);
  check_rank(straggler[0], 13);
  check_onset(straggler[0], 60);
  auto drop = r.of("throughput_drop");
  REQUIRE(drop.size() == 1);
  check_onset(drop[0], 60);
}
