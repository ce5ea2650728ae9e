// GET /v1/alerts: stored alerts, each the alert contract's object.
#include <algorithm>
#include <cmath>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

std::string get_alerts(const Call& call) {
  Args a = call.args({"runId", "kind", "since", "limit", "state"});
  store::AlertFilter f;
  f.run_id = a.text("runId").value_or("");
  f.kind = a.text("kind").value_or("");
  f.since_ns = a.integer("since", 0, INT64_MAX);
  f.limit = a.integer("limit", 1, 100000).value_or(1000);
  // open: no end yet; resolved: its closing revision (ends_ns) arrived.
  std::string state = a.choice("state", "any", {"any", "open", "resolved"});
  if (state != "any") f.resolved = state == "resolved";
  auto s = call.open();
  if (!f.run_id.empty()) run_or_404(s, f.run_id);
  auto rows = s.graph->alerts(f);
  // Each alert is the alert contract's object (docs/alerts.md), as alerts.jsonl has it.
  std::string out = "{\"alerts\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    out += rows[i].json;
  }
  out += "],\"count\":" + std::to_string(rows.size()) + "}";
  return out;
}

}  // namespace runlens::api
