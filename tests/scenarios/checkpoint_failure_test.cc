// A failed checkpoint: the first checkpoint at or after step 70 (step 75) fails.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: a checkpoint fails") {
  auto r = run_scenario(scenario_options(), {"checkpoint_failure:step=70"});
  auto failed = r.of("checkpoint_failure");
  REQUIRE(failed.size() == 1);
  CHECK(*failed[0].step == 75);
  CHECK(attr_of(failed[0], "last_ok_step") == 50);
  CHECK(attr_of(failed[0], "last_ok_age_s") > 45);
  CHECK(attr_of(failed[0], "last_ok_age_s") < 60);
  CHECK(r.serious().size() == 1);
}
