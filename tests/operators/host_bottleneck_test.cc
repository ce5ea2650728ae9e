#include "operators/host_bottleneck.h"

#include <cmath>

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

namespace {

// The compute reading: node-1's ranks (8..15 of 24) of a DDP job whose host is
// contended from step 20: `slow` of them work `factor` x longer each step
// (ranks 8, 9, ...; rank 10 the slowest), while node-1's CPU is `cpu_pct`,
// split into user / system / iowait / steal where `split`.
std::vector<Record> contended_rows(int slow, double factor, double cpu_pct, bool split, bool samples = true) {
  auto start = run_start("r1", 24);  // three nodes: the run's median rank is another node's
  std::vector<Record> rows{start};
  int64_t t = kT0;
  auto per_rank = [&](int32_t r, int64_t s) {
    RankStep p;
    if (s >= 20 && r >= 8 && r < 8 + slow) p.work_ms *= factor + (r == 10 ? 0.1 : 0);
    return p;
  };
  for (int64_t s = 1; s <= 60; ++s) {
    for (auto& r : joined_steps(start, s, s, per_rank, &t)) rows.push_back(r);
    if (!samples) continue;
    rows.push_back(node_row("node-0", t + 1000, 40));
    Record n = node_row("node-1", t + 1000, s >= 19 ? cpu_pct : 35);
    if (split && s >= 19) {
      NodeSample ns = n.as<NodeSample>();
      ns.cpu_user_pct = 84, ns.cpu_system_pct = 10, ns.cpu_iowait_pct = 0.5, ns.cpu_steal_pct = 3;
      for (auto f : {NodeSample::F::cpu_user_pct, NodeSample::F::cpu_system_pct, NodeSample::F::cpu_iowait_pct,
                     NodeSample::F::cpu_steal_pct})
        ns.set_present(f);
      n.body = ns;
    }
    rows.push_back(n);
  }
  return rows;
}

}  // namespace

TEST_CASE("host_bottleneck: a contended host's ranks compute slower than the run's median (the compute reading)") {
  OperatorRun run;
  run_operator(*make_operator("host_bottleneck"), contended_rows(8, 1.3, 97, true), &run);
  auto alerts = run.alerts("host_bottleneck");
  REQUIRE(alerts.size() == 1);
  const Alert& a = alerts[0];
  CHECK(a.node.str() == "node-1");
  CHECK(*a.rank == 10);  // the slowest rank of the node
  CHECK(*a.gpu == 2);
  CHECK(*a.value == 97);
  CHECK(attr(a, "onset_step") == 20);
  CHECK(attr(a, "work_ratio") == doctest::Approx(1.3125));  // 8 ranks at 1.3x, one at 1.4x
  CHECK(attr(a, "worst_work_ratio") == doctest::Approx(1.4));
  CHECK(attr(a, "slow_ranks") == 8);
  CHECK(attr(a, "node_ranks") == 8);
  CHECK(attr(a, "cpu_user_pct") == 84);
  CHECK(attr(a, "cpu_system_pct") == 10);
  CHECK(attr(a, "cpu_iowait_pct") == 0.5);
  CHECK(attr(a, "cpu_steal_pct") == 3);
  CHECK(std::isnan(attr(a, "data_wait_ratio")));  // the data reading did not fire: the ranks were fed
  CHECK(a.summary ==
        "HOST BOTTLENECK: node node-1 CPU at 97 % (84 % user, 10 % system, 0 % iowait, 3 % steal) while its 8 ranks "
        "work 1.31x the run's median rank (8 of them over 1.10x; worst: rank 10 (node node-1, GPU 2), 1.40x): kernels "
        "launch late, since step 20");

  // Without the split, the alert says what it has.
  OperatorRun plain;
  run_operator(*make_operator("host_bottleneck"), contended_rows(8, 1.3, 97, false), &plain);
  REQUIRE(plain.alerts("host_bottleneck").size() == 1);
  CHECK(std::isnan(attr(plain.alerts("host_bottleneck")[0], "cpu_user_pct")));
  CHECK(plain.alerts("host_bottleneck")[0].summary.find("CPU at 97 % while its 8 ranks work 1.31x") !=
        std::string::npos);
}

TEST_CASE("host_bottleneck: the compute reading needs a saturated CPU, several slow ranks and node samples") {
  struct C {
    const char* name;
    int slow;
    double factor, cpu_pct;
    bool samples;
    const char* params;
    bool expect;
  };
  const C cases[] = {
      {"two of eight ranks 1.5x slower", 2, 1.5, 97, true, "", true},
      {"slower ranks, CPU normal", 8, 1.3, 60, true, "", false},
      {"one slow rank on a busy host: a GPU straggler, not the host", 1, 2.5, 97, true, "", false},
      {"ranks 5 % slower: under work_excess", 8, 1.05, 97, true, "", false},
      {"ranks 5 % slower, work_excess 0.04", 8, 1.05, 97, true, "work_excess: 0.04", true},
      {"no node samples (no exporter, SDK host samples off): no evidence", 8, 1.3, 97, false, "", false},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    OperatorRun run;
    run_operator(*make_operator("host_bottleneck", c.params),
                 contended_rows(c.slow, c.factor, c.cpu_pct, true, c.samples), &run);
    CHECK(run.alerts("host_bottleneck").size() == (c.expect ? 1u : 0u));
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
