// Root-cause diagnoses end to end: each failure class of the synthetic fleet
// (cli/synth/synth.h) through the default pipeline gives exactly one diagnosis
// (one alert_id; a repeated alert_id is an update, the last one wins) with the
// right symptom, cause, owner, locators and onset step; healthy runs give none.
#include <map>
#include <set>

#include "schema/number_format.h"
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

// The diagnoses of a run, the last of each alert_id, in order of first appearance.
std::vector<Alert> final_diagnoses(const ScenarioResult& r) {
  std::vector<std::string> order;
  std::map<std::string, Alert> last;
  for (const auto& a : r.alerts) {
    if (a.kind != "diagnosis") continue;
    if (!last.count(a.alert_id)) order.push_back(a.alert_id);
    last[a.alert_id] = a;
  }
  std::vector<Alert> out;
  for (const auto& id : order) out.push_back(last[id]);
  return out;
}

struct Expect {
  const char* name;
  std::vector<std::string> faults;
  const char* symptom;
  const char* cause;
  const char* owner;
  int64_t onset;            // the fault's first step
  int64_t onset_slack;      // how far after it the onset may be
  std::set<int32_t> ranks;  // the rank the diagnosis may name; empty: run-wide (no rank)
  const char* node;         // the node it must name ("" = any / none)
};

}  // namespace

TEST_CASE("scenario: every failure class gives one diagnosis with the right cause, owner, place and onset") {
  // clang-format off
  const Expect cases[] = {
      {"GPU straggler", {"straggler:rank=13,from=60"}, "straggler", "unknown", "infrastructure", 60, kOnsetTolerance, {13}, "gpu-node-1"},
      {"thermal throttling", {"thermal:rank=13,from=60"}, "straggler", "hardware_throttle", "infrastructure", 60, kOnsetTolerance, {13}, "gpu-node-1"},
      {"power cap", {"power_cap:rank=13,from=60"}, "power_throttle", "hardware_throttle", "infrastructure", 60, kDetectionSteps, {13}, "gpu-node-1"},
      {"host CPU saturated", {"host_cpu:rank=13,from=60"}, "data_starvation", "host_bottleneck", "infrastructure", 60, kOnsetTolerance, {8, 9, 10, 11, 12, 13, 14, 15}, "gpu-node-1"},
      {"slow dataset shard", {"slow_shard:rank=13,from=60"}, "data_starvation", "data_pipeline", "data", 60, kOnsetTolerance, {13, 29}, ""},
      {"network", {"network:from=60,rank=13"}, "comm_bottleneck", "network", "network", 60, kOnsetTolerance, {}, ""},
      // Memory fills from step 57 and memory_pressure opens the incident before the OOM at 60.
      {"out of memory", {"oom:rank=13,step=60"}, "oom", "memory", "training", 55, 5, {13}, "gpu-node-1"},
      {"XID", {"xid:rank=13,step=60"}, "xid_error", "hardware_fault", "infrastructure", 60, 0, {13}, "gpu-node-1"},
      {"uncorrectable ECC", {"ecc:rank=13,from=60"}, "ecc_uncorrected", "hardware_fault", "infrastructure", 60, kDetectionSteps, {13}, "gpu-node-1"},
      {"missing rank", {"missing_rank:rank=13,from=60"}, "rank_missing", "hardware_fault", "infrastructure", 60, 0, {13}, "gpu-node-1"},
      {"GPU clock held low", {"clock_low:rank=13,from=60"}, "straggler", "hardware_throttle", "infrastructure", 60, kOnsetTolerance, {13}, "gpu-node-1"},
      {"NVLink errors", {"nvlink:rank=13,from=60"}, "nvlink_error", "hardware_fault", "infrastructure", 60, kOnsetTolerance, {13}, "gpu-node-1"},
      {"PCIe replays", {"pcie_replay:rank=13,from=60"}, "pcie_replay", "hardware_fault", "infrastructure", 60, kOnsetTolerance, {13}, "gpu-node-1"},
      {"MFU drop after a config change", {"config_slowdown:step=60"}, "mfu_drop", "config_change", "training", 60, kOnsetTolerance, {}, ""},
      {"slow checkpoints", {"slow_checkpoint:from=50"}, "checkpoint_overhead", "checkpoint", "platform", 50, 0, {}, ""},
      {"failed checkpoint", {"checkpoint_failure:step=50"}, "checkpoint_failure", "checkpoint", "platform", 50, 0, {}, ""},
      {"NaN loss", {"nan:step=60"}, "nan_loss", "training_instability", "training", 60, 0, {0}, "gpu-node-0"},
      {"LR change", {"lr_change:step=60,factor=20"}, "grad_spike", "config_change", "training", 60, 0, {0}, "gpu-node-0"},
      // The NaN joins the grad_spike's incident: the cause stays, and the
      // final revision names the incident's symptom of highest rank by then.
      {"LR change, spikes, then NaN", {"lr_change:step=100,factor=20", "nan:step=110"}, "nan_loss", "config_change", "training", 100, 0, {0}, "gpu-node-0"},
  };
  // clang-format on
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    auto r = run_scenario(scenario_options(), c.faults);
    auto d = final_diagnoses(r);
    std::string all;
    for (const auto& a : d) all += a.symptom + "/" + a.cause + "@" + std::to_string(a.step.value_or(-1)) + " ";
    CAPTURE(all);
    REQUIRE(d.size() == 1);
    const Alert& a = d[0];
    CAPTURE(a.summary);
    CHECK(a.symptom == c.symptom);
    CHECK(a.cause == c.cause);
    CHECK(a.owner == c.owner);
    CHECK(a.run_id.str() == "scenario");
    double onset = attr_of(a, "onset_step");
    CHECK(onset >= c.onset);
    CHECK(onset <= c.onset + c.onset_slack);
    if (c.ranks.empty()) {
      CHECK_FALSE(a.rank.has_value());
    } else {
      REQUIRE(a.rank.has_value());
      CHECK(c.ranks.count(*a.rank) == 1);
      CHECK(a.node.str() == "gpu-node-" + std::to_string(*a.rank / 8));
      REQUIRE(a.gpu.has_value());
      CHECK(*a.gpu == *a.rank % 8);
    }
    if (*c.node) CHECK(a.node.str() == c.node);
    // The symptom it explains is among the run's alerts, and in the evidence.
    bool symptom_seen = false, in_evidence = false;
    for (const auto& x : r.alerts) symptom_seen |= x.kind == c.symptom;
    for (const auto& e : a.evidence) in_evidence |= e.kind == c.symptom;
    CHECK(symptom_seen);
    CHECK(in_evidence);
  }
}

TEST_CASE("scenario: healthy noisy runs give no diagnosis") {
  for (uint64_t seed : {1, 2, 3, 4}) {
    for (bool detail : {true, false}) {
      CAPTURE(seed);
      CAPTURE(detail);
      synth::Options o = scenario_options(seed);
      o.detail = detail;
      o.gc_pause_rate = 0.01;
      auto r = run_scenario(o, {});
      auto d = final_diagnoses(r);
      CHECK_MESSAGE(d.empty(), (d.empty() ? "" : d.front().summary));
    }
  }
}

TEST_CASE("scenario: a thermal straggler's alert carries its GPU's and node's context") {
  auto r = run_scenario(scenario_options(), {"thermal:rank=13,from=60"});
  auto s = r.of("straggler");
  REQUIRE(s.size() == 1);
  CHECK(attr_of(s[0], "gpu_temp_c") >= 85);
  CHECK(attr_of(s[0], "gpu_sm_clock_mhz") == doctest::Approx(990));
  CHECK(attr_of(s[0], "gpu_peer_sm_clock_mhz") == doctest::Approx(1980));
  CHECK(attr_of(s[0], "gpu_throttle_reasons") == 0x48);
  CHECK(attr_of(s[0], "node_cpu_pct") > 0);
  CHECK(std::abs(attr_of(s[0], "gpu_sample_offset_s")) <= 10);
}

TEST_CASE("scenario: a straggler's diagnosis reports the straggler alert's own number") {
  // One number (docs/alerts.md): the straggler alert's value is the rank's
  // work time / the median rank's at the alert's step; its diagnosis states
  // that number (rank_ratio), in its summary where it prints a ratio and in
  // its evidence and attrs, not step_stats' slowest / median of another step.
  for (const char* fault : {"straggler:rank=13,from=60", "thermal:rank=13,from=60", "clock_low:rank=13,from=60"}) {
    CAPTURE(std::string(fault));
    auto r = run_scenario(scenario_options(), {fault});
    auto stragglers = r.of("straggler");
    REQUIRE(stragglers.size() == 1);
    const Alert& s = stragglers[0];
    REQUIRE(s.value.has_value());
    REQUIRE(s.step.has_value());
    CHECK(*s.value < 10);  // below 10 both print two decimals
    std::string number = fmt_num(*s.value, "%.2f");
    CHECK(s.summary.find("(" + number + "x)") != std::string::npos);
    auto d = final_diagnoses(r);
    REQUIRE(d.size() == 1);
    const Alert& a = d[0];
    CAPTURE(a.summary);
    CHECK(a.symptom == "straggler");
    CHECK(a.rank == s.rank);
    CHECK(attr_of(a, "rank_ratio") == *s.value);
    bool in_evidence = false;
    for (const auto& e : a.evidence) in_evidence |= e.kind == "signal" && e.detail == "rank_ratio " + number;
    CHECK(in_evidence);
    CHECK(a.summary.find("straggler_ratio") == std::string::npos);
    if (a.cause == "unknown")
      CHECK(a.summary.find("works " + number + "x the median rank at step " + std::to_string(*s.step)) !=
            std::string::npos);
  }
}
