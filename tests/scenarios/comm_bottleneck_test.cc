// A network bottleneck (spec section 12): from step 60 every collective takes
// 8x longer and gpu-node-1's TCP retransmits climb.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: slow collectives on every rank") {
  auto r = run_scenario(scenario_options(), {"network:from=60,rank=9"});
  auto comm = r.of("comm_bottleneck");
  REQUIRE(comm.size() == 1);
  check_onset(comm[0], 60);
  CHECK(*comm[0].value > 0.25);
  CHECK(attr_of(comm[0], "collective_latency_ms") > 900);
  auto drop = r.of("throughput_drop");
  REQUIRE(drop.size() == 1);
  check_onset(drop[0], 60);
  CHECK(r.of("straggler").empty());
  CHECK(r.of("mfu_drop").empty());  // compute is as fast as before
  CHECK(r.of("data_starvation").empty());
}
