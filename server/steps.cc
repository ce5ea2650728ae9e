// GET /v1/runs/{runId}/steps: the per-step aggregates, at full resolution or
// bucketed into at most maxPoints rows.
#include <algorithm>
#include <cmath>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

namespace {

// Mean of the values present; nullopt when none.
struct Mean {
  double sum = 0;
  int64_t n = 0;
  void add(const std::optional<double>& v) {
    if (v) sum += *v, ++n;
  }
  std::optional<double> get() const { return n ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt; }
};

// A non-finite value in the bucket is the bucket's value (the NaN step
// survives bucketing); else the mean.
struct Series {
  Mean mean;
  std::optional<double> non_finite;
  void add(const std::optional<double>& v) {
    if (v && !std::isfinite(*v)) {
      if (!non_finite) non_finite = *v;
      return;
    }
    mean.add(v);
  }
  std::optional<double> get() const { return non_finite ? non_finite : mean.get(); }
};

void breakdown(json::Writer& w, const StepStats& x) {
  w.key("breakdownMs").begin_object();
  opt_num(w, "forward", x.forward_ms);
  opt_num(w, "backward", x.backward_ms);
  opt_num(w, "optimizer", x.optimizer_ms);
  opt_num(w, "comm", x.comm_ms);
  opt_num(w, "dataWait", x.data_wait_ms);
  w.end_object();
}

void step_row(json::Writer& w, const store::StepRow& row, std::optional<int64_t> last_step) {
  const StepStats& x = row.stats;
  w.begin_object().key("step").integer(x.step);
  if (last_step) w.key("lastStep").integer(*last_step);
  w.key("timeNs").integer(row.time_ns);
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
  breakdown(w, x);
  w.end_object();
}

// Rows [begin, end) as one: the first step and time, stepMs the max, the
// slowest rank of the slowest step, tokens summed, the rest averaged.
store::StepRow bucket(const std::vector<store::StepRow>& rows, size_t begin, size_t end) {
  store::StepRow out = rows[begin];
  StepStats& o = out.stats;
  Mean world, reported, wmin, p50, p95, p99, wmax, ratio, tps, mfu, dw, cr, lr, fw, bw, opt, comm, wait;
  Series loss, val, grad;
  int64_t tokens = 0;
  double step_ms = -1;
  for (size_t i = begin; i < end; ++i) {
    const StepStats& x = rows[i].stats;
    world.add(x.world_size);
    reported.add(x.reported);
    wmin.add(x.work_min);
    p50.add(x.work_p50);
    p95.add(x.work_p95);
    p99.add(x.work_p99);
    wmax.add(x.work_max);
    ratio.add(x.straggler_ratio);
    tps.add(x.tokens_per_s);
    mfu.add(x.mfu);
    dw.add(x.data_wait_ratio);
    cr.add(x.communication_ratio);
    lr.add(x.lr);
    fw.add(x.forward_ms);
    bw.add(x.backward_ms);
    opt.add(x.optimizer_ms);
    comm.add(x.comm_ms);
    wait.add(x.data_wait_ms);
    loss.add(x.loss);
    val.add(x.val_loss);
    grad.add(x.grad_norm);
    tokens += x.tokens;
    if (x.step_ms > step_ms) step_ms = x.step_ms, o.slowest_rank = x.slowest_rank;
  }
  o.world_size = static_cast<int32_t>(std::lround(world.get().value_or(0)));
  o.reported = static_cast<int32_t>(std::lround(reported.get().value_or(0)));
  o.step_ms = step_ms;
  o.work_min = wmin.get().value_or(0);
  o.work_p50 = p50.get().value_or(0);
  o.work_p95 = p95.get().value_or(0);
  o.work_p99 = p99.get().value_or(0);
  o.work_max = wmax.get().value_or(0);
  o.straggler_ratio = ratio.get().value_or(0);
  o.tokens = tokens;
  o.tokens_per_s = tps.get();
  o.mfu = mfu.get();
  o.data_wait_ratio = dw.get();
  o.communication_ratio = cr.get();
  o.lr = lr.get();
  o.forward_ms = fw.get();
  o.backward_ms = bw.get();
  o.optimizer_ms = opt.get();
  o.comm_ms = comm.get();
  o.data_wait_ms = wait.get();
  o.loss = loss.get();
  o.val_loss = val.get();
  o.grad_norm = grad.get();
  return out;
}

}  // namespace

std::string get_steps(const Call& call) {
  Args a = call.args({"fromStep", "toStep", "limit", "maxPoints"});
  store::StepRange range = a.steps();
  int64_t limit = a.integer("limit", 1, 1'000'000).value_or(1000);
  std::optional<int64_t> max_points = a.integer("maxPoints", 10, 10000);
  // With maxPoints the whole range is read and bucketed (limit still caps the rows read).
  if (max_points && !a.text("limit")) limit = 1'000'000;
  auto s = call.open();
  store::RunRow r = run_or_404(s, call.match(1));
  auto rows = s.graph->steps(r.run_id, range, limit);
  std::string out;
  json::Writer w(&out);
  w.begin_object().key("runId").str(r.run_id);
  size_t per = 1;
  if (max_points && rows.size() > static_cast<size_t>(*max_points)) {
    per = (rows.size() + static_cast<size_t>(*max_points) - 1) / static_cast<size_t>(*max_points);
  }
  if (max_points) w.key("bucketSteps").integer(static_cast<int64_t>(per));
  w.key("steps").begin_array();
  if (!max_points) {
    for (const auto& row : rows) step_row(w, row, std::nullopt);
  } else {
    for (size_t i = 0; i < rows.size(); i += per) {
      size_t end = std::min(rows.size(), i + per);
      step_row(w, per == 1 ? rows[i] : bucket(rows, i, end), rows[end - 1].stats.step);
    }
  }
  w.end_array().end_object();
  return out;
}

}  // namespace runlens::api
