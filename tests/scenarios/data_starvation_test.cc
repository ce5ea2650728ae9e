// Data starvation from a slow dataset shard (spec section 27): shard-5, read by
// ranks 5 and 21, takes 30x longer to read from step 60.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: a slow dataset shard starves the ranks that read it") {
  auto r = run_scenario(scenario_options(), {"slow_shard:shard=5,from=60"});
  auto starved = r.of("data_starvation");
  REQUIRE(starved.size() == 1);
  REQUIRE(starved[0].rank.has_value());
  check_rank(starved[0], *starved[0].rank == 5 ? 5 : 21);
  CHECK((*starved[0].rank == 5 || *starved[0].rank == 21));
  check_onset(starved[0], 60);
  CHECK(attr_of(starved[0], "starved_ranks") == 2);
  CHECK(starved[0].summary.find("reading dataset shard shard-5, whose storage reads take") != std::string::npos);
  CHECK(r.of("host_bottleneck").empty());
  CHECK(r.of("comm_bottleneck").empty());  // the others wait in the collective, but it is not the network
}
