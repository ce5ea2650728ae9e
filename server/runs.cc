// GET /v1/runs and GET /v1/runs/{runId} (spec section 39).
#include <algorithm>
#include <cmath>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

std::string get_runs(const Call& call) {
  Args a = call.args({"experiment", "model", "status", "limit"});
  store::RunFilter f;
  f.experiment_id = a.text("experiment").value_or("");
  f.model_id = a.text("model").value_or("");
  f.status = a.choice("status", "", {"running", "completed", "failed", "aborted"});
  f.limit = a.integer("limit", 1, 10000).value_or(100);
  auto s = call.open();
  auto rows = s.graph->runs(f);
  std::string out;
  json::Writer w(&out);
  w.begin_object().key("runs").begin_array();
  for (const auto& r : rows) {
    w.begin_object();
    run_summary(w, r);
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
