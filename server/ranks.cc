// GET /v1/runs/{runId}/ranks (spec section 40): per-rank summaries, slowest first.
#include <algorithm>
#include <cmath>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

// Spec section 40: a bare array, slowest first by default.
std::string get_ranks(const Call& call) {
  Args a = call.args({"sort", "order", "limit", "fromStep", "toStep"});
  std::string sort =
      a.choice("sort", "step_time", {"step_time", "ratio", "rank", "data_wait", "comm", "slowest_count"});
  std::string order = a.choice("order", sort == "rank" ? "asc" : "desc", {"asc", "desc"});
  int64_t limit = a.integer("limit", 1, 1'000'000).value_or(100);
  store::StepRange range = a.steps();
  auto s = call.open();
  store::RunRow r = run_or_404(s, call.match(1));
  auto rows = s.metrics->rank_summaries(r.run_id, range);
  double median = median_work(rows);
  auto key = [&](const store::RankSummary& x) -> double {
    if (sort == "ratio" || sort == "step_time") return x.work_ms_mean;
    if (sort == "data_wait") return x.data_wait_ms_mean.value_or(-1);
    if (sort == "comm") return x.comm_ms_mean.value_or(-1);
    if (sort == "slowest_count") return static_cast<double>(x.slowest_count);
    return x.rank;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& x, const auto& y) {
    double kx = key(x), ky = key(y);
    if (kx != ky) return order == "asc" ? kx < ky : kx > ky;
    return x.rank < y.rank;
  });
  if (static_cast<int64_t>(rows.size()) > limit) rows.resize(static_cast<size_t>(limit));
  std::string out;
  json::Writer w(&out);
  w.begin_array();
  for (const auto& x : rows) rank_row(w, x, median);
  w.end_array();
  return out;
}

}  // namespace runlens::api
