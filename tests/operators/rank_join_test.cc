#include "operators/rank_join.h"

#include "tests/operators/operator_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {
double steady(int32_t, int64_t) { return 1000; }
}  // namespace

TEST_CASE("rank_join emits one complete record per step when every rank reports") {
  auto def = make_operator("rank_join");
  OperatorRun run;
  run_operator(*def, sync_steps("r1", 8, 5, steady), &run);
  auto steps = run.steps();
  REQUIRE(steps.size() == 5);
  for (size_t i = 0; i < steps.size(); ++i) {
    CHECK(steps[i]->step == static_cast<int64_t>(i + 1));
    CHECK(steps[i]->ranks.size() == 8);
    CHECK(steps[i]->missing.empty());
    CHECK_FALSE(steps[i]->timed_out);
    REQUIRE(steps[i]->run != nullptr);
    for (size_t r = 0; r < 8; ++r) CHECK(steps[i]->ranks[r].rank == static_cast<int32_t>(r));
  }
  CHECK(run.alerts().empty());
  CHECK(run.dead.letters.empty());
}

TEST_CASE("rank_join names a missing rank once, with its node and GPU, and re-arms when it returns") {
  auto def = make_operator("rank_join", "timeout: 5s");
  // Rank 11 (node-1, GPU 3) stops reporting at step 10 and comes back at step 30.
  std::vector<Record> rows{run_start("r1", 16)};
  int64_t t = kT0 + kSec;
  for (int64_t s = 1; s <= 40; ++s) {
    t += 2 * kSec;
    for (int32_t r = 0; r < 16; ++r) {
      bool gone = r == 11 && ((s >= 10 && s < 30) || s >= 35);
      if (!gone) rows.push_back(step("r1", r, s, 1900, t + r));
    }
  }
  OperatorRun run;
  run_operator(*def, rows, &run);
  auto alerts = run.alerts("rank_missing");
  REQUIRE(alerts.size() == 2);
  CHECK(*alerts[0].rank == 11);
  CHECK(alerts[0].node.str() == "node-1");
  CHECK(*alerts[0].gpu == 3);
  CHECK(*alerts[0].step == 10);
  CHECK(alerts[0].severity == Severity::kCritical);
  CHECK(*alerts[1].step == 35);
  CHECK(alerts[0].alert_id != alerts[1].alert_id);
  // Every step is emitted exactly once; the ones without rank 11 name it.
  auto steps = run.steps();
  REQUIRE(steps.size() == 40);
  for (const auto* s : steps) {
    bool gone = (s->step >= 10 && s->step < 30) || s->step >= 35;
    CHECK(s->timed_out == gone);
    CHECK(s->missing == (gone ? std::vector<int32_t>{11} : std::vector<int32_t>{}));
  }
}

TEST_CASE("rank_join output does not depend on how often the watermark moves") {
  auto def = make_operator("rank_join", "timeout: 3s");
  std::vector<Record> rows{run_start("r1", 4)};
  int64_t t = kT0 + kSec;
  for (int64_t s = 1; s <= 20; ++s) {
    t += kSec;
    for (int32_t r = 0; r < 4; ++r) {
      // Rank 2 reports steps 5..9 just after the deadline: it must count as missing both ways.
      int64_t late = (r == 2 && s >= 5 && s < 10) ? 3 * kSec + 1 : 0;
      rows.push_back(step("r1", r, s, 900, t + r + late));
    }
  }
  OperatorRun fine, coarse;
  run_operator(*def, rows, &fine, true);
  run_operator(*def, rows, &coarse, false);
  REQUIRE(fine.out.size() == coarse.out.size());
  for (size_t i = 0; i < fine.out.size(); ++i) {
    CHECK(content_hash(fine.out[i]) == content_hash(coarse.out[i]));
  }
  CHECK(fine.alerts("rank_missing").size() == 1);
  // The reports after the deadline are dead-lettered as late for the join, not lost silently.
  CHECK(fine.dead.letters.size() == 5);
  CHECK(fine.dead.letters[0].reason.find("after the step was closed") != std::string::npos);
}

struct BadStepCase {
  const char* name;
  int32_t rank;
  bool duplicate;
  const char* reason;
};

TEST_CASE("rank_join dead-letters reports it cannot use, and keeps going") {
  const BadStepCase cases[] = {
      {"rank beyond world size", 9, false, "outside the run's world size"},
      {"negative rank", -1, false, "outside the run's world size"},
      {"duplicate report", 1, true, "duplicate report"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto def = make_operator("rank_join");
    auto rows = sync_steps("r1", 4, 3, steady);
    Record bad = step("r1", c.rank, 2, 1000, kT0 + 2 * kSec + 500'000'000);
    if (c.duplicate) bad = rows[6];  // rank 1 of step 2 again
    rows.push_back(bad);
    OperatorRun run;
    run_operator(*def, rows, &run);
    CHECK(run.steps().size() == 3);
    REQUIRE(run.dead.letters.size() == 1);
    CHECK(run.dead.letters[0].reason.find(c.reason) != std::string::npos);
  }
}

TEST_CASE("rank_join without a run_start joins on timeout and raises nothing") {
  auto def = make_operator("rank_join", "timeout: 2s");
  std::vector<Record> rows;
  for (int32_t r = 0; r < 3; ++r) rows.push_back(step("orphan", r, 7, 500, kT0 + r));
  OperatorRun run;
  run_operator(*def, rows, &run);
  auto steps = run.steps();
  REQUIRE(steps.size() == 1);
  CHECK(steps[0]->ranks.size() == 3);
  CHECK(steps[0]->missing.empty());
  CHECK(steps[0]->timed_out);
  CHECK(run.alerts().empty());
}

TEST_CASE("rank_join: a restart drops steps in flight without calling ranks missing") {
  auto def = make_operator("rank_join", "timeout: 5s");
  std::vector<Record> rows{run_start("r1", 4)};
  for (int32_t r = 0; r < 2; ++r) rows.push_back(step("r1", r, 100, 900, kT0 + kSec + r));
  rows.push_back(event("restart", "r1", kT0 + 2 * kSec));
  // After the restart, step 100 runs again with all ranks.
  for (int32_t r = 0; r < 4; ++r) rows.push_back(step("r1", r, 100, 900, kT0 + 20 * kSec + r));
  OperatorRun run;
  run_operator(*def, rows, &run);
  CHECK(run.alerts().empty());
  auto steps = run.steps();
  REQUIRE(steps.size() == 1);
  CHECK(steps[0]->ranks.size() == 4);
}

TEST_CASE("rank_join: a run that ends or fails closes its pending steps at once, raising nothing") {
  for (const char* stop : {"run_end", "oom", "xid", "exception", "nccl_timeout", "abort"}) {
    CAPTURE(stop);
    auto def = make_operator("rank_join", "timeout: 30s");
    std::vector<Record> rows{run_start("r1", 64)};
    // Steps 1..9 complete; 48 of 64 ranks report step 10, then the job stops.
    for (int64_t s = 1; s <= 10; ++s) {
      for (int32_t r = 0; r < (s == 10 ? 48 : 64); ++r) rows.push_back(step("r1", r, s, 900, kT0 + s * kSec + r));
    }
    int64_t stop_at = kT0 + 10 * kSec + 500'000'000;
    if (std::string(stop) == "run_end") {
      RunEnd end;
      end.run_id = Symbol::intern("r1");
      end.set_present(RunEnd::F::run_id);
      Record r;
      r.time_ns = stop_at;
      r.body = end;
      rows.push_back(r);
    } else {
      rows.push_back(event(stop, "r1", stop_at));
    }
    // A rank's report of step 10 after the failure is late: the step is closed.
    if (std::string(stop) != "run_end") rows.push_back(step("r1", 50, 10, 900, stop_at + kSec));
    OperatorRun run;
    run_operator(*def, rows, &run);
    CHECK(run.alerts().empty());  // no rank_missing, no job_stalled: the failure is the alert
    auto steps = run.steps();
    REQUIRE(steps.size() == 10);
    CHECK(steps[9]->step == 10);
    CHECK(steps[9]->ranks.size() == 48);
    CHECK(steps[9]->missing.size() == 16);
    CHECK(steps[9]->timed_out);
    CHECK(run.out.back().time_ns <= stop_at + kSec);
    for (const auto& r : run.out) {
      if (r.kind() == Kind::kStepRecord && r.step_record().step == 10) CHECK(r.time_ns == stop_at);
    }
  }
  {
    // An event that stops nothing leaves the step to its timeout.
    auto def = make_operator("rank_join", "timeout: 30s");
    std::vector<Record> rows{run_start("r1", 4)};
    for (int32_t r = 0; r < 3; ++r) rows.push_back(step("r1", r, 1, 900, kT0 + kSec + r));
    rows.push_back(event("config_change", "r1", kT0 + 2 * kSec));
    OperatorRun run;
    run_operator(*def, rows, &run);
    REQUIRE(run.alerts("rank_missing").size() == 1);
    CHECK(run.alerts("rank_missing")[0].time_ns == kT0 + kSec + 30 * kSec);
  }
}

TEST_CASE("rank_join bounds its state: steps beyond max_pending_steps are closed early") {
  auto def = make_operator("rank_join", "max_pending_steps: 8");
  std::vector<Record> rows{run_start("r1", 2)};
  // Rank 1 never reports and the timeout is long: only the bound closes steps.
  for (int64_t s = 1; s <= 1000; ++s) rows.push_back(step("r1", 0, s, 100, kT0 + s * 1'000'000));
  OperatorRun run;
  run_operator(*def, rows, &run);
  CHECK(run.steps().size() == 1000);
  CHECK(run.alerts("rank_missing").size() == 1);
}

TEST_CASE("rank_join rejects invalid parameters") {
  CHECK(config_error("rank_join", "timeout: soon") ==
        "test.yaml:7:14: error: invalid value for 'timeout': expected a duration such as 500ms, 5s or 2m, got 'soon' "
        "(in operators.op.timeout)");
  CHECK(config_error("rank_join", "max_pending_steps: 0") ==
        "test.yaml:7:24: error: invalid value for 'max_pending_steps': must be at least 1.000000, got 0 (in "
        "operators.op.max_pending_steps)");
}

// --- No alert storms (issue 12) --------------------------------------------------------

namespace {

// A run of `world` ranks (8 per node), `steps` steps 2 s apart; `gone(rank,
// step)` leaves a report out; `step_of(rank, step)` is the step number it
// reports (default: the step).
template <class Gone>
std::vector<Record> job(const std::string& run, int32_t world, int64_t steps, Gone gone,
                        const std::function<int64_t(int32_t, int64_t)>& step_of = nullptr) {
  std::vector<Record> rows{run_start(run, world)};
  int64_t t = kT0 + kSec;
  for (int64_t s = 1; s <= steps; ++s) {
    t += 2 * kSec;
    for (int32_t r = 0; r < world; ++r) {
      if (!gone(r, s)) rows.push_back(step(run, r, step_of ? step_of(r, s) : s, 1900, t + r));
    }
  }
  return rows;
}

const StepRecord* of_step(const OperatorRun& run, int64_t step) {
  for (const auto* s : run.steps()) {
    if (s->step == step) return s;
  }
  return nullptr;
}

double attr(const Alert& a, const std::string& key) {
  for (const auto& [k, v] : a.attrs) {
    if (k == key) return v;
  }
  FAIL("no attr " << key);
  return 0;
}

}  // namespace

TEST_CASE("rank_join: 40 of 64 ranks missing a step is one job_stalled, not 40 rank_missing") {
  auto def = make_operator("rank_join", "timeout: 5s");
  // Ranks 24..63 hang from step 50 to 59, come back, and hang again from step 70.
  auto rows = job("r1", 64, 80, [](int32_t r, int64_t s) { return r >= 24 && ((s >= 50 && s < 60) || s >= 70); });
  OperatorRun run;
  run_operator(*def, rows, &run);
  CHECK(run.alerts("rank_missing").empty());
  CHECK(run.alerts("node_unreachable").empty());
  auto stalled = run.alerts("job_stalled");
  REQUIRE(stalled.size() == 2);
  const Alert& a = stalled[0];
  CHECK(*a.step == 50);
  CHECK(a.severity == Severity::kCritical);
  CHECK_FALSE(a.rank.has_value());
  CHECK(a.node.empty());
  CHECK(*a.value == doctest::Approx(40.0 / 64));
  CHECK(*a.threshold == 0.5);
  CHECK(attr(a, "missing_ranks") == 40);
  CHECK(attr(a, "reported_ranks") == 24);
  CHECK(attr(a, "world_size") == 64);
  CHECK(a.summary ==
        "JOB STALLED: 40 of 64 ranks did not report step 50 within 5s of the first rank (24 reported; more than 50 % "
        "silent): ranks 24, 25, 26, 27, 28, 29, 30, 31 and 32 more (a hung collective, a lost job)");
  // Re-armed by the complete steps 60..69: a second stall is a second incident.
  CHECK(*stalled[1].step == 70);
  CHECK(stalled[1].alert_id != a.alert_id);
  // Every step is still emitted once, naming its missing ranks.
  REQUIRE(run.steps().size() == 80);
  CHECK(of_step(run, 50)->missing.size() == 40);
  CHECK(of_step(run, 61)->missing.empty());
}

TEST_CASE("rank_join: a stall_fraction the missing ranks do not exceed keeps the alerts per node and rank") {
  auto def = make_operator("rank_join", "timeout: 5s\n    stall_fraction: 0.7");
  auto rows = job("r1", 64, 60, [](int32_t r, int64_t s) { return r >= 24 && s >= 50; });
  OperatorRun run;
  run_operator(*def, rows, &run);
  CHECK(run.alerts("job_stalled").empty());
  CHECK(run.alerts("node_unreachable").size() == 5);  // nodes 3..7, whole
  CHECK(run.alerts("rank_missing").empty());
}

TEST_CASE(
    "rank_join: the 8 ranks of a lost node are one node_unreachable; a lone missing rank keeps its rank_missing") {
  auto def = make_operator("rank_join", "timeout: 5s");
  // node-3 (ranks 24..31) is lost from step 40; rank 5 (node-0) hangs from step 40 too, and rank 44 (node-5) from 45.
  auto rows = job("r1", 64, 60,
                  [](int32_t r, int64_t s) { return ((r >= 24 && r < 32) || r == 5) ? s >= 40 : r == 44 && s >= 45; });
  OperatorRun run;
  run_operator(*def, rows, &run);
  CHECK(run.alerts("job_stalled").empty());
  auto nodes = run.alerts("node_unreachable");
  REQUIRE(nodes.size() == 1);
  const Alert& n = nodes[0];
  CHECK(n.node.str() == "node-3");
  CHECK_FALSE(n.rank.has_value());
  CHECK_FALSE(n.gpu.has_value());
  CHECK(*n.step == 40);
  CHECK(n.severity == Severity::kCritical);
  CHECK(attr(n, "node_ranks") == 8);
  CHECK(attr(n, "first_rank") == 24);
  CHECK(attr(n, "reported_ranks") == 55);
  CHECK(n.summary ==
        "NODE UNREACHABLE: none of the 8 ranks of node node-3 (ranks 24, 25, 26, 27, 28, 29, 30, 31) reported step 40 "
        "within 5s of the first rank (55 of 64 ranks reported): a dead host, its network or its power");
  auto missing = run.alerts("rank_missing");
  REQUIRE(missing.size() == 2);
  CHECK(*missing[0].rank == 5);
  CHECK(*missing[0].step == 40);
  CHECK(missing[0].node.str() == "node-0");
  CHECK(*missing[1].rank == 44);
  CHECK(*missing[1].step == 45);
}

TEST_CASE("rank_join: a node whose ranks go missing one by one is not a lost node") {
  auto def = make_operator("rank_join", "timeout: 5s");
  // node-1's ranks 8..15 stop at steps 30, 31, ..., 37: the last one alone completes the node.
  auto rows = job("r1", 32, 50, [](int32_t r, int64_t s) { return r >= 8 && r < 16 && s >= 22 + r; });
  OperatorRun run;
  run_operator(*def, rows, &run);
  CHECK(run.alerts("node_unreachable").empty());
  CHECK(run.alerts("rank_missing").size() == 8);
}

TEST_CASE("rank_join: a rank reporting step 10^6 at step 100 is one step_anomaly and starts no deadline") {
  auto def = make_operator("rank_join", "timeout: 5s");
  // Rank 7's counter reads 10^6 + k for steps 100..110, then counts right again.
  auto rows = job(
      "r1", 64, 140, [](int32_t, int64_t) { return false; },
      [](int32_t r, int64_t s) { return r == 7 && s >= 100 && s <= 110 ? 1'000'000 + (s - 100) : s; });
  OperatorRun run;
  run_operator(*def, rows, &run);
  CHECK(run.alerts("rank_missing").empty());
  CHECK(run.alerts("job_stalled").empty());
  auto anomalies = run.alerts("step_anomaly");
  REQUIRE(anomalies.size() == 1);
  const Alert& a = anomalies[0];
  CHECK(*a.rank == 7);
  CHECK(a.node.str() == "node-0");
  CHECK(*a.gpu == 7);
  CHECK(a.severity == Severity::kWarning);
  // The run's current step when rank 7 reported: ranks 0..6 were at 100, ranks 8..63 at 99.
  CHECK(*a.step == 99);
  CHECK(*a.value == 1e6);
  CHECK(*a.threshold == 99 + 1000);
  CHECK(attr(a, "reported_step") == 1e6);
  CHECK(attr(a, "current_step") == 99);
  CHECK(attr(a, "max_step_jump") == 1000);
  CHECK(a.summary ==
        "STEP ANOMALY: rank 7 (node node-0, GPU 7) reported step 1000000 while the run is at step 99 (the median of "
        "its ranks' latest steps), more than max_step_jump 1000 ahead: a restarted or corrupted step counter; its "
        "reports are set aside until it reports a step within max_step_jump of the run's");
  // Its 11 implausible reports are dead-lettered, and no step 10^6.. is ever opened.
  REQUIRE(run.dead.letters.size() == 11);
  CHECK(run.dead.letters[0].reason ==
        "step 1000000 of rank 7 is more than 1000 steps past the run's current step 99 (max_step_jump): set aside");
  auto steps = run.steps();
  REQUIRE(steps.size() == 140);
  for (const auto* s : steps) {
    CHECK(s->step <= 140);
    bool without7 = s->step >= 100 && s->step <= 110;
    CHECK(s->missing == (without7 ? std::vector<int32_t>{7} : std::vector<int32_t>{}));
  }
}

TEST_CASE("rank_join: a rank stuck on a corrupted counter is flagged once and never called missing") {
  auto def = make_operator("rank_join", "timeout: 5s");
  auto rows = job(
      "r1", 16, 60, [](int32_t, int64_t) { return false; },
      [](int32_t r, int64_t s) { return r == 3 && s >= 20 ? (int64_t{1} << 40) + s : s; });
  OperatorRun run;
  run_operator(*def, rows, &run);
  CHECK(run.alerts("step_anomaly").size() == 1);
  CHECK(run.alerts("rank_missing").empty());
  CHECK(run.dead.letters.size() == 41);
}

TEST_CASE("rank_join: a whole job that jumps its step numbers is followed once most of its ranks have") {
  auto def = make_operator("rank_join", "timeout: 5s");
  // At step 50 every rank jumps to 500 000 + step (a resume without a restart event).
  auto rows = job(
      "r1", 8, 80, [](int32_t, int64_t) { return false; },
      [](int32_t, int64_t s) { return s >= 50 ? 500'000 + s : s; });
  OperatorRun run;
  run_operator(*def, rows, &run);
  // Ranks 0..4 jump first (the lower median of the 8 latest steps is still 49): flagged and set aside;
  // from rank 5 on the median has moved, and ranks 0..4's next reports are plausible again.
  CHECK(run.alerts("step_anomaly").size() == 5);
  CHECK(run.alerts("rank_missing").empty());
  CHECK(run.dead.letters.size() == 5);
  REQUIRE(run.steps().size() == 80);
  REQUIRE(of_step(run, 500'050) != nullptr);
  CHECK(of_step(run, 500'050)->ranks.size() == 3);
  CHECK(of_step(run, 500'050)->missing == std::vector<int32_t>{0, 1, 2, 3, 4});
  REQUIRE(of_step(run, 500'051) != nullptr);
  CHECK(of_step(run, 500'051)->missing.empty());
}

TEST_CASE("rank_join: storms are judged the same however often the watermark moves") {
  auto def = make_operator("rank_join", "timeout: 3s");
  std::vector<Record> rows = job("stall", 64, 40, [](int32_t r, int64_t s) { return r >= 20 && s >= 30; });
  auto lost = job("node", 32, 40, [](int32_t r, int64_t s) { return r >= 16 && r < 24 && s >= 25; });
  auto odd = job(
      "odd", 16, 40, [](int32_t, int64_t) { return false; },
      [](int32_t r, int64_t s) { return r == 9 && s == 20 ? 7'777'777 : s; });
  rows.insert(rows.end(), lost.begin(), lost.end());
  rows.insert(rows.end(), odd.begin(), odd.end());
  OperatorRun fine, coarse;
  run_operator(*def, rows, &fine, true);
  run_operator(*def, rows, &coarse, false);
  REQUIRE(fine.out.size() == coarse.out.size());
  for (size_t i = 0; i < fine.out.size(); ++i) CHECK(content_hash(fine.out[i]) == content_hash(coarse.out[i]));
  CHECK(fine.alerts("job_stalled").size() == 1);
  CHECK(fine.alerts("node_unreachable").size() == 1);
  CHECK(fine.alerts("step_anomaly").size() == 1);
  CHECK(fine.alerts("rank_missing").empty());
}

TEST_CASE("rank_join rejects invalid storm parameters") {
  CHECK(config_error("rank_join", "stall_fraction: 1.5") ==
        "test.yaml:7:21: error: invalid value for 'stall_fraction': must be at most 1.000000, got 1.5 (in "
        "operators.op.stall_fraction)");
  CHECK(config_error("rank_join", "max_step_jump: -1") ==
        "test.yaml:7:20: error: invalid value for 'max_step_jump': must be at least 0.000000, got -1 (in "
        "operators.op.max_step_jump)");
}

namespace {

// Runs `def` over `rows` as run_operator does, except that the rows `shed`
// selects are dropped on the way and reported to the operator, one
// ShedReport per distinct event time and priority, before the rows of that
// time (so before the watermark that would have released them), as the
// runtime delivers them.
template <class Pred>
void run_shedding(const ops::OperatorDef& def, std::vector<Record> rows, Pred shed, OperatorRun* run) {
  std::sort(rows.begin(), rows.end(), [](const Record& a, const Record& b) { return compare_canonical(a, b) < 0; });
  runtime::OperatorContext ctx{"op", 0, 1, &run->dead, &run->counters};
  auto op = def.open(ctx);
  int64_t floor = runtime::kBeginningOfTime;
  size_t i = 0;
  while (i < rows.size()) {
    int64_t t = rows[i].time_ns;
    runtime::Emitter<Record> out(&run->out, floor);
    size_t end = i;
    while (end < rows.size() && rows[end].time_ns == t) ++end;
    for (int pr = 0; pr < runtime::kPriorities; ++pr) {
      std::optional<runtime::ShedReport<Record>> rep;
      for (size_t k = i; k < end; ++k) {
        if (!shed(rows[k]) || static_cast<int>(rows[k].priority()) != pr) continue;
        if (!rep) rep = runtime::ShedReport<Record>{.sample = rows[k], .priority = pr, .first_ns = t, .last_ns = t};
        ++rep->rows;
        rep->kinds |= 1u << static_cast<unsigned>(rows[k].kind());
      }
      if (rep) op->on_shed(*rep, out);
    }
    for (; i < end; ++i) {
      if (!shed(rows[i])) op->process(rows[i], out);
    }
    op->on_watermark(t + 1, out);
    floor = t + 1;
  }
  runtime::Emitter<Record> out(&run->out, floor);
  op->on_watermark(runtime::kEndOfTime, out);
  op->finish(out);
}

}  // namespace

TEST_CASE("rank_join: steps whose reports were shed raise nothing; one telemetry_shed per run and minute") {
  // 64 ranks, a step every 2 s from kT0 + 3 s: step 10 at 21 s, step 20 at 41 s, step 30 at 61 s.
  std::vector<Record> rows{run_start("r1", 64)};
  for (int64_t s = 1; s <= 40; ++s) {
    int64_t t = kT0 + kSec + 2 * kSec * s;
    for (int32_t r = 0; r < 64; ++r) {
      if (s >= 35 && s <= 37 && r == 3) continue;  // really missing, far from any shedding
      rows.push_back(step("r1", r, s, 1900, t + r));
    }
  }
  auto shed = [](const Record& r) {
    if (r.kind() != Kind::kStep) return false;
    const Step& s = r.as<Step>();
    // Three steps each, so that the ranks are still silent at the first one's deadline.
    auto in = [&](int64_t from) { return s.step >= from && s.step < from + 3; };
    return (in(10) && s.rank < 40) ||                 // a stall, if it were believed
           (in(20) && s.rank >= 8 && s.rank < 16) ||  // node-1, lost
           (in(30) && s.rank == 5);                   // one rank missing
  };
  auto def = make_operator("rank_join", "timeout: 5s");

  SUBCASE("without the reports the same gaps are a stall, a lost node and a missing rank") {
    std::vector<Record> kept;
    for (const auto& r : rows) {
      if (!shed(r)) kept.push_back(r);
    }
    OperatorRun run;
    run_operator(*def, kept, &run);
    CHECK(run.alerts("job_stalled").size() == 1);
    CHECK(run.alerts("node_unreachable").size() == 1);
    CHECK(run.alerts("rank_missing").size() == 2);  // rank 5 at step 30, rank 3 at step 35
    CHECK(run.alerts("telemetry_shed").empty());
  }

  SUBCASE("with them, the steps concerned are marked and only the real gap is an alert") {
    OperatorRun run;
    run_shedding(*def, rows, shed, &run);
    CHECK(run.alerts("job_stalled").empty());
    CHECK(run.alerts("node_unreachable").empty());
    auto missing = run.alerts("rank_missing");
    REQUIRE(missing.size() == 1);
    CHECK(*missing[0].rank == 3);
    CHECK(*missing[0].step == 35);
    auto steps = run.steps();
    REQUIRE(steps.size() == 40);
    for (const auto* s : steps) {
      CAPTURE(s->step);
      bool marked =
          (s->step >= 10 && s->step <= 12) || (s->step >= 20 && s->step <= 22) || (s->step >= 30 && s->step <= 32);
      CHECK(s->shed == marked);
      CHECK(s->timed_out == (marked || (s->step >= 35 && s->step <= 37)));
    }
    CHECK(steps[9]->missing.size() == 40);
    CHECK(steps[19]->missing == std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15});
    CHECK(steps[29]->missing == std::vector<int32_t>{5});
    // Minute 0 held steps 10-12 and 20-22 (120 + 24 rows), minute 1 steps 30-32 (3 rows).
    auto info = run.alerts("telemetry_shed");
    REQUIRE(info.size() == 2);
    CHECK(info[0].severity == Severity::kInfo);
    CHECK(info[0].run_id.str() == "r1");
    CHECK(info[0].time_ns == kT0 + 60 * kSec);  // the end of the minute
    CHECK(attr(info[0], "rows") == 144);
    CHECK(attr(info[0], "shed_p1") == 144);
    CHECK(attr(info[0], "shed_p0") == 0);
    CHECK(attr(info[0], "shed_p2") == 0);
    CHECK(attr(info[0], "shed_p3") == 0);
    CHECK(info[0].summary.find("TELEMETRY SHED") == 0);
    CHECK(info[1].time_ns == kT0 + 120 * kSec);
    CHECK(attr(info[1], "rows") == 3);
    CHECK(attr(info[1], "shed_p1") == 3);
    CHECK(info[0].alert_id != info[1].alert_id);
  }

  SUBCASE("a run_end raises what is counted at once") {
    rows.push_back(Record{kT0 + 90 * kSec, {}, RunEnd{}});
    auto& end = std::get<RunEnd>(rows.back().body);
    end.run_id = Symbol::intern("r1");
    end.set_present(RunEnd::F::run_id);
    OperatorRun run;
    run_shedding(*def, rows, shed, &run);
    auto info = run.alerts("telemetry_shed");
    REQUIRE(info.size() == 2);
    CHECK(info[1].time_ns == kT0 + 90 * kSec);
    CHECK(attr(info[1], "rows") == 3);
  }
}
