#include "operators/straggler.h"

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct StragglerCase {
  const char* name;
  int32_t slow_rank;
  std::vector<int64_t> slow_steps;  // steps where that rank works 2x
  bool with_comm;                   // ranks report comm_ms/data_wait_ms (wall times equalize)
  std::vector<int64_t> expect_alert_steps;
  std::vector<int64_t> expect_onsets;
};

std::vector<int64_t> range(int64_t a, int64_t b) {
  std::vector<int64_t> v;
  for (int64_t i = a; i <= b; ++i) v.push_back(i);
  return v;
}

// A pseudo-random number fixed by (rank, step): where noise falls.
uint64_t rank_step_hash(int32_t r, int64_t s) {
  uint64_t h = (uint64_t(uint32_t(r)) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(s) * 0xC2B2AE3D27D4EB4Full);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("straggler flags a persistent slow rank once, on its own work time") {
  const StragglerCase cases[] = {
      {"persistent slow rank, synchronous job", 13, range(10, 30), true, {12}, {10}},
      {"persistent slow rank, step_ms only", 13, range(10, 30), false, {12}, {10}},
      {"one GC pause does not alert", 13, {20}, true, {}, {}},
      {"two slow steps in five do not alert", 13, {20, 23}, true, {}, {}},
      {"three slow steps in five alert", 13, {20, 22, 24}, true, {24}, {20}},
      {"recovered rank re-arms and alerts again", 5, concat(range(10, 14), range(31, 40)), true, {12, 33}, {10, 31}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto def = make_operator("straggler", "persist_k: 3");
    auto link = make_operator("rank_join");
    auto work = [&](int32_t r, int64_t s) {
      double base = 1900 + 7 * ((r * 31 + s * 17) % 11);  // small deterministic spread
      bool slow = r == c.slow_rank && std::find(c.slow_steps.begin(), c.slow_steps.end(), s) != c.slow_steps.end();
      return slow ? base * 2 : base;
    };
    OperatorRun joined;
    run_operator(*link, sync_steps("r1", 32, 50, work, c.with_comm), &joined);
    OperatorRun run;
    run_operator(*def, joined.out, &run);
    auto alerts = run.alerts("straggler");
    REQUIRE(alerts.size() == c.expect_alert_steps.size());
    for (size_t i = 0; i < alerts.size(); ++i) {
      CHECK(*alerts[i].step == c.expect_alert_steps[i]);
      CHECK(*alerts[i].rank == c.slow_rank);
      CHECK(alerts[i].node.str() == "node-" + std::to_string(c.slow_rank / 8));
      CHECK(*alerts[i].gpu == c.slow_rank % 8);
      CHECK(*alerts[i].value == doctest::Approx(2.0).epsilon(0.05));
      CHECK(*alerts[i].threshold == 1.5);
      bool onset_ok = false;
      for (const auto& [k, v] : alerts[i].attrs) onset_ok |= k == "onset_step" && v == c.expect_onsets[i];
      CHECK(onset_ok);
      CHECK(alerts[i].summary.find("STRAGGLER DETECTED") == 0);
    }
    // Each incident that re-armed (persist_n = 5 steps without a slow one
    // before the run's last step, 49) closes: its closing revision.
    auto closed = run.closed("straggler");
    size_t rearmed = 0;
    for (size_t i = 0; i < alerts.size(); ++i) {
      int64_t last_slow = 0;
      for (int64_t s : c.slow_steps) {
        if (s >= c.expect_onsets[i] && (i + 1 == alerts.size() || s < c.expect_onsets[i + 1])) last_slow = s;
      }
      if (last_slow + 5 <= 49) ++rearmed;
    }
    REQUIRE(closed.size() == rearmed);
    for (size_t i = 0; i < closed.size(); ++i) {
      CHECK(closed[i].alert_id == alerts[i].alert_id);
      CHECK(closed[i].revision == alerts[i].revision + 1);
      CHECK(closed[i].time_ns == alerts[i].time_ns);
      CHECK(*closed[i].ends_ns > alerts[i].time_ns);
      CHECK(closed[i].summary == alerts[i].summary);
    }
  }
}

TEST_CASE("straggler scores work time, not the wall time that equalizes at the collective") {
  // Every rank's wall step_ms is identical; only comm_ms tells who the others wait for.
  auto def = make_operator("straggler");
  std::vector<Record> rows{run_start("r1", 8)};
  int64_t t = kT0;
  for (int64_t s = 1; s <= 12; ++s) {  // 8 steps of warm-up (group_steps), then 3 of 5 slow
    t += 4 * kSec;
    for (int32_t r = 0; r < 8; ++r) {
      double work = r == 6 ? 3800 : 1900;
      rows.push_back(step("r1", r, s, 4000, t + r, 4000 - work - 50, 50));
    }
  }
  auto join = make_operator("rank_join");
  OperatorRun joined, run;
  run_operator(*join, rows, &joined);
  run_operator(*def, joined.out, &run);
  auto alerts = run.alerts();
  REQUIRE(alerts.size() == 1);
  CHECK(*alerts[0].rank == 6);
}

TEST_CASE("straggler_work_ms subtracts what is known and never goes negative") {
  Step s;
  s.step_ms = 1000;
  CHECK(ops::straggler_work_ms(s) == 1000);
  s.comm_ms = 300;
  s.set_present(Step::F::comm_ms);
  CHECK(ops::straggler_work_ms(s) == 700);
  s.data_wait_ms = 200;
  s.set_present(Step::F::data_wait_ms);
  CHECK(ops::straggler_work_ms(s) == 500);
  s.comm_ms = 5000;
  CHECK(ops::straggler_work_ms(s) == 0);
}

TEST_CASE("straggler rejects inconsistent parameters at build time") {
  CHECK(config_error("straggler", "persist_k: 6") ==
        "test.yaml:7:16: error: persist_k (6) must not exceed persist_n (5) (in operators.op)");  // > persist_n 5
  CHECK(config_error("straggler", "ratio_threshold: 0.5") ==
        "test.yaml:7:22: error: invalid value for 'ratio_threshold': must be at least 1.000000, got 0.5 (in "
        "operators.op.ratio_threshold)");
  CHECK(config_error("straggler", "ratio_treshold: 2") ==
        "test.yaml:7:5: error: unknown parameter 'ratio_treshold' for straggler (did you mean 'ratio_threshold'?) (in "
        "operators.op)");
}

TEST_CASE("straggler_required_hits: more slow steps when chance would line persist_k of them up") {
  struct Case {
    const char* name;
    int64_t ranks;
    double p;        // rate of chance slow rank-steps
    double alpha;    // false_alarm_rate
    int64_t expect;  // slow steps of the last 5 needed (persist_k = 3)
  };
  const Case cases[] = {
      {"clean small job", 32, 0.001, 1e-4, 3},
      {"clean large job", 1024, 0.001, 1e-4, 3},
      {"large job, 1 % pauses", 1024, 0.01, 1e-4, 4},
      {"large job, 5 % pauses", 1024, 0.05, 1e-4, 5},
      {"adaptation off", 1024, 0.05, 0, 3},
      {"no chance slowness", 100000, 0, 1e-4, 3},
      {"half of all steps slow: all five, never more", 64, 0.5, 1e-4, 5},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(ops::straggler_required_hits(3, 5, c.ranks, c.p, c.alpha) == c.expect);
  }
  // The binomial tail itself: 1024 ranks x P(Bin(5, 0.01) >= 3) = 1024 x 9.85e-6 = 1.0e-2 > 1e-4,
  // 1024 x P(>= 4) = 1024 x 4.9e-8 = 5.0e-5 <= 1e-4.
  CHECK(ops::straggler_required_hits(3, 5, 1024, 0.01, 1.1e-2) == 3);
  CHECK(ops::straggler_required_hits(3, 5, 1024, 0.01, 0.9e-2) == 4);
}

TEST_CASE("straggler: many ranks with frequent one-step pauses raise nothing; a real straggler is still found") {
  // 512 ranks, 300 steps; every rank pauses (2x) on 2 % of its steps, at
  // pseudo-random steps; rank 77 is slow from step 200 on.
  auto pause = [](int32_t r, int64_t s) { return rank_step_hash(r, s) % 1000 < 20; };
  auto work = [&](int32_t r, int64_t s) {
    double base = 1900 + 7 * ((r * 31 + s * 17) % 11);
    if (r == 77 && s >= 200) return base * 2;
    return pause(r, s) ? base * 2 : base;
  };
  auto link = make_operator("rank_join");
  OperatorRun joined;
  run_operator(*link, sync_steps("r1", 512, 300, work), &joined);
  auto stragglers = [&](const std::string& params) {
    OperatorRun run;
    run_operator(*make_operator("straggler", params), joined.out, &run);
    return run.alerts("straggler");
  };
  // Judged at 3 of 5 regardless of the noise, chance makes stragglers of healthy ranks...
  auto naive = stragglers("false_alarm_rate: 0");
  CHECK(naive.size() > 1);
  // ...measured, the noise asks for more slow steps: only rank 77, onset kept.
  auto alerts = stragglers("");
  REQUIRE(alerts.size() == 1);
  CHECK(*alerts[0].rank == 77);
  CHECK(attr(alerts[0], "onset_step") == 200);
  CHECK(*alerts[0].step >= 202);
  CHECK(*alerts[0].step <= 204);
  CHECK(alerts[0].summary.find("of the last 5 steps, since step 200") != std::string::npos);
}

TEST_CASE("straggler skips steps incomplete by shedding") {
  // Rank 13 works 2x from step 10: an alert at step 12 when the steps are whole.
  auto work = [](int32_t r, int64_t s) { return r == 13 && s >= 10 ? 3800.0 : 1900.0 + 7 * ((r * 31 + s * 17) % 11); };
  OperatorRun joined;
  run_operator(*make_operator("rank_join"), sync_steps("r1", 32, 50, work), &joined);
  auto marked = mark_shed(joined.out, 11, 40);  // as if the collector had shed reports of these steps
  OperatorRun whole, shed;
  run_operator(*make_operator("straggler", "persist_k: 3"), joined.out, &whole);
  run_operator(*make_operator("straggler", "persist_k: 3"), marked, &shed);
  REQUIRE(whole.alerts("straggler").size() == 1);
  CHECK(*whole.alerts("straggler")[0].step == 12);
  // Steps 11..40 are not judged: step 10's slowness has left the window by then, so 41, 42 and 43 make three in five.
  auto alerts = shed.alerts("straggler");
  REQUIRE(alerts.size() == 1);
  CHECK(*alerts[0].step == 43);
}

namespace {
// A run whose ranks 16..31 work `slow` x slower than ranks 0..15 from the first
// step, each by its own 0.85..1.15 of it; `extra(rank, step)` multiplies on top.
// Unjoined (its run_start first), then joined by rank_join.
template <class Extra>
std::vector<Record> two_speed_raw(double slow, Extra extra, int64_t steps = 80) {
  auto work = [&](int32_t r, int64_t s) {
    double base = 1900 + 7 * ((r * 31 + s * 17) % 11);
    if (r >= 16) base *= slow * (0.85 + 0.3 * ((r * 7) % 16) / 15.0);
    return base * extra(r, s);
  };
  return sync_steps("r1", 32, steps, work);
}
std::vector<Record> joined(const std::vector<Record>& raw) {
  OperatorRun j;
  run_operator(*make_operator("rank_join"), raw, &j);
  return j.out;
}
template <class Extra>
std::vector<Record> two_speed_run(double slow, Extra extra, int64_t steps = 80) {
  return joined(two_speed_raw(slow, extra, steps));
}
}  // namespace

TEST_CASE("straggler_peer_groups: splits at gaps that leave enough ranks on both sides, largest first") {
  auto levels = [](std::vector<double> v) {
    std::vector<std::pair<double, int32_t>> out;
    for (size_t i = 0; i < v.size(); ++i) out.emplace_back(std::log(v[i]), static_cast<int32_t>(i));
    return out;
  };
  using G = std::vector<std::vector<int32_t>>;
  // Two groups of five, 2.8x apart (the median falls between them).
  CHECK(ops::straggler_peer_groups(levels({1, 1.02, 0.98, 1.01, 0.99, 2.8, 3.4, 2.9, 3.9, 2.75}), 1.3, 2) ==
        G{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}});
  // One slow rank is a straggler, not a group.
  CHECK(ops::straggler_peer_groups(levels({1, 1.02, 0.98, 1.01, 2.0}), 1.3, 2) == G{{0, 1, 2, 3, 4}});
  // A uniform fleet is one group; three speeds are three groups.
  CHECK(ops::straggler_peer_groups(levels({1, 1.05, 1.1, 1.15, 1.2, 1.25}), 1.3, 2).size() == 1);
  CHECK(ops::straggler_peer_groups(levels({1, 1, 2, 2, 4, 4}), 1.3, 2) == G{{0, 1}, {2, 3}, {4, 5}});
  CHECK(ops::straggler_peer_groups({}, 1.3, 2) == G{{}});
}

TEST_CASE("straggler: two speed groups from the start are one rank_heterogeneity, not warnings") {
  auto rows = two_speed_run(2.5, [](int32_t, int64_t) { return 1.0; });
  OperatorRun run;
  run_operator(*make_operator("straggler"), rows, &run);
  CHECK(run.alerts("straggler").empty());
  auto het = run.alerts("rank_heterogeneity");
  REQUIRE(het.size() == 1);
  CHECK(het[0].severity == Severity::kInfo);
  CHECK(!het[0].rank);
  CHECK(*het[0].step == 8);  // the end of the warm-up (group_steps)
  CHECK(*het[0].value == doctest::Approx(2.5).epsilon(0.1));
  CHECK(attr(het[0], "groups") == 2);
  CHECK(attr(het[0], "fast_ranks") == 16);
  CHECK(attr(het[0], "slow_ranks") == 16);
  CHECK(attr(het[0], "onset_step") == 1);
  CHECK(het[0].summary.find("2 speed groups from the start: 16 ranks (0-15) on node-0, node-1 at") !=
        std::string::npos);
  CHECK(het[0].summary.find("16 ranks (16-31) on node-2, node-3") != std::string::npos);
  // Without peer groups the same run is a storm of stragglers (the median falls between the groups).
  OperatorRun naive;
  run_operator(*make_operator("straggler", "group_steps: 0\n    node_wide_fraction: 1"), rows, &naive);
  CHECK(naive.alerts("straggler").size() >= 10);
  CHECK(naive.alerts("rank_heterogeneity").empty());
}

TEST_CASE("straggler: a jump within the slow group is a straggler against its group, within 3 steps") {
  auto rows = two_speed_run(1.8, [](int32_t r, int64_t s) { return (r == 20 || r == 27) && s >= 40 ? 4.5 : 1.0; });
  OperatorRun run;
  run_operator(*make_operator("straggler"), rows, &run);
  auto alerts = run.alerts("straggler");
  REQUIRE(alerts.size() == 2);
  for (const auto& a : alerts) {
    CHECK((*a.rank == 20 || *a.rank == 27));
    CHECK(*a.step == 42);
    CHECK(attr(a, "onset_step") == 40);
    CHECK(attr(a, "group") == 1);
    CHECK(*a.value == doctest::Approx(attr(a, "work_ms") / attr(a, "median_ms")));
    CHECK(*a.value > 3.5);
    CHECK(a.summary.find("against its group's median of") != std::string::npos);
  }
}

TEST_CASE("straggler: groups come from the rank map's GPU models when they differ") {
  // Ranks 16..31 on A100s: one group each, even where the work times alone would not split them (1.2x).
  auto raw = two_speed_raw(1.2, [](int32_t r, int64_t s) { return r == 20 && s >= 40 ? 1.6 : 1.0; });
  auto rs = std::make_shared<RunStart>(raw[0].run_start());
  for (auto& p : rs->ranks) p.gpu_model = Symbol::intern(p.rank >= 16 ? "NVIDIA A100-SXM4-80GB" : "NVIDIA H100");
  raw[0].body = std::shared_ptr<const RunStart>(rs);
  OperatorRun run;
  run_operator(*make_operator("straggler"), joined(raw), &run);
  // Groups of one speed (1.2x < group_gap) raise no rank_heterogeneity; rank 20 at 1.6x its group is a straggler.
  CHECK(run.alerts("rank_heterogeneity").empty());
  auto alerts = run.alerts("straggler");
  REQUIRE(alerts.size() == 1);
  CHECK(*alerts[0].rank == 20);
  CHECK(attr(alerts[0], "group") == 1);
  CHECK(*alerts[0].value == doctest::Approx(1.6 * 1.09).epsilon(0.08));
  CHECK(alerts[0].summary.find(" ms (16 ranks)") != std::string::npos);
  // By GPU model and node type, with the models named, where they differ in speed too.
  auto raw2 = two_speed_raw(2.5, [](int32_t, int64_t) { return 1.0; });
  raw2[0].body = std::shared_ptr<const RunStart>(rs);
  OperatorRun run2;
  run_operator(*make_operator("straggler"), joined(raw2), &run2);
  REQUIRE(run2.alerts("rank_heterogeneity").size() == 1);
  const Alert& het = run2.alerts("rank_heterogeneity")[0];
  CHECK(attr(het, "by_label") == 1);
  CHECK(het.summary.find("(by GPU model and node type): 16 ranks (0-15) on NVIDIA H100 on node-0, node-1") !=
        std::string::npos);
  CHECK(het.summary.find("16 ranks (16-31) on NVIDIA A100-SXM4-80GB") != std::string::npos);
}

TEST_CASE("straggler: an open incident that gets twice as slow is raised again as a revision") {
  auto work = [](int32_t r, int64_t s) {
    double base = 1900 + 7 * ((r * 31 + s * 17) % 11);
    if (r == 13 && s >= 20) base *= s >= 40 ? 4.0 : 1.8;
    return base;
  };
  OperatorRun joined;
  run_operator(*make_operator("rank_join"), sync_steps("r1", 32, 60, work), &joined);
  OperatorRun run;
  run_operator(*make_operator("straggler"), joined.out, &run);
  std::vector<Alert> published;
  for (const auto& r : run.out) {
    if (r.kind() == Kind::kAlert && r.alert().kind == "straggler" && !r.alert().ends_ns) published.push_back(r.alert());
  }
  REQUIRE(published.size() == 2);
  CHECK(published[0].revision == 0);
  CHECK(*published[0].step == 22);
  CHECK(*published[0].value == doctest::Approx(1.8).epsilon(0.05));
  CHECK(published[1].alert_id == published[0].alert_id);
  CHECK(published[1].revision == 1);
  CHECK(*published[1].step == 42);
  CHECK(*published[1].value == doctest::Approx(4.0).epsilon(0.05));
  CHECK(attr(published[1], "escalation") == 1);
  CHECK(attr(published[1], "onset_step") == 20);
  CHECK(attr(published[1], "previous_ratio") == doctest::Approx(1.8).epsilon(0.05));
  CHECK(published[1].summary.find("STRAGGLER ESCALATED") == 0);
  for (const auto& [k, v] : published[1].attrs) CHECK(std::isfinite(v));
  // The run's end closes it: its closing revision follows the escalation.
  RunEnd end;
  end.run_id = Symbol::intern("r1");
  end.set_present(RunEnd::F::run_id);
  Record last;
  last.time_ns = joined.out.back().time_ns + kSec;
  last.body = end;
  OperatorRun ended;
  auto rows = joined.out;
  rows.push_back(last);
  run_operator(*make_operator("straggler"), rows, &ended);
  auto closed = ended.closed("straggler");
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].revision == 2);
  CHECK(*closed[0].value == doctest::Approx(4.0).epsilon(0.05));
}

TEST_CASE("straggler: slowness shared by most of a node's ranks is the host's, not a straggler") {
  // Node 1 (ranks 8..15) is contended: each of its ranks works 2x in a pseudo-random 40 % of its steps from step 20.
  auto work = [](int32_t r, int64_t s) {
    double base = 1900 + 7 * ((r * 31 + s * 17) % 11);
    bool burst = r / 8 == 1 && s >= 20 && rank_step_hash(r, s) % 10 < 4;
    return burst ? base * 2 : base;
  };
  OperatorRun joined;
  run_operator(*make_operator("rank_join"), sync_steps("r1", 32, 60, work), &joined);
  OperatorRun host, per_rank;
  run_operator(*make_operator("straggler"), joined.out, &host);
  run_operator(*make_operator("straggler", "node_wide_fraction: 1"), joined.out, &per_rank);
  // Judged rank by rank, bursts line up into stragglers on most of the node; read as the host's, a rank is flagged
  // only where it was slow in every step of the window (here once).
  CHECK(per_rank.alerts("straggler").size() >= 4);
  CHECK(host.alerts("straggler").size() <= 1);
  // A whole node slowed for good (not in bursts) is not silence: each of its ranks is a straggler, once it has been
  // slow in every step of the window (persist_n: step 24).
  auto slowed = [](int32_t r, int64_t s) {
    return (1900.0 + 7 * ((r * 31 + s * 17) % 11)) * (r / 8 == 1 && s >= 20 ? 2 : 1);
  };
  OperatorRun joined2, node;
  run_operator(*make_operator("rank_join"), sync_steps("r1", 32, 60, slowed), &joined2);
  run_operator(*make_operator("straggler"), joined2.out, &node);
  auto all = node.alerts("straggler");
  CHECK(all.size() == 8);
  for (const auto& a : all) CHECK(*a.step == 24);
}
