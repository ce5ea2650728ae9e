// runlens run: a pipeline live until SIGINT/SIGTERM, optionally with the
// query API over the store it writes.
#include <memory>

#include "cli/commands.h"
#include "cli/pipeline_run.h"
#include "cli/store_option.h"
#include "server/serve.h"

namespace runlens::cli {

namespace {

struct RunFlags {
  PipelineFlags pipeline;
  std::string record;
  int api_port = -1;
  bool quiet = false;
};

int run(const RunFlags& f) {
  std::map<std::string, std::string> extra;
  if (!f.record.empty()) extra["RUNLENS_RECORD"] = f.record;
  runtime::PipelineSpec spec = load_flagged_pipeline("run", f.pipeline, extra);
  EngineOptions eo;
  eo.threads = f.pipeline.threads;
  eo.out_dir = f.pipeline.out_dir;
  // The query API of a live run reads the store its timeline sink writes.
  std::unique_ptr<api::ApiServer> api_server;
  if (f.api_port >= 0) {
    std::string url = pipeline_store_url(spec);
    if (url.empty()) {
      std::fprintf(stderr, "runlens run: --api-port needs a pipeline with a timeline sink\n");
      return kExitUsage;
    }
    api_server = std::make_unique<api::ApiServer>(api::ServeOptions{url, "127.0.0.1", f.api_port});
    std::string error;
    if (!api_server->start(&error)) {
      std::fprintf(stderr, "runlens run: %s\n", error.c_str());
      return kExitUsage;
    }
    std::fprintf(stderr, "query API on http://127.0.0.1:%d/v1/ (store %s)\n", api_server->port(), url.c_str());
    std::fprintf(stderr, "portal: http://127.0.0.1:%d/\n", api_server->port());
  }
  return run_engine(std::move(spec), eo, /*replay=*/false, f.quiet, /*strict=*/false, f.pipeline);
}

}  // namespace

Command add_run(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  auto* sub = app.add_subcommand("run", "Run a pipeline live until SIGINT/SIGTERM");
  add_pipeline_flags(sub, &f->pipeline);
  sub->add_flag("--quiet", f->quiet, "No counter summary at exit");
  sub->add_option("--record", f->record, "Also record every frame received to this recording (sets RUNLENS_RECORD)");
  sub->add_option("--api-port", f->api_port,
                  "Also serve the query API (docs/api.md) on 127.0.0.1:PORT from the store "
                  "the pipeline's timeline sink writes")
      ->check(CLI::Range(0, 65535));
  return {sub, [f] { return run(*f); }};
}

}  // namespace runlens::cli
