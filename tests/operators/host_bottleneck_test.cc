#include "operators/host_bottleneck.h"

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct HostCase {
  const char* name;
  double cpu_pct;         // node-1's CPU from step 20 (35 % before)
  double extra_wait_ms;   // node-1's ranks' extra data wait from step 20
  int64_t last_step;      // the fault lasts until this step
  int64_t cpu_every;      // steps between node samples
  int64_t samples_until;  // no node samples after this step
  const char* params;
  bool expect;
};

// 16 ranks on two nodes (node-1 holds ranks 8..15), 60 steps of ~2 s.
std::vector<Record> host_rows(const HostCase& c) {
  auto start = run_start("r1", 16);
  std::vector<Record> rows{start};
  int64_t t = kT0;
  auto per_rank = [&](int32_t r, int64_t s) {
    RankStep p;
    bool fault = s >= 20 && s <= c.last_step && r >= 8;
    if (fault) p.data_wait_ms += c.extra_wait_ms + (r == 12 ? 100 : 0);
    return p;
  };
  for (int64_t s = 1; s <= 60; ++s) {
    for (auto& r : joined_steps(start, s, s, per_rank, &t)) rows.push_back(r);
    if (s % c.cpu_every == 0 && s <= c.samples_until) {
      bool fault = s >= 19 && s <= c.last_step;
      rows.push_back(node_row("node-0", t + 1000, 40));
      rows.push_back(node_row("node-1", t + 1000, fault ? c.cpu_pct : 35));
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("host_bottleneck flags a saturated node whose ranks wait for data") {
  const HostCase cases[] = {
      {"CPU saturated, ranks starved", 98, 400, 60, 1, 60, "", true},
      {"CPU saturated, samples every 5 steps", 98, 400, 60, 5, 60, "", true},
      {"CPU busy but ranks fed", 98, 0, 60, 1, 60, "", false},
      {"ranks starved, CPU normal", 50, 400, 60, 1, 60, "", false},
      {"two bad steps only", 98, 400, 21, 1, 60, "", false},
      {"the last sample is too old to count", 98, 400, 60, 1, 20, "max_sample_age: 3s", false},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    OperatorRun run;
    run_operator(*make_operator("host_bottleneck", c.params), host_rows(c), &run);
    auto alerts = run.alerts("host_bottleneck");
    REQUIRE(alerts.size() == (c.expect ? 1u : 0u));
    if (!c.expect) continue;
    CHECK(alerts[0].node.str() == "node-1");
    CHECK(*alerts[0].rank == 12);  // the most starved rank of the node
    CHECK(*alerts[0].gpu == 4);
    CHECK(*alerts[0].value == 98);
    CHECK(attr(alerts[0], "onset_step") >= 20);
    CHECK(attr(alerts[0], "onset_step") <= 20 + c.cpu_every);
    CHECK(attr(alerts[0], "node_ranks") == 8);
  }
}

TEST_CASE("host_bottleneck: partitioned by node, the same alerts whatever the partition count") {
  auto rows = host_rows({"", 98, 400, 60, 1, 60, "", true});
  auto def = make_operator("host_bottleneck");
  auto one = alerts_of(run_partitioned(*def, rows, 1));
  REQUIRE(one.size() == 1);
  for (int parts : {2, 3, 4}) CHECK(alerts_of(run_partitioned(*def, rows, parts)) == one);
}

TEST_CASE("host_bottleneck rejects inconsistent parameters") {
  CHECK(config_error("host_bottleneck", "persist_k: 9") ==
        "test.yaml:7:16: error: persist_k (9) must not exceed persist_n (5) (in operators.op)");
  CHECK(config_error("host_bottleneck", "cpu_threshold: 150") ==
        "test.yaml:7:20: error: invalid value for 'cpu_threshold': must be at most 100.000000, got 150 (in "
        "operators.op.cpu_threshold)");
}
