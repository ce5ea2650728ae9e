// The evaluation store (store/store.h, EvalStore; docs/storage.md "Evaluation
// store"): the registry's idempotent registration and hash conflicts, the
// provenance rule, shard results written once per shard, the cache, the
// reads; and `serve` writing evaluations while a replay writes a run into the
// same file.
#include <atomic>
#include <cstdlib>
#include <thread>

#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

std::string hex(char c) { return std::string(64, c); }

store::EvaluationRecord full_evaluation(const std::string& id) {
  store::EvaluationRecord r;
  r.evaluation_id = id;
  r.model_id = "llama-x";
  r.model_version = "v142";
  r.checkpoint_id = "ckpt-820000";
  r.checkpoint_hash = hex('a');
  r.run_id = "pretrain-1";
  r.dataset_id = "mmlu-data";
  r.dataset_version = "2026-04";
  r.dataset_hash = hex('b');
  r.benchmark = "MMLU";
  r.benchmark_version = "2026-04";
  r.suite = "core";
  r.prompt_template_version = "p3";
  r.prompt_template_hash = hex('c');
  r.evaluator_version = "eval-1.4";
  r.temperature = 0.0;
  r.decoding_json = R"({"max_tokens":512,"top_p":1})";
  r.code_commit = "abc123";
  r.worker_version = "worker-2.0";
  r.library_versions = {{"vllm", "0.6.1"}, {"torch", "2.4.0"}};
  r.cache_key = hex('d');
  r.status = "RUNNING";
  r.started_at = "2026-12-01T10:00:00Z";
  return r;
}

store::ShardResult shard_result(const std::string& eval, int32_t shard, int32_t attempt, int64_t first, int n) {
  store::ShardResult r;
  r.evaluation_id = eval;
  r.shard = shard;
  r.attempt = attempt;
  r.worker = "w-" + std::to_string(attempt);
  for (int i = 0; i < n; ++i) {
    store::ItemResult it;
    it.item = first + i;
    it.item_hash = hex('e');
    it.scores = {{"exact_match", (i % 2) ? 1.0 : 0.0}, {"tokens", 17.0 + i}};
    it.response_hash = hex('f');
    it.latency_ms = 12.5 + i;
    if (i == 1) it.error = "timeout";
    r.items.push_back(it);
  }
  r.metrics = {{"accuracy", 0.5, n, 0.1}, {"bleu", 0.3, n, std::nullopt}};
  return r;
}

// Writes whole evaluations (row, shards, shard results, metrics, status) into
// the store `db` until `stop` is set and at least `minimum` are written;
// returns how many, and how many were written before `stop`, or the error.
struct EvalWriter {
  int written = 0, before_stop = 0;
  std::string error;
};

EvalWriter write_evaluations(const std::string& db, const std::atomic<bool>& stop, int minimum, int shards, int items) {
  EvalWriter w;
  try {
    store::Store s = store::open_store(url_of(db));
    for (int i = 0; i < minimum || !stop; ++i) {
      std::string id = "e-" + std::to_string(i);
      s.evals->write_evaluation(full_evaluation(id));
      std::vector<store::ShardRecord> plan;
      for (int32_t k = 0; k < shards; ++k) {
        store::ShardRecord sh;
        sh.evaluation_id = id;
        sh.shard = k;
        sh.item_begin = k * items;
        sh.item_end = (k + 1) * items;
        plan.push_back(sh);
      }
      s.evals->add_shards(plan);
      for (int32_t k = 0; k < shards; ++k) {
        s.evals->set_shard_status(id, k, "RUNNING", 1, "w");
        s.evals->write_shard_result(shard_result(id, k, 1, k * items, items));
      }
      s.evals->set_metrics(id, {{"accuracy", 0.5, shards * items, 0.05}});
      s.evals->set_evaluation_status(id, "COMPLETED", "2026-12-01T10:30:00Z");
      ++w.written;
      if (!stop) ++w.before_stop;
    }
  } catch (const std::exception& ex) {
    w.error = ex.what();
  }
  return w;
}

// The run's tables of `a` and `b` are equal, and `b` holds `evaluations` whole evaluations.
void check_shared(const std::string& alone_db, const std::string& db, int evaluations, int shards, int items) {
  SqliteFile alone(alone_db), shared(db);
  for (const char* t : {"runs", "step_stats", "timeline", "alerts", "checkpoints", "rank_windows", "incidents"}) {
    std::string sql = std::string("SELECT * FROM ") + t + " ORDER BY 1, 2";
    CAPTURE(t);
    CHECK(shared.rows(sql) == alone.rows(sql));
  }
  CHECK(shared.count("step_stats") > 0);
  CHECK(shared.count("evaluation_runs") == evaluations);
  CHECK(shared.count("evaluation_shards") == evaluations * shards);
  CHECK(shared.count("evaluation_items") == evaluations * shards * items);
  CHECK(shared.rows("SELECT count(*) FROM evaluation_runs WHERE status = 'COMPLETED'") ==
        std::to_string(evaluations) + "\n");
  CHECK(shared.rows("SELECT count(*) FROM evaluation_shards WHERE result_attempt = 1") ==
        std::to_string(evaluations * shards) + "\n");
}

}  // namespace

TEST_CASE("eval store: registration is idempotent, a different hash for the same version is an error") {
  std::string dir = fresh_dir("eval-registry");
  store::Store s = store::open_store(url_of(dir + "/e.db"));
  auto& e = *s.evals;

  store::CheckpointRecord c{"ckpt-820000", "pretrain-1", 820000, hex('a'), "ckpt-810000", "s3://ckpt/820000"};
  CHECK(e.register_checkpoint(c));
  CHECK_FALSE(e.register_checkpoint(c));
  auto got = e.checkpoint("ckpt-820000");
  REQUIRE(got);
  CHECK(got->run_id == "pretrain-1");
  CHECK(got->step == 820000);
  CHECK(got->content_hash == hex('a'));
  CHECK(got->parent_id == "ckpt-810000");
  CHECK(got->uri == "s3://ckpt/820000");
  auto other = c;
  other.content_hash = hex('9');
  CHECK_THROWS_WITH_AS(
      e.register_checkpoint(other),
      doctest::Contains(("checkpoint ckpt-820000 is registered with content hash " + hex('a')).c_str()),
      store::StoreError);
  other.content_hash = "not-a-hash";
  CHECK_THROWS_WITH_AS(e.register_checkpoint(other), doctest::Contains("is not a SHA-256"), store::StoreError);

  store::ModelVersionRecord mv{"llama-x", "v142", "ckpt-820000", "pretrain-1", "registered", 0};
  CHECK(mv.id() == "llama-x:v142");
  CHECK(e.register_model_version(mv));
  CHECK_FALSE(e.register_model_version(mv));
  auto mv2 = mv;
  mv2.checkpoint_id = "ckpt-1";
  CHECK_THROWS_WITH_AS(e.register_model_version(mv2),
                       doctest::Contains("model version llama-x:v142 is registered with checkpoint ckpt-820000"),
                       store::StoreError);
  e.set_model_version_status("llama-x", "v142", "promoted");
  auto view = e.model_version("llama-x", "v142");
  REQUIRE(view);
  CHECK(view->version.status == "promoted");
  CHECK(view->version.checkpoint_id == "ckpt-820000");
  CHECK(view->version.run_id == "pretrain-1");
  CHECK(view->version.created_ns > 0);
  CHECK(view->evaluations.empty());
  CHECK_THROWS_AS(e.set_model_version_status("llama-x", "v999", "promoted"), store::StoreError);
  CHECK_FALSE(e.model_version("llama-x", "v999"));

  store::DatasetVersionRecord d{"mmlu-data", "2026-04", hex('b'), 14042};
  CHECK(e.register_dataset_version(d));
  CHECK_FALSE(e.register_dataset_version(d));
  auto dv = e.dataset_version("mmlu-data", "2026-04");
  REQUIRE(dv);
  CHECK(dv->content_hash == hex('b'));
  CHECK(dv->items == 14042);
  auto d2 = d;
  d2.content_hash = hex('8');
  CHECK_THROWS_WITH_AS(e.register_dataset_version(d2),
                       doctest::Contains("dataset version mmlu-data:2026-04 is registered with content hash"),
                       store::StoreError);
  d2 = d;
  d2.items = 1;
  CHECK_THROWS_WITH_AS(e.register_dataset_version(d2), doctest::Contains("registered with 14042 items, not 1"),
                       store::StoreError);

  store::BenchmarkVersionRecord b{"MMLU", "2026-04", hex('7')};
  CHECK(e.register_benchmark_version(b));
  CHECK_FALSE(e.register_benchmark_version(b));
  auto b2 = b;
  b2.content_hash = hex('6');
  CHECK_THROWS_WITH_AS(e.register_benchmark_version(b2),
                       doctest::Contains("benchmark version MMLU:2026-04 is registered with content hash"),
                       store::StoreError);
  {
    SqliteFile f(dir + "/e.db");
    CHECK(f.rows("SELECT model_id FROM models") == "llama-x\n");
    CHECK(f.rows("SELECT dataset_id FROM datasets") == "mmlu-data\n");
    CHECK(f.rows("SELECT benchmark FROM benchmarks") == "MMLU\n");
    CHECK(f.count("benchmark_versions") == 1);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("eval store: an evaluation without provenance is refused with the evaluation service's message") {
  std::string dir = fresh_dir("eval-provenance");
  store::Store s = store::open_store(url_of(dir + "/e.db"));
  auto r = full_evaluation("e-17");
  r.checkpoint_hash = "";
  r.dataset_hash = "abc";
  CHECK_THROWS_WITH_AS(
      s.evals->write_evaluation(r),
      "evaluation e-17 cannot be written without its provenance: missing checkpoint_hash, dataset_hash",
      store::StoreError);
  auto judged = full_evaluation("e-18");
  judged.uses_judge = true;
  judged.judge_model = "judge";
  CHECK(store::check_writable(judged) ==
        "evaluation e-18 cannot be written without its provenance: missing judge_model_version, "
        "judge_prompt_version, judge_prompt_hash, rubric_version");
  auto done = full_evaluation("e-19");
  done.status = "CACHED";
  CHECK(store::missing_provenance(done) == std::vector<std::string>{"cached_from", "completed_at"});
  CHECK(store::check_writable(store::EvaluationRecord{}).find("evaluation (no id) cannot be written") == 0);
  // Worker provenance is needed once there are results, not before.
  auto queued = full_evaluation("e-21");
  queued.status = "QUEUED";
  queued.code_commit = queued.worker_version = "";
  queued.library_versions.clear();
  CHECK(store::check_writable(queued) == "");
  queued.status = "COMPLETED";
  queued.completed_at = "2026-12-01T10:30:00Z";
  CHECK(store::missing_provenance(queued) ==
        std::vector<std::string>{"code_commit", "worker_version", "library_versions"});
  // Nothing was written; a status that needs what the row lacks is refused too.
  CHECK_FALSE(s.evals->evaluation("e-17"));
  s.evals->write_evaluation(full_evaluation("e-20"));
  CHECK_THROWS_WITH_AS(s.evals->set_evaluation_status("e-20", "COMPLETED", ""), doctest::Contains("completed_at"),
                       store::StoreError);
  CHECK(s.evals->evaluation("e-20")->run.status == "RUNNING");
  CHECK_THROWS_AS(s.evals->set_evaluation_status("nope", "FAILED", "2026-12-01T11:00:00Z"), store::StoreError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("eval store: an evaluation, its shards, items, metrics and cache round-trip; duplicates are ignored") {
  std::string dir = fresh_dir("eval-roundtrip");
  std::string db = dir + "/e.db";
  store::Store s = store::open_store(url_of(db));
  auto& e = *s.evals;
  auto r = full_evaluation("e-1");
  e.write_evaluation(r);
  auto v = e.evaluation("e-1");
  REQUIRE(v);
  const auto& got = v->run;
  CHECK(got.evaluation_id == "e-1");
  CHECK(got.model_id == r.model_id);
  CHECK(got.model_version == r.model_version);
  CHECK(got.checkpoint_id == r.checkpoint_id);
  CHECK(got.checkpoint_hash == r.checkpoint_hash);
  CHECK(got.run_id == r.run_id);
  CHECK(got.dataset_id == r.dataset_id);
  CHECK(got.dataset_version == r.dataset_version);
  CHECK(got.dataset_hash == r.dataset_hash);
  CHECK(got.benchmark == r.benchmark);
  CHECK(got.benchmark_version == r.benchmark_version);
  CHECK(got.suite == r.suite);
  CHECK(got.prompt_template_version == r.prompt_template_version);
  CHECK(got.prompt_template_hash == r.prompt_template_hash);
  CHECK(got.evaluator_version == r.evaluator_version);
  CHECK_FALSE(got.uses_judge);
  CHECK(got.temperature == 0.0);
  CHECK(got.decoding_json == r.decoding_json);
  CHECK(got.code_commit == r.code_commit);
  CHECK(got.worker_version == r.worker_version);
  CHECK(got.library_versions ==
        std::vector<std::pair<std::string, std::string>>{{"torch", "2.4.0"}, {"vllm", "0.6.1"}});  // sorted
  CHECK(got.cache_key == r.cache_key);
  CHECK(got.status == "RUNNING");
  CHECK(got.started_at == r.started_at);
  CHECK(got.completed_at.empty());
  CHECK(got.created_ns > 0);
  CHECK(v->shards.empty());

  // A judged evaluation keeps its judge fields.
  auto j = full_evaluation("e-2");
  j.uses_judge = true;
  j.judge_model = "judge-x";
  j.judge_model_version = "j1";
  j.judge_prompt_version = "jp2";
  j.judge_prompt_hash = hex('1');
  j.rubric_version = "r3";
  j.benchmark = "MT-Bench";
  j.temperature = 0.7;
  e.write_evaluation(j);
  auto jv = e.evaluation("e-2");
  REQUIRE(jv);
  CHECK(jv->run.uses_judge);
  CHECK(jv->run.judge_model == "judge-x");
  CHECK(jv->run.judge_model_version == "j1");
  CHECK(jv->run.judge_prompt_version == "jp2");
  CHECK(jv->run.judge_prompt_hash == hex('1'));
  CHECK(jv->run.rubric_version == "r3");
  CHECK(jv->run.temperature == 0.7);

  // Shards: planned once (a second plan keeps the rows), then run.
  std::vector<store::ShardRecord> plan;
  for (int32_t i = 0; i < 3; ++i) {
    store::ShardRecord sh;
    sh.evaluation_id = "e-1";
    sh.shard = i;
    sh.dataset_partition = "test";
    sh.item_begin = i * 10;
    sh.item_end = i * 10 + 10;
    sh.cache_key = i == 0 ? hex('2') : "";
    plan.push_back(sh);
  }
  e.add_shards(plan);
  e.set_shard_status("e-1", 1, "RUNNING", 1, "w-1");
  e.add_shards(plan);
  CHECK_THROWS_AS(e.set_shard_status("e-1", 7, "RUNNING", 1, "w-1"), store::StoreError);

  CHECK(e.write_shard_result(shard_result("e-1", 0, 1, 0, 10)));
  // The same attempt delivered again, and a late retry, are ignored.
  auto again = shard_result("e-1", 0, 1, 0, 10);
  again.items[0].latency_ms = 999;
  CHECK_FALSE(e.write_shard_result(again));
  CHECK_FALSE(e.write_shard_result(shard_result("e-1", 0, 2, 0, 10)));
  CHECK_THROWS_AS(e.write_shard_result(shard_result("e-1", 9, 1, 90, 1)), store::StoreError);

  v = e.evaluation("e-1");
  REQUIRE(v);
  REQUIRE(v->shards.size() == 3);
  CHECK(v->shards_completed == 1);
  CHECK(v->shards[0].status == "COMPLETED");
  CHECK(v->shards[0].attempt == 1);
  CHECK(v->shards[0].result_attempt == 1);
  CHECK(v->shards[0].worker == "w-1");
  CHECK(v->shards[0].dataset_partition == "test");
  CHECK(v->shards[0].item_begin == 0);
  CHECK(v->shards[0].item_end == 10);
  CHECK(v->shards[1].status == "RUNNING");
  CHECK(v->shards[1].attempt == 1);
  CHECK_FALSE(v->shards[1].result_attempt);
  CHECK(v->shards[2].status == "QUEUED");

  auto items = e.items("e-1", std::nullopt);
  REQUIRE(items.size() == 10);
  CHECK(items[0].item == 0);
  CHECK(items[0].shard == 0);
  CHECK(items[0].attempt == 1);
  CHECK(items[0].latency_ms == 12.5);  // the duplicate's 999 was not written
  CHECK(items[0].item_hash == hex('e'));
  CHECK(items[0].response_hash == hex('f'));
  CHECK(items[3].scores == std::vector<std::pair<std::string, double>>{{"exact_match", 1.0}, {"tokens", 20.0}});
  CHECK(items[1].error == "timeout");
  CHECK(items[2].error.empty());
  CHECK(e.items("e-1", 1).empty());
  auto sm = e.shard_metrics("e-1", 0);
  REQUIRE(sm.size() == 2);
  CHECK(sm[0].name == "accuracy");
  CHECK(sm[0].value == 0.5);
  CHECK(sm[0].n == 10);
  CHECK(sm[0].std_error == 0.1);
  CHECK_FALSE(sm[1].std_error);

  // The shard's cache key now points at it; an evaluation-wide entry too.
  auto hit = e.cache_lookup(hex('2'));
  REQUIRE(hit);
  CHECK(hit->evaluation_id == "e-1");
  CHECK(hit->shard == 0);
  CHECK_FALSE(e.cache_lookup(hex('3')));
  e.put_cache({r.cache_key, "e-1", std::nullopt});
  hit = e.cache_lookup(r.cache_key);
  REQUIRE(hit);
  CHECK_FALSE(hit->shard);

  // Finishing: the rest of the shards, the metrics, the status.
  CHECK(e.write_shard_result(shard_result("e-1", 1, 1, 10, 10)));
  CHECK(e.write_shard_result(shard_result("e-1", 2, 3, 20, 10)));
  e.set_metrics("e-1", {{"accuracy", 0.5, 30, 0.09}, {"f1", 0.4, 30, std::nullopt}});
  e.set_metrics("e-1", {{"accuracy", 0.55, 30, 0.09}, {"f1", 0.4, 30, std::nullopt}});  // replaces
  e.set_evaluation_status("e-1", "COMPLETED", "2026-12-01T10:30:00Z");
  v = e.evaluation("e-1");
  REQUIRE(v);
  CHECK(v->shards_completed == 3);
  CHECK(v->shards[2].attempt == 3);
  CHECK(v->run.status == "COMPLETED");
  CHECK(v->run.completed_at == "2026-12-01T10:30:00Z");
  REQUIRE(v->metrics.size() == 2);
  CHECK(v->metrics[0].name == "accuracy");
  CHECK(v->metrics[0].value == 0.55);
  CHECK(v->metrics[0].n == 30);
  CHECK(v->metrics[0].std_error == 0.09);
  CHECK_FALSE(v->metrics[1].std_error);
  CHECK(e.items("e-1", std::nullopt).size() == 30);
  CHECK_THROWS_AS(e.set_metrics("nope", {}), store::StoreError);

  // Listing by model version and by benchmark; the model version with its evaluations.
  e.register_model_version({"llama-x", "v142", "", "", "registered", 0});
  store::EvaluationFilter by_model;
  by_model.model_id = "llama-x";
  by_model.model_version = "v142";
  CHECK(e.evaluations(by_model).size() == 2);
  store::EvaluationFilter by_bench;
  by_bench.benchmark = "MT-Bench";
  auto listed = e.evaluations(by_bench);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].evaluation_id == "e-2");
  by_bench.benchmark = "MMLU";
  by_bench.benchmark_version = "2026-04";
  CHECK(e.evaluations(by_bench).size() == 1);
  by_bench.benchmark_version = "1999";
  CHECK(e.evaluations(by_bench).empty());
  auto mv = e.model_version("llama-x", "v142");
  REQUIRE(mv);
  REQUIRE(mv->evaluations.size() == 2);
  CHECK(mv->evaluations[0].evaluation_id == "e-1");
  CHECK(mv->evaluations[1].evaluation_id == "e-2");
  // The lineage sees the evaluations (it reads evaluation_runs, as in version 2).
  auto lineage = s.graph->lineage("e-1");
  REQUIRE(lineage.size() == 1);
  CHECK(lineage[0].type == "evaluation_run");
  REQUIRE(lineage[0].children.size() == 1);
  CHECK(lineage[0].children[0].id == "llama-x:v142");
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT count(*) FROM evaluation_scores WHERE evaluation_id = 'e-1'") == "2\n");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("eval store: quality_gates rows round-trip; read by gate id (and its /children) or by evaluation") {
  std::string dir = fresh_dir("eval-gates");
  store::Store s = store::open_store(url_of(dir + "/e.db"));
  auto& e = *s.evals;
  store::GateRow d{"g-1", "e-2", "MMLU", "", 0.05, std::nullopt, false, 100, R"({"verdict":"FAIL"})"};
  store::GateRow m{"g-1/accuracy", "e-2", "MMLU", "accuracy", -0.02, -0.35, false, 100, ""};
  store::GateRow other{"g-10", "e-3", "", "", 0.05, std::nullopt, true, 0, "{}"};
  e.write_gate_rows({m, d, other});
  auto rows = e.gate_rows("g-1");
  REQUIRE(rows.size() == 2);  // not g-10
  CHECK(rows[0].gate_id == "g-1");
  CHECK(rows[0].benchmark == "MMLU");
  CHECK(rows[0].decision_json == R"({"verdict":"FAIL"})");
  CHECK(rows[0].metric.empty());
  CHECK(rows[0].threshold == std::optional<double>(0.05));
  CHECK(!rows[0].observed);
  CHECK(rows[0].passed == std::optional<bool>(false));
  CHECK(rows[0].decided_ns == 100);
  CHECK(rows[1].gate_id == "g-1/accuracy");
  CHECK(rows[1].decision_json.empty());
  CHECK(rows[1].observed == std::optional<double>(-0.35));
  CHECK(rows[1].threshold == std::optional<double>(-0.02));
  auto by_eval = e.gate_rows_of_evaluation("e-2");
  REQUIRE(by_eval.size() == 2);
  auto o = e.gate_rows("g-10");
  REQUIRE(o.size() == 1);
  CHECK(o[0].decided_ns > 0);  // 0: set by the store
  CHECK(o[0].benchmark.empty());
  {
    SqliteFile f(dir + "/e.db");
    CHECK(f.rows("SELECT gate_id, quote(benchmark), decision_json FROM quality_gates ORDER BY gate_id") ==
          "g-1|'MMLU'|{\"verdict\":\"FAIL\"}\ng-1/accuracy|'MMLU'|NULL\ng-10|NULL|{}\n");
  }
  // Written again: replaced, not duplicated.
  d.passed = true;
  e.write_gate_rows({d});
  rows = e.gate_rows("g-1");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].passed == std::optional<bool>(true));
}

TEST_CASE("eval store: model_version_transitions round-trip; read for one version or all of a model, by seq") {
  std::string dir = fresh_dir("eval-transitions");
  store::Store s = store::open_store(url_of(dir + "/e.db"));
  auto& e = *s.evals;
  store::TransitionRecord t1{"llama-x", "v142", 1, "registered", "evaluated", "alice", 100, "", ""};
  store::TransitionRecord t2{"llama-x", "v141", 2, "production", "retired", "bob", 200, "", "superseded"};
  store::TransitionRecord t3{"llama-x", "v142", 3, "canary", "production", "bob", 0, "g-1", ""};
  store::TransitionRecord other{"llama-xl", "v142", 1, "registered", "evaluated", "carol", 50, "", ""};
  e.write_transitions({t3, other, t1, t2});
  auto v = e.transitions("llama-x", "v142");
  REQUIRE(v.size() == 2);
  CHECK(v[0].seq == 1);
  CHECK(v[0].from_status == "registered");
  CHECK(v[0].to_status == "evaluated");
  CHECK(v[0].actor == "alice");
  CHECK(v[0].decided_ns == 100);
  CHECK(v[0].gate_id.empty());
  CHECK(v[1].seq == 3);
  CHECK(v[1].gate_id == "g-1");
  CHECK(v[1].decided_ns > 0);  // 0: set by the store
  auto all = e.transitions("llama-x", "");
  REQUIRE(all.size() == 3);  // not llama-xl
  CHECK(all[1].model_version == "v141");
  CHECK(all[1].reason == "superseded");
  CHECK(e.transitions("llama", "").empty());
  CHECK(e.gate_rows_of_evaluation("g-1").empty());  // no longer quality_gates rows
  {
    SqliteFile f(dir + "/e.db");
    CHECK(f.rows("SELECT count(*) FROM quality_gates") == "0\n");
    CHECK(f.rows("SELECT quote(gate_id), quote(reason) FROM model_version_transitions WHERE seq = 1 AND "
                 "model_id = 'llama-x'") == "NULL|NULL\n");
  }
  // Written again: replaced, not duplicated.
  t1.actor = "dave";
  e.write_transitions({t1});
  v = e.transitions("llama-x", "v142");
  REQUIRE(v.size() == 2);
  CHECK(v[0].actor == "dave");
  std::filesystem::remove_all(dir);
}

TEST_CASE("eval store: a replay writes a run while evaluations are written into the same store; nothing lost") {
  std::string dir = fresh_dir("eval-concurrent");
  synth::Options o = small_run("busy-run", 400, 5);
  std::string input = write_jsonl(dir + "/in.jsonl", synth_run(o, {}, 50));
  std::string pipeline = store_pipeline(dir);
  // The run alone, for comparison.
  replay_into({input}, dir + "/alone", dir + "/alone.db", 2, pipeline);

  std::string db = dir + "/shared.db";
  { store::open_store(url_of(db)); }
  constexpr int kShards = 3, kItems = 25;
  std::atomic<bool> replay_done{false};
  EvalWriter w;
  std::thread evals([&] { w = write_evaluations(db, replay_done, 20, kShards, kItems); });
  replay_into({input}, dir + "/shared", db, 2, pipeline);
  replay_done = true;
  evals.join();
  CHECK(w.error == "");
  CHECK(w.before_stop > 0);
  MESSAGE(w.written << " evaluations written, " << w.before_stop << " while the replay ran");
  check_shared(dir + "/alone.db", db, w.written, kShards, kItems);
  std::filesystem::remove_all(dir);
}

TEST_CASE("eval store: `runlens replay` in another process and evaluation writes share one store") {
  std::string dir = fresh_dir("eval-process");
  synth::Options o = small_run("proc-run", 600, 7);
  std::string input = write_jsonl(dir + "/in.jsonl", synth_run(o, {}, 50));
  auto replay = [&](const std::string& name, const std::string& db) { return replay_process(input, dir, name, db); };
  REQUIRE(replay("alone", dir + "/alone.db") == 0);
  std::string db = dir + "/shared.db";
  { store::open_store(url_of(db)); }
  constexpr int kShards = 2, kItems = 40;
  std::atomic<bool> replay_done{false};
  EvalWriter w;
  std::thread evals([&] { w = write_evaluations(db, replay_done, 20, kShards, kItems); });
  int rc = replay("shared", db);
  replay_done = true;
  evals.join();
  CHECK(rc == 0);
  CHECK(w.error == "");
  CHECK(w.before_stop > 0);
  MESSAGE(w.written << " evaluations written, " << w.before_stop << " while the replay ran");
  check_shared(dir + "/alone.db", db, w.written, kShards, kItems);
  std::filesystem::remove_all(dir);
}
