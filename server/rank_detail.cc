// GET /v1/runs/{runId}/ranks/{rank}: one rank's drill-down to its node and
// GPU (spec section 26's chain: rank -> node -> GPU -> temperature, clock,
// throttle reasons), with the samples around its first incident.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

namespace {

// Steps either side of the first incident's opening step shown when no range is asked.
constexpr int64_t kAroundSteps = 50;

std::optional<double> round1(std::optional<double> v) {
  return v ? std::optional<double>(std::round(*v * 10) / 10) : std::nullopt;
}

// The step that was running at `time_ns`: the last step that started at or before it.
std::optional<int64_t> step_at(const std::vector<store::StepRow>& steps, int64_t time_ns) {
  auto it = std::upper_bound(steps.begin(), steps.end(), time_ns,
                             [](int64_t t, const store::StepRow& s) { return t < s.time_ns; });
  if (it == steps.begin()) return std::nullopt;
  return std::prev(it)->stats.step;
}

}  // namespace

std::string get_rank(const Call& call) {
  Args a = call.args({"fromStep", "toStep"});
  store::StepRange range = a.steps();
  const std::string& text = call.match(2);
  int32_t rank = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), rank);
  if (ec != std::errc() || end != text.data() + text.size() || rank < 0)
    throw HttpError{400, "rank must be a non-negative integer, got '" + text + "'"};
  auto s = call.open();
  store::RunRow run = run_or_404(s, call.match(1));
  auto summaries = s.metrics->rank_summaries(run.run_id, range);
  const store::RankSummary* summary = nullptr;
  for (const auto& x : summaries)
    if (x.rank == rank) summary = &x;
  std::string node;
  int32_t gpu = -1;
  for (const auto& al : s.graph->allocations(run.run_id)) {
    if (al.rank == rank) {
      node = al.node;
      gpu = al.gpu;
    }
  }
  if (!summary && node.empty() && rank >= run.world_size)
    throw HttpError{404, "run '" + run.run_id + "' has no rank " + std::to_string(rank)};

  // The rank's incidents: those of its alerts.
  store::AlertFilter af;
  af.run_id = run.run_id;
  af.limit = 100'000;
  std::map<std::string, bool> mine;
  for (const auto& al : s.graph->alerts(af))
    if (al.alert.rank && *al.alert.rank == rank && !al.incident_id.empty()) mine[al.incident_id] = true;
  std::vector<store::IncidentRow> incidents;
  for (const auto& inc : s.graph->incidents(run.run_id))
    if (mine.count(inc.incident_id)) incidents.push_back(inc);

  // The window of samples: the range asked, else around the first incident, else the whole run.
  store::StepRange around = range;
  if (!range.from && !range.to && !incidents.empty() && incidents.front().opened_step) {
    around.from = std::max<int64_t>(0, *incidents.front().opened_step - kAroundSteps);
    around.to = *incidents.front().opened_step + kAroundSteps;
  }
  auto step_rows = s.graph->steps(run.run_id, around, 1'000'000);
  int64_t from_ns = step_rows.empty() ? run.started_ns : step_rows.front().time_ns;
  int64_t to_ns = step_rows.empty() ? std::max(run.last_time_ns, run.started_ns) : step_rows.back().time_ns;
  if (!range.from && !range.to && incidents.empty()) {
    from_ns = run.started_ns;
    to_ns = std::max(run.last_time_ns, run.started_ns);
  }

  std::string out;
  json::Writer w(&out);
  w.begin_object().key("runId").str(run.run_id).key("rank").integer(rank);
  opt_str(w, "node", node);
  opt_int(w, "gpu", gpu >= 0 ? std::optional<int64_t>(gpu) : std::nullopt);
  w.key("summary");
  if (summary)
    rank_row(w, *summary, median_work(summaries));
  else
    w.null();

  // Steps: full resolution where the store kept them, else its window means.
  auto full = s.metrics->rank_steps_of(run.run_id, rank, range);
  auto windows = s.metrics->rank_windows_of(run.run_id, rank, range);
  struct Entry {
    int64_t step = 0, last = 0;
    double work = 0, ratio = 0;
    std::optional<double> comm, wait;
    bool is_step = true;
  };
  std::vector<Entry> entries;
  for (const auto& r : full)
    entries.push_back({r.step, r.step, r.work_ms, r.ratio_to_median, r.comm_ms, r.data_wait_ms});
  // A window's mean stands for the steps of it the full-resolution rows do
  // not cover: before the first of them and after the last.
  size_t fi = 0;
  for (const auto& win : windows) {
    if (win.steps <= 0) continue;
    while (fi < full.size() && full[fi].step < win.first_step) ++fi;
    size_t fj = fi;
    while (fj < full.size() && full[fj].step <= win.last_step) ++fj;
    double n = static_cast<double>(win.steps);
    Entry e{win.first_step, win.last_step, win.work_ms_sum / n, win.ratio_sum / n, std::nullopt, std::nullopt, false};
    if (win.comm_n > 0) e.comm = win.comm_ms_sum / static_cast<double>(win.comm_n);
    if (win.data_wait_n > 0) e.wait = win.data_wait_ms_sum / static_cast<double>(win.data_wait_n);
    if (fi == fj) {
      entries.push_back(e);
      continue;
    }
    if (full[fi].step > win.first_step) {
      Entry before = e;
      before.last = full[fi].step - 1;
      entries.push_back(before);
    }
    if (full[fj - 1].step < win.last_step) {
      Entry after = e;
      after.step = full[fj - 1].step + 1;
      entries.push_back(after);
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) { return x.step < y.step; });
  w.key("steps").begin_array();
  for (const auto& e : entries) {
    w.begin_object().key("step").integer(e.step).key("lastStep").integer(e.last);
    w.key("resolution").str(e.is_step ? "step" : "window");
    w.key("workMs").num(std::round(e.work * 10) / 10);
    w.key("ratioToMedian").num(std::round(e.ratio * 1000) / 1000);
    opt_num(w, "commMs", round1(e.comm));
    opt_num(w, "dataWaitMs", round1(e.wait));
    w.end_object();
  }
  w.end_array();

  w.key("incidents").begin_array();
  for (const auto& inc : incidents) {
    w.begin_object().key("incidentId").str(inc.incident_id).key("kind").str(inc.kind);
    w.key("severity").str(inc.severity);
    opt_int(w, "openedStep", inc.opened_step);
    opt_int(w, "lastStep", inc.last_step);
    w.end_object();
  }
  w.end_array();

  // GPU samples: full resolution when kept, else the finest rollup tier.
  auto tiers = s.metrics->rollup_resolutions();
  std::vector<std::string> nodes;
  if (!node.empty()) nodes.push_back(node);
  std::string gpu_resolution = "none";
  w.key("gpuSamples").begin_array();
  if (!node.empty() && gpu >= 0) {
    auto samples = s.metrics->gpu_samples(nodes, from_ns, to_ns);
    std::erase_if(samples, [&](const store::GpuSampleRow& r) { return r.sample.gpu != gpu; });
    if (!samples.empty()) {
      gpu_resolution = "sample";
      for (const auto& r : samples) {
        const Gpu& g = r.sample;
        w.begin_object().key("timeNs").integer(r.time_ns);
        opt_int(w, "step", step_at(step_rows, r.time_ns));
        auto f = [&](Gpu::F field, double v) { return g.has(field) ? std::optional<double>(v) : std::nullopt; };
        opt_num(w, "utilPct", f(Gpu::F::util_pct, g.util_pct));
        opt_num(w, "tempC", f(Gpu::F::temp_c, g.temp_c));
        opt_num(w, "smClockMhz", f(Gpu::F::sm_clock_mhz, g.sm_clock_mhz));
        opt_num(w, "powerW", f(Gpu::F::power_w, g.power_w));
        w.key("powerLimitW").null();  // not kept by the store's GPU blocks
        opt_int(w, "throttleReasons",
                g.has(Gpu::F::throttle_reasons) ? std::optional<int64_t>(g.throttle_reasons) : std::nullopt);
        opt_int(w, "xid", g.has(Gpu::F::xid) ? std::optional<int64_t>(g.xid) : std::nullopt);
        w.end_object();
      }
    } else if (!tiers.empty()) {
      gpu_resolution = "rollup";
      for (const auto& r : s.metrics->gpu_rollups(nodes, tiers.front(), from_ns, to_ns)) {
        if (r.gpu != gpu) continue;
        w.begin_object().key("timeNs").integer(r.bucket_ns);
        opt_int(w, "step", step_at(step_rows, r.bucket_ns));
        opt_num(w, "utilPct", r.util_pct.mean());
        opt_num(w, "tempC", r.temp_c.mean());
        opt_num(w, "smClockMhz", r.sm_clock_mhz.mean());
        opt_num(w, "powerW", r.power_w.mean());
        w.key("powerLimitW").null();
        w.key("throttleReasons").integer(r.throttle_reasons);
        w.key("xid").integer(r.xid);
        w.end_object();
      }
    }
  }
  w.end_array();
  w.key("gpuResolution").str(gpu_resolution);
  if (gpu_resolution == "rollup") w.key("gpuResolutionNs").integer(tiers.front());

  // Node samples: the store keeps node rollups only; the finest tier.
  w.key("nodeSamples").begin_array();
  if (!node.empty() && !tiers.empty()) {
    for (const auto& r : s.metrics->node_rollups(nodes, tiers.front(), from_ns, to_ns)) {
      w.begin_object().key("timeNs").integer(r.bucket_ns);
      opt_int(w, "step", step_at(step_rows, r.bucket_ns));
      opt_num(w, "cpuPct", r.cpu_pct.mean());
      opt_num(w, "memUsedBytes", r.mem_used_bytes.n ? std::optional<double>(r.mem_used_bytes.max) : std::nullopt);
      w.end_object();
    }
  }
  w.end_array();
  w.key("window").begin_object().key("fromNs").integer(from_ns).key("toNs").integer(to_ns);
  opt_int(w, "fromStep", step_rows.empty() ? std::nullopt : std::optional<int64_t>(step_rows.front().stats.step));
  opt_int(w, "toStep", step_rows.empty() ? std::nullopt : std::optional<int64_t>(step_rows.back().stats.step));
  w.end_object().end_object();
  return out;
}

}  // namespace runlens::api
