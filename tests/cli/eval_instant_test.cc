// The instant runner: its statistics are valid for every metric the
// service knows (the aggregator accepts them whole), deterministic, and
// refused with a reason for a metric whose statistics it does not know.
#include "cli/eval_instant.h"

#include <doctest/doctest.h>

#include <cmath>

#include "eval/aggregator.h"
#include "eval/metric.h"
#include "eval/shard_plan.h"
#include "eval/suite.h"
#include "eval/wire/wire.h"

namespace runlens::cli {
namespace {

eval::Suite suite_with(const std::string& metrics_yaml, bool judge) {
  std::string text =
      "suite: instant-v1\nbenchmark: b\nversion: \"1\"\nevaluator: any\n"
      "dataset: {id: d, version: \"1\", sha256: " +
      std::string(64, 'a') +
      ", items: 1000, first_item: 7}\n"
      "prompt: {template: \"{x}\", version: v1}\nmetrics:\n" +
      metrics_yaml + "partition_size: 250\npriority: P3\nworkers: {pool: cpu, memory: 1GiB}\n";
  if (judge)
    text +=
        "judge: {model: j, model_version: \"1\", prompt: p, prompt_version: p1, rubric_version: r1, criteria: [c], "
        "scale: [1, 10]}\n";
  return eval::parse_suite(text, "instant.yaml");
}

eval::wire::Assign assign_for(const eval::Suite& s, const eval::Shard& shard) {
  eval::wire::Assign a;
  a.evaluation_id = "ev-instant";
  a.shard = shard.partition;
  a.begin = shard.items.begin;
  a.end = shard.items.end;
  a.suite = eval::wire::suite_info(s);
  a.metrics = eval::wire::metric_infos(s);
  for (const auto& m : a.metrics) a.stride += m.stats;
  return a;
}

TEST_CASE("instant runner: every metric's statistics are accepted by the aggregator") {
  std::string yaml;
  for (const auto& d : eval::metric_defs()) {
    yaml += "  - " + std::string(d.name);
    if (d.name == "pass@k") yaml += ": {k: [1, 10]}";
    yaml += "\n";
  }
  eval::Suite s = suite_with(yaml, true);
  auto shards = eval::plan_shards("ev-instant", *s.dataset.items, s.partition_size, s.dataset.first_item);
  eval::Aggregator agg("ev-instant", s.metrics, shards, &*s.judge);
  for (const auto& shard : shards) {
    eval::wire::Assign a = assign_for(s, shard);
    eval::ShardResult r;
    r.evaluation_id = "ev-instant";
    r.partition = shard.partition;
    r.worker = "instant";
    CHECK(instant_stats(a, &r.stats) == "");
    for (int64_t i = a.begin; i < a.end; ++i) r.items.push_back(i);
    auto out = agg.accept(r);
    CHECK_MESSAGE(out.outcome == eval::Acceptance::kAccepted, out.reason);
  }
  CHECK(agg.complete());
  for (const auto& m : agg.metrics()) {
    CAPTURE(m.name);
    CHECK(m.n == (m.name == "jailbreak_success_rate" ? 500 : 1000));  // a rate over every other item (in scope)
    CHECK(std::isfinite(m.value));
  }
  // Deterministic: the same shard gives the same numbers.
  std::vector<double> a1, a2;
  CHECK(instant_stats(assign_for(s, shards[1]), &a1) == "");
  CHECK(instant_stats(assign_for(s, shards[1]), &a2) == "");
  CHECK(a1 == a2);
  CHECK(a1.size() == static_cast<size_t>(250 * agg.stride()));
}

TEST_CASE("instant runner: a metric it does not know, or with other statistics, is refused with the reason") {
  eval::Suite s = suite_with("  - accuracy\n", false);
  auto shards = eval::plan_shards("ev-instant", 1000, 250, 7);
  eval::wire::Assign a = assign_for(s, shards[0]);
  std::vector<double> stats;
  a.metrics[0].stats = 2;
  a.stride = 2;
  CHECK(instant_stats(a, &stats) ==
        "metric accuracy: the service expects 2 statistics per item, this worker reports 1");
  a.metrics[0].name = "vibes";
  CHECK(instant_stats(a, &stats) == "metric vibes is unknown to this worker");
}

}  // namespace
}  // namespace runlens::cli
