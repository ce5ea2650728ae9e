// Two engines in one process at the same time, with different thread counts:
// each has its own registry (a test-only probe is registered in each, seen by
// its own engine only) and its own task arena, and both give the alerts of a
// run on its own.
#include <doctest/doctest.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "connectors/builtin.h"
#include "engine/engine.h"
#include "operators/operator.h"
#include "runtime/executor.h"
#include "tests/pipelines/replay_run.h"

namespace {

using namespace runlens;

// What the probe's partitions saw of the executor that ran them.
struct Seen {
  std::mutex mu;
  std::set<int> arena_concurrency;  // tbb::this_task_arena::max_concurrency() in process()
  std::set<int> partitions;         // OperatorContext::partitions
  uint64_t rows = 0;
};

class Probe final : public ops::Operator {
 public:
  explicit Probe(Seen* seen) : seen_(seen) {}
  void process(const Record&, ops::Emitter&) override {
    std::lock_guard lock(seen_->mu);
    seen_->arena_concurrency.insert(tbb::this_task_arena::max_concurrency());
    ++seen_->rows;
  }

 private:
  Seen* seen_;
};

class ProbeDef final : public ops::OperatorDef {
 public:
  explicit ProbeDef(Seen* seen) : seen_(seen) {}
  bool partitioned() const override { return true; }
  std::optional<uint64_t> key(const Record& r) const override { return ops::run_key(r.run_id()); }
  std::unique_ptr<ops::Operator> open(const runtime::OperatorContext& ctx) const override {
    std::lock_guard lock(seen_->mu);
    seen_->partitions.insert(ctx.partitions);
    return std::make_unique<Probe>(seen_);
  }

 private:
  Seen* seen_;
};

// The built-in registry plus a `probe` sink that reports to `seen`.
std::shared_ptr<const ops::Registry> registry_with_probe(Seen* seen) {
  auto r = std::make_shared<ops::Registry>(ops::kind_names());
  ops::RegisterBuiltinOperators(*r);
  connectors::RegisterBuiltinConnectors(*r);
  runtime::ComponentInfo info;
  info.type = "probe";
  info.role = runtime::Role::kSink;
  info.accepts = mask(Kind::kStepRecord);
  r->add_operator(std::move(info), [seen](const runtime::BuildContext&) { return std::make_unique<ProbeDef>(seen); });
  return r;
}

const std::string kPipeline =
    "sources:\n"
    "  telemetry: {type: file, paths: [replaced-by-replay]}\n"
    "operators:\n"
    "  join: {type: rank_join, inputs: [telemetry]}\n"
    "  stragglers: {type: straggler, inputs: [join]}\n"
    "sinks:\n"
    "  alerts: {type: jsonl, inputs: [join, stragglers], path: \"${RUNLENS_OUT}/alerts.jsonl\"}\n"
    "  probe: {type: probe, inputs: [join]}\n";

struct EngineRun {
  Seen seen;
  std::string alerts;
};

void run_engine(const std::string& dir, int threads, EngineRun* out) {
  std::string pipeline = dir + "/pipeline.yaml";
  std::ofstream(pipeline) << kPipeline;
  auto spec = load_pipeline(pipeline, {{"RUNLENS_OUT", dir}}, registry_with_probe(&out->seen));
  EngineOptions eo;
  eo.threads = threads;
  eo.out_dir = dir;
  eo.replay_inputs = {RUNLENS_SOURCE_DIR "/tests/golden/straggler/input.jsonl"};
  Engine engine(std::move(spec), eo);
  engine.run();
  out->alerts = testing::read_file(dir + "/alerts.jsonl");
}

}  // namespace

TEST_CASE("two engines with different thread counts run side by side in one process") {
  std::string a_dir = testing::fresh_dir("engine-a"), b_dir = testing::fresh_dir("engine-b");
  EngineRun solo;
  run_engine(a_dir, 1, &solo);
  std::string expected = solo.alerts;
  REQUIRE(expected.find("\"kind\":\"straggler\"") != std::string::npos);
  for (int round = 0; round < 3; ++round) {
    EngineRun a, b;
    std::thread ta([&] { run_engine(a_dir, 2, &a); });
    std::thread tb([&] { run_engine(b_dir, 5, &b); });
    ta.join();
    tb.join();
    // Each engine's operators ran in its own arena (the thread that waits on
    // the graph, and a worker slot for each other thread as far as the
    // machine's pool of TBB workers goes), with one partition per thread.
    CHECK(a.seen.arena_concurrency == std::set<int>{runtime::Executor<Record>::arena_concurrency(2)});
    CHECK(b.seen.arena_concurrency == std::set<int>{runtime::Executor<Record>::arena_concurrency(5)});
    CHECK(runtime::Executor<Record>::arena_concurrency(2) == std::min(1, tbb::info::default_concurrency() - 1) + 1);
    CHECK(runtime::Executor<Record>::arena_concurrency(1) == 1);
    CHECK(a.seen.partitions == std::set<int>{2});
    CHECK(b.seen.partitions == std::set<int>{5});
    CHECK(a.seen.rows > 0);
    CHECK(a.seen.rows == b.seen.rows);
    // Both give the alerts of a run on its own.
    CHECK(a.alerts == expected);
    CHECK(b.alerts == expected);
  }
  std::filesystem::remove_all(a_dir);
  std::filesystem::remove_all(b_dir);
}
