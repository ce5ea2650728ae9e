// GET /v1/runs and GET /v1/runs/{runId} (spec section 39).
#include <algorithm>
#include <cmath>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

std::string get_runs(const Call& call) {
  Args a = call.args({"experiment", "model", "status", "limit", "since", "until", "q"});
  store::RunFilter f;
  f.experiment_id = a.text("experiment").value_or("");
  f.model_id = a.text("model").value_or("");
  f.status = a.choice("status", "", {"running", "completed", "failed", "aborted"});
  f.limit = a.integer("limit", 1, 10000).value_or(100);
  f.since_ns = time_ns(a, "since");
  f.until_ns = time_ns(a, "until");
  if (f.since_ns && f.until_ns && *f.since_ns > *f.until_ns) throw HttpError{400, "since is after until"};
  f.text = a.text("q").value_or("");
  if (f.text.size() > 200) throw HttpError{400, "parameter 'q' is longer than 200 characters"};
  auto s = call.open();
  // Two queries whatever the number of runs: the runs, then their incident counts.
  auto rows = s.graph->runs(f);
  std::vector<std::string> ids;
  for (const auto& r : rows) ids.push_back(r.run_id);
  auto counts = s.graph->incident_counts(ids);
  std::string out;
  json::Writer w(&out);
  w.begin_object().key("runs").begin_array();
  for (const auto& r : rows) {
    w.begin_object();
    run_summary(w, r);
    opt_num(w, "loss", r.loss);
    opt_num(w, "mfu", r.mfu);
    opt_num(w, "tokensPerSecond", r.tokens_per_s);
    auto c = counts.find(r.run_id);
    w.key("incidents").integer(c == counts.end() ? 0 : c->second.incidents);
    w.key("openIncidents").integer(c == counts.end() ? 0 : c->second.open);
    w.key("gpus").integer(r.world_size);
    w.end_object();
  }
  w.end_array().key("count").integer(static_cast<int64_t>(rows.size())).end_object();
  return out;
}

// Spec section 39.
std::string get_run(const Call& call) {
  call.args({});  // it takes no parameters
  auto s = call.open();
  store::RunRow r = run_or_404(s, call.match(1));
  auto incidents = s.graph->incidents(r.run_id);
  auto agg = s.graph->aggregates(r.run_id);
  std::string out;
  json::Writer w(&out);
  w.begin_object();
  run_summary(w, r);
  w.key("tokensProcessed").integer(r.tokens_processed);
  w.key("restarts").integer(r.restarts);
  opt_str(w, "endReason", r.end_reason);
  w.key("metrics").begin_object();
  opt_num(w, "loss", r.loss);
  opt_num(w, "valLoss", r.val_loss);
  opt_num(w, "mfu", r.mfu);
  opt_num(w, "tokensPerSecond", r.tokens_per_s);
  opt_num(w, "learningRate", r.lr);
  opt_num(w, "gradNorm", r.grad_norm);
  opt_num(w, "stepTimeMsMedian", agg.step_ms_median);
  w.end_object();
  w.key("config").begin_object();
  for (const auto& [k, v] : r.config) {
    w.key(k);
    value(w, v);
  }
  w.end_object();
  opt_str(w, "latestCheckpointId", r.last_checkpoint_id);
  w.key("alerts").integer(agg.alerts);
  w.key("incidents").begin_array();
  for (const auto& i : incidents) {
    w.begin_object().key("incidentId").str(i.incident_id).key("kind").str(i.kind).key("severity").str(i.severity);
    opt_int(w, "openedStep", i.opened_step);
    opt_int(w, "lastStep", i.last_step);
    w.key("alertCount").integer(i.alert_count).end_object();
  }
  w.end_array().end_object();
  return out;
}

}  // namespace runlens::api
