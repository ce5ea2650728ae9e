// GET /v1/runs/{runId}/gpus: the run's GPUs over a step range, from the
// finest GPU rollup tier (docs/api.md).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

std::string get_gpus(const Call& call) {
  Args a = call.args({"fromStep", "toStep"});
  store::StepRange range = a.steps();
  auto s = call.open();
  store::RunRow run = run_or_404(s, call.match(1));
  int64_t from_ns = run.started_ns, to_ns = std::max(run.last_time_ns, run.started_ns);
  if (range.from || range.to) {
    auto steps = s.graph->steps(run.run_id, range, 1'000'000);
    if (steps.empty()) {
      to_ns = from_ns - 1;  // no step in the range: no samples
    } else {
      if (range.from) from_ns = steps.front().time_ns;
      if (range.to) to_ns = steps.back().time_ns;
    }
  }
  // Per node of the run's allocation, its GPUs' ranks and accumulators by GPU index.
  struct Acc {
    int32_t rank = -1;
    store::Agg util, temp, power, clock, mem;
    int64_t samples = 0, throttle = 0, xid = 0;
  };
  std::unordered_map<std::string, std::vector<Acc>> by_node;
  std::vector<std::string> nodes;
  for (const auto& al : s.graph->allocations(run.run_id)) {
    if (al.node.empty() || al.gpu < 0 || al.gpu > 4096) continue;
    auto [it, fresh] = by_node.try_emplace(al.node);
    if (fresh) nodes.push_back(al.node);
    if (it->second.size() <= static_cast<size_t>(al.gpu)) it->second.resize(static_cast<size_t>(al.gpu) + 1);
    it->second[static_cast<size_t>(al.gpu)].rank = al.rank;
  }
  std::sort(nodes.begin(), nodes.end());
  // Cost: one indexed query per node (the finest tier's blocks of the time
  // range), one hash lookup per GPU row; ~136k rows for 1024 GPUs over a
  // 2,000-step run at 1-minute buckets.
  auto tiers = s.metrics->rollup_resolutions();
  if (!tiers.empty() && !nodes.empty() && from_ns <= to_ns) {
    std::vector<Acc>* gpus = nullptr;
    std::string last_node;
    for (const auto& r : s.metrics->gpu_rollups(nodes, tiers.front(), from_ns, to_ns)) {
      if (!gpus || r.node != last_node) {
        last_node = r.node;
        gpus = &by_node[r.node];
      }
      if (r.gpu < 0 || static_cast<size_t>(r.gpu) >= gpus->size() || (*gpus)[static_cast<size_t>(r.gpu)].rank < 0)
        continue;
      Acc& x = (*gpus)[static_cast<size_t>(r.gpu)];
      auto merge = [](store::Agg& into, const store::Agg& b) {
        if (b.n == 0) return;
        if (into.n == 0 || b.min < into.min) into.min = b.min;
        if (into.n == 0 || b.max > into.max) into.max = b.max;
        into.sum += b.sum;
        into.n += b.n;
      };
      merge(x.util, r.util_pct);
      merge(x.temp, r.temp_c);
      merge(x.power, r.power_w);
      merge(x.clock, r.sm_clock_mhz);
      merge(x.mem, r.mem_used_bytes);
      x.samples += r.samples;
      x.throttle |= r.throttle_reasons;
      if (r.xid != 0) x.xid = r.xid;
    }
  }
  auto round1 = [](std::optional<double> v) {
    return v ? std::optional<double>(std::round(*v * 10) / 10) : std::nullopt;
  };
  std::string out;
  json::Writer w(&out);
  w.begin_array();
  for (const auto& node : nodes) {
    const std::vector<Acc>& gpus = by_node[node];
    for (size_t gpu = 0; gpu < gpus.size(); ++gpu) {
      const Acc& x = gpus[gpu];
      if (x.rank < 0) continue;
      w.begin_object().key("node").str(node).key("gpu").integer(static_cast<int64_t>(gpu)).key("rank").integer(x.rank);
      opt_num(w, "utilPct", round1(x.util.mean()));
      opt_num(w, "tempC", round1(x.temp.mean()));
      opt_num(w, "tempMaxC", round1(x.temp.n ? std::optional<double>(x.temp.max) : std::nullopt));
      opt_num(w, "powerW", round1(x.power.mean()));
      opt_num(w, "smClockMhz", round1(x.clock.mean()));
      opt_num(w, "smClockMinMhz", round1(x.clock.n ? std::optional<double>(x.clock.min) : std::nullopt));
      opt_num(w, "memUsedBytes", x.mem.n ? std::optional<double>(std::round(x.mem.max)) : std::nullopt);
      w.key("throttleReasons").integer(x.throttle).key("xid").integer(x.xid).key("samples").integer(x.samples);
      w.end_object();
    }
  }
  w.end_array();
  return out;
}

}  // namespace runlens::api
