// GET /v1/runs/{runId}/timeline (spec section 41).
#include <algorithm>
#include <cmath>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

// Spec section 41.
std::string get_timeline(const Call& call) {
  Args a = call.args({"fromStep", "toStep", "limit"});
  store::StepRange range = a.steps();
  int64_t limit = a.integer("limit", 1, 1'000'000).value_or(10000);
  auto s = call.open();
  store::RunRow r = run_or_404(s, call.match(1));
  auto rows = s.graph->timeline(r.run_id, range, limit);
  std::string out;
  json::Writer w(&out);
  w.begin_object().key("runId").str(r.run_id);
  opt_int(w, "fromStep", range.from);
  opt_int(w, "toStep", range.to);
  w.key("events").begin_array();
  for (const auto& e : rows) timeline_entry(w, e);
  w.end_array().end_object();
  return out;
}

}  // namespace runlens::api
