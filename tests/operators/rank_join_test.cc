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
