#include "operators/gpu_health.h"

#include <functional>

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct GpuCase {
  const char* name;
  std::function<GpuReading(int)> sample;            // the watched GPU's i-th sample (i = 1..60)
  std::vector<std::pair<const char*, int>> expect;  // alert kind, and the sample that raises it
};

GpuReading healthy(int) { return {}; }
GpuReading hot_bits(int) {
  GpuReading g;
  g.temp_c = 91, g.sm_clock_mhz = 990, g.power_w = 520;
  g.throttle_reasons = ops::kThrottleHwThermal | ops::kThrottleHwSlowdown;
  return g;
}

// Samples of three GPUs every 10 s; node-1 GPU 5 (rank 13 of r1) is the one watched.
std::vector<Record> gpu_rows(const std::function<GpuReading(int)>& watched, int samples = 60) {
  std::vector<Record> rows{run_start("r1", 16)};
  for (int i = 1; i <= samples; ++i) {
    int64_t t = kT0 + i * 10 * kSec;
    rows.push_back(gpu_row("node-1", 5, t, watched(i)));
    rows.push_back(gpu_row("node-1", 4, t));
    rows.push_back(gpu_row("node-0", 5, t));
  }
  return rows;
}

}  // namespace

TEST_CASE("gpu_health raises each hardware alert once per incident, on the GPU that shows it") {
  const GpuCase cases[] = {
      {"healthy", healthy, {}},
      {"hardware thermal slowdown",
       [](int i) { return i >= 10 ? hot_bits(i) : healthy(i); },
       {{"thermal_throttle", 11}}},
      {"hot without a reason bit",
       [](int i) {
         GpuReading g;
         if (i >= 10) g.temp_c = 93;
         return g;
       },
       {{"thermal_throttle", 11}}},
      {"one hot sample",
       [](int i) {
         GpuReading g;
         if (i == 10) g.temp_c = 93;
         return g;
       },
       {}},
      {"power cap at full clock is normal",
       [](int) {
         GpuReading g;
         g.throttle_reasons = ops::kThrottlePowerCap;
         return g;
       },
       {}},
      {"power cap holding the clock down",
       [](int i) {
         GpuReading g;
         if (i >= 10)
           g.throttle_reasons = ops::kThrottlePowerCap, g.sm_clock_mhz = 1500, g.power_limit_w = 450, g.power_w = 449;
         return g;
       },
       {{"power_throttle", 11}}},
      {"hardware power brake",
       [](int i) {
         GpuReading g;
         if (i >= 10) g.throttle_reasons = ops::kThrottleHwPowerBrake;
         return g;
       },
       {{"power_throttle", 11}}},
      {"hardware slowdown without heat",
       [](int i) {
         GpuReading g;
         if (i >= 10) g.throttle_reasons = ops::kThrottleHwSlowdown, g.sm_clock_mhz = 990;
         return g;
       },
       {{"power_throttle", 11}}},
      {"clock low with no reason",
       [](int i) {
         GpuReading g;
         if (i >= 10) g.sm_clock_mhz = 1500;
         return g;
       },
       {{"clock_low", 11}}},
      {"idle GPU clocks down",
       [](int i) {
         GpuReading g;
         if (i >= 10) g.sm_clock_mhz = 800, g.util_pct = 5;
         return g;
       },
       {}},
      {"memory nearly full",
       [](int i) {
         GpuReading g;
         if (i >= 10) g.mem_used_bytes = 79 * kGiB + kGiB / 2;
         return g;
       },
       {{"memory_pressure", 11}}},
      {"thermal twice, re-armed in between",
       [](int i) { return (i >= 10 && i <= 15) || (i >= 30 && i <= 35) ? hot_bits(i) : healthy(i); },
       {{"thermal_throttle", 11}, {"thermal_throttle", 31}}},
      {"ECC double-bit errors rise",
       [](int i) {
         GpuReading g;
         g.ecc_dbe_total = i >= 10 ? i - 9 : 0;
         return g;
       },
       {{"ecc_uncorrected", 10}}},
      {"ECC counter reset to zero",
       [](int i) {
         GpuReading g;
         g.ecc_dbe_total = i < 10 ? 5 : 0;
         return g;
       },
       {}},
      {"ECC errors after a reset",
       [](int i) {
         GpuReading g;
         g.ecc_dbe_total = i < 10 ? 5 : (i == 10 ? 0 : 2);
         return g;
       },
       {{"ecc_uncorrected", 11}}},
      {"ECC re-armed after quiet samples",
       [](int i) {
         GpuReading g;
         g.ecc_dbe_total = i < 10 ? 0 : (i < 25 ? 1 : 2);
         return g;
       },
       {{"ecc_uncorrected", 10}, {"ecc_uncorrected", 25}}},
      {"a few PCIe replays",
       [](int i) {
         GpuReading g;
         g.pcie_replay_total = i >= 10 ? 3 : 0;
         return g;
       },
       {}},
      {"PCIe replay burst",
       [](int i) {
         GpuReading g;
         g.pcie_replay_total = i >= 10 ? 40 : 0;
         return g;
       },
       {{"pcie_replay", 10}}},
      {"NVLink errors",
       [](int i) {
         GpuReading g;
         g.nvlink_errors_total = i >= 10 ? 1 : 0;
         return g;
       },
       {{"nvlink_error", 10}}},
      {"XID in the samples, staying set",
       [](int i) {
         GpuReading g;
         g.xid = i >= 10 ? 79 : 0;
         return g;
       },
       {{"xid_error", 10}}},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    auto def = make_operator("gpu_health");
    OperatorRun run;
    run_operator(*def, gpu_rows(c.sample), &run);
    auto alerts = run.alerts();
    REQUIRE(alerts.size() == c.expect.size());
    for (size_t i = 0; i < alerts.size(); ++i) {
      CHECK(alerts[i].kind == c.expect[i].first);
      CHECK(alerts[i].time_ns == kT0 + c.expect[i].second * 10 * kSec);
      CHECK(alerts[i].node.str() == "node-1");
      CHECK(*alerts[i].gpu == 5);
      CHECK(*alerts[i].rank == 13);
      CHECK(alerts[i].run_id.str() == "r1");
      CHECK(alerts[i].alert_id.size() == 16);
    }
  }
}

TEST_CASE("gpu_health: an xid event and the sample that shows it are one incident") {
  auto def = make_operator("gpu_health");
  auto rows = gpu_rows(
      [](int i) {
        GpuReading g;
        g.xid = i >= 20 ? 79 : 0;
        return g;
      },
      40);
  rows.push_back(
      event_row("xid", kT0 + 195 * kSec, EventFields().node("node-1").gpu(5).code(79).message("fallen off the bus")));
  rows.push_back(event_row("xid", kT0 + 300 * kSec, EventFields().node("node-1").gpu(5).code(48)));
  OperatorRun run;
  run_operator(*def, rows, &run);
  auto alerts = run.alerts("xid_error");
  REQUIRE(alerts.size() == 2);
  CHECK(*alerts[0].value == 79);
  CHECK(alerts[0].summary.find("GPU has fallen off the bus") != std::string::npos);
  CHECK(*alerts[1].value == 48);
  CHECK(*alerts[1].rank == 13);
}

TEST_CASE("gpu_health: partitioned by node, the same alerts whatever the partition count") {
  // An xid event that names only the run and rank goes to every partition; only
  // the owner of the rank's node raises it.
  std::vector<Record> rows{run_start("r1", 32)};
  for (int i = 1; i <= 30; ++i) {
    int64_t t = kT0 + i * 10 * kSec;
    for (int n = 0; n < 4; ++n) {
      for (int g = 0; g < 8; ++g)
        rows.push_back(
            gpu_row("node-" + std::to_string(n), g, t, n == 2 && g == 3 && i > 5 ? hot_bits(i) : GpuReading{}));
    }
  }
  rows.push_back(event_row("xid", kT0 + 155 * kSec, EventFields().run("r1").rank(9).step(70).code(31)));
  auto def = make_operator("gpu_health");
  auto one = alerts_of(run_partitioned(*def, rows, 1));
  REQUIRE(one.size() == 2);
  CHECK(one[0].kind == "thermal_throttle");
  CHECK(*one[0].rank == 19);
  CHECK(one[1].kind == "xid_error");
  CHECK(one[1].node.str() == "node-1");
  CHECK(*one[1].gpu == 1);
  CHECK(*one[1].step == 70);
  for (int parts : {2, 3, 5}) {
    CAPTURE(parts);
    auto many = alerts_of(run_partitioned(*def, rows, parts));
    CHECK(many == one);
  }
}

TEST_CASE("gpu_health names the run's current step from its joined steps") {
  auto start = run_start("r1", 16);
  std::vector<Record> rows{start};
  int64_t t = kT0;
  for (auto& r : joined_steps(
           start, 1, 30, [](int32_t, int64_t) { return RankStep{}; }, &t))
    rows.push_back(r);
  for (int i = 1; i <= 6; ++i)
    rows.push_back(gpu_row("node-1", 5, kT0 + i * 10 * kSec, i >= 3 ? hot_bits(i) : GpuReading{}));
  OperatorRun run;
  run_operator(*make_operator("gpu_health"), rows, &run);
  auto alerts = run.alerts();
  REQUIRE(alerts.size() == 1);
  REQUIRE(alerts[0].step.has_value());
  CHECK(*alerts[0].step >= 15);  // steps of ~2 s, the alert at 40 s
  CHECK(*alerts[0].step <= 21);
}

TEST_CASE("gpu_health: counter increases count resets as resets") {
  CHECK(ops::counter_increase(5, 7) == 2);
  CHECK(ops::counter_increase(5, 5) == 0);
  CHECK(ops::counter_increase(5, 0) == 0);
  CHECK(ops::counter_increase(5, 2) == 2);  // reset, then two new errors
}

TEST_CASE("gpu_health rejects inconsistent parameters") {
  CHECK(config_error("gpu_health", "persist_k: 4") ==
        "test.yaml:7:16: error: persist_k (4) must not exceed persist_n (3) (in operators.op)");
  CHECK(config_error("gpu_health", "clock_drop: 1.5") ==
        "test.yaml:7:17: error: invalid value for 'clock_drop': must be at most 0.990000, got 1.5 (in "
        "operators.op.clock_drop)");
  CHECK_NOTHROW(make_operator("gpu_health", "temp_threshold: 85"));
}

TEST_CASE("gpu_health: without mem_used_bytes, the rank's reserved memory gives the headroom") {
  auto start = run_start("r1", 16);
  std::vector<Record> rows{start};
  int64_t t = kT0;
  auto per_rank = [](int32_t, int64_t) { return RankStep{}; };
  for (int64_t s = 1; s <= 20; ++s) {
    for (auto r : joined_steps(start, s, s, per_rank, &t)) {
      auto rec = std::make_shared<StepRecord>(r.step_record());
      for (Step& st : rec->ranks) {
        st.mem_reserved_bytes = st.rank == 13 && s >= 10 ? 79 * kGiB + kGiB / 2 : 60 * kGiB;
        st.set_present(Step::F::mem_reserved_bytes);
      }
      r.body = std::shared_ptr<const StepRecord>(rec);
      rows.push_back(r);
    }
    GpuReading g;
    g.mem_used_bytes = -1;  // not sampled
    rows.push_back(gpu_row("node-1", 5, t + 1000, g));
    rows.push_back(gpu_row("node-1", 4, t + 1000, g));
  }
  for (int parts : {1, 2}) {
    auto alerts = alerts_of(run_partitioned(*make_operator("gpu_health"), rows, parts));
    REQUIRE(alerts.size() == 1);
    CHECK(alerts[0].kind == "memory_pressure");
    CHECK(*alerts[0].rank == 13);
    CHECK(*alerts[0].step == 11);
    CHECK(alerts[0].summary.find("reserved by the rank's allocator") != std::string::npos);
  }
}
