// The run-graph builder without a database: rows in, store batches out. What
// a run's rows become, how train_marks become timeline entries (one entry per
// LR change), per-rank windows and failure windows from measured step
// records, the commit cadence (rows, interval, deferred batches), and runs
// stored before (replaced or continued).
#include "timeline/run_graph.h"

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/status.h"

using namespace runlens;
namespace tl = runlens::timeline;

namespace {

constexpr int64_t kT0 = 1'767'225'600'000'000'000;  // 2026-01-01
constexpr int64_t kSec = 1'000'000'000;

Symbol sym(const std::string& s) { return Symbol::intern(s); }

Record run_start(const std::string& run, int64_t t, int32_t world, const std::string& node = "node-a") {
  auto rs = std::make_shared<RunStart>();
  rs->run_id = sym(run);
  rs->model_id = sym("m");
  rs->model_version = sym("v1");
  rs->world_size = world;
  for (int32_t r = 0; r < world; ++r) rs->ranks.push_back({r, sym(node), r});
  for (auto f : {RunStart::F::run_id, RunStart::F::model_id, RunStart::F::model_version, RunStart::F::world_size,
                 RunStart::F::ranks}) {
    rs->set_present(f);
  }
  Record r;
  r.time_ns = t;
  r.body = std::shared_ptr<const RunStart>(rs);
  return r;
}

Record train(const std::string& run, int64_t step, int64_t t, double loss) {
  Train tr;
  tr.run_id = sym(run);
  tr.step = step;
  tr.loss = loss;
  for (auto f : {Train::F::run_id, Train::F::step, Train::F::loss}) tr.set_present(f);
  Record r;
  r.time_ns = t;
  r.body = tr;
  return r;
}

Record marks(const std::string& run, int64_t step, int64_t t, std::optional<TrainMarks::Change> lr,
             std::optional<TrainMarks::Change> loss = {}) {
  TrainMarks m;
  m.run_id = sym(run);
  m.step = step;
  m.lr = lr;
  m.loss = loss;
  Record r;
  r.time_ns = t;
  r.body = m;
  return r;
}

Record lr_config_change(const std::string& run, int64_t step, int64_t t, double before, double after) {
  Occurrence e;
  e.kind = sym("config_change");
  e.run_id = sym(run);
  e.step = step;
  e.key = sym("lr");
  e.old = Value::of(before);
  e.new_ = Value::of(after);
  for (auto f : {Occurrence::F::kind, Occurrence::F::run_id, Occurrence::F::step, Occurrence::F::key,
                 Occurrence::F::old, Occurrence::F::new_}) {
    e.set_present(f);
  }
  Record r;
  r.time_ns = t;
  r.body = e;
  return r;
}

Record checkpoint(const std::string& run, int64_t step, int64_t t) {
  Checkpoint c;
  c.run_id = sym(run);
  c.checkpoint_id = sym(run + "/ckpt-" + std::to_string(step));
  c.step = step;
  for (auto f : {Checkpoint::F::run_id, Checkpoint::F::checkpoint_id, Checkpoint::F::step}) c.set_present(f);
  Record r;
  r.time_ns = t;
  r.body = c;
  return r;
}

// A step record as rank_join emits it, measured: rank 1 works twice as long as rank 0.
Record step_record(const std::string& run, int64_t step, int64_t t, bool measured = true) {
  auto rec = std::make_shared<StepRecord>();
  rec->run_id = sym(run);
  rec->step = step;
  rec->world_size = 2;
  rec->first_time_ns = t;
  for (int32_t rank : {0, 1}) {
    Step s;
    s.run_id = rec->run_id;
    s.rank = rank;
    s.step = step;
    s.step_ms = rank == 0 ? 100 : 200;
    for (auto f : {Step::F::run_id, Step::F::rank, Step::F::step, Step::F::step_ms}) s.set_present(f);
    rec->ranks.push_back(s);
  }
  if (measured) {
    rec->work_ms = {100, 200};
    rec->ratio_to_median = {100.0 / 150, 200.0 / 150};
    rec->slowest_rank = 1;
  }
  Record r;
  r.time_ns = t;
  r.body = std::shared_ptr<const StepRecord>(rec);
  return r;
}

Record alert(const std::string& run, int64_t step, int64_t t) {
  auto a = std::make_shared<Alert>();
  a->alert_id = "a-" + std::to_string(step);
  a->kind = "straggler";
  a->severity = Severity::kWarning;
  a->time_ns = t;
  a->run_id = sym(run);
  a->step = step;
  a->rank = 1;
  a->summary = "STRAGGLER DETECTED: rank 1";
  Record r;
  r.time_ns = t;
  r.body = std::shared_ptr<const Alert>(a);
  return r;
}

Record run_end(const std::string& run, int64_t t) {
  RunEnd e;
  e.run_id = sym(run);
  e.set_present(RunEnd::F::run_id);
  Record r;
  r.time_ns = t;
  r.body = e;
  return r;
}

// The builder's output, kept: commits, deferred batches, lookups of stored runs.
struct Collect final : tl::Output {
  std::vector<tl::Batch> written, deferred;
  std::vector<std::chrono::steady_clock::time_point> deadlines;
  std::map<std::string, store::RunRow> stored;
  std::vector<std::string> lookups;

  void write(tl::Batch b) override { written.push_back(std::move(b)); }
  void write_deferred(tl::Batch b, std::chrono::steady_clock::time_point deadline) override {
    deferred.push_back(std::move(b));
    deadlines.push_back(deadline);
  }
  std::optional<store::RunRow> stored_run(const std::string& run_id) override {
    lookups.push_back(run_id);
    auto it = stored.find(run_id);
    return it == stored.end() ? std::nullopt : std::optional<store::RunRow>(it->second);
  }
  // Everything handed over, in order, as one batch (how the store sees it).
  tl::Batch all() const {
    tl::Batch out;
    for (const auto* list : {&deferred, &written}) {
      for (auto b : *list) {
        tl::fold_open(b);
        for (auto& x : b.graph.runs) out.graph.runs.push_back(x);
        for (auto& x : b.graph.allocations) out.graph.allocations.push_back(x);
        for (auto& x : b.graph.timeline) out.graph.timeline.push_back(x);
        for (auto& x : b.graph.incidents) out.graph.incidents.push_back(x);
        for (auto& x : b.graph.alerts) out.graph.alerts.push_back(x);
        for (auto& x : b.graph.checkpoints) out.graph.checkpoints.push_back(x);
        for (auto& x : b.metrics.rank_steps) out.metrics.rank_steps.push_back(x);
        for (auto& x : b.metrics.rank_windows) out.metrics.rank_windows.push_back(x);
      }
    }
    return out;
  }
  std::vector<std::string> timeline(const std::string& field = "kind") const {
    std::vector<std::string> out;
    for (const auto& e : all().graph.timeline) out.push_back(field == "kind" ? e.kind : e.summary);
    return out;
  }
};

tl::Options small_windows() {
  tl::Options o;
  o.failure_window_steps = 2;
  o.rank_window = 10;
  return o;
}

TEST_CASE("a run's rows become its run row, its allocation and its timeline; the last commit comes at finish") {
  Collect out;
  tl::RunGraphBuilder b(tl::Options{}, &out);
  b.add(run_start("r", kT0, 2));
  for (int64_t s = 1; s <= 3; ++s) b.add(train("r", s, kT0 + s * kSec, 3.0 - 0.1 * static_cast<double>(s)));
  b.add(run_end("r", kT0 + 4 * kSec));
  CHECK(out.lookups == std::vector<std::string>{"r"});  // once, at its first run_start
  b.finish();
  REQUIRE(!out.written.empty());
  auto all = out.all();
  REQUIRE(!all.graph.runs.empty());
  const store::RunRow& last = all.graph.runs.back();
  CHECK(last.run_id == "r");
  CHECK(last.status == "completed");
  CHECK(last.step == 3);
  CHECK(last.loss == doctest::Approx(2.7));
  CHECK(last.ended_ns == kT0 + 4 * kSec);
  CHECK(all.graph.allocations.size() == 2);
  CHECK(out.timeline() == std::vector<std::string>{"run_start", "run_end"});
  CHECK(out.timeline("summary")[0] == "run started: 2 ranks on 1 nodes, model m:v1");
  CHECK(out.written.back().metrics.prune.empty());  // no rollup tiers configured: nothing to prune
}

TEST_CASE("train_marks become lr_change and jump entries; an LR change the run reported is one entry") {
  Collect out;
  tl::RunGraphBuilder b(tl::Options{}, &out);
  b.add(run_start("r", kT0, 1));
  b.add(lr_config_change("r", 10, kT0 + 10 * kSec, 0.001, 0.002));
  b.add(marks("r", 11, kT0 + 11 * kSec, TrainMarks::Change{0.001, 0.002}));  // the same change, seen in the series
  b.add(marks("r", 20, kT0 + 20 * kSec, TrainMarks::Change{0.25, 2.5}));     // a change of its own
  b.add(lr_config_change("r", 21, kT0 + 21 * kSec, 0.25, 2.5));              // reported a step later: the same
  b.add(marks("r", 30, kT0 + 30 * kSec, std::nullopt, TrainMarks::Change{2, 9}));
  b.finish();
  CHECK(out.timeline() == std::vector<std::string>{"run_start", "config_change", "lr_change", "loss_jump"});
  auto summaries = out.timeline("summary");
  CHECK(summaries[1] == "config changed: lr 0.001 -> 0.002");
  CHECK(summaries[2] == "learning rate changed 0.25 -> 2.5 (10x)");
  CHECK(summaries[3] == "loss jumped 2 -> 9 (4.5x)");
  auto entries = out.all().graph.timeline;
  CHECK(entries[2].step == 20);
  CHECK(entries[2].severity == "warning");
  CHECK(entries[2].time_ns == kT0 + 20 * kSec);
  CHECK(entries[2].detail_json == R"({"old":0.25,"new":2.5,"factor":10})");
  std::string line;
  tl::entry_json(entries[3], &line);
  CHECK(line == "{\"run_id\":\"r\",\"step\":30,\"time_ns\":" + std::to_string(kT0 + 30 * kSec) +
                    ",\"kind\":\"loss_jump\",\"severity\":\"warning\",\"summary\":\"loss jumped 2 -> 9 (4.5x)\","
                    "\"detail\":{\"old\":2,\"new\":9}}");
}

TEST_CASE("measured step records: per-rank windows, and full resolution around an alert and at the end") {
  Collect out;
  tl::RunGraphBuilder b(small_windows(), &out);
  b.add(run_start("r", kT0, 2));
  for (int64_t s = 1; s <= 20; ++s) {
    b.add(step_record("r", s, kT0 + s * kSec));
    if (s == 10) b.add(alert("r", 10, kT0 + s * kSec + 1));
  }
  b.add(run_end("r", kT0 + 21 * kSec));
  b.finish();
  auto all = out.all();
  // Two windows of ten steps per rank, summed from the records' own measures.
  std::map<std::pair<int64_t, int32_t>, store::RankWindowRow> windows;
  for (const auto& w : all.metrics.rank_windows) windows[{w.first_step, w.rank}] = w;
  REQUIRE(windows.size() == 4);
  for (int64_t first : {1, 11}) {
    const auto& r0 = windows.at({first, 0});
    const auto& r1 = windows.at({first, 1});
    CHECK(r0.last_step == first + 9);
    CHECK(r0.steps == 10);
    CHECK(r0.work_ms_sum == doctest::Approx(1000));
    CHECK(r0.ratio_sum == doctest::Approx(10 * 100.0 / 150));
    CHECK(r0.slowest_count == 0);
    CHECK(r1.ratio_sum == doctest::Approx(10 * 200.0 / 150));
    CHECK(r1.slowest_count == 10);
    CHECK(r1.node == "node-a");
    CHECK(r1.gpu == 1);
  }
  // Rank rows: the failure window (steps 8 to 12) and the run's last window (19, 20), each step's ranks.
  std::map<int64_t, std::set<std::string>> kept;
  for (const auto& r : store::rows_of(all.metrics.rank_steps)) {
    kept[r.step].insert(r.kept_for);
    if (r.rank == 1) CHECK(r.ratio_to_median == doctest::Approx(200.0 / 150));
    CHECK(r.run_id == "r");
    CHECK(r.gpu == r.rank);  // from the run's placement
    CHECK(r.step_ms == (r.rank == 0 ? 100 : 200));
    CHECK(r.work_ms == r.step_ms);
    CHECK(r.time_ns == kT0 + r.step * kSec);
    CHECK_FALSE(r.comm_ms);
    CHECK_FALSE(r.data_wait_ms);
  }
  std::set<int64_t> steps;
  for (const auto& [s, why] : kept) steps.insert(s);
  CHECK(steps == std::set<int64_t>{8, 9, 10, 11, 12, 19, 20});
  CHECK(kept[10] == std::set<std::string>{"failure"});
  CHECK(kept[20] == std::set<std::string>{"recent"});
  CHECK(store::rows_of(all.metrics.rank_steps).size() == 14);
  REQUIRE(all.graph.incidents.size() >= 1);
  CHECK(all.graph.incidents.back().incident_id == "inc-a-10");
  CHECK(all.graph.alerts.size() == 1);
  CHECK(all.graph.alerts[0].incident_id == "inc-a-10");
}

TEST_CASE(
    "a failure window that reaches the run's end: its steps' rank rows once, the last window's others as recent") {
  Collect out;
  tl::RunGraphBuilder b(small_windows(), &out);
  b.add(run_start("r", kT0, 2));
  for (int64_t s = 1; s <= 20; ++s) {
    b.add(step_record("r", s, kT0 + s * kSec));
    if (s == 17) b.add(alert("r", 17, kT0 + s * kSec + 1));  // keeps steps 15 to 19 (and the run's last: 19, 20)
  }
  b.add(run_end("r", kT0 + 21 * kSec));
  b.finish();
  auto all = out.all();
  std::map<int64_t, std::multiset<std::string>> kept;  // per step, one reason per rank row
  for (const auto& r : store::rows_of(all.metrics.rank_steps)) kept[r.step].insert(r.kept_for);
  std::set<int64_t> steps;
  for (const auto& [s, why] : kept) steps.insert(s);
  CHECK(steps == std::set<int64_t>{15, 16, 17, 18, 19, 20});
  for (int64_t s = 15; s <= 19; ++s) {
    CAPTURE(s);
    CHECK(kept[s] == std::multiset<std::string>{"failure", "failure"});
  }
  CHECK(kept[20] == std::multiset<std::string>{"recent", "recent"});
  CHECK(store::rows_of(all.metrics.rank_steps).size() == 12);
}

TEST_CASE("a kept step's block: each rank's fields as measured, a rank without a placement on no GPU") {
  Collect out;
  tl::RunGraphBuilder b(small_windows(), &out);
  b.add(run_start("r", kT0, 2));
  for (int64_t s = 1; s <= 3; ++s) {
    Record r = step_record("r", s, kT0 + s * kSec);
    auto rec = std::make_shared<StepRecord>(r.step_record());
    rec->ranks[0].comm_ms = 7.5;
    rec->ranks[0].set_present(Step::F::comm_ms);
    rec->ranks[1].data_wait_ms = 3.25;
    rec->ranks[1].set_present(Step::F::data_wait_ms);
    rec->ranks[1].rank = 5;  // not in the run's placement of two ranks
    r.body = std::shared_ptr<const StepRecord>(rec);
    b.add(r);
  }
  b.add(run_end("r", kT0 + 4 * kSec));
  b.finish();
  auto all = out.all();
  REQUIRE(all.metrics.rank_steps.size() == 2);  // the run's last window (steps 2 and 3): a block a step
  for (const auto& block : all.metrics.rank_steps) {
    CAPTURE(block.step);
    CHECK(block.kept_for == "recent");
    REQUIRE(block.ranks() == 2);
    const auto rows = block.rows();
    CHECK(rows[0].rank == 0);
    CHECK(rows[0].gpu == 0);
    CHECK(rows[0].comm_ms == 7.5);
    CHECK_FALSE(rows[0].data_wait_ms);
    CHECK(rows[1].rank == 5);
    CHECK(rows[1].gpu == -1);
    CHECK_FALSE(rows[1].comm_ms);
    CHECK(rows[1].data_wait_ms == 3.25);
    CHECK(rows[1].work_ms == 200);
    CHECK(rows[1].ratio_to_median == doctest::Approx(200.0 / 150));
  }
}

TEST_CASE("a revision of an alert is a timeline entry marked with it, in the alert's incident, counted once") {
  Collect out;
  tl::RunGraphBuilder b(small_windows(), &out);
  b.add(run_start("r", kT0, 2));
  for (int64_t s = 1; s <= 20; ++s) {
    b.add(step_record("r", s, kT0 + s * kSec));
    if (s == 10) b.add(alert("r", 10, kT0 + s * kSec + 1));
    if (s == 14) {
      // The same alert refined (asof_join's nearer sample), four steps later.
      Record r = alert("r", 10, kT0 + 10 * kSec + 1);
      auto a = std::make_shared<Alert>(r.alert());
      a->revision = 1;
      a->summary = "STRAGGLER DETECTED: rank 1 (refined)";
      r.time_ns = kT0 + s * kSec + 1;
      r.body = std::shared_ptr<const Alert>(a);
      b.add(r);
    }
  }
  b.add(run_end("r", kT0 + 21 * kSec));
  b.finish();
  auto all = out.all();
  REQUIRE(all.graph.alerts.size() == 2);  // both go to the store, which keeps the higher revision
  CHECK(all.graph.alerts[0].alert.revision == 0);
  CHECK(all.graph.alerts[1].alert.revision == 1);
  CHECK(all.graph.alerts[1].incident_id == "inc-a-10");
  CHECK(all.graph.alerts[1].json.find("\"revision\":1,") != std::string::npos);
  std::vector<std::string> details;
  for (const auto& e : all.graph.timeline) {
    if (e.kind == "alert") details.push_back(e.detail_json);
  }
  REQUIRE(details.size() == 2);
  CHECK(details[0].find("revision") == std::string::npos);
  CHECK(details[1].find("\"revision\":1") != std::string::npos);
  REQUIRE(!all.graph.incidents.empty());
  CHECK(all.graph.incidents.back().incident_id == "inc-a-10");
  CHECK(all.graph.incidents.back().alert_count == 1);  // a revision is no new alert
  // Nor does it open a failure window of its own: rank rows around step 10 (8..12) and the end, none around 14.
  std::set<int64_t> steps;
  for (const auto& r : store::rows_of(all.metrics.rank_steps)) steps.insert(r.step);
  CHECK(steps == std::set<int64_t>{8, 9, 10, 11, 12, 19, 20});
}

TEST_CASE("a step record that rank_join did not measure is a broken invariant") {
  Collect out;
  tl::RunGraphBuilder b(small_windows(), &out);
  b.add(run_start("r", kT0, 2));
  CHECK_THROWS_AS(b.add(step_record("r", 1, kT0 + kSec, /*measured=*/false)), runtime::InternalError);
}

TEST_CASE("commits: commit_rows forces one; a watermark before the interval defers, one after it commits") {
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1000);
  Collect out;
  tl::Options o;
  o.commit_rows = 5;
  o.commit_interval_ns = kSec;
  tl::RunGraphBuilder b(o, &out, [&] { return now; });
  b.add(run_start("r", kT0, 2));  // a commit before the lookup; then 2 allocations and the entry wait
  CHECK(out.written.size() == 1);
  now += std::chrono::milliseconds(500);
  b.on_watermark();
  REQUIRE(out.deferred.size() == 1);
  CHECK(out.deferred[0].graph.allocations.size() == 2);
  CHECK(out.deadlines[0] == now + std::chrono::milliseconds(500));  // the interval after the last commit
  b.on_watermark();                                                 // nothing new: nothing handed over
  CHECK(out.deferred.size() == 1);
  b.add(checkpoint("r", 1, kT0 + kSec));  // 3 + 2 rows since the last commit: commit_rows
  CHECK(out.written.size() == 2);
  CHECK(out.written[1].graph.checkpoints.size() == 1);
  b.add(checkpoint("r", 2, kT0 + 2 * kSec));
  CHECK(out.written.size() == 2);
  now += std::chrono::seconds(2);
  b.on_watermark();  // the interval is up
  CHECK(out.written.size() == 3);
  CHECK(out.written[2].graph.checkpoints.size() == 1);
  CHECK(out.deferred.size() == 1);
}

TEST_CASE("a run stored before: the same run replayed is replaced; a later start of it continues it") {
  SUBCASE("same start: replaced") {
    Collect out;
    store::RunRow stored;
    stored.run_id = "r";
    stored.started_ns = kT0;
    out.stored["r"] = stored;
    tl::RunGraphBuilder b(tl::Options{}, &out);
    b.add(run_start("r", kT0, 1));
    b.finish();
    REQUIRE(out.written.size() == 2);
    CHECK(out.written[1].graph.replace_runs == std::vector<std::string>{"r"});
    CHECK(out.written[1].metrics.replace_runs == std::vector<std::string>{"r"});
    CHECK(out.timeline() == std::vector<std::string>{"run_start"});
  }
  SUBCASE("a later start: continued") {
    Collect out;
    store::RunRow stored;
    stored.run_id = "r";
    stored.started_ns = kT0 - 3600 * kSec;
    stored.step = 40;
    stored.tokens_processed = 1000;
    out.stored["r"] = stored;
    tl::RunGraphBuilder b(tl::Options{}, &out);
    b.add(run_start("r", kT0, 1));
    b.finish();
    auto all = out.all();
    CHECK(out.written[1].graph.replace_runs.empty());
    CHECK(out.timeline() == std::vector<std::string>{"restart"});
    CHECK(out.timeline("summary")[0] == "run started again: 1 ranks on 1 nodes, model m:v1");
    CHECK(all.graph.timeline[0].step == 40);
    CHECK(all.graph.runs.back().restarts == 1);
    CHECK(all.graph.runs.back().started_ns == kT0 - 3600 * kSec);
    CHECK(all.graph.runs.back().tokens_processed == 1000);
  }
}

TEST_CASE("merge_batches appends in order, but not across a replacement or after a prune") {
  tl::Batch a, b;
  a.graph.timeline.push_back({"r", 1, 1, "alert", "info", "one", "", ""});
  b.graph.timeline.push_back({"r", 2, 2, "alert", "info", "two", "", ""});
  b.metrics.prune = {{60 * kSec, 3600 * kSec}};
  REQUIRE(tl::merge_batches(a, b));
  REQUIRE(a.graph.timeline.size() == 2);
  CHECK(a.graph.timeline[1].summary == "two");
  CHECK(a.metrics.prune.size() == 1);
  tl::Batch c;
  c.graph.timeline.push_back({"r", 3, 3, "alert", "info", "three", "", ""});
  CHECK_FALSE(tl::merge_batches(a, c));  // `a` prunes: written before what follows
  CHECK(c.graph.timeline.size() == 1);
  tl::Batch d, e;
  e.graph.replace_runs = {"r"};
  CHECK_FALSE(tl::merge_batches(d, e));
}

TEST_CASE("rows added to a batch drop what was prepared of it before (merged into, or its open view folded in)") {
  struct Made : store::PreparedRows {};
  tl::Batch a, b;
  a.metrics.prepared = std::make_shared<Made>();
  b.metrics.prepared = std::make_shared<Made>();
  REQUIRE(tl::merge_batches(a, b));
  CHECK(a.metrics.prepared == nullptr);
  tl::Batch c;
  c.metrics.prepared = std::make_shared<Made>();
  tl::fold_open(c);  // no view: nothing added, the preparation stands
  CHECK(c.metrics.prepared != nullptr);
  c.open.emplace();
  c.open->gpu_rollups.push_back({});
  tl::fold_open(c);
  CHECK(c.metrics.prepared == nullptr);
  CHECK(c.metrics.gpu_rollups.size() == 1);
}

TEST_CASE("open state: a later view replaces an earlier one; a row closed since is not undone; commits drop views") {
  auto window = [](int64_t first, int32_t rank, int64_t steps) {
    store::RankWindowRow w;
    w.run_id = "r";
    w.first_step = first;
    w.last_step = first + 9;
    w.rank = rank;
    w.steps = steps;
    return w;
  };
  auto deferred_with = [&](std::vector<store::RankWindowRow> open) {
    tl::Batch b;
    b.deferred = true;
    b.open = tl::OpenState{std::move(open), {}, {}};
    return b;
  };
  // Deferred into deferred: the later view replaces the earlier.
  tl::Batch a = deferred_with({window(1, 0, 3), window(1, 1, 3)});
  tl::Batch b = deferred_with({window(1, 0, 5)});
  REQUIRE(tl::merge_batches(a, b));
  REQUIRE(a.open);
  REQUIRE(a.open->rank_windows.size() == 1);
  CHECK(a.open->rank_windows[0].steps == 5);
  // A deferred batch without a view, that closes a window: the earlier view loses that window.
  tl::Batch c;
  c.deferred = true;
  c.metrics.rank_windows.push_back(window(1, 0, 10));  // closed: its final value
  a.open->rank_windows.push_back(window(11, 0, 1));
  REQUIRE(tl::merge_batches(a, c));
  REQUIRE(a.open);
  REQUIRE(a.open->rank_windows.size() == 1);
  CHECK(a.open->rank_windows[0].first_step == 11);
  tl::fold_open(a);
  CHECK(!a.open);
  REQUIRE(a.metrics.rank_windows.size() == 2);
  CHECK(a.metrics.rank_windows[0].steps == 10);  // the closed row, then the view
  CHECK(a.metrics.rank_windows[1].first_step == 11);
  // A commit without a view of its own drops the deferred view (its rows come closed, or in a later view).
  tl::Batch d = deferred_with({window(21, 0, 2)});
  tl::Batch commit;
  REQUIRE(tl::merge_batches(d, commit));
  CHECK(!d.open);
  CHECK(!d.deferred);
}

}  // namespace
