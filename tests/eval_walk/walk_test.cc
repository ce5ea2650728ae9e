// The regression walk's pure parts: the effective config at a checkpoint,
// validation loss at a step, the paired difference (checked by hand), the
// model-failure tree's signals and decisions on store rows built here.
#include "eval/walk/walk.h"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "runtime/status.h"
#include "tests/eval_walk/walk_fixture.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

store::TimelineEntry change(int64_t step, const std::string& kind, const std::string& detail) {
  store::TimelineEntry e;
  e.run_id = "r";
  e.step = step;
  e.kind = kind;
  e.detail_json = detail;
  return e;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Opened {
  std::string dir;
  store::Store s;
};

Opened scenario_store(const std::string& name) {
  Opened o;
  o.dir = walk_dir(name);
  o.s = store::open_store(store::store_url_of_file(o.dir + "/runlens.db"));
  WalkScenario{}.write(o.s);
  return o;
}

walk::ModelComparison compare(store::Store& s, const std::string& left, const std::string& right, walk::VersionSide* l,
                              walk::VersionSide* r) {
  *l = walk::read_version(s, "toy", left);
  *r = walk::read_version(s, "toy", right);
  return walk::compare_versions(*l, *r, *walk::builtin_model_rules());
}

}  // namespace

TEST_CASE("effective config: run_start config plus config changes up to the checkpoint's step") {
  store::RunRow run;
  run.config = {{"lr", Value::of(0.05)}, {"batch_size", Value::of(32.0)}};
  std::vector<store::TimelineEntry> tl = {
      change(400, "config_change", R"({"key":"batch_size","old":32,"new":64})"),
      change(150, "config_change", R"({"key":"lr","old":0.05,"new":1.0})"),
      change(200, "lr_change", R"({"old":1.0,"new":0.5,"factor":0.5})"),
      change(250, "config_change", R"({"key":"precision","new":"bf16"})"),
      change(260, "config_change", "not json"),  // ignored
  };
  auto at100 = walk::effective_config(run, tl, 100);
  REQUIRE(at100.size() == 2);
  CHECK(at100[0].key == "lr");
  CHECK(at100[0].value.number == 0.05);
  CHECK(at100[0].step == 0);

  auto at300 = walk::effective_config(run, tl, 300);
  REQUIRE(at300.size() == 3);
  CHECK(at300[0].value.number == 0.5);  // the config change at 150, then the inferred LR change at 200
  CHECK(at300[0].step == 200);
  CHECK(at300[1].key == "batch_size");
  CHECK(at300[1].value.number == 32);
  CHECK(at300[1].step == 0);
  CHECK(at300[2].key == "precision");
  CHECK(at300[2].value.text == "bf16");
  CHECK(at300[2].step == 250);

  auto at150 = walk::effective_config(run, tl, 150);
  CHECK(walk::find_key(at150, "lr")->value.number == 1.0);
  CHECK(walk::find_key(at150, "lr")->step == 150);
  auto all = walk::effective_config(run, tl, std::nullopt);
  CHECK(walk::find_key(all, "batch_size")->value.number == 64);
  CHECK(walk::find_key(all, "batch_size")->step == 400);
}

TEST_CASE("validation loss at a checkpoint: the last one reported at or before its step") {
  std::vector<store::StepRow> steps(4);
  const double v[] = {0.9, 0.7, NAN, 0.5};
  for (int i = 0; i < 4; ++i) {
    steps[i].stats.step = 100 * (i + 1);
    steps[i].stats.val_loss = v[i];
  }
  steps[1].stats.val_loss.reset();
  CHECK(walk::val_loss_at(steps, 50) == std::nullopt);
  CHECK(walk::val_loss_at(steps, 100) == 0.9);
  CHECK(walk::val_loss_at(steps, 350) == 0.9);  // 200 has none, 300 is NaN
  CHECK(walk::val_loss_at(steps, 400) == 0.5);
  CHECK(walk::val_loss_at(steps, std::nullopt) == 0.5);
}

TEST_CASE("paired difference: mean, standard error, interval and p-value agree with a direct computation") {
  walk::EvalResult l, r;
  for (auto* e : {&l, &r}) {
    e->record.benchmark = "b";
    e->record.dataset_hash = hex64('b');
  }
  l.record.evaluation_id = "L";
  r.record.evaluation_id = "R";
  const std::vector<double> ls = scores(9), rs = scores(6);
  for (size_t i = 0; i < ls.size(); ++i) {
    l.items.push_back({static_cast<int64_t>(i), 0, 0, "", {{"accuracy", ls[i]}}, {}, "", 0, ""});
    r.items.push_back(
        {static_cast<int64_t>(ls.size() - 1 - i), 0, 0, "", {{"accuracy", rs[ls.size() - 1 - i]}}, {}, "", 0, ""});
  }
  l.metrics = {{"accuracy", 0.9, 40, std::nullopt}};
  r.metrics = {{"accuracy", 0.6, 40, std::nullopt}};
  walk::BenchmarkComparison b = walk::compare_benchmark(l, r);
  REQUIRE(b.metrics.size() == 1);
  const walk::MetricComparison& m = b.metrics[0];
  CHECK(b.paired);
  CHECK(m.method == "paired");
  CHECK(m.n == 40);
  // d_i = -1 for 12 of the 40 items (i % 10 in 6..8), else 0.
  const double mean = -12.0 / 40;
  double ss = 0;
  for (int i = 0; i < 40; ++i) {
    const double d = (i % 10 >= 6 && i % 10 <= 8) ? -1.0 : 0.0;
    ss += (d - mean) * (d - mean);
  }
  const double se = std::sqrt(ss / 39) / std::sqrt(40.0);
  CHECK(*m.difference == doctest::Approx(-0.3));
  CHECK(*m.std_error == doctest::Approx(se).epsilon(1e-12));
  CHECK(*m.std_error == doctest::Approx(0.07338).epsilon(1e-3));
  // t(0.975, 39) = 2.0227
  CHECK(*m.ci_low == doctest::Approx(-0.3 - 2.0227 * se).epsilon(1e-4));
  CHECK(*m.ci_high == doctest::Approx(-0.3 + 2.0227 * se).epsilon(1e-4));
  // t = -4.088 with 39 df: two-sided p = 0.00021
  CHECK(*m.p_value == doctest::Approx(2.1e-4).epsilon(0.05));
  CHECK(m.significant);
}

TEST_CASE("unpaired datasets are flagged: no paired statistics, no significance") {
  walk::EvalResult l, r;
  l.record = {};
  l.record.benchmark = r.record.benchmark = "b";
  l.record.dataset_hash = hex64('b');
  r.record.dataset_hash = hex64('c');
  l.record.dataset_id = r.record.dataset_id = "d";
  l.record.dataset_version = "1";
  r.record.dataset_version = "2";
  for (int i = 0; i < 10; ++i) {
    l.items.push_back({i, 0, 0, "", {{"accuracy", 1.0}}, {}, "", 0, ""});
    r.items.push_back({i, 0, 0, "", {{"accuracy", 0.0}}, {}, "", 0, ""});
  }
  l.metrics = {{"accuracy", 0.9, 100, 0.03}};
  r.metrics = {{"accuracy", 0.5, 100, 0.04}};
  walk::BenchmarkComparison b = walk::compare_benchmark(l, r);
  CHECK_FALSE(b.paired);
  CHECK(b.note.find("not paired") != std::string::npos);
  CHECK(b.note.find("d@1") != std::string::npos);
  REQUIRE(b.metrics.size() == 1);
  CHECK(b.metrics[0].method == "unpaired");
  CHECK_FALSE(b.metrics[0].significant);
  CHECK_FALSE(b.metrics[0].p_value.has_value());
  CHECK(*b.metrics[0].difference == doctest::Approx(-0.4));
  CHECK(*b.metrics[0].std_error == doctest::Approx(0.05));
}

TEST_CASE("the model-failure tree: shipped, compiled in, explains the evaluation alert kinds") {
  auto rules = walk::builtin_model_rules();
  REQUIRE(rules->trees.size() == 1);
  auto disk =
      walk::parse_model_rules({{"configs/rules/model/model_failure.yaml",
                                read(std::string(RUNLENS_SOURCE_DIR) + "/configs/rules/model/model_failure.yaml")}});
  CHECK(disk.trees[0].leaves.size() == rules->trees[0].leaves.size());
  for (const char* kind : {"benchmark_regression", "safety_regression", "latency_regression"}) {
    CAPTURE(kind);
    CHECK(rules->tree_for(kind) >= 0);
  }
  // A wrong signal is reported at its file:line:col.
  try {
    walk::parse_model_rules({{"m.yaml",
                              "name: m\nsymptoms: [benchmark_regression]\npriority: 0\ntree:\n  if: val_los_delta > 0\n"
                              "  then: {cause: config_change, owner: training, recommendation: r}\n"
                              "  else: {cause: unknown, owner: evaluation, recommendation: r}\n"}});
    FAIL("no error");
  } catch (const runtime::ConfigError& e) {
    REQUIRE(!e.diagnostics().empty());
    CHECK(e.diagnostics()[0].str().find("m.yaml:5:7:") == 0);
    CHECK(e.diagnostics()[0].str().find("did you mean 'val_loss_delta'") != std::string::npos);
  }
}

TEST_CASE("LR pair: the candidate's lr changed at step 150 and val loss rose: config_change naming lr and the step") {
  auto o = scenario_store("lr");
  walk::VersionSide l, r;
  auto c = compare(o.s, "v1", "v2", &l, &r);
  CHECK(r.step == 300);
  CHECK(c.signals.values.at("lr") == 1.0);
  CHECK(c.signals.values.at("baseline_lr") == 0.05);
  CHECK(c.signals.values.at("lr_ratio") == doctest::Approx(20));
  CHECK(c.signals.values.at("lr_step") == 150);
  CHECK(c.signals.values.at("val_loss_delta") == doctest::Approx(0.55));
  CHECK(c.signals.changed_keys.at("lr") == 150);
  CHECK(c.decision.cause == "config_change");
  CHECK(c.decision.owner == "training");
  CHECK(c.decision.summary.find("lr 0.05 → 1.0 at step 150") != std::string::npos);
  CHECK(c.decision.path.size() == 2);
  CHECK(c.decision.path[0].value == "true");
  // The config diff marks lr with the step it changed; other keys are the same.
  bool lr_seen = false;
  for (const auto& d : c.config) {
    if (d.key == "lr") {
      lr_seen = true;
      CHECK(d.changed);
      CHECK(d.right->step == 150);
      CHECK(d.left->step == 0);
    } else {
      CHECK_FALSE(d.changed);
    }
  }
  CHECK(lr_seen);
  REQUIRE(c.benchmarks.size() == 1);
  CHECK(c.benchmarks[0].metrics[0].difference == doctest::Approx(-0.3));
  CHECK(c.benchmarks[0].metrics[0].significant);
  REQUIRE(c.conclusion.size() >= 4);
  CHECK(c.conclusion[0] == "Infrastructure appears healthy.");
  CHECK(c.conclusion[1] == "Training configuration changed: lr 0.05 → 1 at step 150.");
  CHECK(c.conclusion[2] == "Validation loss 0.4 → 0.95 (regression).");
}

TEST_CASE("the effective config stops at the checkpoint: a change after it is not the cause") {
  auto dir = walk_dir("late");
  store::Store s = store::open_store(store::store_url_of_file(dir + "/runlens.db"));
  RunSpec base{"r-a"}, late{"r-b"};
  late.lr_changed_to = 1.0;
  late.change_step = 350;  // after the checkpoint at 300
  late.hash = 'b';
  write_run(s, base);
  write_run(s, late);
  write_version(s, {"e-a", "a", base, scores(9)});
  write_version(s, {"e-b", "b", late, scores(9)});
  walk::VersionSide l, r;
  auto c = compare(s, "a", "b", &l, &r);
  CHECK(c.signals.changed_keys.empty());
  CHECK(c.signals.values.at("lr_ratio") == 1.0);
  CHECK(c.signals.values.at("val_loss_delta") == 0.0);
  CHECK(c.decision.cause == "unknown");
  CHECK(c.decision.owner == "evaluation");
  // This store has no production version: explain needs a baseline named.
  try {
    walk::model_explain(s, "toy", "b", "");
    FAIL("no error");
  } catch (const walk::WalkError& e) {
    CHECK(e.status == 409);
    CHECK(e.message == "no baseline named and toy has no production version to compare with: pass baseline=VERSION");
  }
  CHECK(walk::model_explain(s, "toy", "b", "toy:a").find(R"("baselineFrom":"named","modelVersion":"toy:b")") == 1);
}

TEST_CASE("prompt pair with equal validation loss: evaluation_mismatch, owner evaluation") {
  auto o = scenario_store("prompt");
  walk::VersionSide l, r;
  auto c = compare(o.s, "v3", "v4", &l, &r);
  CHECK(c.signals.values.at("val_loss_delta") == 0.0);
  CHECK(c.signals.values.at("prompt_version_changed") == 1.0);
  CHECK(c.signals.values.at("dataset_version_changed") == 0.0);
  CHECK(c.decision.cause == "evaluation_mismatch");
  CHECK(c.decision.owner == "evaluation");
  CHECK(c.decision.summary.find("validation loss unchanged (0.4 → 0.4) but the benchmark moved by -0.3") == 0);
  REQUIRE(c.benchmarks.size() == 1);
  CHECK(c.benchmarks[0].paired);
  bool prompt_marked = false;
  for (const auto& v : c.benchmarks[0].versions) {
    if (v.name == "prompt") prompt_marked = v.changed && v.left == "p1" && v.right == "p2";
  }
  CHECK(prompt_marked);
  CHECK(c.conclusion[1] == "Training configuration unchanged.");
  CHECK(c.conclusion[3] ==
        "digits-holdout accuracy 0.9 → 0.6 (-0.3, p = 0.0002101, significant); evaluation "
        "changed: prompt p1 → p2.");
}

TEST_CASE("dataset pair: the training dataset changed and val loss rose: dataset_change, owner data") {
  auto o = scenario_store("dataset");
  walk::VersionSide l, r;
  auto c = compare(o.s, "v1", "v5", &l, &r);
  CHECK(c.signals.values.at("training_dataset_changed") == 1.0);
  CHECK(c.decision.cause == "dataset_change");
  CHECK(c.decision.owner == "data");
  CHECK(c.conclusion[1] == "Training configuration changed: training dataset digits-v1 → digits-v2.");
}

TEST_CASE("infrastructure incidents before the checkpoint count; later ones do not") {
  auto dir = walk_dir("infra");
  store::Store s = store::open_store(store::store_url_of_file(dir + "/runlens.db"));
  RunSpec base{"r-a"}, bad{"r-b"};
  bad.val_loss_after = 0.9;
  bad.alerts = {{"xid_error", 120}, {"straggler", 130}, {"nan_loss", 140}, {"thermal_throttle", 380}};
  bad.hash = 'b';
  write_run(s, base);
  write_run(s, bad);
  write_version(s, {"e-a", "a", base, scores(9)});
  write_version(s, {"e-b", "b", bad, scores(6)});
  walk::VersionSide l, r;
  auto c = compare(s, "a", "b", &l, &r);
  CHECK(c.right_health.alerts == 3);
  CHECK(c.right_health.infra_alerts == 2);
  CHECK_FALSE(c.right_health.healthy());
  CHECK(c.right_health.by_kind.count("thermal_throttle") == 0);
  CHECK(c.decision.cause == "hardware_fault");
  CHECK(c.decision.owner == "infrastructure");
  CHECK(c.conclusion[0].find("Infrastructure was not healthy in the candidate's run r-b up to step 300") == 0);
}

TEST_CASE("model versions: unknown, no evaluations, no production version") {
  auto o = scenario_store("errors");
  try {
    walk::model_compare(o.s, "toy", "v1", "v9");
    FAIL("no error");
  } catch (const walk::WalkError& e) {
    CHECK(e.status == 404);
    CHECK(e.message == "unknown model version 'toy:v9'");
  }
  try {
    walk::model_explain(o.s, "toy", "v7", "v1");
    FAIL("no error");
  } catch (const walk::WalkError& e) {
    CHECK(e.status == 409);
    CHECK(e.message.find("model version toy:v7 has no COMPLETED, PARTIAL or CACHED evaluation") == 0);
  }
  try {
    walk::model_explain(o.s, "other", "v1", "");
    FAIL("no error");
  } catch (const walk::WalkError& e) {
    CHECK(e.status == 404);
  }
  // No baseline: the production version (v1).
  std::string json = walk::model_explain(o.s, "toy", "v2", "");
  CHECK(json.find(R"("baselineFrom":"production","modelVersion":"toy:v2","baseline":"toy:v1")") == 1);
}
