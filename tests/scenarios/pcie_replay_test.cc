// PCIe replays: rank 13's GPU's pcie_replay_total jumps by ~100 a sample from
// step 60 (healthy GPUs replay now and then, a few at a time).
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: PCIe replays on one GPU") {
  auto r = run_scenario(scenario_options(), {"pcie_replay:rank=13,from=60"});
  auto pcie = r.of("pcie_replay");
  REQUIRE(pcie.size() == 1);
  check_rank(pcie[0], 13);
  CHECK(*pcie[0].step >= 60);
  CHECK(*pcie[0].step <= 62);
  CHECK(r.serious().size() == 1);  // the healthy GPUs' occasional replays raise nothing
}

TEST_CASE("scenario: PCIe replays that slow their rank make it the straggler, explained by the link") {
  auto r = run_scenario(scenario_options(), {"pcie_replay:rank=13,from=60,factor=1.8"});
  REQUIRE(r.of("pcie_replay").size() == 1);
  auto straggler = r.of("straggler");
  REQUIRE(straggler.size() == 1);
  check_rank(straggler[0], 13);
  check_onset(straggler[0], 60);
  std::vector<Alert> diagnoses = r.of("diagnosis");
  REQUIRE(!diagnoses.empty());
  for (const auto& d : diagnoses) {
    CAPTURE(d.summary);
    CHECK(d.cause == "hardware_fault");
    CHECK(d.owner == "infrastructure");
  }
}
