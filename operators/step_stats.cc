#include "operators/step_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "operators/median.h"
#include "operators/run_deadlines.h"
#include "operators/run_state.h"
#include "operators/straggler.h"

namespace runlens::ops {

namespace {
// Index of the nearest-rank quantile q of n values (n > 0).
size_t quantile_index(size_t n, double q) {
  size_t idx = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  return std::clamp<size_t>(idx, 1, n) - 1;
}

// The nearest-rank quantiles `qs` (ascending) of `v`, which it reorders: each
// selection works on what lies above the previous one, so three quantiles of
// a thousand ranks cost about two passes, not a sort.
template <size_t N>
void quantiles(std::vector<double>& v, const double (&qs)[N], double (&out)[N]) {
  auto from = v.begin();
  for (size_t i = 0; i < N; ++i) {
    auto at = v.begin() + static_cast<long>(quantile_index(v.size(), qs[i]));
    if (at >= from) {
      select_nth(from, at, v.end());
      from = at + 1;
    }
    out[i] = *at;
  }
}
}  // namespace

StepStats compute_step_stats(const StepRecord& rec) {
  StepStats st;
  st.run_id = rec.run_id;
  st.step = rec.step;
  st.world_size = rec.world_size;
  st.run = rec.run;
  st.shed = rec.shed;
  std::vector<double> work;
  work.reserve(rec.ranks.size());
  double data_sum = 0, comm_sum = 0;
  int data_n = 0, comm_n = 0;
  // forward, backward, optimizer, comm, data wait: sums and counts of the ranks that reported them.
  double part_sum[5] = {0, 0, 0, 0, 0};
  int part_n[5] = {0, 0, 0, 0, 0};
  const Step::F part_field[5] = {Step::F::forward_ms, Step::F::backward_ms, Step::F::optimizer_ms, Step::F::comm_ms,
                                 Step::F::data_wait_ms};
  bool tokens_known = false;
  for (const Step& s : rec.ranks) {
    if (!std::isfinite(s.step_ms)) continue;
    double w = straggler_work_ms(s);
    work.push_back(w);
    if (w > st.work_max || st.slowest_rank < 0) st.work_max = w, st.slowest_rank = s.rank;
    st.step_ms = std::max(st.step_ms, s.step_ms);
    if (s.step_ms > 0 && s.has(Step::F::data_wait_ms)) data_sum += s.data_wait_ms / s.step_ms, ++data_n;
    if (s.step_ms > 0 && s.has(Step::F::comm_ms)) comm_sum += s.comm_ms / s.step_ms, ++comm_n;
    if (s.has(Step::F::tokens)) st.tokens += s.tokens, tokens_known = true;
    const double part_value[5] = {s.forward_ms, s.backward_ms, s.optimizer_ms, s.comm_ms, s.data_wait_ms};
    for (int i = 0; i < 5; ++i) {
      if (s.has(part_field[i]) && std::isfinite(part_value[i])) part_sum[i] += part_value[i], ++part_n[i];
    }
  }
  std::optional<double>* parts[5] = {&st.forward_ms, &st.backward_ms, &st.optimizer_ms, &st.comm_ms, &st.data_wait_ms};
  for (int i = 0; i < 5; ++i) {
    if (part_n[i] > 0) *parts[i] = part_sum[i] / part_n[i];
  }
  st.reported = static_cast<int32_t>(work.size());
  if (!work.empty()) {
    st.work_min = *std::min_element(work.begin(), work.end());
    double q[3];
    quantiles(work, {0.50, 0.95, 0.99}, q);
    st.work_p50 = q[0];
    st.work_p95 = q[1];
    st.work_p99 = q[2];
    st.straggler_ratio = st.work_p50 > 0 ? st.work_max / st.work_p50 : 0;
  }
  if (data_n) st.data_wait_ratio = data_sum / data_n;
  if (comm_n) st.communication_ratio = comm_sum / comm_n;
  if (tokens_known && st.step_ms > 0) {
    st.tokens_per_s = static_cast<double>(st.tokens) / (st.step_ms / 1000.0);
    if (rec.run && rec.run->start.has(RunStart::F::gpu_peak_flops) &&
        rec.run->start.has(RunStart::F::model_flops_per_token) && rec.run->start.gpu_peak_flops > 0 &&
        st.reported > 0) {
      st.mfu = *st.tokens_per_s * rec.run->start.model_flops_per_token /
               (rec.run->start.gpu_peak_flops * static_cast<double>(st.reported));
    }
  }
  return st;
}

namespace {

struct Pending {
  std::shared_ptr<StepStats> stats;
  int64_t deadline = 0;
  template <class Io>
  void fields(Io& io) {
    io(stats, deadline);
  }
};

struct RunState {
  std::map<int64_t, Pending> waiting;  // step stats waiting for their train event
  std::map<int64_t, Train> early;      // train events that came before their step record
  template <class Io>
  void fields(Io& io) {
    io(waiting, early);
  }
};

void attach(StepStats& st, const Train& t) {
  if (t.has(Train::F::loss)) st.loss = t.loss;
  if (t.has(Train::F::val_loss)) st.val_loss = t.val_loss;
  if (t.has(Train::F::lr)) st.lr = t.lr;
  if (t.has(Train::F::grad_norm)) st.grad_norm = t.grad_norm;
}

class StepStatsOp final : public PerRunOperator<StepStatsOp, RunState> {
 public:
  // Version 4: rank entries (run_start, rank maps) carry gpu_model and node_type.
  static constexpr runtime::state::StateType kState{"step_stats", 4};
  explicit StepStatsOp(const StepStatsOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_, timers_);
  }

  void advance(int64_t t, Emitter& out) { fire_until(t, out); }
  // A restart drops the early train events (step numbers may repeat); the
  // step stats waiting for theirs still go out at their deadline.
  void on_restart(Symbol run, const Record&, Emitter&) { runs_[run].early.clear(); }

  void handle(const Record& r, Emitter& out) {
    switch (r.kind()) {
      case Kind::kStepRecord:
        on_step(r, out);
        break;
      case Kind::kTrain:
        on_train(r, out);
        break;
      case Kind::kRunEnd: {
        auto it = runs_.find(r.as<RunEnd>().run_id);
        if (it == runs_.end()) break;
        for (auto& [step, p] : it->second.waiting) emit(std::move(p.stats), r.time_ns, r.tenant, out);
        runs_.erase(it);
        break;
      }
      case Kind::kEvent: {
        // A failure stops the job: the steps waiting for their train event go out now.
        if (!stops_run(r.as<Occurrence>())) break;
        auto it = runs_.find(r.as<Occurrence>().run_id);
        if (it == runs_.end()) break;
        for (auto& [step, p] : it->second.waiting) emit(std::move(p.stats), r.time_ns, r.tenant, out);
        it->second.waiting.clear();
        break;
      }
      default:
        break;
    }
  }

 private:
  void on_step(const Record& r, Emitter& out) {
    const StepRecord& rec = r.step_record();
    auto stats = std::make_shared<StepStats>(compute_step_stats(rec));
    RunState& st = runs_[rec.run_id];
    if (auto it = st.early.find(rec.step); it != st.early.end()) {
      attach(*stats, it->second);
      st.early.erase(it);
      emit(std::move(stats), r.time_ns, r.tenant, out);
      return;
    }
    int64_t deadline = r.time_ns + o_.train_wait_ns;
    st.waiting[rec.step] = Pending{std::move(stats), deadline};
    timers_.schedule(deadline, rec.run_id, rec.step);
    while (static_cast<int64_t>(st.waiting.size()) > o_.max_pending) {
      emit(std::move(st.waiting.begin()->second.stats), r.time_ns, r.tenant, out);
      st.waiting.erase(st.waiting.begin());
    }
  }

  void on_train(const Record& r, Emitter& out) {
    const Train& t = r.as<Train>();
    RunState& st = runs_[t.run_id];
    if (auto it = st.waiting.find(t.step); it != st.waiting.end()) {
      attach(*it->second.stats, t);
      emit(std::move(it->second.stats), r.time_ns, r.tenant, out);
      st.waiting.erase(it);
      return;
    }
    // The lowest rank's report wins when several ranks send train metrics.
    auto [it, fresh] = st.early.try_emplace(t.step, t);
    if (!fresh && (t.has(Train::F::rank) ? t.rank : 0) < (it->second.has(Train::F::rank) ? it->second.rank : 0))
      it->second = t;
    while (static_cast<int64_t>(st.early.size()) > o_.max_pending) st.early.erase(st.early.begin());
  }

  void fire_until(int64_t t, Emitter& out) {
    timers_.fire_until(t, [&](int64_t deadline, Symbol run_id, int64_t step) {
      auto run = runs_.find(run_id);
      if (run == runs_.end()) return;
      auto it = run->second.waiting.find(step);
      if (it == run->second.waiting.end() || it->second.deadline != deadline) return;
      emit(std::move(it->second.stats), deadline, Symbol(), out);
      run->second.waiting.erase(it);
    });
  }

  static void emit(std::shared_ptr<StepStats> stats, int64_t at, Symbol tenant, Emitter& out) {
    Record r;
    r.time_ns = at;
    r.tenant = tenant;
    r.body = std::shared_ptr<const StepStats>(std::move(stats));
    out.emit(std::move(r));
  }

  StepStatsOptions o_;
  RunDeadlines<int64_t> timers_;  // by step
};

std::string describe_options(const StepStatsOptions& o) {
  return "train_wait=" + runtime::format_duration(o.train_wait_ns);
}

}  // namespace

std::unique_ptr<OperatorDef> MakeStepStats(const StepStatsOptions& options) {
  return std::make_unique<PerRunDef<StepStatsOp, StepStatsOptions>>(options, &describe_options);
}

void RegisterStepStats(Registry& registry) {
  ComponentInfo info;
  info.type = "step_stats";
  info.role = Role::kOperator;
  info.doc =
      "Per joined step: min/p50/p95/p99/max of the ranks' work time, the slowest rank and straggler_ratio, "
      "tokens/s, MFU (from run_start's gpu_peak_flops and model_flops_per_token), data_wait_ratio and "
      "communication_ratio, the means over its ranks of forward, backward, optimizer, comm and data-wait time, with "
      "the step's loss, LR and grad norm from its train event.";
  const StepStatsOptions defaults;  // each default is written once, in StepStatsOptions
  info.params = {
      {.name = "train_wait",
       .type = ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.train_wait_ns),
       .doc = "How long (event time) a step's aggregates wait for its train event before they are emitted without it.",
       .min = 0},
      {.name = "max_pending",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.max_pending),
       .doc = "Most steps per run held waiting for a train event.",
       .min = 1},
  };
  info.accepts = mask(Kind::kStepRecord) | mask(Kind::kTrain) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kStepStats);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    StepStatsOptions o;
    o.train_wait_ns = ctx.params->get_duration_ns("train_wait");
    o.max_pending = ctx.params->get_int("max_pending");
    return MakeStepStats(o);
  });
}

}  // namespace runlens::ops
