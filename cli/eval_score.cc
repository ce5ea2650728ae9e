// runlens eval score --suite FILE RESULTS.jsonl: aggregates per-item
// statistics ({"item": N, "stats": [...]} per line, the items of a worker's
// `result`) with the service's own aggregator, without a service. Items are
// grouped into the suite's shards (eval/shard_plan.h); each shard is
// validated whole, as the service validates a result, so a malformed line or
// a shard with missing or repeated items is an error naming it.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>

#include "cli/eval.h"
#include "eval/aggregator.h"
#include "eval/shard_plan.h"
#include "eval/suite.h"
#include "formats/json_reader.h"
#include "formats/json_writer.h"

namespace runlens::cli {

namespace {

struct ScoreFlags {
  std::string suite;
  std::string results;
  bool json = false;
};

std::string number_text(double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

int score(const ScoreFlags& f) {
  const eval::Suite suite = eval::load_suite(f.suite);  // a ConfigError is reported by main() (exit 2)
  if (!suite.dataset.items) {
    std::fprintf(stderr, "runlens eval score: %s: the suite gives no dataset.items, so its shards are not known\n",
                 f.suite.c_str());
    return kExitUsage;
  }
  std::vector<eval::Shard> shards =
      eval::plan_shards("score", *suite.dataset.items, suite.partition_size, suite.dataset.first_item);
  eval::Aggregator agg("score", suite.metrics, shards, suite.judge ? &*suite.judge : nullptr);

  std::ifstream in(f.results);
  if (!in) {
    std::fprintf(stderr, "runlens eval score: cannot open %s\n", f.results.c_str());
    return kExitUsage;
  }
  const int64_t first = suite.dataset.first_item, end = first + *suite.dataset.items;
  std::map<int, eval::ShardResult> by_shard;
  std::string line;
  int lineno = 0;
  auto bad = [&](const std::string& why) {
    std::fprintf(stderr, "%s:%d:1: error: %s\n", f.results.c_str(), lineno, why.c_str());
    return kExitUsage;
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json::Value v;
    json::ParseError err;
    if (!json::parse(line, &v, &err))
      return bad("not JSON at column " + std::to_string(err.offset + 1) + ": " + err.message);
    const json::Value* item = v.find("item");
    const json::Value* stats = v.find("stats");
    if (v.type != json::Value::Type::kObject || !item || !item->integral || !stats ||
        stats->type != json::Value::Type::kArray)
      return bad("expected {\"item\": INTEGER, \"stats\": [NUMBER, ...]}");
    if (item->integer < first || item->integer >= end)
      return bad("item " + std::to_string(item->integer) + " is outside the suite's items [" + std::to_string(first) +
                 ", " + std::to_string(end) + ")");
    if (static_cast<int>(stats->items.size()) != agg.stride())
      return bad("item " + std::to_string(item->integer) + " has " + std::to_string(stats->items.size()) +
                 " statistics; the suite's metrics take " + std::to_string(agg.stride()));
    const int partition = static_cast<int>((item->integer - first) / suite.partition_size);
    eval::ShardResult& r = by_shard[partition];
    r.evaluation_id = "score", r.partition = partition, r.attempt = 1, r.worker = f.results;
    r.items.push_back(item->integer);
    for (const auto& s : stats->items) {
      if (s.type != json::Value::Type::kNumber)
        return bad("item " + std::to_string(item->integer) + ": statistics must be numbers, got " +
                   std::string(s.type_name()));
      r.stats.push_back(s.number);
    }
  }
  for (auto& [partition, r] : by_shard) {
    eval::AcceptOutcome o = agg.accept(r);
    if (o.outcome != eval::Acceptance::kAccepted) {
      std::fprintf(stderr, "runlens eval score: %s\n", o.reason.c_str());
      return kExitFailure;
    }
  }
  const std::vector<int> missing = agg.missing_shards();
  const char* status = missing.empty() ? "COMPLETED" : (by_shard.empty() ? "FAILED" : "PARTIAL");
  const auto metrics = agg.metrics();
  if (f.json) {
    std::string out;
    json::Writer w(&out);
    w.begin_object().key("suite").str(suite.name).key("status").str(status);
    w.key("items").integer(agg.counters().items).key("shards").integer(static_cast<int64_t>(shards.size()));
    w.key("missingShards").begin_array();
    for (int m : missing) w.integer(m);
    w.end_array().key("metrics").begin_array();
    for (const auto& m : metrics) {
      w.begin_object().key("name").str(m.name).key("value").num(m.value).key("n").integer(m.n);
      w.key("stderr").num(m.std_error).end_object();
    }
    w.end_array().end_object();
    std::printf("%s\n", out.c_str());
    return kExitOk;
  }
  std::printf("suite %s: %s, %lld of %lld items in %zu of %zu shards\n", suite.name.c_str(), status,
              static_cast<long long>(agg.counters().items), static_cast<long long>(*suite.dataset.items),
              shards.size() - missing.size(), shards.size());
  if (!missing.empty()) {
    std::string list;
    for (int m : missing) list += (list.empty() ? "" : ", ") + std::to_string(m);
    std::printf("missing shards: %s\n", list.c_str());
  }
  std::printf("%s", format_metrics(metrics).c_str());
  return kExitOk;
}

}  // namespace

std::string format_metrics(const std::vector<eval::MetricResult>& metrics) {
  size_t width = 6;
  for (const auto& m : metrics) width = std::max(width, m.name.size());
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-*s  %12s  %8s  %10s\n", static_cast<int>(width), "metric", "value", "n",
                "stderr");
  out += buf;
  for (const auto& m : metrics) {
    std::snprintf(buf, sizeof buf, "  %-*s  %12s  %8lld  %10s\n", static_cast<int>(width), m.name.c_str(),
                  number_text(m.value).c_str(), static_cast<long long>(m.n), number_text(m.std_error).c_str());
    out += buf;
  }
  return out;
}

Command add_eval_score(CLI::App& group) {
  auto f = std::make_shared<ScoreFlags>();
  auto* sub = group.add_subcommand(
      "score", "Aggregate per-item statistics ({\"item\",\"stats\"} JSON lines) as the service would, offline");
  sub->add_option("--suite", f->suite, "The suite (configs/eval/*.yaml) the statistics are for")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("RESULTS", f->results, "JSON lines: {\"item\": N, \"stats\": [...]} (other members ignored)")
      ->required();
  sub->add_flag("--json", f->json, "Print the result as one JSON object");
  return {sub, [f] { return score(*f); }};
}

}  // namespace runlens::cli
