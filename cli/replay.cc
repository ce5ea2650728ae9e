// runlens replay: recorded runs (JSONL or recordings) through a pipeline.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "cli/pipeline_run.h"
#include "connectors/sources/sources.h"

namespace runlens::cli {

namespace {

struct ReplayFlags {
  PipelineFlags pipeline;
  std::vector<std::string> inputs;
  std::string speed = "max";
  std::string new_store;  // --new-store: whole or in_place
  int64_t batch = 0;
  bool quiet = false, no_progress = false, strict = false;
};

// The executor's threads when --threads is not given. At --speed max the
// source reads and decodes as fast as it can, so its own thread keeps a core
// busy and the operators do best on the others: on 2 cores one executor
// thread instead of two took 6-15 % less CPU and 5-8 % less wall time
// (docs/performance.md), the second one mostly spinning for work the source
// had not yet read. A paced replay's source mostly waits, as `run`'s does:
// every core.
int default_threads(double speed) { return speed == 0 ? std::max(1, cores() - 1) : cores(); }

// RUNLENS_NEW_STORE, which the timeline sink's new_store reads: --new-store,
// else what --set or the environment say, else whole. Nobody reads a new
// store while a replay writes it, so by default it is built whole and put in
// place at the end (store::OpenOptions::build_whole): each page is written
// once and synced once (docs/performance.md, "A new store built whole").
std::map<std::string, std::string> new_store_variable(const ReplayFlags& f) {
  constexpr const char* kVar = "RUNLENS_NEW_STORE";
  if (!f.new_store.empty()) return {{kVar, f.new_store}};
  const char* env = std::getenv(kVar);
  if (parse_sets(f.pipeline.sets).count(kVar) || (env && *env)) return {};
  return {{kVar, "whole"}};
}

int replay(const ReplayFlags& f) {
  runtime::PipelineSpec spec = load_flagged_pipeline("replay", f.pipeline, new_store_variable(f));
  auto sp = connectors::parse_speed(f.speed);
  if (!sp) {
    std::fprintf(stderr, "runlens replay: invalid --speed '%s' (max, realtime or e.g. 10x)\n", f.speed.c_str());
    return kExitUsage;
  }
  EngineOptions eo;
  eo.threads = f.pipeline.threads > 0 ? f.pipeline.threads : default_threads(*sp);
  eo.out_dir = f.pipeline.out_dir;
  eo.batch_size = f.batch;
  eo.replay_inputs = f.inputs;
  eo.speed = *sp;
  eo.progress = !f.quiet && !f.no_progress && isatty(STDERR_FILENO);
  // Replay never sheds: every event of the recording is processed.
  spec.settings.overflow = runtime::OverflowPolicy::kBlock;
  return run_engine(std::move(spec), eo, /*replay=*/true, f.quiet, f.strict, f.pipeline);
}

}  // namespace

Command add_replay(CLI::App& app) {
  auto f = std::make_shared<ReplayFlags>();
  auto* sub = app.add_subcommand("replay", "Replay recorded runs (JSONL or recordings) through a pipeline");
  sub->add_option("INPUT", f->inputs, "Telemetry files: JSONL or recordings, recognised by content")->required();
  add_pipeline_flags(sub, &f->pipeline);
  sub->add_option("--speed", f->speed, "max, realtime, or a factor such as 10x")->capture_default_str();
  sub->add_option(
         "--new-store", f->new_store,
         "Where the store does not exist yet: whole builds it beside its path and puts it in place when the "
         "replay ends (readers see no store until then, a killed replay leaves no store there); in_place writes it "
         "where it lies, readable while the replay runs, as `run` does. Sets RUNLENS_NEW_STORE (default: "
         "$RUNLENS_NEW_STORE, else whole)")
      ->check(CLI::IsMember({"whole", "in_place"}));
  sub->add_option("--batch", f->batch, "Rows per batch read (default: the pipeline's batch_size)");
  sub->add_flag("--quiet", f->quiet, "No progress bar and no counter summary");
  sub->add_flag("--no-progress", f->no_progress, "No progress bar");
  sub->add_flag("--strict", f->strict, "Exit 3 when the input had dead letters");
  return {sub, [f] { return replay(*f); }};
}

}  // namespace runlens::cli
