// NVLink errors: rank 13's GPU's nvlink_errors_total rises from step 60 and
// collectives slow down 8x on every rank (links retrain, traffic reroutes).
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: NVLink errors on one GPU slow every collective") {
  auto r = run_scenario(scenario_options(), {"nvlink:rank=13,from=60"});
  auto nvlink = r.of("nvlink_error");
  REQUIRE(nvlink.size() == 1);  // the counter keeps rising: one incident
  check_rank(nvlink[0], 13);
  CHECK(*nvlink[0].step >= 60);
  CHECK(*nvlink[0].step <= 62);
  CHECK(nvlink[0].severity == Severity::kWarning);
  // Every rank waits in collectives: a run-wide comm bottleneck, no straggler.
  auto comm = r.of("comm_bottleneck");
  REQUIRE(comm.size() == 1);
  check_onset(comm[0], 60);
  CHECK(r.of("straggler").empty());
  CHECK(r.of("pcie_replay").empty());
}
