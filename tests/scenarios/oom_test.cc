// CUDA OOM at a long-sequence batch (spec section 6): rank 11 gets 32K-token
// sequences at steps 78-79 with memory near full, and runs out at step 80.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: out of memory at a long-sequence batch") {
  auto r = run_scenario(scenario_options(), {"oom:rank=11,step=80"});
  auto oom = r.of("oom");
  REQUIRE(oom.size() == 1);
  check_rank(oom[0], 11);
  CHECK(*oom[0].step == 80);
  CHECK(oom[0].severity == Severity::kCritical);
  CHECK(attr_of(oom[0], "seq_len") == 32768);
  for (const char* w : {"sequence length 32768", "dataset shard shard-11", "memory peak", "a spike"}) {
    CAPTURE(w);
    CHECK(oom[0].summary.find(w) != std::string::npos);
  }
  // The GPU's memory was nearly full before it ran out.
  auto pressure = r.of("memory_pressure");
  REQUIRE(pressure.size() == 1);
  check_rank(pressure[0], 11);
  CHECK(*pressure[0].step < 80);
  CHECK(*pressure[0].step >= 74);
  CHECK(r.of("rank_missing").empty());  // the run ended (failed): nobody is missing
}
