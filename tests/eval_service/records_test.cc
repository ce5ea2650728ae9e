// eval/service/records: the EvaluationRun <-> store row mapping, the one
// provenance rule (the store's) applied to an EvaluationRun, and the stable
// names of per-item statistics.
#include "eval/service/records.h"

#include <doctest/doctest.h>

#include <cmath>

namespace runlens::eval::service {
namespace {

EvaluationRun complete_run() {
  EvaluationRun r;
  const std::string h(64, 'a');
  r.evaluation_id = "e-17";
  r.model_id = "llama-x";
  r.model_version = "v142";
  r.checkpoint_id = "checkpoint-820000";
  r.checkpoint_hash = h;
  r.dataset_id = "mmlu";
  r.dataset_version = "2026-04";
  r.dataset_hash = h;
  r.benchmark = "MMLU";
  r.benchmark_version = "2026-04";
  r.prompt_template_version = "v12";
  r.prompt_template_hash = h;
  r.evaluator_version = "evaluator-v7";
  r.temperature = 0;
  r.decoding_json = R"({"max_tokens":2048,"temperature":0})";
  r.code_commit = "177c9c5";
  r.worker_version = "runlens-worker 0.1.0";
  r.library_versions = {{"torch", "2.1.0"}};
  r.cache_key = h;
  r.status = EvalStatus::kCompleted;
  r.started_at = "2026-12-01T09:00:00Z";
  r.completed_at = "2026-12-01T09:05:00Z";
  return r;
}

TEST_CASE("records: a complete run is writable and maps onto the store's row and back") {
  EvaluationRun r = complete_run();
  CHECK(check_writable(r).empty());
  store::EvaluationRecord rec = to_record(r);
  CHECK(rec.status == "COMPLETED");
  CHECK(rec.library_versions == std::vector<std::pair<std::string, std::string>>{{"torch", "2.1.0"}});
  EvaluationRun back = from_record(rec);
  CHECK(back.status == EvalStatus::kCompleted);
  CHECK(back.checkpoint_hash == r.checkpoint_hash);
  CHECK(back.library_versions == r.library_versions);
  CHECK(parse_status("CACHED") == EvalStatus::kCached);
  CHECK_FALSE(parse_status("DONE").has_value());
}

TEST_CASE("records: a result without its provenance cannot be written, and the check names what is missing") {
  EvaluationRun r = complete_run();
  r.checkpoint_hash.clear();
  r.dataset_hash = "abc123";  // not a SHA-256
  r.temperature.reset();
  CHECK(check_writable(r) ==
        "evaluation e-17 cannot be written without its provenance: missing checkpoint_hash, dataset_hash, temperature");

  r = complete_run();
  r.uses_judge = true;
  r.judge_model = "judge-1";
  CHECK(check_writable(r) ==
        "evaluation e-17 cannot be written without its provenance: missing judge_model_version, "
        "judge_prompt_version, judge_prompt_hash, rubric_version");

  r = complete_run();
  r.status = EvalStatus::kCached;
  r.completed_at.clear();
  r.library_versions.clear();
  CHECK(
      check_writable(r) ==
      "evaluation e-17 cannot be written without its provenance: missing library_versions, cached_from, completed_at");

  // Before results exist there is no worker to name: QUEUED and RUNNING rows need no worker fields.
  r = complete_run();
  r.status = EvalStatus::kQueued;
  r.completed_at.clear();
  r.code_commit.clear();
  r.worker_version.clear();
  r.library_versions.clear();
  CHECK(check_writable(r).empty());
  r.status = EvalStatus::kPartial;
  r.completed_at = "2026-12-01T09:05:00Z";
  CHECK(check_writable(r) ==
        "evaluation e-17 cannot be written without its provenance: missing code_commit, worker_version, "
        "library_versions");
  r.status = EvalStatus::kFailed;  // nothing finished: no result to attribute
  CHECK(check_writable(r).empty());

  CHECK(check_writable(EvaluationRun{})
            .find("evaluation (no id) cannot be written without its provenance: missing "
                  "evaluation_id, model_id, model_version, checkpoint_id,") == 0);
}

TEST_CASE("records: per-item statistics have stable names, and are read back by name") {
  Suite s = parse_suite(R"(suite: s
benchmark: b
version: "1"
evaluator: e
dataset: {id: d, version: "1", sha256: 46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a, items: 10}
prompt: {template: "{x}", version: p}
metrics:
  - accuracy
  - perplexity
  - bleu
  - pass@k: {k: [1]}
  - f1: {average: micro}
decoding: {temperature: 0.7, samples: 4}
partition_size: 5
priority: P2
workers: {pool: cpu, memory: 1GiB}
)");
  auto names = stat_names(s);
  CHECK(names == std::vector<std::string>{"accuracy", "perplexity.loglik", "perplexity.count", "bleu.match1",
                                          "bleu.match2", "bleu.match3", "bleu.match4", "bleu.total1", "bleu.total2",
                                          "bleu.total3", "bleu.total4", "bleu.hyp_len", "bleu.ref_len", "pass@k.n",
                                          "pass@k.c", "f1.label", "f1.pred"});
  CHECK(suite_temperature(s) == 0.7);
  store::ItemResult it;
  for (size_t i = 0; i < names.size(); ++i)
    it.scores.emplace_back(names[names.size() - 1 - i], double(names.size() - 1 - i));
  std::vector<double> out(names.size());
  REQUIRE(stats_of(it, names, out.data()));  // out of order: found by name
  for (size_t i = 0; i < names.size(); ++i) CHECK(out[i] == double(i));
  it.scores.pop_back();
  CHECK_FALSE(stats_of(it, names, out.data()));
  auto values = to_values({{"accuracy", 0.5, 10, 0.1}, {"f1", 0.4, 10, NAN}});
  CHECK(values[0].std_error == 0.1);
  CHECK_FALSE(values[1].std_error.has_value());
  CHECK(std::isnan(from_values(values)[1].std_error));
  CHECK(rfc3339_now().size() == 24);
}

}  // namespace
}  // namespace runlens::eval::service
