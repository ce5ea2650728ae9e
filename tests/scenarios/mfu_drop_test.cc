// MFU drop after a config change: at step 70 the run switches on full
// activation checkpointing (a config_change event) and every rank computes
// 1.4x longer.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: a config change makes every step slower") {
  auto r = run_scenario(scenario_options(), {"config_slowdown:step=70"});
  auto mfu = r.of("mfu_drop");
  REQUIRE(mfu.size() == 1);
  check_onset(mfu[0], 70);
  CHECK(attr_of(mfu[0], "config_change_step") == 70);
  CHECK(attr_of(mfu[0], "drop") > 0.2);
  auto drop = r.of("throughput_drop");
  REQUIRE(drop.size() == 1);
  check_onset(drop[0], 70);
  CHECK(r.of("straggler").empty());
  CHECK(r.serious().size() == 2);
}
