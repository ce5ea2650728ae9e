// Training instability (spec sections 10, 24, 25): the LR jumps 20x at step 100
// (no config_change reported), the gradient norm and the loss spike, and the
// loss goes NaN at step 110.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: an LR jump, a gradient spike, a loss spike, then NaN") {
  auto r = run_scenario(scenario_options(), {"lr_change:step=100,factor=20", "nan:step=110"});
  auto grad = r.of("grad_spike");
  REQUIRE(grad.size() == 1);
  CHECK(*grad[0].step == 100);
  CHECK(attr_of(grad[0], "lr_change_step") == 100);  // the inferred LR change
  auto loss = r.of("loss_spike");
  REQUIRE(loss.size() == 1);
  CHECK(*loss[0].step == 100);
  auto nan = r.of("nan_loss");
  REQUIRE(nan.size() == 1);
  CHECK(*nan[0].step == 110);
  CHECK(r.serious().size() == 3);
}
