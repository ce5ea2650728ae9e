#include "operators/rank_join.h"

#include <algorithm>
#include <array>
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

// What the collector shed of a run in one minute of event time (by the minute
// of each report's earliest row): rows by priority, for telemetry_shed.
struct ShedMinute {
  std::array<int64_t, runtime::kPriorities> rows{};
  template <class Io>
  void fields(Io& io) {
    io(rows);
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
  // By rank: the step of its most recent report, joined or set aside (INT64_MIN:
  // none); their median is the run's current step.
  std::vector<int64_t> latest;
  int64_t current = INT64_MIN;  // the current step when last computed (INT64_MIN: not yet)
  // Ranks whose latest report jumped past max_step_jump (step_anomaly raised),
  // with the run's current step then; their reports are set aside until one is
  // within max_step_jump again.
  std::unordered_map<int32_t, int64_t> anomalous;
  int64_t stalled_step = INT64_MIN;  // the step job_stalled was raised at, until a step closes without a stall
  // Event-time spans [first, last] of step reports the collector shed (from
  // on_shed), merged, kept while a step they concern can still close.
  std::vector<std::pair<int64_t, int64_t>> shed_spans;
  std::map<int64_t, ShedMinute> shed_minutes;  // by minute (event time / 60 s), until telemetry_shed is raised
  template <class Io>
  void fields(Io& io) {
    io(info, world, pending, closed, closed_order, missing, last_seen, tenant, latest, current, anomalous, stalled_step,
       shed_spans, shed_minutes);
  }
};

constexpr size_t kClosedMemory = 4096;
constexpr size_t kShedSpans = 256;  // most shed spans kept per run: beyond it the two oldest merge
constexpr int64_t kShedMinuteNs = 60'000'000'000;

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

class RankJoin final : public PerRunOperator<RankJoin, RunState> {
 public:
  // Version 5: rank entries (run_start, rank maps) carry gpu_model and node_type.
  static constexpr runtime::state::StateType kState{"rank_join", 5};
  RankJoin(const RankJoinOptions& o, const runtime::OperatorContext& ctx) : o_(o), ctx_(ctx) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_, timers_, shed_timers_);
  }

  // Timers fire before the row at or after them (end of input: whatever is
  // still pending times out now).
  void advance(int64_t t, Emitter& out) {
    now_ = std::max(now_, t);
    fire_until(t, out);
    fire_shed_until(t, out);
  }

  // The runtime shed rows on their way here. Step reports mark the steps
  // they may belong to as incomplete by shedding (see concerned()); every
  // row of a run is counted for its telemetry_shed alert, raised when event
  // time passes the end of the minute.
  void on_shed(const runtime::ShedReport<Record>& rep, Emitter&) override {
    Symbol run = rep.sample.run_id();
    if (rep.broadcast || run.empty() || rep.rows <= 0) return;
    RunState& st = runs_[run];
    if (rep.kinds & mask(Kind::kStep)) add_shed_span(st, rep.first_ns, rep.last_ns);
    int64_t minute = floor_div(rep.first_ns, kShedMinuteNs);
    auto [it, fresh] = st.shed_minutes.try_emplace(minute);
    it->second.rows[static_cast<size_t>(std::clamp(rep.priority, 0, runtime::kPriorities - 1))] += rep.rows;
    if (fresh) shed_timers_.schedule(minute_end(minute), run, minute);
  }

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
    it->second.latest.clear();
    it->second.current = INT64_MIN;
    it->second.anomalous.clear();
    it->second.stalled_step = INT64_MIN;
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
      case Kind::kEvent:
        if (stops_run(r.as<Occurrence>())) on_failure(r, out);
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
    for (const auto& [minute, counts] : it->second.shed_minutes)
      out.emit(alert_record(shed_alert(it->first, it->second, minute, counts, r.time_ns)));
    runs_.erase(it);
  }

  // A failure stops the job: its pending steps are emitted now with what
  // arrived, raising no rank_missing (the failure is the alert); a report of
  // one of them that comes later is late.
  void on_failure(const Record& r, Emitter& out) {
    auto it = runs_.find(r.as<Occurrence>().run_id);
    if (it == runs_.end()) return;
    RunState& st = it->second;
    for (auto& [step, p] : st.pending) {
      emit(it->first, st, step, p, r.time_ns, true, false, out);
      remember_closed(st, step);
    }
    st.pending.clear();
  }

  void on_step(const Record& r, Emitter& out) {
    const Step& s = r.as<Step>();
    RunState& st = runs_[s.run_id];
    if (!indexable_rank(s.rank) || (st.world > 0 && s.rank >= st.world)) {
      reject(r, "rank " + std::to_string(s.rank) + " is outside the run's world size " + std::to_string(st.world));
      return;
    }
    if (set_aside(r, s, st, out)) return;
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
      st.stalled_step = INT64_MIN;  // every rank reported: whatever stalled is moving again
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

  void fire_shed_until(int64_t t, Emitter& out) {
    shed_timers_.fire_until(t, [&](int64_t deadline, Symbol run_id, int64_t minute) {
      auto run = runs_.find(run_id);
      if (run == runs_.end()) return;
      auto it = run->second.shed_minutes.find(minute);
      if (it == run->second.shed_minutes.end()) return;
      out.emit(alert_record(shed_alert(run_id, run->second, minute, it->second, deadline)));
      run->second.shed_minutes.erase(it);
    });
  }

  static int64_t minute_end(int64_t minute) {
    return minute >= INT64_MAX / kShedMinuteNs ? runtime::kEndOfTime : (minute + 1) * kShedMinuteNs;
  }

  static int64_t sat_sub(int64_t a, int64_t b) { return a < INT64_MIN + b ? INT64_MIN : a - b; }

  // Adds a span of shed step reports, merged with those it overlaps; spans
  // that can no longer concern a step are forgotten: a step still open has
  // its deadline ahead of event time, so its span starts at most two
  // timeouts before it.
  void add_shed_span(RunState& st, int64_t first, int64_t last) {
    auto& spans = st.shed_spans;
    int64_t horizon = sat_sub(sat_sub(now_, o_.timeout_ns), o_.timeout_ns);
    std::erase_if(spans, [&](const auto& s) { return s.second < horizon; });
    for (auto& s : spans) {
      if (s.first <= last && first <= s.second) {
        s.first = std::min(s.first, first), s.second = std::max(s.second, last);
        return;
      }
    }
    spans.emplace_back(first, last);
    std::sort(spans.begin(), spans.end());
    if (spans.size() > kShedSpans) {
      spans[1].first = spans[0].first;
      spans.erase(spans.begin());
    }
  }

  // Whether step reports shed by the collector may belong to the step: one
  // fell within the step's time span, from `timeout` before its first report
  // (a shed report may have been the first) to its deadline.
  bool concerned(const RunState& st, const Pending& p) const {
    int64_t from = sat_sub(p.first_time, o_.timeout_ns);
    for (const auto& s : st.shed_spans) {
      if (s.first <= p.deadline && s.second >= from) return true;
    }
    return false;
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
    if (static_cast<size_t>(p.count) == p.by_rank.size()) {
      rec->ranks = std::move(p.by_rank);  // every rank's slot holds its report: in rank order already
    } else {
      rec->ranks.reserve(static_cast<size_t>(p.count));
      for (size_t rank = 0; rank < p.have.size(); ++rank) {
        if (p.have[rank]) rec->ranks.push_back(std::move(p.by_rank[rank]));
      }
    }
    for (int32_t rank = 0; rank < st.world; ++rank) {
      bool have = static_cast<size_t>(rank) < p.have.size() && p.have[rank];
      if (!have) rec->missing.push_back(rank);
    }
    measure_ranks(*rec);
    // Incomplete by shedding: its missing ranks may have reported; nothing is raised for them.
    rec->shed = !rec->missing.empty() && concerned(st, p);
    if (alert && st.world > 0 && !rec->shed) raise_missing(run_id, st, step, p, at, rec->missing, out);
    Record r;
    r.time_ns = at;
    r.body = std::shared_ptr<const StepRecord>(std::move(rec));
    out.emit(std::move(r));
  }

  // `step` lies more than max_step_jump past `current`.
  bool beyond(int64_t step, int64_t current) const {
    return o_.max_step_jump > 0 && current != INT64_MIN && step > current &&
           static_cast<uint64_t>(step) - static_cast<uint64_t>(current) > static_cast<uint64_t>(o_.max_step_jump);
  }

  // The run's current step: the (lower) median of its ranks' latest steps.
  int64_t current_step(const RunState& st) {
    scratch_.clear();
    for (int64_t v : st.latest) {
      if (v != INT64_MIN) scratch_.push_back(v);
    }
    if (scratch_.empty()) return INT64_MIN;
    return lower_median_in_place(scratch_);
  }

  // Judges a report against the run's current step. A step more than
  // max_step_jump past it (a restarted or corrupted counter) is set aside:
  // dead-lettered, no step opened, no deadline started, and step_anomaly
  // raised the first time in a row. True when the report was set aside.
  bool set_aside(const Record& r, const Step& s, RunState& st, Emitter& out) {
    if (o_.max_step_jump <= 0) return false;
    // The cached current step only lags the true one, so only a report beyond
    // it needs the median computed again.
    if (st.current == INT64_MIN || beyond(s.step, st.current)) st.current = current_step(st);
    if (st.latest.size() <= static_cast<size_t>(s.rank)) st.latest.resize(static_cast<size_t>(s.rank) + 1, INT64_MIN);
    st.latest[s.rank] = s.step;
    if (!beyond(s.step, st.current)) {
      st.anomalous.erase(s.rank);
      return false;
    }
    reject(r, "step " + std::to_string(s.step) + " of rank " + std::to_string(s.rank) + " is more than " +
                  std::to_string(o_.max_step_jump) + " steps past the run's current step " +
                  std::to_string(st.current) + " (max_step_jump): set aside");
    if (st.anomalous.emplace(s.rank, st.current).second)
      out.emit(alert_record(anomaly_alert(s.run_id, st, s.rank, s.step, r.time_ns)));
    return true;
  }

  // The alerts of a step closed by its deadline: one job_stalled when more
  // than stall_fraction of the ranks are silent, else one node_unreachable per
  // node whose ranks are all silent, two or more of them newly (lost
  // together, not one by one), and rank_missing for the other ranks newly
  // silent. Silent: missing, not set aside as anomalous and
  // not already past this step. Each rank once, until it reports a later step.
  void raise_missing(Symbol run_id, RunState& st, int64_t step, const Pending& p, int64_t at,
                     const std::vector<int32_t>& missing, Emitter& out) {
    std::vector<int32_t> silent;
    for (int32_t rank : missing) {
      if (st.anomalous.count(rank)) continue;  // it reports, with a step counter gone wrong
      // A rank that has reported a later step is not hung: it skipped this one.
      if (static_cast<size_t>(rank) < st.last_seen.size() && st.last_seen[rank] > step) continue;
      silent.push_back(rank);
    }
    if (static_cast<double>(silent.size()) > o_.stall_fraction * static_cast<double>(st.world)) {
      if (st.stalled_step == INT64_MIN) {
        st.stalled_step = step;
        out.emit(alert_record(stalled_alert(run_id, st, step, p, at, silent)));
      }
      for (int32_t rank : silent) st.missing.try_emplace(rank, step);
      return;
    }
    st.stalled_step = INT64_MIN;
    std::vector<int32_t> fresh;
    for (int32_t rank : silent) {
      if (!st.missing.count(rank)) fresh.push_back(rank);
    }
    if (fresh.empty()) return;
    std::vector<bool> is_silent(static_cast<size_t>(st.world), false);
    for (int32_t rank : silent) is_silent[static_cast<size_t>(rank)] = true;
    // The ranks of each node, from the rank map.
    std::unordered_map<Symbol, std::vector<int32_t>> on_node;
    const RunInfo* info = st.info.get();
    auto node_of = [&](int32_t rank) {
      const RankPlacement* where = info ? info->place(rank) : nullptr;
      return where ? where->node : Symbol();
    };
    if (info) {
      for (int32_t rank = 0; rank < st.world; ++rank) {
        Symbol n = node_of(rank);
        if (!n.empty()) on_node[n].push_back(rank);
      }
    }
    std::unordered_set<Symbol> judged;
    for (int32_t rank : fresh) {
      Symbol n = node_of(rank);
      if (!n.empty() && judged.insert(n).second) {
        const std::vector<int32_t>& ranks = on_node[n];
        // Lost together: every rank of the node silent, at least two of them newly.
        bool all =
            std::all_of(ranks.begin(), ranks.end(), [&](int32_t k) { return is_silent[static_cast<size_t>(k)]; });
        auto newly = std::count_if(ranks.begin(), ranks.end(), [&](int32_t k) { return !st.missing.count(k); });
        if (all && newly >= 2) {
          out.emit(alert_record(node_alert(run_id, st, step, n, ranks, at, p)));
          for (int32_t k : ranks) st.missing.try_emplace(k, step);
        }
      }
      if (st.missing.count(rank)) continue;  // its node's alert names it
      st.missing[rank] = step;
      out.emit(alert_record(missing_alert(run_id, st, step, rank, at, p)));
    }
  }

  // "0, 1, 2 and 5 more": the first `most` of `ranks`.
  static std::string rank_list(const std::vector<int32_t>& ranks, size_t most) {
    std::string s;
    for (size_t i = 0; i < ranks.size() && i < most; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > most) s += " and " + std::to_string(ranks.size() - most) + " more";
    return s;
  }

  // An alert of `kind` about run `run_id`, at event time `at`: what every alert below starts from.
  static Alert run_alert(std::string_view kind, Severity severity, Symbol run_id, const RunState& st, int64_t at) {
    Alert a;
    a.kind = kind;
    a.severity = severity;
    a.time_ns = at;
    a.tenant = st.tenant;
    a.run_id = run_id;
    return a;
  }

  Alert stalled_alert(Symbol run_id, const RunState& st, int64_t step, const Pending& p, int64_t at,
                      const std::vector<int32_t>& silent) {
    Alert a = run_alert(alert_kind::kJobStalled, Severity::kCritical, run_id, st, at);
    a.step = step;
    a.value = static_cast<double>(silent.size()) / static_cast<double>(st.world);
    a.threshold = o_.stall_fraction;
    a.summary = "JOB STALLED: " + std::to_string(silent.size()) + " of " + std::to_string(st.world) +
                " ranks did not report step " + std::to_string(step) + " within " +
                runtime::format_duration(o_.timeout_ns) + " of the first rank (" + std::to_string(p.count) +
                " reported; more than " + runtime::number_text(o_.stall_fraction * 100) + " % silent): ranks " +
                rank_list(silent, kSampleRanks) + " (a hung collective, a lost job)";
    a.attrs = {{"missing_ranks", static_cast<double>(silent.size())},
               {"reported_ranks", static_cast<double>(p.count)},
               {"world_size", static_cast<double>(st.world)},
               {"wait_s", static_cast<double>(at - p.first_time) / 1e9}};
    a.alert_id = make_alert_id(a, step);
    return a;
  }

  Alert node_alert(Symbol run_id, const RunState& st, int64_t step, Symbol node, const std::vector<int32_t>& ranks,
                   int64_t at, const Pending& p) {
    Alert a = run_alert(alert_kind::kNodeUnreachable, Severity::kCritical, run_id, st, at);
    a.step = step;
    a.node = node;
    a.value = static_cast<double>(at - p.first_time) / 1e9;
    a.threshold = static_cast<double>(o_.timeout_ns) / 1e9;
    a.summary = "NODE UNREACHABLE: none of the " + std::to_string(ranks.size()) + " ranks of node " + node.string() +
                " (ranks " + rank_list(ranks, kNodeRanks) + ") reported step " + std::to_string(step) + " within " +
                runtime::format_duration(o_.timeout_ns) + " of the first rank (" + std::to_string(p.count) + " of " +
                std::to_string(st.world) + " ranks reported): a dead host, its network or its power";
    a.attrs = {{"node_ranks", static_cast<double>(ranks.size())},
               {"first_rank", static_cast<double>(ranks.front())},
               {"reported_ranks", static_cast<double>(p.count)},
               {"world_size", static_cast<double>(st.world)}};
    a.alert_id = make_alert_id(a, step);
    return a;
  }

  Alert anomaly_alert(Symbol run_id, const RunState& st, int32_t rank, int64_t reported, int64_t at) {
    Alert a = run_alert(alert_kind::kStepAnomaly, Severity::kWarning, run_id, st, at);
    a.step = st.current;
    std::string where = locate_rank(a, st.info.get(), rank);
    a.value = static_cast<double>(reported);
    a.threshold = static_cast<double>(st.current) + static_cast<double>(o_.max_step_jump);
    a.summary = "STEP ANOMALY: " + where + " reported step " + std::to_string(reported) + " while the run is at step " +
                std::to_string(st.current) + " (the median of its ranks' latest steps), more than max_step_jump " +
                std::to_string(o_.max_step_jump) +
                " ahead: a restarted or corrupted step counter; its reports are set aside until it reports a step "
                "within max_step_jump of the run's";
    a.attrs = {{"reported_step", static_cast<double>(reported)},
               {"current_step", static_cast<double>(st.current)},
               {"max_step_jump", static_cast<double>(o_.max_step_jump)}};
    a.alert_id = make_alert_id(a, st.current);
    return a;
  }

  Alert shed_alert(Symbol run_id, const RunState& st, int64_t minute, const ShedMinute& m, int64_t at) {
    Alert a = run_alert(alert_kind::kTelemetryShed, Severity::kInfo, run_id, st, at);
    int64_t total = 0;
    for (int64_t n : m.rows) total += n;
    a.value = static_cast<double>(total);
    a.summary = "TELEMETRY SHED: the collector could not keep up and shed " + std::to_string(total) +
                " rows of this run in the minute from " + runtime::number_text(static_cast<double>(minute) * 60) +
                " s (event time; P0 " + std::to_string(m.rows[0]) + ", P1 " + std::to_string(m.rows[1]) + ", P2 " +
                std::to_string(m.rows[2]) + ", P3 " + std::to_string(m.rows[3]) +
                "): the steps concerned are not judged (no rank_missing, straggler or ratio alert for them)";
    a.attrs = {{"shed_p0", static_cast<double>(m.rows[0])}, {"shed_p1", static_cast<double>(m.rows[1])},
               {"shed_p2", static_cast<double>(m.rows[2])}, {"shed_p3", static_cast<double>(m.rows[3])},
               {"rows", static_cast<double>(total)},        {"minute_start_s", static_cast<double>(minute) * 60}};
    a.alert_id = make_alert_id(a, minute);
    return a;
  }

  Alert missing_alert(Symbol run_id, const RunState& st, int64_t step, int32_t rank, int64_t at, const Pending& p) {
    Alert a = run_alert(alert_kind::kRankMissing, Severity::kCritical, run_id, st, at);
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

  static constexpr size_t kSampleRanks = 8;  // missing ranks named in a job_stalled summary
  static constexpr size_t kNodeRanks = 16;   // ranks named in a node_unreachable summary

  RankJoinOptions o_;
  runtime::OperatorContext ctx_;
  RunDeadlines<int64_t> timers_;       // by step
  RunDeadlines<int64_t> shed_timers_;  // by minute: a run's telemetry_shed
  std::vector<int64_t> scratch_;       // current_step's, not state
  // The latest event time advanced to (not state: a restored instance prunes
  // shed spans later, never too early).
  int64_t now_ = INT64_MIN;
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
      "`timeout`, naming the missing ranks. Raises `rank_missing` for a rank missing past the timeout; one "
      "`job_stalled` instead when more than `stall_fraction` of the ranks are missing, and one `node_unreachable` "
      "for a node whose ranks are all missing; `step_anomaly` for a rank whose step jumps more than "
      "`max_step_jump` past the run's current step (the median of its ranks' latest steps), whose reports are set "
      "aside (dead-lettered, starting no deadline) until one is within `max_step_jump` again. Step reports the "
      "runtime shed on the way (overflow: shed) mark the steps they may belong to as incomplete by shedding "
      "(emitted with `shed`, raising none of those alerts), and one `telemetry_shed` info alert per run and minute "
      "of event time counts what was shed, by priority.";
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
       .doc = "Raise rank_missing (job_stalled, node_unreachable) for ranks missing past the timeout."},
      {.name = "stall_fraction",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.stall_fraction),
       .doc = "Share of a run's ranks that, missing one step, make it one job_stalled alert instead of an alert per "
              "rank or node.",
       .min = 0,
       .max = 1},
      {.name = "max_step_jump",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.max_step_jump),
       .doc = "Steps past the run's current step (the median of its ranks' latest steps) beyond which a rank's "
              "report is a step_anomaly and set aside; 0 turns the check off.",
       .min = 0,
       .max = 1e15},
  };
  info.accepts = mask(Kind::kRunStart) | mask(Kind::kStep) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kStepRecord) | mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    RankJoinOptions o;
    o.timeout_ns = ctx.params->get_duration_ns("timeout");
    o.max_pending_steps = ctx.params->get_int("max_pending_steps");
    o.alert_missing = ctx.params->get_bool("alert_missing");
    o.stall_fraction = ctx.params->get_double("stall_fraction");
    o.max_step_jump = ctx.params->get_int("max_step_jump");
    return MakeRankJoin(o);
  });
}

}  // namespace runlens::ops
