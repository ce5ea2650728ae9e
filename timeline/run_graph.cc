#include "timeline/run_graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "formats/json_writer.h"
#include "formats/jsonl_codec.h"
#include "runtime/status.h"
#include "schema/gpu_packed.h"
#include "schema/number_format.h"
#include "schema/row.h"
#include "schema/symbol_index.h"
#include "timeline/gpu_window.h"

namespace runlens::timeline {

void entry_json(const store::TimelineEntry& e, std::string* line) {
  line->clear();
  json::Writer w(line);
  w.begin_object().key("run_id").str(e.run_id);
  if (e.step) w.key("step").integer(*e.step);
  w.key("time_ns").integer(e.time_ns).key("kind").str(e.kind).key("severity").str(e.severity);
  w.key("summary").str(e.summary);
  if (!e.ref.empty()) w.key("ref").str(e.ref);
  w.end_object();
  if (!e.detail_json.empty()) {  // the detail object, spliced in as written
    line->pop_back();
    *line += ",\"detail\":" + e.detail_json + "}";
  }
}

namespace {

template <class T>
void append(std::vector<T>& into, std::vector<T>& more) {
  if (into.empty()) {
    into.swap(more);
    return;
  }
  into.insert(into.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  more.clear();
}

}  // namespace

namespace {

// Removes from `open` the rows that `closed` holds final values of.
void drop_closed(OpenState& open, const store::MetricBatch& closed) {
  std::set<std::tuple<std::string_view, int64_t, int32_t>> windows;
  for (const auto* list : {&closed.rank_windows, &closed.rank_window_additions}) {
    for (const auto& w : *list) windows.insert({w.run_id, w.first_step, w.rank});
  }
  std::erase_if(open.rank_windows, [&](const store::RankWindowRow& w) {
    return windows.count({w.run_id, w.first_step, w.rank}) > 0;
  });
  std::set<std::tuple<int64_t, std::string_view, int32_t, int64_t>> gpus;
  for (const auto& r : closed.gpu_rollups) gpus.insert({r.resolution_ns, r.node, r.gpu, r.bucket_ns});
  std::erase_if(open.gpu_rollups, [&](const store::GpuRollupRow& r) {
    return gpus.count({r.resolution_ns, r.node, r.gpu, r.bucket_ns}) > 0;
  });
  std::set<std::tuple<int64_t, std::string_view, int64_t>> nodes;
  for (const auto& r : closed.node_rollups) nodes.insert({r.resolution_ns, r.node, r.bucket_ns});
  std::erase_if(open.node_rollups, [&](const store::NodeRollupRow& r) {
    return nodes.count({r.resolution_ns, r.node, r.bucket_ns}) > 0;
  });
}

}  // namespace

void fold_open(Batch& b) {
  if (!b.open) return;
  append(b.metrics.rank_windows, b.open->rank_windows);
  append(b.metrics.gpu_rollups, b.open->gpu_rollups);
  append(b.metrics.node_rollups, b.open->node_rollups);
  b.metrics.prepared.reset();  // made from fewer rows
  b.open.reset();
}

bool merge_batches(Batch& into, Batch& next) {
  // A replacement drops the runs' earlier rows, and retention prunes after
  // the rows of its batch: written in one transaction, either would reach
  // rows of the other batch.
  if (!next.graph.replace_runs.empty() || !next.metrics.replace_runs.empty() || !into.metrics.prune.empty())
    return false;
  // A later view of the open state replaces an earlier one: each of its rows
  // is in the later view again, or closed (and so among `next`'s rows).
  // Without a later view, the earlier one stays the latest for a deferred
  // batch, less what `next` closed (a view written after a row's final value
  // would undo it); a commit without a view of its own drops it (a view is
  // never needed for the rows to end right, only for live readers).
  if (next.open || !next.deferred)
    into.open.reset();
  else if (into.open)
    drop_closed(*into.open, next.metrics);
  store::GraphBatch& g = into.graph;
  store::GraphBatch& n = next.graph;
  append(g.runs, n.runs);
  append(g.allocations, n.allocations);
  append(g.checkpoints, n.checkpoints);
  append(g.artifacts, n.artifacts);
  append(g.alerts, n.alerts);
  append(g.incidents, n.incidents);
  append(g.timeline, n.timeline);
  append(g.steps, n.steps);
  store::MetricBatch& m = into.metrics;
  store::MetricBatch& x = next.metrics;
  m.prepared.reset();  // made from fewer rows
  append(m.rank_steps, x.rank_steps);
  append(m.rank_windows, x.rank_windows);
  append(m.rank_window_additions, x.rank_window_additions);
  m.gpu_samples.append(x.gpu_samples);
  append(m.gpu_rollups, x.gpu_rollups);
  append(m.node_rollups, x.node_rollups);
  m.prune = std::move(x.prune);
  if (next.open) into.open = std::move(next.open);
  into.deferred = next.deferred;
  return true;
}

namespace {

std::string hex16(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Short numbers for summaries: 0.0003 -> "3e-04", 1903.4 -> "1903".
std::string num(double v) { return fmt_num(v, NumberStyle::kShortWhole); }

std::string value_text(const Value& v) { return v.kind == Value::Kind::kNumber ? num(v.number) : v.text; }

bool critical_event(std::string_view kind) {
  return kind == event_kind::kXid || kind == event_kind::kOom || kind == event_kind::kNcclTimeout ||
         kind == event_kind::kException || kind == event_kind::kAbort;
}

struct RunState {
  store::RunRow row;
  bool started = false;  // a run_start was seen (rows of a run may come before it)
  bool config_sent = false;
  bool dirty = false;
  bool ended = false;
  std::vector<RankPlacement> placement;  // by rank
  std::optional<int64_t> latest_step;
  // Train series: the first report of a step counts; non-finite values are marked once per stretch.
  int64_t last_train_step = INT64_MIN;
  bool non_finite = false;
  std::optional<int64_t> lr_noted_step;  // step of the last LR entry (a train_marks LR change, or a config_change)
  // Rank rows: the last steps, kept whole until a failure window wants them;
  // `kept` once their rows are in a batch (a run's last window then skips
  // them: the store keeps a step's rows once, the first time).
  struct RecentStep {
    std::shared_ptr<const StepRecord> rec;
    bool kept = false;
  };
  std::deque<RecentStep> recent;
  int64_t keep_until_step = INT64_MIN;
  // Per-rank summaries of the two latest windows of steps (by first step);
  // older ones are closed. A step record for a closed window is added to it.
  std::map<int64_t, std::vector<store::RankWindowRow>> windows;
  // The open incident.
  std::optional<store::IncidentRow> incident;
};

// The start of the rollup bucket of `res` nanoseconds holding `t` (a floor,
// for times before the epoch too), and whether `t` falls in the one at `start`.
int64_t bucket_start(int64_t t, int64_t res) { return t - ((t % res) + res) % res; }
bool in_bucket(int64_t t, int64_t start, int64_t res) { return t >= start && t - start < res; }

struct RollupKey {
  uint32_t node;
  int32_t gpu;
  bool operator==(const RollupKey&) const = default;
};
struct RollupKeyHash {
  size_t operator()(const RollupKey& k) const {
    return std::hash<uint64_t>()((uint64_t{k.node} << 32) ^ uint32_t(k.gpu));
  }
};

// The GPU rows of a node written last: rows go out in time order per node,
// so the latest time written and the GPUs written at it tell a row written.
struct GpuMark {
  int64_t time = INT64_MIN;
  std::vector<int32_t> gpus;  // a node's few GPUs: a flat list, no node allocations
};
// Per node that sent GPU samples: until when its samples are kept at full
// resolution (a failure window), and which were written last.
struct GpuNode {
  int64_t keep_until = INT64_MIN;
  GpuMark written;
};
// Per GPU: its open rollup bucket of each tier, and its last XID.
struct GpuTrack {
  std::vector<store::GpuRollupRow> rollups;  // by tier
  int64_t last_xid = 0;
};

}  // namespace

class RunGraphBuilder::Impl {
 public:
  Impl(const Options& o, Output* out, Clock clock) : o_(o), out_(out), clock_(std::move(clock)) {
    RUNLENS_CHECK(out_ != nullptr, "a run graph builder needs an output");
    node_rollups_.resize(o_.rollups.size());
    last_commit_ = last_prune_ = clock_();
    last_open_shown_ = last_commit_ - std::chrono::hours(1);  // the first commit shows it
  }

  void add(const Record& r) {
    read_since_open_ += runtime::RowTraits<Record>::weight(r);
    switch (r.kind()) {
      case Kind::kRunStart:
        on_run_start(r);
        break;
      case Kind::kTrain:
        on_train(r);
        break;
      case Kind::kTrainMarks:
        on_train_marks(r);
        break;
      case Kind::kStepStats:
        on_step_stats(r);
        break;
      case Kind::kStepRecord:
        on_step_record(r);
        break;
      case Kind::kCheckpoint:
        on_checkpoint(r);
        break;
      case Kind::kEvent:
        on_event(r);
        break;
      case Kind::kGpu:
        on_gpu(r);
        break;
      case Kind::kNode:
        on_node(r);
        break;
      case Kind::kAlert:
        on_alert(r);
        break;
      case Kind::kRunEnd:
        on_run_end(r);
        break;
      default:
        break;
    }
    if (pending_ >= o_.commit_rows) commit(false);
  }

  void on_watermark() {
    auto now = clock_();
    if (now - last_commit_ >= std::chrono::nanoseconds(o_.commit_interval_ns)) {
      commit(false);
    } else if (has_unsent()) {
      // Not yet time to commit: hand over what is pending to be written once
      // the interval is up, unless the next commit comes first and joins it.
      // A pipeline that goes quiet is still seen by live readers then.
      cut(false, /*deferred=*/true);
    }
  }

  void finish() {
    for (auto& [sym, st] : runs_) {
      if (!st.ended) keep_recent(sym, st);
    }
    for (size_t i = 0; i < o_.rollups.size(); ++i) {
      for (auto& [k, track] : gpus_) metrics_.gpu_rollups.push_back(track.rollups[i]);
    }
    gpus_.clear();
    gpu_index_.clear();
    for (auto& tier : node_rollups_) {
      for (auto& [k, row] : tier) metrics_.node_rollups.push_back(row);
      tier.clear();
    }
    metrics_.prune = o_.rollups;
    commit(true);
  }

 private:
  // --- run graph -------------------------------------------------------------------------

  RunState& state(Symbol run, const Record& r) {
    auto it = runs_.find(run);
    if (it != runs_.end()) return it->second;
    RunState& st = runs_[run];
    st.row.run_id = run.string();
    st.row.tenant = r.tenant.string();
    st.row.started_ns = r.time_ns;
    st.row.last_time_ns = r.time_ns;
    return st;
  }

  void touch(RunState& st, int64_t t) {
    st.row.last_time_ns = std::max(st.row.last_time_ns, t);
    st.dirty = true;
  }

  void on_run_start(const Record& r) {
    const RunStart& rs = r.run_start();
    auto seen = runs_.find(rs.run_id);
    bool again = seen != runs_.end() && seen->second.started;
    RunState& st = state(rs.run_id, r);
    st.started = true;
    if (!again) {
      // Another process may have written this run before: the same run
      // replayed again is replaced; a later start of it continues it.
      commit(false);
      if (auto stored = out_->stored_run(st.row.run_id)) {
        if (stored->started_ns == r.time_ns) {
          graph_.replace_runs.push_back(st.row.run_id);
          metrics_.replace_runs.push_back(st.row.run_id);
        } else {
          st.row = *stored;
          st.row.config.clear();
          st.latest_step = stored->step;
          again = true;
        }
      }
    }
    store::RunRow& row = st.row;
    if (again) {
      reset_series(st);
      row.restarts += 1;
      row.status = "running";
      row.ended_ns.reset();
      row.end_reason.clear();
      st.ended = false;
    } else {
      row.started_ns = r.time_ns;
    }
    row.experiment_id = rs.experiment_id.string();
    row.job_id = rs.job_id.string();
    row.model_id = rs.model_id.string();
    row.model_version = rs.model_version.string();
    row.dataset_version = rs.dataset_version.string();
    row.code_commit = rs.code_commit;
    row.world_size = rs.world_size;
    if (rs.has(RunStart::F::gpu_peak_flops)) row.gpu_peak_flops = rs.gpu_peak_flops;
    if (rs.has(RunStart::F::model_flops_per_token)) row.model_flops_per_token = rs.model_flops_per_token;
    row.config = rs.config;
    st.config_sent = false;
    touch(st, r.time_ns);

    st.placement.assign(static_cast<size_t>(std::max(rs.world_size, 0)), RankPlacement{0, Symbol(), -1});
    for (const auto& p : rs.ranks) {
      if (p.rank < 0 || p.rank >= rs.world_size) continue;
      st.placement[static_cast<size_t>(p.rank)] = p;
      graph_.allocations.push_back({row.run_id, p.rank, p.node.string(), p.gpu});
      if (!p.node.empty()) on_node_of_[p.node].push_back({rs.run_id, p.gpu});
    }
    count_row(static_cast<int64_t>(rs.ranks.size()));

    std::set<std::string_view> nodes;
    for (const auto& p : rs.ranks) nodes.insert(p.node.str());
    std::string summary =
        std::string(again ? "run started again" : "run started") + ": " + std::to_string(rs.world_size) + " ranks";
    if (!nodes.empty()) summary += " on " + std::to_string(nodes.size()) + " nodes";
    if (!row.model_id.empty())
      summary += ", model " + row.model_id + (row.model_version.empty() ? "" : ":" + row.model_version);
    if (!row.dataset_version.empty()) summary += ", dataset " + row.dataset_version;
    if (!row.code_commit.empty()) summary += ", code " + row.code_commit;
    std::string detail;
    json::Writer w(&detail);
    w.begin_object();
    if (!rs.config.empty()) {
      w.key("config").begin_object();
      for (const auto& [k, v] : rs.config) {
        w.key(k);
        if (v.kind == Value::Kind::kNumber)
          w.num(v.number);
        else
          w.str(v.text);
      }
      w.end_object();
    }
    w.end_object();
    add_entry(st, r.time_ns, st.latest_step, again ? event_kind::kRestart : timeline_kind::kRunStart,
              again ? "warning" : "info", summary, "", detail);
  }

  void on_train(const Record& r) {
    const Train& t = r.as<Train>();
    RunState& st = state(t.run_id, r);
    touch(st, r.time_ns);
    bump_step(st, t.step);
    // Several ranks may report a step's train metrics: the first report counts.
    if (t.step <= st.last_train_step) return;
    st.last_train_step = t.step;
    store::RunRow& row = st.row;
    if (t.has(Train::F::loss)) row.loss = t.loss;
    if (t.has(Train::F::val_loss)) row.val_loss = t.val_loss;
    if (t.has(Train::F::lr)) row.lr = t.lr;
    if (t.has(Train::F::grad_norm)) row.grad_norm = t.grad_norm;

    bool bad_loss = t.has(Train::F::loss) && !std::isfinite(t.loss);
    bool bad_grad = t.has(Train::F::grad_norm) && !std::isfinite(t.grad_norm);
    bool counted = (t.has(Train::F::nan_count) && t.nan_count > 0) || (t.has(Train::F::inf_count) && t.inf_count > 0);
    if (bad_loss || bad_grad || counted) {
      if (!st.non_finite) {
        std::string s = "non-finite values at step " + std::to_string(t.step) + ":";
        if (t.has(Train::F::loss)) s += " loss " + num(t.loss);
        if (t.has(Train::F::grad_norm)) s += " grad_norm " + num(t.grad_norm);
        if (t.has(Train::F::nan_count) && t.nan_count > 0) s += " nan_count " + std::to_string(t.nan_count);
        if (t.has(Train::F::inf_count) && t.inf_count > 0) s += " inf_count " + std::to_string(t.inf_count);
        add_entry(st, r.time_ns, t.step, timeline_kind::kNonFinite, "critical", s, "", "");
      }
      st.non_finite = true;
    } else {
      st.non_finite = false;
    }
  }

  // LR changes and jumps, as train_marks found them. An LR change within three
  // steps of one the run reported (config_change) is that change: one entry.
  void on_train_marks(const Record& r) {
    const TrainMarks& t = r.as<TrainMarks>();
    RunState& st = state(t.run_id, r);
    if (t.lr) {
      bool noted = st.lr_noted_step && t.step - *st.lr_noted_step <= 3;
      if (!noted) {
        st.lr_noted_step = t.step;
        double before = t.lr->before, after = t.lr->after;
        std::string detail;
        json::Writer(&detail)
            .begin_object()
            .key("old")
            .num(before)
            .key("new")
            .num(after)
            .key("factor")
            .num(after / before)
            .end_object();
        add_entry(st, r.time_ns, t.step, timeline_kind::kLrChange, "warning",
                  "learning rate changed " + num(before) + " -> " + num(after) + " (" + num(after / before) + "x)", "",
                  detail);
      }
    }
    auto jump = [&](const std::optional<TrainMarks::Change>& c, std::string_view kind, const char* name) {
      if (!c) return;
      std::string detail;
      json::Writer(&detail).begin_object().key("old").num(c->before).key("new").num(c->after).end_object();
      add_entry(st, r.time_ns, t.step, kind, "warning",
                std::string(name) + " jumped " + num(c->before) + " -> " + num(c->after) + " (" +
                    num(c->after / c->before) + "x)",
                "", detail);
    };
    jump(t.loss, timeline_kind::kLossJump, "loss");
    jump(t.grad_norm, timeline_kind::kGradNormJump, "gradient norm");
  }

  void on_step_stats(const Record& r) {
    const StepStats& s = r.step_stats();
    RunState& st = state(s.run_id, r);
    touch(st, r.time_ns);
    bump_step(st, s.step);
    if (st.row.world_size == 0) st.row.world_size = s.world_size;
    st.row.tokens_processed += s.tokens;
    if (s.mfu) st.row.mfu = s.mfu;
    if (s.tokens_per_s) st.row.tokens_per_s = s.tokens_per_s;
    store::StepRow row;
    row.time_ns = r.time_ns;
    row.stats = s;
    row.stats.run.reset();
    graph_.steps.push_back(std::move(row));
    count_row();
  }

  void on_step_record(const Record& r) {
    auto rec = std::get<std::shared_ptr<const StepRecord>>(r.body);
    RUNLENS_CHECK(rec->work_ms.size() == rec->ranks.size() && rec->ratio_to_median.size() == rec->ranks.size(),
                  "a step record reached the run graph unmeasured (rank_join measures each: ops::measure_ranks)");
    RunState& st = state(rec->run_id, r);
    touch(st, r.time_ns);
    bump_step(st, rec->step);
    if (st.row.world_size == 0) st.row.world_size = rec->world_size;
    accumulate_windows(st, *rec);
    const bool kept = rec->step <= st.keep_until_step;
    if (kept) rank_rows(st, *rec, rec->first_time_ns, "failure");
    st.recent.push_back({rec, kept});
    while (static_cast<int64_t>(st.recent.size()) > o_.failure_window_steps + 16) st.recent.pop_front();
  }

  void on_checkpoint(const Record& r) {
    const Checkpoint& c = r.as<Checkpoint>();
    RunState& st = state(c.run_id, r);
    touch(st, r.time_ns);
    store::CheckpointRow row;
    row.run_id = st.row.run_id;
    row.checkpoint_id = c.checkpoint_id.string();
    if (c.has(Checkpoint::F::step)) row.step = c.step;
    row.time_ns = r.time_ns;
    if (c.has(Checkpoint::F::duration_ms)) row.duration_ms = c.duration_ms;
    if (c.has(Checkpoint::F::upload_ms)) row.upload_ms = c.upload_ms;
    if (c.has(Checkpoint::F::size_bytes)) row.size_bytes = c.size_bytes;
    if (c.has(Checkpoint::F::ok)) row.ok = c.ok;
    row.uri = c.uri;
    row.sha256 = c.sha256;
    bool failed = row.ok && !*row.ok;
    if (!failed) st.row.last_checkpoint_id = row.checkpoint_id;
    if (!row.uri.empty()) {
      store::ArtifactRow a;
      a.artifact_id = "art-" + hex16(fnv1a(row.uri, fnv1a("checkpoint", fnv1a(row.run_id))));
      a.run_id = row.run_id;
      a.artifact_type = "checkpoint";
      a.object_uri = row.uri;
      a.checksum = row.sha256.empty() ? "" : "sha256:" + row.sha256;
      a.created_at_ns = r.time_ns;
      a.checkpoint_id = row.checkpoint_id;
      graph_.artifacts.push_back(std::move(a));
    }
    std::string s = std::string(failed ? "checkpoint FAILED: " : "checkpoint saved: ") + row.checkpoint_id;
    if (row.step) s += " at step " + std::to_string(*row.step);
    if (row.duration_ms) s += ", " + num(*row.duration_ms / 1000) + " s";
    if (row.size_bytes) s += ", " + num(static_cast<double>(*row.size_bytes) / (1 << 30)) + " GiB";
    if (row.step) bump_step(st, *row.step);
    add_entry(st, r.time_ns, row.step ? row.step : st.latest_step, timeline_kind::kCheckpoint,
              failed ? "critical" : "info", s, row.checkpoint_id, "");
    graph_.checkpoints.push_back(std::move(row));
    count_row();
  }

  void on_event(const Record& r) {
    const Occurrence& e = r.as<Occurrence>();
    std::string kind = e.kind.string();
    std::string s = kind;
    if (kind == event_kind::kConfigChange && e.has(Occurrence::F::key)) {
      s = "config changed: " + e.key.string();
      if (e.has(Occurrence::F::old)) s += " " + value_text(e.old);
      if (e.has(Occurrence::F::new_)) s += " -> " + value_text(e.new_);
    } else {
      if (e.has(Occurrence::F::code)) s += " " + std::to_string(e.code);
      if (!e.node.empty()) s += " on " + e.node.string();
      if (e.has(Occurrence::F::gpu)) s += " GPU " + std::to_string(e.gpu);
      if (e.has(Occurrence::F::rank)) s += " (rank " + std::to_string(e.rank) + ")";
      if (!e.message.empty()) s += ": " + e.message;
    }
    std::string detail;
    json::Writer w(&detail);
    w.begin_object();
    if (!e.node.empty()) w.key("node").str(e.node.str());
    if (e.has(Occurrence::F::gpu)) w.key("gpu").integer(e.gpu);
    if (e.has(Occurrence::F::rank)) w.key("rank").integer(e.rank);
    if (e.has(Occurrence::F::code)) w.key("code").integer(e.code);
    if (!e.message.empty()) w.key("message").str(e.message);
    if (!e.key.empty()) w.key("key").str(e.key.str());
    auto value = [&](const char* k, const Value& v) {
      w.key(k);
      if (v.kind == Value::Kind::kNumber)
        w.num(v.number);
      else
        w.str(v.text);
    };
    if (e.has(Occurrence::F::old)) value("old", e.old);
    if (e.has(Occurrence::F::new_)) value("new", e.new_);
    w.end_object();
    if (detail == "{}") detail.clear();
    std::string severity = critical_event(kind) ? "critical" : kind == event_kind::kRestart ? "warning" : "info";
    static const Symbol kLr = Symbol::intern("lr");
    auto entry = [&](RunState& st) {
      touch(st, r.time_ns);
      if (kind == event_kind::kConfigChange && e.key == kLr) {
        // One LR change, one entry: an operator may infer the change this sink marked already.
        int64_t step = e.has(Occurrence::F::step) ? e.step : st.latest_step.value_or(0);
        if (st.lr_noted_step && std::llabs(step - *st.lr_noted_step) <= 1) return;
        st.lr_noted_step = step;
      }
      if (e.has(Occurrence::F::step)) bump_step(st, e.step);
      if (kind == event_kind::kRestart) st.row.restarts += 1, reset_series(st);
      add_entry(st, r.time_ns, e.has(Occurrence::F::step) ? std::optional<int64_t>(e.step) : st.latest_step, kind,
                severity, s, "", detail);
    };
    if (!e.run_id.empty()) return entry(state(e.run_id, r));
    // A node-level event belongs to the runs placed on that node (and GPU).
    for (Symbol run : runs_on(e.node, e.has(Occurrence::F::gpu) ? e.gpu : -1)) entry(runs_.at(run));
  }

  void on_alert(const Record& r) {
    const Alert& a = r.alert();
    store::StoredAlert sa;
    sa.alert = a;
    jsonl::encode_alert(a, &sa.json);
    std::vector<Symbol> runs;
    if (!a.run_id.empty())
      runs.push_back(a.run_id);
    else
      runs = runs_on(a.node, a.gpu.value_or(-1));
    for (Symbol run : runs) {
      RunState& st = state(run, r);
      touch(st, r.time_ns);
      std::optional<int64_t> step = a.step ? a.step : st.latest_step;
      // A revision (the same alert_id published again) is no new alert: it
      // joins no incident again (the store keeps the one its alert joined).
      bool revised = a.revision > 0;
      sa.incident_id = !revised      ? incident_for(st, a, step, r.time_ns)
                       : st.incident ? st.incident->incident_id
                                     : "inc-" + a.alert_id;
      bool diagnosis = a.kind == alert_kind::kDiagnosis;
      std::string s = diagnosis && a.summary.empty()
                          ? "diagnosis: " + a.cause + (a.owner.empty() ? "" : " (owner: " + a.owner + ")")
                          : a.summary;
      std::string detail;
      json::Writer w(&detail);
      w.begin_object().key("alert_kind").str(a.kind);
      if (!a.symptom.empty()) w.key("symptom").str(a.symptom);
      if (a.rank) w.key("rank").integer(*a.rank);
      if (!a.node.empty()) w.key("node").str(a.node.str());
      if (a.gpu) w.key("gpu").integer(*a.gpu);
      if (a.value) w.key("value").num(*a.value);
      if (a.threshold) w.key("threshold").num(*a.threshold);
      w.key("incident_id").str(sa.incident_id);
      if (revised) w.key("revision").integer(a.revision);
      w.end_object();
      add_entry(st, r.time_ns, step, diagnosis ? timeline_kind::kDiagnosis : timeline_kind::kAlert,
                std::string(severity_name(a.severity)), s, a.alert_id, detail);
      if (!diagnosis && !revised) open_failure_window(run, st, step, r.time_ns, a.node);
    }
    if (runs.empty() && !a.node.empty()) open_gpu_window({a.node}, r.time_ns);
    graph_.alerts.push_back(std::move(sa));
    count_row();
  }

  void on_run_end(const Record& r) {
    const RunEnd& e = r.as<RunEnd>();
    RunState& st = state(e.run_id, r);
    touch(st, r.time_ns);
    st.row.status = e.status.empty() ? "completed" : e.status.string();
    st.row.end_reason = e.reason;
    st.row.ended_ns = r.time_ns;
    std::string s = "run " + st.row.status;
    if (!e.reason.empty()) s += ": " + e.reason;
    add_entry(st, r.time_ns, st.latest_step, timeline_kind::kRunEnd, st.row.status == "completed" ? "info" : "critical",
              s, "", "");
    keep_recent(e.run_id, st);
    st.ended = true;
    st.recent.clear();
    for (auto& [node, list] : on_node_of_) {
      list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& p) { return p.first == e.run_id; }),
                 list.end());
    }
  }

  // --- timeline and incidents ---------------------------------------------------------

  void add_entry(RunState& st, int64_t t, std::optional<int64_t> step, std::string_view kind, std::string severity,
                 std::string summary, std::string ref, std::string detail) {
    store::TimelineEntry e{
        st.row.run_id,    step, t, std::string(kind), std::move(severity), std::move(summary), std::move(ref),
        std::move(detail)};
    graph_.timeline.push_back(std::move(e));
    count_row();
  }

  // Alerts of a run within the failure window of the open incident join it.
  std::string incident_for(RunState& st, const Alert& a, std::optional<int64_t> step, int64_t t) {
    auto& inc = st.incident;
    bool near = false;
    if (inc) {
      if (step && inc->last_step)
        near = *step - *inc->last_step <= o_.failure_window_steps;
      else
        near = t - inc->last_ns <= o_.failure_window_ns;
    }
    if (!near) {
      inc = store::IncidentRow{
          "inc-" + a.alert_id, st.row.run_id, a.kind, std::string(severity_name(a.severity)), t, t, step, step, 0};
    }
    inc->last_ns = t;
    if (step) inc->last_step = std::max(inc->last_step.value_or(*step), *step);
    if (a.severity == Severity::kCritical) inc->severity = "critical";
    inc->alert_count += 1;
    incidents_[inc->incident_id] = *inc;
    return inc->incident_id;
  }

  // --- tiered retention ---------------------------------------------------------------

  // After a restart training may resume from an earlier step.
  static void reset_series(RunState& st) { st.last_train_step = INT64_MIN; }

  void bump_step(RunState& st, int64_t step) {
    if (!st.latest_step || step > *st.latest_step) st.latest_step = step;
    if (!st.row.step || step > *st.row.step) st.row.step = step;
  }

  void accumulate_windows(RunState& st, const StepRecord& rec) {
    const int64_t w = o_.rank_window;
    int64_t first = rec.step >= 1 ? ((rec.step - 1) / w) * w + 1 : -(((-rec.step) / w) + 1) * w + 1;
    bool closed = !st.windows.empty() && first < st.windows.begin()->first;
    std::vector<store::RankWindowRow> late;
    auto& rows = closed ? late : st.windows[first];
    const std::vector<double>& work = rec.work_ms;
    for (size_t i = 0; i < rec.ranks.size(); ++i) {
      const Step& s = rec.ranks[i];
      if (s.rank < 0) continue;
      if (static_cast<size_t>(s.rank) >= rows.size()) rows.resize(static_cast<size_t>(s.rank) + 1);
      store::RankWindowRow& row = rows[static_cast<size_t>(s.rank)];
      if (row.steps == 0) {
        row.run_id = st.row.run_id;
        row.first_step = first;
        row.last_step = first + w - 1;
        row.rank = s.rank;
        if (static_cast<size_t>(s.rank) < st.placement.size()) {
          row.node = st.placement[static_cast<size_t>(s.rank)].node.string();
          row.gpu = st.placement[static_cast<size_t>(s.rank)].gpu;
        }
        row.work_ms_max = work[i];
      }
      row.steps += 1;
      row.work_ms_sum += work[i];
      row.work_ms_max = std::max(row.work_ms_max, work[i]);
      row.step_ms_sum += s.step_ms;
      row.ratio_sum += rec.ratio_to_median[i];
      if (s.has(Step::F::comm_ms)) row.comm_ms_sum += s.comm_ms, row.comm_n += 1;
      if (s.has(Step::F::data_wait_ms)) row.data_wait_ms_sum += s.data_wait_ms, row.data_wait_n += 1;
      if (s.rank == rec.slowest_rank) row.slowest_count += 1;
    }
    for (auto& row : late) {
      if (row.steps > 0) metrics_.rank_window_additions.push_back(std::move(row));
    }
    // Keep the two latest windows open: whole sums, so the stored rows do not
    // depend on when commits happen.
    while (st.windows.size() > 2) close_window(st, st.windows.begin());
  }

  void close_window(RunState& st, std::map<int64_t, std::vector<store::RankWindowRow>>::iterator it) {
    for (auto& row : it->second) {
      if (row.steps > 0) metrics_.rank_windows.push_back(std::move(row));
    }
    st.windows.erase(it);
  }

  // A step's ranks as one block of records (store/rank_block.h), written
  // where they will lie: no row a rank.
  void rank_rows(RunState& st, const StepRecord& rec, int64_t t, const char* why) {
    if (rec.ranks.empty()) return;
    store::RankStepBlock& block = metrics_.rank_steps.emplace_back();
    block.run_id = st.row.run_id;
    block.step = rec.step;
    block.time_ns = t;
    block.kept_for = why;
    block.data.resize(rec.ranks.size() * store::rank_record::kBytes);
    char* out = block.data.data();
    for (size_t i = 0; i < rec.ranks.size(); ++i, out += store::rank_record::kBytes) {
      const Step& s = rec.ranks[i];
      const int32_t gpu = s.rank >= 0 && static_cast<size_t>(s.rank) < st.placement.size()
                              ? st.placement[static_cast<size_t>(s.rank)].gpu
                              : -1;
      store::rank_record::write(out, s.rank, gpu, s.step_ms, rec.work_ms[i],
                                s.has(Step::F::comm_ms) ? &s.comm_ms : nullptr,
                                s.has(Step::F::data_wait_ms) ? &s.data_wait_ms : nullptr, rec.ratio_to_median[i]);
    }
    count_row(static_cast<int64_t>(rec.ranks.size()));
    // A failure window (or a run's last window) is many steps of ranks: commit
    // as it fills, so that it never waits in memory whole.
    if (pending_ >= o_.commit_rows) commit(false);
  }

  // Section 34: full resolution from a window before the alert to one after.
  void open_failure_window(Symbol run, RunState& st, std::optional<int64_t> step, int64_t t, Symbol alert_node) {
    if (step) {
      for (auto& [rec, kept] : st.recent) {
        if (rec->step >= *step - o_.failure_window_steps && rec->step > st.keep_until_step) {
          rank_rows(st, *rec, rec->first_time_ns, "failure");
          kept = true;
        }
      }
      st.keep_until_step = std::max(st.keep_until_step, *step + o_.failure_window_steps);
    }
    // Every node of the run: a failure's cause is often not where it shows.
    std::set<Symbol, bool (*)(Symbol, Symbol)> nodes([](Symbol a, Symbol b) { return Symbol::compare(a, b) < 0; });
    if (!alert_node.empty()) nodes.insert(alert_node);
    for (const auto& p : st.placement) {
      if (!p.node.empty()) nodes.insert(p.node);
    }
    open_gpu_window(std::vector<Symbol>(nodes.begin(), nodes.end()), t);
  }

  void open_gpu_window(const std::vector<Symbol>& nodes, int64_t t) {
    for (Symbol n : nodes) {
      int64_t& until = gpu_nodes_[n].keep_until;
      until = std::max(until, t + o_.failure_window_ns);
    }
    const std::vector<GpuMark*> wanted = marks_of(nodes);
    const int64_t from = std::max(t - o_.failure_window_ns, written_until(wanted));
    gpu_recent_.for_each_packed_since(from, [&](int64_t time, gpu_packed::View g) {
      const uint32_t id = g.node().id();
      if (id < wanted.size() && wanted[id]) keep_gpu(*wanted[id], time, g.node(), g.gpu(), g, failure_);
    });
  }

  // How far back the window of GPU samples must be passed over for `marks`:
  // keep_gpu takes nothing of a node from before its mark's time, so nothing
  // from before the earliest of them (every mark moves only forward). A
  // failure window that opens again, or a run's end inside one, mostly finds
  // every sample written already.
  static int64_t written_until(const std::vector<GpuMark*>& marks) {
    int64_t earliest = INT64_MAX;  // no node: nothing to keep
    for (const GpuMark* m : marks) {
      if (m) earliest = std::min(earliest, m->time);
    }
    return earliest;
  }

  // The written marks of `nodes` by symbol id (null: not one of them), for a
  // pass over the last window of GPU samples: an index, not a lookup, a sample.
  std::vector<GpuMark*> marks_of(const std::vector<Symbol>& nodes) {
    std::vector<GpuMark*> by_id;
    for (Symbol n : nodes) {
      if (n.empty()) continue;
      if (by_id.size() <= n.id()) by_id.resize(n.id() + 1, nullptr);
      by_id[n.id()] = &gpu_nodes_[n].written;
    }
    return by_id;
  }

  // Each GPU row is written once: rows go out in time order per node, so a
  // mark per node (the latest time written, and the GPUs written at it) will do.
  // The sample is kept as it lies packed in the window of recent samples:
  // its bytes are copied, not unpacked and packed again.
  void keep_gpu(GpuMark& m, int64_t time, Symbol node, int32_t gpu, gpu_packed::View packed, Symbol why) {
    if (time < m.time) return;
    if (time > m.time) m.time = time, m.gpus.clear();
    if (std::find(m.gpus.begin(), m.gpus.end(), gpu) != m.gpus.end()) return;
    m.gpus.push_back(gpu);
    // Kept rows come in bursts (a failure window opening keeps hundreds of
    // thousands): room for all a commit can take, not regrown row by row.
    if (metrics_.gpu_samples.empty())
      metrics_.gpu_samples.reserve(static_cast<size_t>(std::max<int64_t>(1, o_.commit_rows - pending_)));
    metrics_.gpu_samples.push_back(time, node, gpu, packed, why);
    count_row();
    if (pending_ >= o_.commit_rows) commit(false);
  }

  // The last window of a run stays at full resolution.
  void keep_recent(Symbol run, RunState& st) {
    if (st.latest_step) {
      for (const auto& [rec, kept] : st.recent) {
        if (!kept && rec->step > *st.latest_step - o_.failure_window_steps)
          rank_rows(st, *rec, rec->first_time_ns, "recent");
      }
    }
    std::vector<Symbol> nodes;
    for (const auto& p : st.placement) nodes.push_back(p.node);
    const std::vector<GpuMark*> wanted = marks_of(nodes);
    gpu_recent_.for_each_packed_since(written_until(wanted), [&](int64_t time, gpu_packed::View g) {
      const uint32_t id = g.node().id();
      if (id < wanted.size() && wanted[id]) keep_gpu(*wanted[id], time, g.node(), g.gpu(), g, recent_);
    });
  }

  std::vector<Symbol> runs_on(Symbol node, int32_t gpu) {
    std::vector<Symbol> out;
    auto it = on_node_of_.find(node);
    if (node.empty() || it == on_node_of_.end()) return out;
    for (const auto& [run, g] : it->second) {
      if ((gpu < 0 || g == gpu) && std::find(out.begin(), out.end(), run) == out.end()) out.push_back(run);
    }
    std::sort(out.begin(), out.end(), [](Symbol a, Symbol b) { return Symbol::compare(a, b) < 0; });
    return out;
  }

  // A node's GPU state and a GPU's rollups, through indexes by the node's
  // symbol id (every GPU sample looks both up). Neither map erases but at
  // finish(), which clears its index too; their elements never move.
  GpuNode& gpu_node(Symbol node) {
    return remembered(gpu_node_index_.slot(node), [&]() -> GpuNode& { return gpu_nodes_[node]; });
  }
  GpuTrack& gpu_track(Symbol node, int32_t gpu) {
    return remembered(gpu_index_.slot(node, gpu), [&]() -> GpuTrack& { return gpus_[RollupKey{node.id(), gpu}]; });
  }

  void on_gpu(const Record& r) {
    const Gpu& g = r.as<Gpu>();
    // Full resolution: inside a failure window, and the last window for everyone.
    GpuNode& node = gpu_node(g.node);
    const gpu_packed::View packed = gpu_recent_.push_back(r.time_ns, g);
    if (r.time_ns <= node.keep_until) keep_gpu(node.written, r.time_ns, g.node, g.gpu, packed, failure_);
    while (!gpu_recent_.empty() && gpu_recent_.front_time() < r.time_ns - o_.failure_window_ns) gpu_recent_.pop_front();

    GpuTrack& track = gpu_track(g.node, g.gpu);
    if (track.rollups.size() != o_.rollups.size()) track.rollups.resize(o_.rollups.size());
    for (size_t i = 0; i < o_.rollups.size(); ++i) {
      int64_t res = o_.rollups[i].resolution_ns;
      auto& open = track.rollups[i];
      if (enter_bucket(open, r.time_ns, res, &metrics_.gpu_rollups)) {
        open.node = g.node.string();
        open.gpu = g.gpu;
      }
      open.samples += 1;
      if (g.has(Gpu::F::util_pct)) open.util_pct.add(g.util_pct);
      if (g.has(Gpu::F::temp_c)) open.temp_c.add(g.temp_c);
      if (g.has(Gpu::F::power_w)) open.power_w.add(g.power_w);
      if (g.has(Gpu::F::sm_clock_mhz)) open.sm_clock_mhz.add(g.sm_clock_mhz);
      if (g.has(Gpu::F::mem_used_bytes)) open.mem_used_bytes.add(static_cast<double>(g.mem_used_bytes));
      if (g.has(Gpu::F::throttle_reasons)) open.throttle_reasons |= g.throttle_reasons;
      if (g.has(Gpu::F::xid) && g.xid != 0) open.xid = g.xid;
    }

    // An XID on a GPU is an event of the runs placed there (once per value).
    int64_t xid = g.has(Gpu::F::xid) ? g.xid : 0;
    int64_t& last = track.last_xid;
    if (xid != 0 && xid != last) {
      for (Symbol run : runs_on(g.node, g.gpu)) {
        RunState& st = runs_.at(run);
        std::string detail;
        json::Writer(&detail)
            .begin_object()
            .key("node")
            .str(g.node.str())
            .key("gpu")
            .integer(g.gpu)
            .key("code")
            .integer(xid)
            .end_object();
        add_entry(st, r.time_ns, st.latest_step, "xid", "critical",
                  "XID " + std::to_string(xid) + " on " + g.node.string() + " GPU " + std::to_string(g.gpu), "",
                  detail);
      }
    }
    last = xid;
  }

  // Makes `open` a rollup bucket of `res` holding time `t`: a sample mostly
  // falls in the one open already (no division then); a bucket it leaves is
  // done and goes to `done`. True when a new bucket was begun (the caller
  // names what it is of).
  template <class Row>
  bool enter_bucket(Row& open, int64_t t, int64_t res, std::vector<Row>* done) {
    if (open.samples > 0) {
      if (in_bucket(t, open.bucket_ns, res)) return false;
      done->push_back(open);
      count_row();
      open = Row();
    }
    open.resolution_ns = res;
    open.bucket_ns = bucket_start(t, res);
    return true;
  }

  void on_node(const Record& r) {
    const NodeSample& n = r.as<NodeSample>();
    for (size_t i = 0; i < o_.rollups.size(); ++i) {
      int64_t res = o_.rollups[i].resolution_ns;
      auto& open = node_rollups_[i][n.node.id()];
      if (enter_bucket(open, r.time_ns, res, &metrics_.node_rollups)) open.node = n.node.string();
      open.samples += 1;
      if (n.has(NodeSample::F::cpu_pct)) open.cpu_pct.add(n.cpu_pct);
      if (n.has(NodeSample::F::mem_used_bytes)) open.mem_used_bytes.add(static_cast<double>(n.mem_used_bytes));
      if (n.has(NodeSample::F::net_tx_bps)) open.net_tx_bps.add(n.net_tx_bps);
      if (n.has(NodeSample::F::net_rx_bps)) open.net_rx_bps.add(n.net_rx_bps);
      if (n.has(NodeSample::F::disk_read_bps)) open.disk_read_bps.add(n.disk_read_bps);
      if (n.has(NodeSample::F::disk_write_bps)) open.disk_write_bps.add(n.disk_write_bps);
      if (n.has(NodeSample::F::tcp_retransmits_total)) {
        open.tcp_retransmits_total = std::max(open.tcp_retransmits_total, n.tcp_retransmits_total);
      }
      if (n.has(NodeSample::F::rdma_errors_total)) {
        open.rdma_errors_total = std::max(open.rdma_errors_total, n.rdma_errors_total);
      }
    }
  }

  // --- commits ------------------------------------------------------------------------

  void count_row(int64_t n = 1) {
    pending_ += n;
    unsent_ += n;
  }

  int64_t open_rows() const {
    int64_t n = 0;
    for (const auto& [sym, st] : runs_) {
      for (const auto& [first, rows] : st.windows) n += static_cast<int64_t>(rows.size());
    }
    n += static_cast<int64_t>(gpus_.size() * o_.rollups.size());
    for (const auto& tier : node_rollups_) n += static_cast<int64_t>(tier.size());
    return n;
  }

  bool has_unsent() const {
    if (unsent_ > 0) return true;
    for (const auto& [sym, st] : runs_) {
      if (st.dirty) return true;
    }
    return false;
  }

  // Hands over what is pending as one commit.
  void commit(bool final) { cut(final, /*deferred=*/false); }

  // Hands over what is pending, with the open state (run rows, window
  // summaries, open rollup buckets) as of now, so that live readers see it.
  // A deferred cut closes nothing and resets no commit clock: it is the start
  // of the next commit's batch, written early only if that commit is late.
  void cut(bool final, bool deferred) {
    // Open state (window summaries and rollup buckets still filling) is shown
    // once per commit interval: a commit forced by rows comes sooner than a
    // live reader needs it, and would rewrite the same rows each time.
    // A deferred batch is written by the interval's end at the latest, so it
    // shows open state when that would be due by then.
    // A deferred batch may be the last before the pipeline goes quiet, so it
    // shows open state more often: after an eighth of the interval, or once
    // the rows read since it was last shown are eight times as many as its
    // own rows (so copying it costs at most an eighth of a row copy per row
    // read). The latest view handed over replaces the one before (merge_batches).
    auto now = clock_();
    auto interval = std::chrono::nanoseconds(o_.commit_interval_ns);
    bool show_open = !final && now - last_open_shown_ >= interval;
    if (!final && deferred && !show_open)
      show_open = now - last_open_shown_ >= interval / 8 || 8 * open_rows() <= read_since_open_;
    if (show_open) last_open_shown_ = now, read_since_open_ = 0;
    OpenState open;
    for (auto& [sym, st] : runs_) {
      if (st.dirty) {
        store::RunRow row = st.row;
        if (st.config_sent) row.config.clear();
        st.config_sent = true;
        graph_.runs.push_back(std::move(row));
        st.dirty = false;
      }
      if ((final || st.ended) && !deferred) {
        while (!st.windows.empty()) close_window(st, st.windows.begin());
      } else if (show_open) {
        for (const auto& [first, rows] : st.windows) {  // as of now, for live readers
          for (const auto& w : rows) {
            if (w.steps > 0) open.rank_windows.push_back(w);
          }
        }
      }
    }
    for (auto& [id, inc] : incidents_) graph_.incidents.push_back(inc);
    incidents_.clear();
    if (show_open) {
      for (size_t i = 0; i < o_.rollups.size(); ++i) {
        for (auto& [k, track] : gpus_) open.gpu_rollups.push_back(track.rollups[i]);
      }
      for (auto& tier : node_rollups_) {
        for (auto& [k, row] : tier) open.node_rollups.push_back(row);
      }
    }
    Batch b{std::move(graph_), std::move(metrics_), {}, deferred};
    if (show_open) b.open = std::move(open);
    graph_ = store::GraphBatch();
    metrics_ = store::MetricBatch();
    unsent_ = 0;
    if (deferred) {
      out_->write_deferred(std::move(b), last_commit_ + std::chrono::nanoseconds(o_.commit_interval_ns));
      return;
    }
    // Retention per rollup tier: at the end, and every ten minutes of a long live run.
    if (now - last_prune_ >= std::chrono::minutes(10)) b.metrics.prune = o_.rollups, last_prune_ = now;
    out_->write(std::move(b));
    pending_ = 0;
    last_commit_ = clock_();
  }

  Options o_;
  Output* out_;
  Clock clock_;
  std::unordered_map<Symbol, RunState> runs_;
  std::unordered_map<Symbol, std::vector<std::pair<Symbol, int32_t>>> on_node_of_;  // node -> (run, gpu)
  std::map<std::string, store::IncidentRow> incidents_;                             // changed since the last commit
  GpuWindow gpu_recent_;                                                            // the last failure_window_time
  const Symbol failure_ = Symbol::intern("failure"), recent_ = Symbol::intern("recent");  // why GPU samples are kept
  std::unordered_map<Symbol, GpuNode> gpu_nodes_;
  SymbolIndex<GpuNode*> gpu_node_index_;  // gpu_node()
  SymbolSlots<GpuTrack, 64> gpu_index_;   // gpu_track(): by node, GPU
  std::unordered_map<RollupKey, GpuTrack, RollupKeyHash> gpus_;
  std::vector<std::unordered_map<uint32_t, store::NodeRollupRow>> node_rollups_;
  store::GraphBatch graph_;
  store::MetricBatch metrics_;
  int64_t pending_ = 0;          // rows since the last commit: commit_rows
  int64_t unsent_ = 0;           // rows since the last batch handed over (a commit or a deferred cut)
  int64_t read_since_open_ = 0;  // row weight read since the open state was last shown
  std::chrono::steady_clock::time_point last_commit_, last_prune_, last_open_shown_;
};

RunGraphBuilder::RunGraphBuilder(Options options, Output* out, Clock clock)
    : impl_(std::make_unique<Impl>(options, out, std::move(clock))) {}
RunGraphBuilder::~RunGraphBuilder() = default;
void RunGraphBuilder::add(const Record& r) { impl_->add(r); }
void RunGraphBuilder::on_watermark() { impl_->on_watermark(); }
void RunGraphBuilder::finish() { impl_->finish(); }

}  // namespace runlens::timeline
