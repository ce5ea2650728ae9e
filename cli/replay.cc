// runlens replay: recorded runs (JSONL or recordings) through a pipeline.
#include <unistd.h>

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

int replay(const ReplayFlags& f) {
  runtime::PipelineSpec spec = load_flagged_pipeline("replay", f.pipeline);
  EngineOptions eo;
  eo.threads = f.pipeline.threads;
  eo.out_dir = f.pipeline.out_dir;
  eo.batch_size = f.batch;
  eo.replay_inputs = f.inputs;
  auto sp = connectors::parse_speed(f.speed);
  if (!sp) {
    std::fprintf(stderr, "runlens replay: invalid --speed '%s' (max, realtime or e.g. 10x)\n", f.speed.c_str());
    return kExitUsage;
  }
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
