// GET /v1/runs/{runId}/steps: the per-step aggregates.
#include <algorithm>
#include <cmath>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

std::string get_steps(const Call& call) {
  Args a = call.args({"fromStep", "toStep", "limit"});
  store::StepRange range = a.steps();
  int64_t limit = a.integer("limit", 1, 1'000'000).value_or(1000);
  auto s = call.open();
  store::RunRow r = run_or_404(s, call.match(1));
  auto rows = s.graph->steps(r.run_id, range, limit);
  std::string out;
  json::Writer w(&out);
  w.begin_object().key("runId").str(r.run_id).key("steps").begin_array();
  for (const auto& row : rows) {
    const StepStats& x = row.stats;
    w.begin_object().key("step").integer(x.step).key("timeNs").integer(row.time_ns);
    w.key("worldSize").integer(x.world_size).key("reportedRanks").integer(x.reported);
    w.key("stepMs").num(x.step_ms);
    w.key("rankTimeMs").begin_object().key("min").num(x.work_min).key("p50").num(x.work_p50).key("p95").num(x.work_p95);
    w.key("p99").num(x.work_p99).key("max").num(x.work_max).end_object();
    opt_int(w, "slowestRank", x.slowest_rank >= 0 ? std::optional<int64_t>(x.slowest_rank) : std::nullopt);
    w.key("stragglerRatio").num(x.straggler_ratio);
    w.key("tokens").integer(x.tokens);
    opt_num(w, "tokensPerSecond", x.tokens_per_s);
    opt_num(w, "mfu", x.mfu);
    opt_num(w, "dataWaitRatio", x.data_wait_ratio);
    opt_num(w, "communicationRatio", x.communication_ratio);
    opt_num(w, "loss", x.loss);
    opt_num(w, "valLoss", x.val_loss);
    opt_num(w, "learningRate", x.lr);
    opt_num(w, "gradNorm", x.grad_norm);
    w.end_object();
  }
  w.end_array().end_object();
  return out;
}

}  // namespace runlens::api
