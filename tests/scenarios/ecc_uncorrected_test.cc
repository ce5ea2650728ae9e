// Uncorrected ECC errors: rank 3's GPU's ecc_dbe_total rises from step 70.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: double-bit ECC errors on one GPU") {
  auto r = run_scenario(scenario_options(), {"ecc:rank=3,from=70"});
  auto ecc = r.of("ecc_uncorrected");
  REQUIRE(ecc.size() == 1);  // it keeps rising: one incident
  check_rank(ecc[0], 3);
  CHECK(*ecc[0].step >= 70);
  CHECK(*ecc[0].step <= 72);
  CHECK(ecc[0].severity == Severity::kCritical);
  CHECK(r.serious().size() == 1);
}
