// Store rows for the regression walk's tests: training runs (config, steps
// with validation loss, config changes, alerts, a checkpoint) and model
// versions evaluated on a benchmark with per-item scores, written into a
// real SQLite store.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "formats/jsonl_codec.h"
#include "store/store.h"
#include "tests/scratch_dirs.h"

namespace runlens::testing {

inline std::string walk_dir(const std::string& name) {
  return make_scratch_dir(std::filesystem::temp_directory_path() /
                          ("runlens-walk-" + name + "-" + std::to_string(getpid())));
}

inline std::string hex64(char c) { return std::string(64, c); }

struct RunSpec {
  std::string run_id;
  std::string dataset = "digits-v1";
  double lr = 0.05;
  std::optional<double> lr_changed_to{};  // a config_change of lr at `change_step`
  int64_t change_step = 150;
  double val_loss_before = 0.40, val_loss_after = 0.40;  // up to change_step, after it
  int64_t checkpoint_step = 300;
  std::vector<std::pair<std::string, int64_t>> alerts{};  // kind, step
  char hash = 'a';
};

inline std::string checkpoint_of(const RunSpec& r) { return r.run_id + "-ck"; }

inline void write_run(store::Store& s, const RunSpec& spec) {
  store::GraphBatch b;
  store::RunRow run;
  run.run_id = spec.run_id;
  run.model_id = "toy";
  run.dataset_version = spec.dataset;
  run.code_commit = "c0ffee";
  run.world_size = 1;
  run.status = "completed";
  run.started_ns = 1'000'000'000;
  run.config = {{"lr", Value::of(spec.lr)}, {"batch_size", Value::of(32.0)}, {"optimizer", Value::of("sgd")}};
  b.runs.push_back(run);
  const Symbol rid = Symbol::intern(spec.run_id);
  for (int64_t step = 10; step <= 400; step += 10) {
    store::StepRow r;
    r.time_ns = run.started_ns + step * 1'000'000;
    r.stats.run_id = rid;
    r.stats.step = step;
    r.stats.world_size = 1;
    r.stats.reported = 1;
    r.stats.step_ms = 100;
    r.stats.mfu = 0.45;
    const bool after = step > spec.change_step;
    r.stats.lr = after && spec.lr_changed_to ? *spec.lr_changed_to : spec.lr;
    r.stats.loss = after ? spec.val_loss_after - 0.05 : spec.val_loss_before - 0.05;
    if (step % 50 == 0) r.stats.val_loss = after ? spec.val_loss_after : spec.val_loss_before;
    b.steps.push_back(r);
  }
  if (spec.lr_changed_to) {
    store::TimelineEntry e;
    e.run_id = spec.run_id;
    e.step = spec.change_step;
    e.time_ns = run.started_ns + spec.change_step * 1'000'000;
    e.kind = "config_change";
    e.severity = "info";
    e.summary = "config changed: lr " + std::to_string(spec.lr) + " -> " + std::to_string(*spec.lr_changed_to);
    e.detail_json =
        "{\"key\":\"lr\",\"old\":" + std::to_string(spec.lr) + ",\"new\":" + std::to_string(*spec.lr_changed_to) + "}";
    b.timeline.push_back(e);
  }
  int n = 0;
  for (const auto& [kind, step] : spec.alerts) {
    store::StoredAlert a;
    a.alert.alert_id = spec.run_id + "-a" + std::to_string(n++);
    a.alert.kind = kind;
    a.alert.run_id = rid;
    a.alert.step = step;
    a.alert.time_ns = run.started_ns + step * 1'000'000;
    a.alert.summary = kind;
    jsonl::encode_alert(a.alert, &a.json);
    b.alerts.push_back(a);
  }
  store::CheckpointRow ck;
  ck.run_id = spec.run_id;
  ck.checkpoint_id = checkpoint_of(spec);
  ck.step = spec.checkpoint_step;
  ck.time_ns = run.started_ns + spec.checkpoint_step * 1'000'000;
  ck.ok = true;
  ck.uri = "file:///tmp/" + ck.checkpoint_id;
  ck.sha256 = hex64(spec.hash);
  b.checkpoints.push_back(ck);
  s.graph->write(b);
}

struct EvalSpec {
  std::string id;
  std::string version;             // of model "toy"
  RunSpec run;                     // whose checkpoint it evaluates
  std::vector<double> accuracy{};  // per item
  char dataset_hash = 'b';
  std::string dataset_version = "1";
  std::string prompt = "p1";
  std::string evaluator = "ev1";
  std::string benchmark = "digits-holdout";
};

// 40 items, item i correct when i % 10 < correct_of_10.
inline std::vector<double> scores(int correct_of_10, int n = 40) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(i % 10 < correct_of_10 ? 1.0 : 0.0);
  return v;
}

inline void write_version(store::Store& s, const EvalSpec& e) {
  store::CheckpointRecord c;
  c.checkpoint_id = checkpoint_of(e.run);
  c.run_id = e.run.run_id;
  c.step = e.run.checkpoint_step;
  c.content_hash = hex64(e.run.hash);
  c.uri = "file:///tmp/" + c.checkpoint_id;
  s.evals->register_checkpoint(c);
  store::ModelVersionRecord mv;
  mv.model_id = "toy";
  mv.version = e.version;
  mv.checkpoint_id = c.checkpoint_id;
  mv.run_id = e.run.run_id;
  s.evals->register_model_version(mv);
  if (e.id.empty()) return;

  store::EvaluationRecord r;
  r.evaluation_id = e.id;
  r.model_id = "toy";
  r.model_version = e.version;
  r.checkpoint_id = c.checkpoint_id;
  r.checkpoint_hash = c.content_hash;
  r.run_id = e.run.run_id;
  r.dataset_id = "digits-test";
  r.dataset_version = e.dataset_version;
  r.dataset_hash = hex64(e.dataset_hash);
  r.benchmark = e.benchmark;
  r.benchmark_version = "1";
  r.suite = "digits-v1";
  r.prompt_template_version = e.prompt;
  r.prompt_template_hash = hex64(e.prompt == "p1" ? 'c' : 'd');
  r.evaluator_version = e.evaluator;
  r.temperature = 0.0;
  r.decoding_json = "{}";
  r.code_commit = "c0ffee";
  r.worker_version = "w-1";
  r.library_versions = {{"numpy", "1.26"}};
  r.cache_key = hex64('e');
  r.status = "RUNNING";
  r.started_at = "2026-12-01T10:00:00Z";
  s.evals->write_evaluation(r);
  store::ShardRecord sh;
  sh.evaluation_id = e.id;
  sh.shard = 0;
  sh.dataset_partition = "test";
  sh.item_begin = 0;
  sh.item_end = static_cast<int64_t>(e.accuracy.size());
  s.evals->add_shards({sh});
  store::ShardResult res;
  res.evaluation_id = e.id;
  res.shard = 0;
  res.attempt = 1;
  res.worker = "w";
  double sum = 0;
  for (size_t i = 0; i < e.accuracy.size(); ++i) {
    store::ItemResult it;
    it.item = static_cast<int64_t>(i);
    it.item_hash = hex64('f');
    it.scores = {{"accuracy", e.accuracy[i]}};
    it.response_hash = hex64('0');
    res.items.push_back(it);
    sum += e.accuracy[i];
  }
  const double n = static_cast<double>(e.accuracy.size());
  const double mean = sum / n;
  res.metrics = {{"accuracy", mean, static_cast<int64_t>(n), std::sqrt(mean * (1 - mean) / n)}};
  s.evals->write_shard_result(res);
  s.evals->set_metrics(e.id, res.metrics);
  s.evals->set_evaluation_status(e.id, "COMPLETED", "2026-12-01T10:05:00Z");
}

// The runs and versions every walk test uses, all of model "toy":
//  v1  r-base    lr 0.05, val loss 0.40, accuracy 0.9 (production)
//  v2  r-lr      lr 0.05 -> 1.0 at step 150, val loss 0.95 after it, accuracy 0.6
//  v3  r-same    like r-base, prompt p1, accuracy 0.9
//  v4  r-same2   like r-base, prompt p2, accuracy 0.6
//  v5  r-ds      training dataset digits-v2, val loss 0.70 after step 150, accuracy 0.7
//  v6  r-same3   like r-base, evaluated on another dataset (hash 'c'), accuracy 0.8
//  v7  r-same4   registered, never evaluated
struct WalkScenario {
  RunSpec base{"r-base"}, lr{"r-lr"}, same{"r-same"}, same2{"r-same2"}, ds{"r-ds"}, same3{"r-same3"}, same4{"r-same4"};
  WalkScenario() {
    lr.lr_changed_to = 1.0;
    lr.val_loss_after = 0.95;
    lr.hash = 'b';
    same.hash = 'c';
    same2.hash = 'd';
    ds.dataset = "digits-v2";
    ds.val_loss_after = 0.70;
    ds.hash = '1';
    same3.hash = '2';
    same4.hash = '3';
  }
  void write(store::Store& s) const {
    for (const RunSpec* r : {&base, &lr, &same, &same2, &ds, &same3, &same4}) write_run(s, *r);
    write_version(s, {"e-v1", "v1", base, scores(9)});
    write_version(s, {"e-v2", "v2", lr, scores(6)});
    write_version(s, {"e-v3", "v3", same, scores(9)});
    EvalSpec v4{"e-v4", "v4", same2, scores(6)};
    v4.prompt = "p2";
    write_version(s, v4);
    write_version(s, {"e-v5", "v5", ds, scores(7)});
    EvalSpec v6{"e-v6", "v6", same3, scores(8)};
    v6.dataset_hash = 'c';
    v6.dataset_version = "2";
    write_version(s, v6);
    write_version(s, {"", "v7", same4, {}});
    store::TransitionRecord t{"toy", "v1", 1, "gated", "production", "lead", 5, "", "test"};
    s.evals->write_transitions({t});
  }
};

}  // namespace runlens::testing
