#include "cli/pipeline_run.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "cli/allocator.h"
#include "cli/commands.h"
#include "cli/store_option.h"
#include "connectors/metrics/metrics_server.h"

namespace runlens::cli {

namespace {

void print_summary(const RunSummary& s, bool replay) {
  std::fprintf(stderr, "%s", runtime::format_counters(s.counters).c_str());
  if (std::string pages = allocator_summary(); !pages.empty()) std::fprintf(stderr, "memory: %s\n", pages.c_str());
  double rate = s.seconds > 0 ? static_cast<double>(s.source_rows) / s.seconds : 0;
  std::fprintf(stderr, "%s %llu events in %.3f s (%.0f events/s)", replay ? "replayed" : "processed",
               static_cast<unsigned long long>(s.source_rows), s.seconds, rate);
  if (s.dead_letters) {
    std::fprintf(stderr, "; %llu dead letters in %s", static_cast<unsigned long long>(s.dead_letters),
                 s.dead_letter_path.c_str());
  }
  std::fprintf(stderr, "\n");
}

}  // namespace

void add_pipeline_flags(CLI::App* sub, PipelineFlags* flags) {
  sub->add_option("--pipeline", flags->pipeline,
                  "Pipeline file (default: the embedded pipelines/training-health.yaml)");
  sub->add_option("--out", flags->out_dir, "Output directory; sets RUNLENS_OUT")->capture_default_str();
  add_pipeline_store_option(sub, &flags->store);
  sub->add_option("--threads", flags->threads,
                  "Executor threads (default: all cores; replay at --speed max: all but one, for the source)");
  sub->add_option("--set", flags->sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  sub->add_option("--counters-json", flags->counters_json,
                  "At exit, write every node's counters (rows, drops by priority, queue peak, sink latency) to FILE, "
                  "one JSON object per line");
  sub->add_option("--metrics-port", flags->metrics_port,
                  "Serve GET /metrics (Prometheus text format) on HOST:PORT while the pipeline runs; 0 picks a free "
                  "port, printed as 'metrics: http://HOST:PORT/metrics' on standard error")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--metrics-host", flags->metrics_host, "Address --metrics-port listens on")->capture_default_str();
}

runtime::PipelineSpec load_flagged_pipeline(const std::string& command, const PipelineFlags& flags,
                                            const std::map<std::string, std::string>& extra) {
  auto vars = parse_sets(flags.sets);
  vars["RUNLENS_OUT"] = flags.out_dir;
  for (const auto& [k, v] : extra) vars[k] = v;
  set_store_variable(command, flags.store, &vars);
  return load_pipeline(flags.pipeline, vars);
}

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int run_engine(runtime::PipelineSpec spec, EngineOptions options, bool replay, bool quiet, bool strict,
               const PipelineFlags& flags) {
  const std::string& counters_json = flags.counters_json;
  cap_arenas(options.threads > 0 ? options.threads : cores());
  std::unique_ptr<connectors::metrics::MetricsServer> metrics_server;
  if (flags.metrics_port >= 0) {
    options.metrics = std::make_shared<connectors::metrics::MetricsHub>();
    metrics_server =
        std::make_unique<connectors::metrics::MetricsServer>(options.metrics, flags.metrics_host, flags.metrics_port);
    std::string error;
    if (!metrics_server->start(&error)) {
      std::fprintf(stderr, "runlens: --metrics-port: %s\n", error.c_str());
      return kExitUsage;
    }
    std::fprintf(stderr, "metrics: http://%s:%d/metrics\n", flags.metrics_host.c_str(), metrics_server->port());
  }
  Engine engine(std::move(spec), options);
  // A signal only sets a flag (stop_requested()), so the watcher polls it;
  // the end of the run wakes it at once, or every run's exit would wait out
  // the rest of a poll interval (up to 50 ms).
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watcher([&] {
    std::unique_lock l(mu);
    while (!cv.wait_for(l, std::chrono::milliseconds(50), [&] { return done; })) {
      if (stop_requested()) {
        engine.stop();
        break;
      }
    }
  });
  auto finish_watcher = [&] {
    {
      std::lock_guard l(mu);
      done = true;
    }
    cv.notify_one();
    watcher.join();
  };
  RunSummary summary;
  try {
    summary = engine.run();
  } catch (...) {
    finish_watcher();
    throw;
  }
  finish_watcher();
  if (!quiet) print_summary(summary, replay);
  if (!counters_json.empty()) {
    std::FILE* f = std::fopen(counters_json.c_str(), "w");
    std::string text = runtime::counters_json(summary.counters);
    if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
      std::fprintf(stderr, "runlens: cannot write the counters to %s\n", counters_json.c_str());
      if (f) std::fclose(f);
      return kExitFailure;
    }
    std::fclose(f);
  }
  if (strict && summary.dead_letters > 0) return kExitDeadLetters;
  return kExitOk;
}

}  // namespace runlens::cli
