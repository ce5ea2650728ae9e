// GET /v1/runs/{runId}/heatmap: work time relative to the step's median,
// ranks x steps, downsampled on the server (docs/api.md).
//
// The store's per-rank resolution is what the map shows: the rank windows
// (one summary per rank per `rank_window` steps) across the run, and inside
// failure windows the full-resolution rank steps (RankStepRow, kept_for
// "failure"), which replace the part of the windows they cover. Each column
// says which it is (`resolution`).
//
// Cost: two queries, each reading only the columns it needs: rank windows
// (first_step, last_step, rank, steps, ratio_sum: ranks x windows rows, 20k
// for 1024 ranks x 2,000 steps at 100-step windows) and the failure steps'
// rank blocks (one blob per step, the rank and ratio read out of each
// 56-byte record, no row objects). Then O(ranks x units) to average units
// into columns and O(ranks x columns) to take the max over rank buckets; no
// per-rank or per-step query.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

namespace {

constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();

// A run of steps at one resolution: part of a rank window (its mean ratio
// stands for each of its steps) or one full-resolution step.
struct Unit {
  int64_t first = 0, last = 0;
  bool step = false;
  size_t source = 0;  // index into windows or steps
};

double round3(double v) { return std::round(v * 1000) / 1000; }

}  // namespace

std::string get_heatmap(const Call& call) {
  Args a = call.args({"fromStep", "toStep", "maxRanks", "maxSteps"});
  store::StepRange range = a.steps();
  const int64_t max_ranks = a.integer("maxRanks", 1, 4096).value_or(256);
  const int64_t max_steps = a.integer("maxSteps", 1, 4000).value_or(400);
  auto s = call.open();
  store::RunRow run = run_or_404(s, call.match(1));
  auto window_rows = s.metrics->rank_window_ratios(run.run_id, range);
  auto steps = s.metrics->rank_step_ratios(run.run_id, range, "failure");

  int32_t n_ranks = std::max(run.world_size, 0);
  for (const auto& w : window_rows) n_ranks = std::max(n_ranks, w.rank + 1);
  for (const auto& st : steps)
    for (const auto& [rank, ratio] : st.ranks) n_ranks = std::max(n_ranks, rank + 1);
  const size_t nr = static_cast<size_t>(n_ranks);

  // Windows by first step (an open window's ranks may have reached different
  // last steps: the window ends at the furthest), each rank's mean ratio.
  struct Window {
    int64_t first = 0, last = 0;
    std::vector<double> ratio;
  };
  std::vector<Window> windows;
  for (const auto& w : window_rows) {
    if (windows.empty() || windows.back().first != w.first_step) {
      windows.push_back({w.first_step, w.last_step, std::vector<double>(nr, kAbsent)});
    }
    Window& back = windows.back();
    back.last = std::max(back.last, w.last_step);
    if (w.steps > 0 && w.rank >= 0)
      back.ratio[static_cast<size_t>(w.rank)] = w.ratio_sum / static_cast<double>(w.steps);
  }

  // The range shown: as asked, else what the store holds.
  std::optional<int64_t> lo = range.from, hi = range.to;
  if (!lo) {
    if (!windows.empty()) lo = windows.front().first;
    if (!steps.empty()) lo = std::min(lo.value_or(steps.front().step), steps.front().step);
  }
  if (!hi) {
    for (const auto& w : windows) hi = std::max(hi.value_or(w.last), w.last);
    if (!steps.empty()) hi = std::max(hi.value_or(steps.back().step), steps.back().step);
  }

  // Units in step order: windows split around the failure steps inside them.
  std::vector<Unit> units;
  size_t p = 0;
  if (lo && hi) {
    for (size_t wi = 0; wi < windows.size(); ++wi) {
      int64_t from = std::max(windows[wi].first, *lo), to = std::min(windows[wi].last, *hi);
      if (from > to) continue;
      for (; p < steps.size() && steps[p].step < from; ++p) units.push_back({steps[p].step, steps[p].step, true, p});
      int64_t cur = from;
      for (; p < steps.size() && steps[p].step <= to; ++p) {
        if (steps[p].step > cur) units.push_back({cur, steps[p].step - 1, false, wi});
        units.push_back({steps[p].step, steps[p].step, true, p});
        cur = steps[p].step + 1;
      }
      if (cur <= to) units.push_back({cur, to, false, wi});
    }
  }
  for (; p < steps.size(); ++p) units.push_back({steps[p].step, steps[p].step, true, p});

  // Full-resolution ratios by rank, per step unit.
  std::vector<std::vector<double>> step_ratio(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    step_ratio[i].assign(nr, kAbsent);
    for (const auto& [rank, ratio] : steps[i].ranks)
      if (rank >= 0) step_ratio[i][static_cast<size_t>(rank)] = ratio;
  }

  // Columns: consecutive units, at most max_steps of them; a column's value
  // for a rank is its mean ratio over the column's steps (units weighted by
  // the steps they span).
  const size_t per_column =
      units.empty() ? 1 : (units.size() + static_cast<size_t>(max_steps) - 1) / static_cast<size_t>(max_steps);
  const size_t n_columns = units.empty() ? 0 : (units.size() + per_column - 1) / per_column;
  const size_t rank_bucket = nr == 0 ? 1 : (nr + static_cast<size_t>(max_ranks) - 1) / static_cast<size_t>(max_ranks);
  const size_t n_rows = nr == 0 ? 0 : (nr + rank_bucket - 1) / rank_bucket;
  std::vector<std::vector<double>> cells(n_rows, std::vector<double>(n_columns, kAbsent));
  std::vector<double> sum(nr), weight(nr);
  std::string out;
  json::Writer w(&out);
  w.begin_object().key("runId").str(run.run_id);
  opt_int(w, "fromStep", lo);
  opt_int(w, "toStep", hi);
  w.key("ranks").integer(n_ranks);
  w.key("rankBucket").integer(static_cast<int64_t>(rank_bucket));
  w.key("rows").begin_array();
  for (size_t r = 0; r < n_rows; ++r) {
    w.begin_object().key("firstRank").integer(static_cast<int64_t>(r * rank_bucket));
    w.key("lastRank").integer(static_cast<int64_t>(std::min(nr, (r + 1) * rank_bucket) - 1)).end_object();
  }
  w.end_array().key("columns").begin_array();
  double max = kAbsent;
  for (size_t c = 0; c < n_columns; ++c) {
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(weight.begin(), weight.end(), 0.0);
    bool all_steps = true;
    size_t begin = c * per_column, end = std::min(units.size(), begin + per_column);
    for (size_t u = begin; u < end; ++u) {
      const Unit& unit = units[u];
      all_steps = all_steps && unit.step;
      const std::vector<double>& ratio = unit.step ? step_ratio[unit.source] : windows[unit.source].ratio;
      double span = static_cast<double>(unit.last - unit.first + 1);
      for (size_t k = 0; k < nr; ++k) {
        if (std::isnan(ratio[k])) continue;
        sum[k] += ratio[k] * span;
        weight[k] += span;
      }
    }
    for (size_t k = 0; k < nr; ++k) {
      if (weight[k] <= 0) continue;
      double v = sum[k] / weight[k];
      double& cell = cells[k / rank_bucket][c];
      if (std::isnan(cell) || v > cell) cell = v;
      if (std::isnan(max) || v > max) max = v;
    }
    w.begin_object().key("firstStep").integer(units[begin].first).key("lastStep").integer(units[end - 1].last);
    w.key("resolution").str(all_steps ? "step" : "window").end_object();
  }
  w.end_array().key("cells").begin_array();
  for (const auto& row : cells) {
    w.begin_array();
    for (double v : row) {
      if (std::isnan(v))
        w.null();
      else
        w.num(round3(v));
    }
    w.end_array();
  }
  w.end_array();
  opt_num(w, "max", std::isnan(max) ? std::nullopt : std::optional<double>(round3(max)));
  // Failure windows: the runs of consecutive full-resolution steps.
  w.key("failureWindows").begin_array();
  for (size_t i = 0; i < steps.size();) {
    size_t j = i;
    while (j + 1 < steps.size() && steps[j + 1].step == steps[j].step + 1) ++j;
    w.begin_array().integer(steps[i].step).integer(steps[j].step).end_array();
    i = j + 1;
  }
  w.end_array();
  // The incidents of one rank that overlap the range (the rank from the incident's alerts).
  store::AlertFilter af;
  af.run_id = run.run_id;
  af.limit = 100'000;
  std::map<std::string, int32_t> rank_of;
  for (const auto& al : s.graph->alerts(af))
    if (al.alert.rank && !al.incident_id.empty()) rank_of.emplace(al.incident_id, *al.alert.rank);
  w.key("highlight").begin_array();
  for (const auto& inc : s.graph->incidents(run.run_id)) {
    auto it = rank_of.find(inc.incident_id);
    if (it == rank_of.end()) continue;
    if (lo && inc.last_step && *inc.last_step < *lo) continue;
    if (hi && inc.opened_step && *inc.opened_step > *hi) continue;
    w.begin_object().key("rank").integer(it->second);
    w.key("row").integer(static_cast<int64_t>(static_cast<size_t>(std::max(it->second, 0)) / rank_bucket));
    w.key("kind").str(inc.kind).key("severity").str(inc.severity).key("incidentId").str(inc.incident_id);
    opt_int(w, "openedStep", inc.opened_step);
    opt_int(w, "lastStep", inc.last_step);
    w.end_object();
  }
  w.end_array().end_object();
  return out;
}

}  // namespace runlens::api
