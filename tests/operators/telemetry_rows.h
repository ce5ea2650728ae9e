// Builders for the rows the detector tests need beyond operator_run.h (gpu,
// node, data, collective, checkpoint and event rows, joined steps and step
// aggregates), and a runner that splits rows over partitions by the
// operator's key() the way the executor does.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "tests/operators/operator_run.h"

namespace runlens::testing {

constexpr int64_t kGiB = int64_t{1} << 30;

// One GPU sample; fields below 0 (or NaN) are absent.
struct GpuReading {
  double temp_c = 70;
  double sm_clock_mhz = 1980;
  double util_pct = 95;
  double power_w = 680;
  double power_limit_w = 700;
  int64_t throttle_reasons = 0;
  int64_t mem_used_bytes = 60 * kGiB;
  int64_t mem_total_bytes = 80 * kGiB;
  int64_t ecc_dbe_total = -1;
  int64_t nvlink_errors_total = -1;
  int64_t pcie_replay_total = -1;
  int64_t xid = -1;
};

inline Record gpu_row(const std::string& node, int32_t gpu, int64_t t, const GpuReading& g = {}) {
  Gpu s;
  s.node = Symbol::intern(node);
  s.gpu = gpu;
  s.set_present(Gpu::F::node);
  s.set_present(Gpu::F::gpu);
  auto num = [&](double v, double Gpu::*m, Gpu::F f) {
    if (v >= 0) s.*m = v, s.set_present(f);
  };
  auto i64 = [&](int64_t v, int64_t Gpu::*m, Gpu::F f) {
    if (v >= 0) s.*m = v, s.set_present(f);
  };
  num(g.temp_c, &Gpu::temp_c, Gpu::F::temp_c);
  num(g.sm_clock_mhz, &Gpu::sm_clock_mhz, Gpu::F::sm_clock_mhz);
  num(g.util_pct, &Gpu::util_pct, Gpu::F::util_pct);
  num(g.power_w, &Gpu::power_w, Gpu::F::power_w);
  num(g.power_limit_w, &Gpu::power_limit_w, Gpu::F::power_limit_w);
  i64(g.throttle_reasons, &Gpu::throttle_reasons, Gpu::F::throttle_reasons);
  i64(g.mem_used_bytes, &Gpu::mem_used_bytes, Gpu::F::mem_used_bytes);
  i64(g.mem_total_bytes, &Gpu::mem_total_bytes, Gpu::F::mem_total_bytes);
  i64(g.ecc_dbe_total, &Gpu::ecc_dbe_total, Gpu::F::ecc_dbe_total);
  i64(g.nvlink_errors_total, &Gpu::nvlink_errors_total, Gpu::F::nvlink_errors_total);
  i64(g.pcie_replay_total, &Gpu::pcie_replay_total, Gpu::F::pcie_replay_total);
  i64(g.xid, &Gpu::xid, Gpu::F::xid);
  Record r;
  r.time_ns = t;
  r.body = s;
  return r;
}

inline Record node_row(const std::string& node, int64_t t, double cpu_pct) {
  NodeSample n;
  n.node = Symbol::intern(node);
  n.cpu_pct = cpu_pct;
  n.set_present(NodeSample::F::node);
  n.set_present(NodeSample::F::cpu_pct);
  Record r;
  r.time_ns = t;
  r.body = n;
  return r;
}

inline Record data_row(const std::string& run, int32_t rank, int64_t step_no, int64_t t, const std::string& shard,
                       double storage_read_ms) {
  DataSample d;
  d.run_id = Symbol::intern(run);
  d.rank = rank;
  d.step = step_no;
  d.dataset_shard = Symbol::intern(shard);
  d.storage_read_ms = storage_read_ms;
  for (auto f : {DataSample::F::run_id, DataSample::F::rank, DataSample::F::step, DataSample::F::dataset_shard,
                 DataSample::F::storage_read_ms}) {
    d.set_present(f);
  }
  Record r;
  r.time_ns = t;
  r.body = d;
  return r;
}

inline Record collective_row(const std::string& run, int32_t rank, int64_t step_no, int64_t t, double latency_ms) {
  Collective c;
  c.run_id = Symbol::intern(run);
  c.rank = rank;
  c.step = step_no;
  c.latency_ms = latency_ms;
  for (auto f : {Collective::F::run_id, Collective::F::rank, Collective::F::step, Collective::F::latency_ms}) {
    c.set_present(f);
  }
  Record r;
  r.time_ns = t;
  r.body = c;
  return r;
}

inline Record checkpoint_row(const std::string& run, int64_t step_no, int64_t t, double duration_ms, bool ok = true) {
  Checkpoint c;
  c.run_id = Symbol::intern(run);
  c.checkpoint_id = Symbol::intern(run + "/step-" + std::to_string(step_no));
  c.step = step_no;
  c.duration_ms = duration_ms;
  c.ok = ok;
  for (auto f : {Checkpoint::F::run_id, Checkpoint::F::checkpoint_id, Checkpoint::F::step, Checkpoint::F::duration_ms,
                 Checkpoint::F::ok}) {
    c.set_present(f);
  }
  Record r;
  r.time_ns = t;
  r.body = c;
  return r;
}

// The fields of an `event` row, set by name: EventFields().node("n").gpu(5).code(79).
// Fields not set are absent.
struct EventFields {
  std::string run_, node_, key_, message_;
  int32_t gpu_ = -1, rank_ = -1;
  int64_t step_ = -1, code_ = -1;
  std::optional<double> old_, new_;
  EventFields& run(std::string v) { return run_ = std::move(v), *this; }
  EventFields& node(std::string v) { return node_ = std::move(v), *this; }
  EventFields& gpu(int32_t v) { return gpu_ = v, *this; }
  EventFields& rank(int32_t v) { return rank_ = v, *this; }
  EventFields& step(int64_t v) { return step_ = v, *this; }
  EventFields& code(int64_t v) { return code_ = v, *this; }
  EventFields& key(std::string v) { return key_ = std::move(v), *this; }
  EventFields& change(double old_value, double new_value) { return old_ = old_value, new_ = new_value, *this; }
  EventFields& message(std::string v) { return message_ = std::move(v), *this; }
};

inline Record event_row(const std::string& kind, int64_t t, const EventFields& f) {
  Occurrence e;
  e.kind = Symbol::intern(kind);
  e.set_present(Occurrence::F::kind);
  if (!f.run_.empty()) e.run_id = Symbol::intern(f.run_), e.set_present(Occurrence::F::run_id);
  if (!f.node_.empty()) e.node = Symbol::intern(f.node_), e.set_present(Occurrence::F::node);
  if (f.gpu_ >= 0) e.gpu = f.gpu_, e.set_present(Occurrence::F::gpu);
  if (f.rank_ >= 0) e.rank = f.rank_, e.set_present(Occurrence::F::rank);
  if (f.step_ >= 0) e.step = f.step_, e.set_present(Occurrence::F::step);
  if (f.code_ >= 0) e.code = f.code_, e.set_present(Occurrence::F::code);
  if (!f.key_.empty()) e.key = Symbol::intern(f.key_), e.set_present(Occurrence::F::key);
  if (f.old_) e.old = Value::of(*f.old_), e.set_present(Occurrence::F::old);
  if (f.new_) e.new_ = Value::of(*f.new_), e.set_present(Occurrence::F::new_);
  if (!f.message_.empty()) e.message = f.message_, e.set_present(Occurrence::F::message);
  Record r;
  r.time_ns = t;
  r.body = e;
  return r;
}

inline Record train_lr(const std::string& run, int64_t step_no, double loss, double grad_norm, double lr, int64_t t) {
  Record r = train(run, step_no, loss, t, grad_norm);
  Train tr = r.as<Train>();
  tr.lr = lr;
  tr.set_present(Train::F::lr);
  r.body = tr;
  return r;
}

// One rank's part of a joined step.
struct RankStep {
  double work_ms = 1900;
  double data_wait_ms = 10;
  double comm_ms = 120;  // the collective itself; waiting for slower ranks is added
  int64_t seq_len = -1;
  std::string shard;
  int64_t mem_peak_bytes = -1;
};

// Joined steps of a synchronous job, as rank_join emits them: every rank's
// wall step time equalizes at the collective (faster ranks wait in comm_ms).
template <class PerRank>
std::vector<Record> joined_steps(const Record& start, int64_t first, int64_t last, PerRank per_rank, int64_t* t_inout,
                                 std::vector<int32_t> absent = {}) {
  auto info = RunInfo::from(start.run_start());
  int32_t world = static_cast<int32_t>(info->placement.size());
  std::vector<Record> rows;
  for (int64_t s = first; s <= last; ++s) {
    std::vector<RankStep> parts;
    double slowest = 0;
    for (int32_t r = 0; r < world; ++r) {
      parts.push_back(per_rank(r, s));
      slowest = std::max(slowest, parts.back().work_ms + parts.back().data_wait_ms);
    }
    double comm_base = parts.empty() ? 0 : parts[0].comm_ms;
    *t_inout += static_cast<int64_t>((slowest + comm_base) * 1e6);
    auto rec = std::make_shared<StepRecord>();
    rec->run_id = info->start.run_id;
    rec->step = s;
    rec->world_size = world;
    rec->run = info;
    rec->first_time_ns = *t_inout;
    for (int32_t r = 0; r < world; ++r) {
      if (std::find(absent.begin(), absent.end(), r) != absent.end()) {
        rec->missing.push_back(r);
        continue;
      }
      const RankStep& p = parts[r];
      Step st;
      st.run_id = rec->run_id;
      st.rank = r;
      st.step = s;
      st.data_wait_ms = p.data_wait_ms;
      st.comm_ms = slowest - p.work_ms - p.data_wait_ms + p.comm_ms;
      st.step_ms = p.work_ms + p.data_wait_ms + st.comm_ms;
      st.tokens = 16384;
      for (auto f : {Step::F::run_id, Step::F::rank, Step::F::step, Step::F::step_ms, Step::F::data_wait_ms,
                     Step::F::comm_ms, Step::F::tokens}) {
        st.set_present(f);
      }
      if (p.seq_len >= 0) st.seq_len = p.seq_len, st.set_present(Step::F::seq_len);
      if (!p.shard.empty()) st.dataset_shard = Symbol::intern(p.shard), st.set_present(Step::F::dataset_shard);
      if (p.mem_peak_bytes >= 0) st.mem_peak_bytes = p.mem_peak_bytes, st.set_present(Step::F::mem_peak_bytes);
      rec->ranks.push_back(st);
    }
    Record r;
    r.time_ns = *t_inout;
    r.body = std::shared_ptr<const StepRecord>(std::move(rec));
    rows.push_back(std::move(r));
  }
  return rows;
}

// Per-step aggregates as step_stats emits them (only what detectors read).
inline Record stats_row(const std::string& run, int64_t step_no, int64_t t, int32_t reported, int64_t tokens,
                        double step_ms, double work_p50, std::optional<double> mfu) {
  auto st = std::make_shared<StepStats>();
  st->run_id = Symbol::intern(run);
  st->step = step_no;
  st->world_size = st->reported = reported;
  st->tokens = tokens;
  st->step_ms = step_ms;
  st->work_p50 = work_p50;
  st->tokens_per_s = static_cast<double>(tokens) / (step_ms / 1000);
  st->mfu = mfu;
  Record r;
  r.time_ns = t;
  r.body = std::shared_ptr<const StepStats>(std::move(st));
  return r;
}

// Runs an operator split over `parts` partitions, each row to the partition of
// its key (every partition when the key is nullopt), as the executor routes,
// with a watermark to every partition after each distinct event time (as
// run_operator does); returns every partition's output in canonical order.
inline std::vector<Record> run_partitioned(const ops::OperatorDef& def, std::vector<Record> rows, int parts) {
  std::sort(rows.begin(), rows.end(), [](const Record& a, const Record& b) { return compare_canonical(a, b) < 0; });
  std::vector<OperatorRun> runs(static_cast<size_t>(parts));
  std::vector<std::unique_ptr<ops::Operator>> ops;
  for (int p = 0; p < parts; ++p) {
    runtime::OperatorContext ctx{"op", p, parts, &runs[p].dead, &runs[p].counters};
    ops.push_back(def.open(ctx));
  }
  int64_t floor = runtime::kBeginningOfTime;
  size_t i = 0;
  while (i < rows.size()) {
    int64_t t = rows[i].time_ns;
    for (; i < rows.size() && rows[i].time_ns == t; ++i) {
      auto key = def.key(rows[i]);
      for (int p = 0; p < parts; ++p) {
        if (key && static_cast<int>(*key % static_cast<uint64_t>(parts)) != p) continue;
        runtime::Emitter<Record> out(&runs[p].out, floor);
        ops[p]->process(rows[i], out);
      }
    }
    for (int p = 0; p < parts; ++p) {
      runtime::Emitter<Record> out(&runs[p].out, floor);
      ops[p]->on_watermark(t + 1, out);
    }
    floor = t + 1;
  }
  std::vector<Record> all;
  for (int p = 0; p < parts; ++p) {
    runtime::Emitter<Record> out(&runs[p].out, floor);
    ops[p]->on_watermark(runtime::kEndOfTime, out);
    ops[p]->finish(out);
    for (auto& r : runs[p].out) all.push_back(std::move(r));
  }
  std::sort(all.begin(), all.end(), [](const Record& a, const Record& b) { return compare_canonical(a, b) < 0; });
  return all;
}

inline std::vector<Alert> alerts_of(const std::vector<Record>& rows, const std::string& kind = "") {
  std::vector<Alert> a;
  for (const auto& r : rows) {
    if (r.kind() == Kind::kAlert && (kind.empty() || r.alert().kind == kind)) a.push_back(r.alert());
  }
  return a;
}

inline double attr(const Alert& a, const std::string& key) {
  for (const auto& [k, v] : a.attrs) {
    if (k == key) return v;
  }
  return NAN;
}

// `rows` with the step records of steps `from`..`to` marked incomplete by
// shedding (StepRecord::shed), as rank_join emits them when the collector
// shed reports of those steps.
inline std::vector<Record> mark_shed(std::vector<Record> rows, int64_t from, int64_t to) {
  for (auto& r : rows) {
    if (r.kind() != Kind::kStepRecord || r.step_record().step < from || r.step_record().step > to) continue;
    auto rec = std::make_shared<StepRecord>(r.step_record());
    rec->shed = true;
    r.body = std::shared_ptr<const StepRecord>(std::move(rec));
  }
  return rows;
}

}  // namespace runlens::testing
