// An XID 79 takes rank 20's GPU off the bus at step 70: the rank goes missing.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: an XID error takes a GPU off the bus") {
  auto r = run_scenario(scenario_options(), {"xid:rank=20,step=70"});
  auto xid = r.of("xid_error");
  REQUIRE(xid.size() == 1);
  check_rank(xid[0], 20);
  CHECK(*xid[0].step == 70);
  CHECK(*xid[0].value == 79);
  CHECK(xid[0].severity == Severity::kCritical);
  auto missing = r.of("rank_missing");
  REQUIRE(missing.size() == 1);
  check_rank(missing[0], 20);
  CHECK(*missing[0].step == 70);
}
