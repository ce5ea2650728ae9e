// The evaluation core's ceiling: pushes N items (default 1 M) through
// plan -> schedule -> (workers that score instantly) -> validate and
// aggregate -> complete, in one process and one thread, and prints items/s
// and peak RSS. The service benchmark (ZeroMQ workers, the store) is bounded
// by this figure; the target is 100 k items/s end to end.
//
//   build/bench/eval_core_bench [--items N] [--partition P] [--workers W] [--slots S]
//                               [--metrics light|heavy] [--lose-worker]
//
// "heavy" scores accuracy, perplexity, corpus BLEU and pass@{1,10} per item
// (15 statistics per item); "light" accuracy only. --lose-worker stops one
// worker's heartbeats halfway, so its shards are retried elsewhere.
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "eval/aggregator.h"
#include "eval/scheduler.h"
#include "eval/shard_plan.h"
#include "eval/suite.h"

using namespace runlens::eval;
using runlens::bench::wall;

namespace {

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

MetricSpec metric(const char* name, std::vector<int64_t> k = {}) {
  MetricSpec m;
  m.name = name;
  m.def = find_metric(name);
  m.k = std::move(k);
  return m;
}

// A worker that scores instantly: deterministic statistics per item.
void score(const Assignment& a, bool heavy, ShardResult* r) {
  r->evaluation_id = a.evaluation_id;
  r->partition = a.partition;
  r->attempt = a.attempt;
  r->worker = a.worker;
  r->items.clear();
  r->stats.clear();
  for (int64_t i = a.items.begin; i < a.items.end; ++i) {
    r->items.push_back(i);
    const uint64_t h = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    r->stats.push_back(static_cast<double>((h >> 33) & 1));  // accuracy
    if (!heavy) continue;
    const double tokens = 8 + static_cast<double>((h >> 40) % 32);
    r->stats.push_back(-tokens * (2 + static_cast<double>((h >> 50) % 100) / 100));  // log-likelihood
    r->stats.push_back(tokens);
    const double hyp = 10 + static_cast<double>((h >> 20) % 10);
    const double m1 = hyp - static_cast<double>((h >> 12) % 5);
    const double stats[10] = {
        m1, m1 - 2, m1 - 4 < 0 ? 0 : m1 - 4, m1 - 6 < 0 ? 0 : m1 - 6, hyp, hyp - 1, hyp - 2, hyp - 3, hyp, hyp + 1};
    r->stats.insert(r->stats.end(), stats, stats + 10);
    r->stats.push_back(20);                                   // samples
    r->stats.push_back(static_cast<double>((h >> 28) % 21));  // passing
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t items = 1000000, partition = 1000;
  int workers = 4, slots = 2;
  bool heavy = true, lose_worker = false;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "eval_core_bench: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--items"))
      items = std::atoll(value("--items"));
    else if (!std::strcmp(argv[i], "--partition"))
      partition = std::atoll(value("--partition"));
    else if (!std::strcmp(argv[i], "--workers"))
      workers = std::atoi(value("--workers"));
    else if (!std::strcmp(argv[i], "--slots"))
      slots = std::atoi(value("--slots"));
    else if (!std::strcmp(argv[i], "--metrics"))
      heavy = std::strcmp(value("--metrics"), "light") != 0;
    else if (!std::strcmp(argv[i], "--lose-worker"))
      lose_worker = true;
    else {
      std::fprintf(stderr,
                   "usage: eval_core_bench [--items N] [--partition P] [--workers W] [--slots S] [--metrics "
                   "light|heavy] [--lose-worker]\n");
      return 2;
    }
  }
  if (items < 1 || partition < 1 || workers < 1 || slots < 1) {
    std::fprintf(stderr, "eval_core_bench: --items, --partition, --workers and --slots must be at least 1\n");
    return 2;
  }

  const std::string id = "e-bench";
  std::vector<MetricSpec> metrics = {metric("accuracy")};
  if (heavy) {
    metrics.push_back(metric("perplexity"));
    metrics.push_back(metric("bleu"));
    metrics.push_back(metric("pass@k", {1, 10}));
  }

  double t_plan = 0, t_sched = 0, t_score = 0, t_agg = 0;
  const double t0 = wall();
  std::vector<Shard> shards = plan_shards(id, items, partition);
  Aggregator agg(id, metrics, shards);
  Scheduler sched(SchedulerOptions{1000});
  for (int w = 0; w < workers; ++w) sched.add_worker({"w" + std::to_string(w), Pool::kGpu, 81920, slots}, 0);
  EvaluationSpec spec;
  spec.evaluation_id = id;
  spec.priority = Priority::kP1;
  spec.requirements = {Pool::kGpu, 40960};
  spec.checkpoint_id = "ck-bench";
  spec.shards = shards;
  sched.submit(std::move(spec), 0);
  t_plan = wall() - t0;

  ShardResult result;
  int64_t t = 1;  // the scheduler's clock, in ms: one round per ms
  int64_t rounds = 0, rejected = 0;
  while (!is_terminal(sched.status(id))) {
    double a = wall();
    std::vector<Assignment> as = sched.schedule(t);
    t_sched += wall() - a;
    for (const Assignment& asg : as) {
      const bool lost =
          lose_worker && asg.worker == "w0" && rounds > static_cast<int64_t>(shards.size()) / (2 * workers * slots);
      if (lost) continue;  // w0 went silent: its shard never reports
      a = wall();
      score(asg, heavy, &result);
      t_score += wall() - a;
      a = wall();
      if (!sched.can_accept(id, asg.partition, asg.attempt)) continue;
      AcceptOutcome out = agg.accept(result);
      t_agg += wall() - a;
      a = wall();
      if (out.outcome == Acceptance::kRejected) {
        ++rejected;
        sched.fail(id, asg.partition, asg.attempt, asg.worker, out.reason, t);
      } else {
        sched.complete(id, asg.partition, asg.attempt, asg.worker, t);
      }
      t_sched += wall() - a;
    }
    a = wall();
    for (int w = 0; w < workers; ++w) {
      const bool silent = lose_worker && w == 0 && rounds > static_cast<int64_t>(shards.size()) / (2 * workers * slots);
      if (!silent) sched.heartbeat("w" + std::to_string(w), t);
    }
    sched.expire(t);
    t_sched += wall() - a;
    t += 100;
    ++rounds;
  }
  const double total = wall() - t0;
  const double coordination = total - t_score;
  std::vector<MetricResult> ms = agg.metrics();

  std::printf(
      "eval_core_bench: %lld items, partition %lld (%zu shards), %d workers x %d slots, %s metrics (%d "
      "statistics/item)\n",
      static_cast<long long>(items), static_cast<long long>(partition), shards.size(), workers, slots,
      heavy ? "heavy" : "light", agg.stride());
  std::printf("  status %s, %lld scheduling rounds, %lld retried, %lld rejected, %lld duplicates\n",
              std::string(eval_status_name(sched.status(id))).c_str(), static_cast<long long>(rounds),
              static_cast<long long>(sched.counters().retried), static_cast<long long>(rejected),
              static_cast<long long>(sched.counters().duplicates));
  std::printf("  plan %.3f s, schedule %.3f s, aggregate %.3f s, (instant) scoring %.3f s\n", t_plan, t_sched, t_agg,
              t_score);
  std::printf("  coordination: %.0f items/s (%.3f s); with scoring: %.0f items/s (%.3f s)\n",
              static_cast<double>(items) / coordination, coordination, static_cast<double>(items) / total, total);
  std::printf("  peak RSS %.1f MiB\n", peak_rss_mib());
  for (const auto& m : ms)
    std::printf("  %s = %.6g (n %lld, stderr %.3g)\n", m.name.c_str(), m.value, static_cast<long long>(m.n),
                m.std_error);
  return sched.status(id) == EvalStatus::kCompleted && agg.complete() ? 0 : 1;
}
