// Slow checkpoints: from step 50 each checkpoint (every 25 steps) takes 15x
// longer, about 45 s of a 95 s window.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: slow checkpoints") {
  auto r = run_scenario(scenario_options(), {"slow_checkpoint:from=50"});
  auto overhead = r.of("checkpoint_overhead");
  REQUIRE(overhead.size() == 1);
  CHECK(attr_of(overhead[0], "onset_step") == 50);
  CHECK(*overhead[0].step == 75);  // the second slow checkpoint in a row
  CHECK(*overhead[0].value > 0.1);
  CHECK(r.serious().size() == 1);
}
