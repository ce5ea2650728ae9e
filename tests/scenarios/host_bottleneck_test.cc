// A saturated host: gpu-node-2 (ranks 16..23) runs at ~97 % CPU from step 60
// and its ranks wait ~400 ms more for data every step.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: saturated host CPU starves its ranks") {
  auto r = run_scenario(scenario_options(), {"host_cpu:rank=17,from=60"});
  auto host = r.of("host_bottleneck");
  REQUIRE(host.size() == 1);
  CHECK(host[0].node.str() == "gpu-node-2");
  REQUIRE(host[0].rank.has_value());
  CHECK(*host[0].rank >= 16);
  CHECK(*host[0].rank <= 23);
  check_onset(host[0], 60);
  auto starved = r.of("data_starvation");
  REQUIRE(starved.size() == 1);
  CHECK(starved[0].node.str() == "gpu-node-2");
  check_onset(starved[0], 60);
  CHECK(attr_of(starved[0], "starved_ranks") == 8);
  CHECK(starved[0].summary.find("storage reads normal") != std::string::npos);
}
