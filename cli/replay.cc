// runlens replay: recorded runs (JSONL or recordings) through a pipeline.
#include <unistd.h>

#include <algorithm>
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

int replay(const ReplayFlags& f) {
  runtime::PipelineSpec spec = load_flagged_pipeline("replay", f.pipeline);
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
  sub->add_option("--batch", f->batch, "Rows per batch read (default: the pipeline's batch_size)");
  sub->add_flag("--quiet", f->quiet, "No progress bar and no counter summary");
  sub->add_flag("--no-progress", f->no_progress, "No progress bar");
  sub->add_flag("--strict", f->strict, "Exit 3 when the input had dead letters");
  return {sub, [f] { return replay(*f); }};
}

}  // namespace runlens::cli
