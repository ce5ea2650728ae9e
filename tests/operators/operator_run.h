// Runs one operator the way the executor does, without threads: rows in
// canonical order, a watermark after each distinct event time (or only at the
// end), then finish(). Plus builders for the rows operator tests need.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "operators/operator.h"
#include "runtime/params.h"
#include "runtime/pipeline_spec.h"

namespace runlens::testing {

constexpr int64_t kT0 = 1'767'225'600'000'000'000;  // 2026-01-01
constexpr int64_t kSec = 1'000'000'000;

class CollectDeadLetters final : public runtime::DeadLetterSink {
 public:
  void write(const runtime::DeadLetter& d) override {
    std::lock_guard lock(mu);
    letters.push_back(d);
  }
  std::mutex mu;
  std::vector<runtime::DeadLetter> letters;
};

struct OperatorRun {
  std::vector<Record> out;
  CollectDeadLetters dead;
  runtime::NodeCounters counters;

  // The alerts published, but closing revisions (ends_ns set: closed()).
  std::vector<Alert> alerts(const std::string& kind = "") const { return published(kind, false); }
  // The closing revisions: alerts whose incident closed (docs/alerts.md, "Closing revisions").
  std::vector<Alert> closed(const std::string& kind = "") const { return published(kind, true); }
  std::vector<Alert> published(const std::string& kind, bool closing) const {
    std::vector<Alert> a;
    for (const auto& r : out) {
      if (r.kind() == Kind::kAlert && (kind.empty() || r.alert().kind == kind) &&
          r.alert().ends_ns.has_value() == closing)
        a.push_back(r.alert());
    }
    return a;
  }
  std::vector<const StepRecord*> steps() const {
    std::vector<const StepRecord*> s;
    for (const auto& r : out) {
      if (r.kind() == Kind::kStepRecord) s.push_back(&r.step_record());
    }
    return s;
  }
};

// Builds an operator of the built-in registry from YAML parameters, e.g.
// make_operator("straggler", "persist_k: 2") (throws ConfigError when invalid).
// The parameters are line 7 of "test.yaml", from column 5.
inline std::unique_ptr<ops::OperatorDef> make_operator(const std::string& type, const std::string& params_yaml = "") {
  auto registry = make_builtin_registry();
  // Wire it to something whose port types fit: the source, or a rank_join for step records.
  const auto* info = registry->find(type);
  bool reads_contract = info && (info->accepts & ops::kAllContractKinds);
  std::string text =
      "sources: {s: {type: file, paths: [x]}}\noperators:\n  j: {type: rank_join, inputs: [s]}\n  op:\n    type: " +
      type + "\n    inputs: [" + (reads_contract ? "s" : "j") + "]\n";
  if (!params_yaml.empty()) text += "    " + params_yaml + "\n";
  auto spec = runtime::parse_pipeline_text(text, "test.yaml", *registry, runtime::env_lookup());
  return registry->make_operator(*spec.find("op"));
}

// What building `type` with `params_yaml` reports, for invalid-parameter
// tests that check the message and its position, e.g.
// "test.yaml:7:16: error: persist_k (6) must not exceed persist_n (5) (in operators.op)";
// "" when it builds.
inline std::string config_error(const std::string& type, const std::string& params_yaml) {
  try {
    make_operator(type, params_yaml);
  } catch (const runtime::ConfigError& e) {
    return e.what();
  }
  return "";
}

// watermark_each_row = false: one watermark at the end (the coarsest batching).
inline void run_operator(const ops::OperatorDef& def, std::vector<Record> rows, OperatorRun* run,
                         bool watermark_each_row = true) {
  std::sort(rows.begin(), rows.end(), [](const Record& a, const Record& b) { return compare_canonical(a, b) < 0; });
  runtime::OperatorContext ctx{"op", 0, 1, &run->dead, &run->counters};
  auto op = def.open(ctx);
  int64_t floor = runtime::kBeginningOfTime;
  size_t i = 0;
  while (i < rows.size()) {
    int64_t t = rows[i].time_ns;
    runtime::Emitter<Record> out(&run->out, floor);
    // Release every row older than the next distinct time, as a watermark just past t would.
    while (i < rows.size() && rows[i].time_ns == t) op->process(rows[i++], out);
    if (watermark_each_row) {
      op->on_watermark(t + 1, out);
      floor = t + 1;
    }
  }
  runtime::Emitter<Record> out(&run->out, floor);
  op->on_watermark(runtime::kEndOfTime, out);
  op->finish(out);
}

inline Record run_start(const std::string& run, int32_t world, int32_t gpus_per_node = 8, int64_t t = kT0) {
  auto rs = std::make_shared<RunStart>();
  rs->run_id = Symbol::intern(run);
  rs->world_size = world;
  for (int32_t r = 0; r < world; ++r) {
    rs->ranks.push_back({r, Symbol::intern("node-" + std::to_string(r / gpus_per_node)), r % gpus_per_node});
  }
  rs->set_present(RunStart::F::run_id);
  rs->set_present(RunStart::F::world_size);
  rs->set_present(RunStart::F::ranks);
  Record rec;
  rec.time_ns = t;
  rec.body = std::shared_ptr<const RunStart>(std::move(rs));
  return rec;
}

// A step report; comm_ms / data_wait_ms < 0 means absent.
inline Record step(const std::string& run, int32_t rank, int64_t step_no, double step_ms, int64_t t,
                   double comm_ms = -1, double data_wait_ms = -1) {
  Step s;
  s.run_id = Symbol::intern(run);
  s.rank = rank;
  s.step = step_no;
  s.step_ms = step_ms;
  for (auto f : {Step::F::run_id, Step::F::rank, Step::F::step, Step::F::step_ms}) s.set_present(f);
  if (comm_ms >= 0) s.comm_ms = comm_ms, s.set_present(Step::F::comm_ms);
  if (data_wait_ms >= 0) s.data_wait_ms = data_wait_ms, s.set_present(Step::F::data_wait_ms);
  Record r;
  r.time_ns = t;
  r.body = s;
  return r;
}

inline Record train(const std::string& run, int64_t step_no, double loss, int64_t t, double grad_norm = 1.0,
                    int64_t nan_count = -1) {
  Train tr;
  tr.run_id = Symbol::intern(run);
  tr.step = step_no;
  tr.loss = loss;
  tr.grad_norm = grad_norm;
  for (auto f : {Train::F::run_id, Train::F::step, Train::F::loss, Train::F::grad_norm}) tr.set_present(f);
  if (nan_count >= 0) tr.nan_count = nan_count, tr.set_present(Train::F::nan_count);
  Record r;
  r.time_ns = t;
  r.body = tr;
  return r;
}

inline Record event(const std::string& kind, const std::string& run, int64_t t) {
  Occurrence e;
  e.kind = Symbol::intern(kind);
  e.run_id = Symbol::intern(run);
  e.set_present(Occurrence::F::kind);
  e.set_present(Occurrence::F::run_id);
  Record r;
  r.time_ns = t;
  r.body = e;
  return r;
}

// A synchronous job: every rank's wall step time equalizes at the collective;
// `work(rank, step)` is each rank's own work in ms.
template <class Work>
std::vector<Record> sync_steps(const std::string& run, int32_t world, int64_t steps, Work work, bool with_comm = true,
                               int32_t skip_rank = -1, int64_t skip_from = 0) {
  std::vector<Record> rows{run_start(run, world)};
  int64_t t = kT0 + kSec;
  for (int64_t s = 1; s <= steps; ++s) {
    double slowest = 0;
    for (int32_t r = 0; r < world; ++r) slowest = std::max(slowest, work(r, s));
    double allreduce = 100;
    t += static_cast<int64_t>((slowest + allreduce) * 1e6);
    for (int32_t r = 0; r < world; ++r) {
      if (r == skip_rank && s >= skip_from) continue;
      double w = work(r, s);
      double comm = slowest - w + allreduce;
      rows.push_back(with_comm ? step(run, r, s, w + comm + 10, t + r, comm, 10) : step(run, r, s, w, t + r));
    }
  }
  return rows;
}

}  // namespace runlens::testing
