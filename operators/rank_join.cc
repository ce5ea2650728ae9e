#include "operators/rank_join.h"

#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "operators/median.h"
#include "operators/placement.h"
#include "operators/run_deadlines.h"
#include "operators/run_state.h"

namespace runlens::ops {

void measure_ranks(StepRecord& rec) {
  rec.work_ms.clear();
  rec.work_ms.reserve(rec.ranks.size());
  for (const Step& s : rec.ranks) {
    double w = s.step_ms;
    if (s.has(Step::F::comm_ms)) w -= s.comm_ms;
    if (s.has(Step::F::data_wait_ms)) w -= s.data_wait_ms;
    rec.work_ms.push_back(w > 0 ? w : s.step_ms);
  }
  std::vector<double> scratch = rec.work_ms;
  double median = scratch.empty() ? 0 : median_in_place(scratch);
  rec.ratio_to_median.clear();
  rec.ratio_to_median.reserve(rec.ranks.size());
  rec.slowest_rank = -1;
  double slowest_ms = -1;
  for (size_t i = 0; i < rec.ranks.size(); ++i) {
    rec.ratio_to_median.push_back(median > 0 ? rec.work_ms[i] / median : 0);
    if (rec.work_ms[i] > slowest_ms) slowest_ms = rec.work_ms[i], rec.slowest_rank = rec.ranks[i].rank;
  }
}

namespace {

struct Pending {
  std::vector<Step> by_rank;  // index = rank; present when have[rank]
  std::vector<bool> have;
  int32_t count = 0;
  int64_t first_time = 0;
  int64_t deadline = 0;
  template <class Io>
  void fields(Io& io) {
    io(by_rank, have, count, first_time, deadline);
    if constexpr (runtime::state::kReading<Io>) {
      if (by_rank.size() != have.size())
        io.fail("a pending step has reports of " + std::to_string(by_rank.size()) + " ranks and presence bits of " +
                std::to_string(have.size()));
    }
  }
};

struct RunState {
  std::shared_ptr<const RunInfo> info;
  int32_t world = 0;                   // 0 = unknown (no run_start yet)
  std::map<int64_t, Pending> pending;  // by step
  std::unordered_set<int64_t> closed;  // recently closed steps, to recognise late reports
  std::deque<int64_t> closed_order;
  // Ranks reported missing, with the step they went missing at; a rank is
  // re-armed when it reports a later step.
  std::unordered_map<int32_t, int64_t> missing;
  std::vector<int64_t> last_seen;  // by rank: the latest step it reported
  Symbol tenant;
  template <class Io>
  void fields(Io& io) {
    io(info, world, pending, closed, closed_order, missing, last_seen, tenant);
  }
};

constexpr size_t kClosedMemory = 4096;

class RankJoin final : public PerRunOperator<RankJoin, RunState> {
 public:
  static constexpr runtime::state::StateType kState{"rank_join", 1};
  RankJoin(const RankJoinOptions& o, const runtime::OperatorContext& ctx) : o_(o), ctx_(ctx) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_, timers_);
  }

  // Timers fire before the row at or after them (end of input: whatever is
  // still pending times out now).
  void advance(int64_t t, Emitter& out) { fire_until(t, out); }

  // The job restarted (from a checkpoint): steps in flight will never
  // complete and step numbers may repeat. Not a missing rank. The rank map stays.
  void on_restart(Symbol run, const Record&, Emitter&) {
    if (run.empty()) return;
    auto it = runs_.find(run);
    if (it == runs_.end()) return;
    it->second.pending.clear();
    it->second.closed.clear();
    it->second.closed_order.clear();
    it->second.missing.clear();
    it->second.last_seen.clear();
  }

  void handle(const Record& r, Emitter& out) {
    switch (r.kind()) {
      case Kind::kRunStart:
        on_run_start(r);
        break;
      case Kind::kStep:
        on_step(r, out);
        break;
      case Kind::kRunEnd:
        on_run_end(r, out);
        break;
      default:
        break;
    }
  }

 private:
  void on_run_start(const Record& r) {
    const RunStart& rs = r.run_start();
    RunState& st = runs_[rs.run_id];
    st.info = RunInfo::from(rs);
    st.tenant = r.tenant;
    st.world = static_cast<int32_t>(st.info->placement.size());
  }

  void on_run_end(const Record& r, Emitter& out) {
    auto it = runs_.find(r.as<RunEnd>().run_id);
    if (it == runs_.end()) return;
    // Emit what was joined, without raising rank_missing: the run is over.
    for (auto& [step, p] : it->second.pending) emit(it->first, it->second, step, p, r.time_ns, true, false, out);
    runs_.erase(it);
  }

  void on_step(const Record& r, Emitter& out) {
    const Step& s = r.as<Step>();
    RunState& st = runs_[s.run_id];
    if (s.rank < 0 || (st.world > 0 && s.rank >= st.world) || s.rank >= (1 << 20)) {
      reject(r, "rank " + std::to_string(s.rank) + " is outside the run's world size " + std::to_string(st.world));
      return;
    }
    if (st.closed.count(s.step)) {
      reject(r, "step " + std::to_string(s.step) + " of rank " + std::to_string(s.rank) +
                    " arrived after the step was closed (it timed out or the run restarted)");
      ctx_.counters->add(ctx_.counters->late, 1);
      return;
    }
    auto [it, fresh] = st.pending.try_emplace(s.step);
    Pending& p = it->second;
    if (fresh) {
      p.first_time = r.time_ns;
      p.deadline = r.time_ns + o_.timeout_ns;
      timers_.schedule(p.deadline, s.run_id, s.step);
      if (static_cast<int64_t>(st.pending.size()) > o_.max_pending_steps) {
        // Too many open steps: close the oldest now, as if it had timed out.
        auto oldest = st.pending.begin();
        close(s.run_id, st, oldest, r.time_ns, out);
        if (!st.pending.count(s.step)) return;
      }
    }
    size_t need = static_cast<size_t>(std::max<int32_t>(st.world, s.rank + 1));
    if (p.by_rank.size() < need) {
      p.by_rank.resize(need);
      p.have.resize(need, false);
    }
    if (p.have[s.rank]) {
      reject(r, "duplicate report of step " + std::to_string(s.step) + " by rank " + std::to_string(s.rank));
      return;
    }
    p.have[s.rank] = true;
    p.by_rank[s.rank] = s;
    ++p.count;
    if (st.last_seen.size() <= static_cast<size_t>(s.rank)) st.last_seen.resize(s.rank + 1, INT64_MIN);
    st.last_seen[s.rank] = std::max(st.last_seen[s.rank], s.step);
    if (auto m = st.missing.find(s.rank); m != st.missing.end() && s.step > m->second) st.missing.erase(m);
    if (st.world > 0 && p.count == st.world) {
      auto node = st.pending.find(s.step);
      emit(s.run_id, st, s.step, node->second, r.time_ns, false, false, out);
      remember_closed(st, s.step);
      st.pending.erase(node);
    }
  }

  void fire_until(int64_t t, Emitter& out) {
    timers_.fire_until(t, [&](int64_t deadline, Symbol run_id, int64_t step) {
      auto run = runs_.find(run_id);
      if (run == runs_.end()) return;
      auto it = run->second.pending.find(step);
      if (it == run->second.pending.end() || it->second.deadline != deadline) return;
      close(run_id, run->second, it, deadline, out);
    });
  }

  void close(Symbol run_id, RunState& st, std::map<int64_t, Pending>::iterator it, int64_t at, Emitter& out) {
    emit(run_id, st, it->first, it->second, at, true, o_.alert_missing, out);
    remember_closed(st, it->first);
    st.pending.erase(it);
  }

  void remember_closed(RunState& st, int64_t step) {
    if (st.closed.insert(step).second) st.closed_order.push_back(step);
    while (st.closed_order.size() > kClosedMemory) {
      st.closed.erase(st.closed_order.front());
      st.closed_order.pop_front();
    }
  }

  void emit(Symbol run_id, RunState& st, int64_t step, Pending& p, int64_t at, bool timed_out, bool alert,
            Emitter& out) {
    auto rec = std::make_shared<StepRecord>();
    rec->run_id = run_id;
    rec->step = step;
    rec->world_size = st.world;
    rec->timed_out = timed_out;
    rec->first_time_ns = p.first_time;
    rec->run = st.info;
    rec->ranks.reserve(static_cast<size_t>(p.count));
    for (size_t rank = 0; rank < p.have.size(); ++rank) {
      if (p.have[rank]) rec->ranks.push_back(std::move(p.by_rank[rank]));
    }
    for (int32_t rank = 0; rank < st.world; ++rank) {
      bool have = static_cast<size_t>(rank) < p.have.size() && p.have[rank];
      if (!have) rec->missing.push_back(rank);
    }
    measure_ranks(*rec);
    if (alert && st.world > 0) {
      for (int32_t rank : rec->missing) {
        if (st.missing.count(rank)) continue;  // already reported
        // A rank that has reported a later step is not hung: it skipped this one.
        if (static_cast<size_t>(rank) < st.last_seen.size() && st.last_seen[rank] > step) continue;
        st.missing[rank] = step;
        out.emit(alert_record(missing_alert(run_id, st, step, rank, at, p)));
      }
    }
    Record r;
    r.time_ns = at;
    r.body = std::shared_ptr<const StepRecord>(std::move(rec));
    out.emit(std::move(r));
  }

  Alert missing_alert(Symbol run_id, const RunState& st, int64_t step, int32_t rank, int64_t at, const Pending& p) {
    Alert a;
    a.kind = alert_kind::kRankMissing;
    a.severity = Severity::kCritical;
    a.time_ns = at;
    a.tenant = st.tenant;
    a.run_id = run_id;
    a.step = step;
    std::string where = locate_rank(a, st.info.get(), rank);
    a.value = static_cast<double>(at - p.first_time) / 1e9;
    a.threshold = static_cast<double>(o_.timeout_ns) / 1e9;
    a.summary = where + " did not report step " + std::to_string(step) + " within " +
                runtime::format_duration(o_.timeout_ns) + " of the first rank (" + std::to_string(p.count) + " of " +
                std::to_string(st.world) + " ranks reported): a hang or a dead GPU";
    a.attrs = {{"reported_ranks", static_cast<double>(p.count)}, {"world_size", static_cast<double>(st.world)}};
    a.alert_id = make_alert_id(a, step);
    return a;
  }

  void reject(const Record& r, const std::string& why) {
    if (!ctx_.dead_letters) return;
    runtime::DeadLetter d;
    d.component = ctx_.node_id;
    d.position = "event time " + std::to_string(r.time_ns);
    d.reason = why;
    ctx_.dead_letters->write(d);
    ctx_.counters->add(ctx_.counters->dead_lettered, 1);
  }

  RankJoinOptions o_;
  runtime::OperatorContext ctx_;
  RunDeadlines<int64_t> timers_;  // by step
};

std::string describe_options(const RankJoinOptions& o) {
  return "timeout=" + runtime::format_duration(o.timeout_ns) +
         " max_pending_steps=" + std::to_string(o.max_pending_steps);
}

}  // namespace

std::unique_ptr<OperatorDef> MakeRankJoin(const RankJoinOptions& options) {
  return std::make_unique<PerRunDef<RankJoin, RankJoinOptions>>(options, &describe_options);
}

void RegisterRankJoin(Registry& registry) {
  ComponentInfo info;
  info.type = "rank_join";
  info.role = Role::kOperator;
  info.doc =
      "Joins one step's `step` events from all ranks of a run (world size and rank map from run_start) into a "
      "step record; emits it when every rank has reported or when event time passes the first report plus "
      "`timeout`, naming the missing ranks, and raises `rank_missing` for a rank missing past the timeout.";
  const RankJoinOptions defaults;  // each default is written once, in RankJoinOptions
  info.params = {
      {.name = "timeout",
       .type = ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.timeout_ns),
       .doc = "How long after a step's first rank report (event time) to wait for the other ranks.",
       .min = 0.001},
      {.name = "max_pending_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.max_pending_steps),
       .doc = "Most steps of one run held open at once; beyond it the oldest is closed as timed out.",
       .min = 1,
       .max = 1e7},
      {.name = "alert_missing",
       .type = ParamType::kBool,
       .default_value = runtime::bool_text(defaults.alert_missing),
       .doc = "Raise rank_missing for ranks missing past the timeout."},
  };
  info.accepts = mask(Kind::kRunStart) | mask(Kind::kStep) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kStepRecord) | mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    RankJoinOptions o;
    o.timeout_ns = ctx.params->get_duration_ns("timeout");
    o.max_pending_steps = ctx.params->get_int("max_pending_steps");
    o.alert_missing = ctx.params->get_bool("alert_missing");
    return MakeRankJoin(o);
  });
}

}  // namespace runlens::ops
