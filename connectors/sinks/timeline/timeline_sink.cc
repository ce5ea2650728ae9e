#include "connectors/sinks/timeline/timeline_sink.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "runtime/async_writer.h"
#include "runtime/params.h"

namespace runlens::connectors {

bool parse_rollup_tier(const std::string& text, store::RollupTier* out, std::string* why) {
  auto duration = [](std::string s) -> std::optional<int64_t> {
    if (!s.empty() && s.back() == 'd') {  // days, for retention
      auto d = runtime::parse_duration_ns(s.substr(0, s.size() - 1));
      if (d && *d <= INT64_MAX / 86400) return *d * 86400;
      return std::nullopt;
    }
    return runtime::parse_duration_ns(s);
  };
  size_t colon = text.find(':');
  if (colon == std::string::npos) {
    *why = "expected RESOLUTION:RETENTION (e.g. 1m:30d), got '" + text + "'";
    return false;
  }
  auto res = duration(text.substr(0, colon));
  auto ret = duration(text.substr(colon + 1));
  if (!res || *res <= 0 || !ret) {
    *why = "expected durations such as 10s, 1m, 1h or 30d in '" + text + "'";
    return false;
  }
  if (*ret < *res) {
    *why = "retention shorter than the resolution in '" + text + "'";
    return false;
  }
  out->resolution_ns = *res;
  out->retention_ns = *ret;
  return true;
}

namespace {

// Feeds rows to the run-graph builder (timeline/run_graph.h) and hands its
// batches to the store through an asynchronous writer; everything here runs
// on the thread the runtime calls the sink on, but the writes.
class TimelineSink final : public Operator, private timeline::Output {
 public:
  TimelineSink(const TimelineSinkOptions& o, const runtime::OperatorContext& ctx) : o_(o) {
    std::error_code ec;
    for (const std::string& p : {o_.timeline_path}) {
      auto parent = std::filesystem::path(p).parent_path();
      if (!p.empty() && !parent.empty()) std::filesystem::create_directories(parent, ec);
    }
    try {
      // The writer's connection (migrates).
      store_ = store::open_store(o_.store_url, {.build_whole = o_.build_whole});
      // This thread's, for runs stored before. Read-only: it never writes,
      // so it needs no checkpointer of its own (a thread and a connection).
      reader_ = store::open_store(store_.read_url, {.mode = store::OpenMode::kReadOnly});
    } catch (const store::StoreError& e) {
      throw runtime::ConfigError({runtime::Diagnostic{{}, "", e.what()}});
    }
    if (!o_.timeline_path.empty()) {
      timeline_file_ = std::fopen(o_.timeline_path.c_str(), "wb");
      if (!timeline_file_) {
        throw runtime::ConfigError(
            {runtime::Diagnostic{{}, "", "cannot create " + o_.timeline_path + ": " + std::strerror(errno)}});
      }
    }
    runtime::AsyncWriter<timeline::Batch>::Options w;
    w.capacity = 2;  // the pipeline waits on the disk only when two commits are already waiting
    w.write = [this](timeline::Batch& b) {
      timeline::fold_open(b);
      // The graph first: a reader that sees rank rows also sees their run.
      store_.graph->write(b.graph);
      store_.metrics->write(b.metrics);
    };
    w.merge = &timeline::merge_batches;
    // While two commits wait, the sink's thread encodes the blocks of its
    // commit and of the waiting ones, which the writer's thread would do
    // itself (it keeps the inserts).
    w.prepare = [this](timeline::Batch& b) {
      timeline::fold_open(b);
      b.metrics.prepared = store_.metrics->prepare(b.metrics);
    };
    w.counters = ctx.counters ? &ctx.counters->writer : nullptr;
    writer_.emplace(std::move(w));
    builder_.emplace(o_.graph, static_cast<timeline::Output*>(this));
  }
  ~TimelineSink() override {
    builder_.reset();
    writer_.reset();  // writes what was handed over, then joins
    if (timeline_file_) std::fclose(timeline_file_);
  }

  void process(const Record& r, Emitter&) override {
    writer_->check();  // a failed write fails the pipeline at the next row
    builder_->add(r);
  }
  void on_watermark(int64_t, Emitter&) override {
    writer_->check();
    builder_->on_watermark();
  }
  void finish(Emitter&) override {
    builder_->finish();
    writer_->close();           // rethrows a failed write
    if (store_.finish_build) {  // a new store built whole goes in place now (throws as a failed write does)
      reader_ = {};
      store_.finish_build();
    }
  }

 private:
  // --- timeline::Output: the builder's batches ------------------------------------------
  void write(timeline::Batch b) override {
    write_lines(b);
    writer_->push(std::move(b));
  }
  void write_deferred(timeline::Batch b, std::chrono::steady_clock::time_point deadline) override {
    write_lines(b);
    writer_->push_deferred(std::move(b), deadline);
  }
  std::optional<store::RunRow> stored_run(const std::string& run_id) override {
    writer_->drain();
    return reader_.graph->run(run_id);
  }

  // timeline.jsonl: each entry once, in the order the builder made them.
  void write_lines(const timeline::Batch& b) {
    if (!timeline_file_ || b.graph.timeline.empty()) return;
    for (const auto& e : b.graph.timeline) {
      timeline::entry_json(e, &line_);
      line_.push_back('\n');
      std::fwrite(line_.data(), 1, line_.size(), timeline_file_);
    }
    std::fflush(timeline_file_);
  }

  TimelineSinkOptions o_;
  store::Store store_;   // the writer thread's
  store::Store reader_;  // this thread's
  std::FILE* timeline_file_ = nullptr;
  std::string line_;
  std::optional<runtime::AsyncWriter<timeline::Batch>> writer_;
  std::optional<timeline::RunGraphBuilder> builder_;
};

class TimelineSinkDef final : public OperatorDef {
 public:
  explicit TimelineSinkDef(TimelineSinkOptions o) : o_(std::move(o)) {}
  std::unique_ptr<Operator> open(const runtime::OperatorContext& ctx) const override {
    return std::make_unique<TimelineSink>(o_, ctx);
  }
  std::string describe() const override { return "store=" + o_.store_url; }

 private:
  TimelineSinkOptions o_;
};

}  // namespace

std::unique_ptr<OperatorDef> MakeTimelineSink(TimelineSinkOptions options) {
  return std::make_unique<TimelineSinkDef>(std::move(options));
}

void RegisterTimelineSink(Registry& registry) {
  runtime::ComponentInfo info;
  info.type = "timeline";
  info.role = runtime::Role::kSink;
  info.doc =
      "Keeps the correlated run graph in the embedded store (SQLite, WAL): runs with their experiment, model "
      "version, dataset, config and rank -> node -> GPU allocation, checkpoints and artifacts, alerts grouped into "
      "incidents, per-step aggregates (from step_stats), and each run's timeline (LR and config changes, jumps "
      "from train_marks, non-finite values, alerts, diagnoses, XID/OOM/exception events, checkpoints, restarts, the "
      "end), also written to timeline_path. Rank and GPU rows are kept at full resolution only around alerts and for "
      "each run's last window; otherwise per-rank window summaries and GPU/node rollups. Writes on a thread of its "
      "own (runtime/async_writer.h). See docs/storage.md.";
  const TimelineSinkOptions defaults;  // each default is written once, in TimelineSinkOptions
  info.params = {
      {.name = "store",
       .type = runtime::ParamType::kString,
       .default_value = "${RUNLENS_STORE:-sqlite://${RUNLENS_OUT:-out}/runlens.db}",
       .doc = "The store's URL, e.g. sqlite:///ABSOLUTE/PATH.db or sqlite://RELATIVE/PATH.db (docs/storage.md); "
              "created and migrated when needed; several replays may fill one store."},
      {.name = "db",
       .type = runtime::ParamType::kString,
       .default_value = "",
       .doc = "Deprecated, goes away in the next release: the store file's path; use store: sqlite://PATH. When set, "
              "it is used instead of store."},
      {.name = "new_store",
       .type = runtime::ParamType::kString,
       .default_value = "${RUNLENS_NEW_STORE:-in_place}",
       .doc =
           "Where no store exists yet: in_place writes it at its URL, readable from the first commit (`runlens "
           "serve` can follow a live run); whole builds it beside its path with no log and no syncs, and puts it "
           "in place, synced, when the pipeline ends: readers see no store until then, then all of it, and a "
           "killed pipeline leaves no store there. `runlens replay` sets RUNLENS_NEW_STORE=whole unless told otherwise "
           "(--new-store). A store that exists is always written in place.",
       .choices = {"in_place", "whole"}},
      {.name = "timeline_path",
       .type = runtime::ParamType::kString,
       .default_value = "${RUNLENS_OUT:-out}/timeline.jsonl",
       .doc = "Where the timeline is also written as JSON lines (replaced at start); empty for none."},
      {.name = "failure_window_steps",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(defaults.graph.failure_window_steps),
       .doc = "Rank rows are kept at full resolution from this many steps before an alert to as many after, and for "
              "the last this-many steps of a run.",
       .min = 1},
      {.name = "failure_window_time",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.graph.failure_window_ns),
       .doc = "GPU rows are kept at full resolution from this long before an alert to as long after.",
       .min = 0},
      {.name = "rank_window",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(defaults.graph.rank_window),
       .doc = "Steps per per-rank summary row.",
       .min = 1},
      {.name = "rollups",
       .type = runtime::ParamType::kStringList,
       .default_value = "[1m:30d, 1h:365d]",
       .doc = "GPU and node rollup tiers, RESOLUTION:RETENTION (e.g. add 10s:1d where GPUs are sampled more often than "
              "every 10 s); retention counts back from the newest sample."},
      {.name = "commit_interval",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.graph.commit_interval_ns),
       .doc = "Wall time between commits: how stale a live reader's view may be.",
       .min = 0},
      {.name = "commit_rows",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(defaults.graph.commit_rows),
       .doc = "Pending rows that force a commit (and bound what waits in memory for one).",
       .min = 1},
  };
  info.accepts = mask(Kind::kRunStart) | mask(Kind::kTrain) | mask(Kind::kGpu) | mask(Kind::kNode) |
                 mask(Kind::kCheckpoint) | mask(Kind::kEvent) | mask(Kind::kRunEnd) | mask(Kind::kStepRecord) |
                 mask(Kind::kStepStats) | mask(Kind::kAlert) | mask(Kind::kTrainMarks);
  // The series inference that was the sink's is train_marks' (operators/train_marks.h).
  for (const char* p : {"lr_change_ratio", "jump_ratio"}) {
    registry.add_moved_param("timeline", p,
                             "set it on a train_marks operator and list that operator in this sink's inputs "
                             "(docs/storage.md)");
  }
  registry.add_operator(std::move(info), [](const runtime::BuildContext& ctx) {
    TimelineSinkOptions o;
    o.store_url = ctx.params->get_string("store");
    if (const std::string& db = ctx.params->get_string("db"); !db.empty()) {
      o.store_url = store::store_url_of_file(db);
      ctx.warn("db",
               "timeline parameter 'db' is deprecated and goes away in the next release; use store: " + o.store_url);
    }
    if (auto why = store::store_url_error(o.store_url))
      ctx.fail(ctx.params->get_string("db").empty() ? "store" : "db", *why);
    o.timeline_path = ctx.params->get_string("timeline_path");
    o.build_whole = ctx.params->get_string("new_store") == "whole";
    o.graph.failure_window_steps = ctx.params->get_int("failure_window_steps");
    o.graph.failure_window_ns = ctx.params->get_duration_ns("failure_window_time");
    o.graph.rank_window = ctx.params->get_int("rank_window");
    for (const auto& t : ctx.params->get_list("rollups")) {
      store::RollupTier tier;
      std::string why;
      if (!parse_rollup_tier(t, &tier, &why)) ctx.fail("rollups", why);
      o.graph.rollups.push_back(tier);
    }
    o.graph.commit_interval_ns = ctx.params->get_duration_ns("commit_interval");
    o.graph.commit_rows = ctx.params->get_int("commit_rows");
    return MakeTimelineSink(std::move(o));
  });
}

}  // namespace runlens::connectors
