// train_marks: LR changes (a factor that breaks the trend) and loss /
// gradient-norm jumps of a run's train series; the first report of a step
// counts; restarts (of the run, of a node it is placed on) and a second
// run_start start the series again; marks sort right after their train rows.
#include "operators/train_marks.h"

#include <cmath>

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

ops::TrainMarksOptions defaults() { return ops::TrainMarksOptions{}; }

Train point(int64_t step, double loss, double grad, double lr, int32_t rank = 0) {
  Train t = train_lr("r", step, loss, grad, lr, kT0).as<Train>();
  t.rank = rank;
  t.set_present(Train::F::rank);
  return t;
}

struct SeriesCase {
  const char* name;
  std::vector<Train> points;
  // Steps with a mark, and which: "lr", "loss", "grad".
  std::vector<std::pair<int64_t, std::string>> expect;
};

std::vector<std::pair<int64_t, std::string>> marks_of(const std::vector<Train>& points) {
  ops::TrainSeries s;
  std::vector<std::pair<int64_t, std::string>> out;
  for (const auto& t : points) {
    auto m = ops::mark_train(defaults(), t, s);
    if (!m) continue;
    if (m->lr) out.push_back({m->step, "lr"});
    if (m->loss) out.push_back({m->step, "loss"});
    if (m->grad_norm) out.push_back({m->step, "grad"});
  }
  return out;
}

TEST_CASE("mark_train: what is a change and a jump, and what is not") {
  auto series = [](int64_t n, auto lr_at, auto loss_at, auto grad_at) {
    std::vector<Train> p;
    for (int64_t s = 1; s <= n; ++s) p.push_back(point(s, loss_at(s), grad_at(s), lr_at(s)));
    return p;
  };
  auto flat = [](double v) { return [v](int64_t) { return v; }; };
  auto warmup_then_decay = [](int64_t s) {
    return s <= 20 ? 3e-4 * static_cast<double>(s) / 20 : 3e-4 * std::pow(0.99, static_cast<double>(s - 20));
  };
  std::vector<SeriesCase> cases = {
      {"a smooth schedule is no change", series(60, warmup_then_decay, flat(2), flat(1)), {}},
      {"halving every step is a trend, not a change",
       series(
           10, [](int64_t s) { return std::pow(0.5, s); }, flat(2), flat(1)),
       {}},
      {"an 8x step of the LR is a change",
       series(
           20, [](int64_t s) { return s < 12 ? 1e-4 : 8e-4; }, flat(2), flat(1)),
       {{12, "lr"}}},
      {"a loss 5x the step before is a jump; 3x is not",
       series(
           10, flat(1e-4), [](int64_t s) { return s == 5   ? 10.0
                                                  : s == 8 ? 6.0
                                                           : 2.0; }, flat(1)),
       {{5, "loss"}}},
      {"a gradient norm jump",
       series(6, flat(1e-4), flat(2), [](int64_t s) { return s == 4 ? 9.0 : 1.0; }),
       {{4, "grad"}}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(marks_of(c.points) == c.expect);
  }
  // Non-finite values are nan_detect's: skipped, and the value before stays the baseline.
  std::vector<Train> nan = {point(1, 2, 1, 1e-4), point(2, NAN, 1, 1e-4), point(3, 9, 1, 1e-4)};
  CHECK(marks_of(nan) == std::vector<std::pair<int64_t, std::string>>{{3, "loss"}});
  // The first report of a step counts; a repeat (another rank) neither marks nor moves the series.
  std::vector<Train> repeat = {point(1, 2, 1, 1e-4), point(2, 2, 1, 1e-4), point(2, 50, 1, 1e-4, 1),
                               point(3, 2.5, 1, 1e-4)};
  CHECK(marks_of(repeat).empty());
  // The values before and at the step.
  ops::TrainSeries s;
  ops::mark_train(defaults(), point(1, 2, 1, 1e-4), s);
  ops::mark_train(defaults(), point(2, 2, 1, 1e-4), s);
  auto m = ops::mark_train(defaults(), point(3, 2, 1, 1e-3), s);
  REQUIRE(m);
  REQUIRE(m->lr);
  CHECK(m->lr->before == 1e-4);
  CHECK(m->lr->after == 1e-3);
  CHECK(!m->loss);
  CHECK(m->run_id == Symbol::intern("r"));
  CHECK(m->step == 3);
}

// A run on node-0 and node-1 whose loss steps from 2 to 10 at step 6, with an
// event (if any) at step 4.
std::vector<Record> run_with(std::optional<Record> extra) {
  std::vector<Record> rows = {run_start("r", 16, 8)};
  for (int64_t s = 1; s <= 8; ++s) rows.push_back(train_lr("r", s, s >= 6 ? 10 : 2, 1, 1e-4, kT0 + s * kSec));
  if (extra) rows.push_back(*extra);
  return rows;
}

TEST_CASE("the operator emits a train_marks row at the train row's time; restarts start the series again") {
  auto def = make_operator("train_marks");
  auto marked_steps = [&](std::optional<Record> extra) {
    OperatorRun run;
    run_operator(*def, run_with(extra), &run);
    std::vector<int64_t> steps;
    for (const auto& r : run.out) {
      REQUIRE(r.kind() == Kind::kTrainMarks);
      const TrainMarks& m = r.as<TrainMarks>();
      CHECK(r.time_ns == kT0 + m.step * kSec);
      steps.push_back(m.step);
    }
    return steps;
  };
  CHECK(marked_steps(std::nullopt) == std::vector<int64_t>{6});
  // A restart between the two levels: the series starts again, so step 6 has nothing before it.
  Record restart = event_row("restart", kT0 + 5 * kSec + 1, EventFields().run("r"));
  CHECK(marked_steps(restart).empty());
  // A node's restart (no run) is one of every run placed on that node...
  CHECK(marked_steps(event_row("restart", kT0 + 5 * kSec + 1, EventFields().node("node-1"))).empty());
  // ...but not of runs elsewhere, nor of a GPU the run does not use.
  CHECK(marked_steps(event_row("restart", kT0 + 5 * kSec + 1, EventFields().node("node-7"))) ==
        std::vector<int64_t>{6});
  // A run started again (a second run_start) starts its series again too.
  CHECK(marked_steps(run_start("r", 16, 8, kT0 + 5 * kSec + 1)).empty());
  // Other events do nothing to the series.
  CHECK(marked_steps(event_row("config_change", kT0 + 5 * kSec + 1, EventFields().run("r").key("lr").change(1, 2))) ==
        std::vector<int64_t>{6});
}

TEST_CASE("partitioned by run, with a node's restart sent to every partition: the same marks") {
  std::vector<Record> rows;
  for (int run = 0; run < 6; ++run) {
    std::string id = "run-" + std::to_string(run);
    rows.push_back(run_start(id, 8, 8));
    for (int64_t s = 1; s <= 8; ++s) rows.push_back(train_lr(id, s, s >= 6 ? 10 : 2, 1, 1e-4, kT0 + s * kSec + run));
  }
  rows.push_back(event_row("restart", kT0 + 5 * kSec + 100, EventFields().node("node-0")));
  auto def = make_operator("train_marks");
  OperatorRun one;
  run_operator(*def, rows, &one);
  CHECK(one.out.empty());  // every run sits on node-0: each restarted before its jump
  CHECK(run_partitioned(*def, rows, 3).empty());
  rows.pop_back();
  OperatorRun all;
  run_operator(*def, rows, &all);
  CHECK(all.out.size() == 6);
  auto split = run_partitioned(*def, rows, 3);
  REQUIRE(split.size() == all.out.size());
  for (size_t i = 0; i < split.size(); ++i) CHECK(split[i].as<TrainMarks>() == all.out[i].as<TrainMarks>());
}

TEST_CASE("a train_marks row sorts right after the train rows of its run and step, before the rest of that time") {
  const int64_t t = kT0 + 7 * kSec;
  Record lead = train_lr("a", 7, 2, 1, 1e-4, t);
  Record other_rank = train_lr("a", 7, 2, 1, 1e-4, t);
  {
    Train tr = other_rank.as<Train>();
    tr.rank = 3;
    tr.set_present(Train::F::rank);
    other_rank.body = tr;
  }
  TrainMarks m;
  m.run_id = Symbol::intern("a");
  m.step = 7;
  m.loss = TrainMarks::Change{2, 9};
  Record marks;
  marks.time_ns = t;
  marks.body = m;
  Record next_run = train_lr("b", 7, 2, 1, 1e-4, t);
  Record gpu = gpu_row("node-0", 0, t);
  Record ev = event_row("config_change", t, EventFields().run("a").step(7).key("lr").change(1, 2));
  std::vector<Record> rows = {ev, next_run, gpu, marks, other_rank, lead};
  std::sort(rows.begin(), rows.end(), [](const Record& x, const Record& y) { return compare_canonical(x, y) < 0; });
  std::vector<std::string> order;
  for (const auto& r : rows) order.push_back(std::string(kind_name(r.kind())) + ":" + r.run_id().string());
  CHECK(order == std::vector<std::string>{"train:a", "train:a", "train_marks:a", "train:b", "gpu:", "event:a"});
  CHECK(compare_canonical(marks, lead) > 0);
  CHECK(compare_canonical(lead, marks) < 0);
  CHECK(compare_canonical(marks, marks) == 0);
}

TEST_CASE("train_marks parameters are checked on load, with their position") {
  try {
    make_operator("train_marks", "jump_ratio: 0.5");
    FAIL("no error");
  } catch (const runtime::ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].where.file == "test.yaml");
    CHECK(e.diagnostics()[0].where.line == 7);
    CHECK(e.diagnostics()[0].message.find("jump_ratio") != std::string::npos);
  }
}

}  // namespace
