// runlens report: a run's failure page (spec section 24) from a store, a
// replay's output directory, or telemetry files (replayed first).
#include "reports/report.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/store_option.h"
#include "engine/engine.h"
#include "store/store.h"

namespace runlens::cli {

namespace {

struct ReportFlags {
  StoreFlags store;
  report::ReportOptions options;
  std::string format = "text";
  std::vector<std::string> inputs;
};

// Prints the page; 2 for an unknown run or store.
int print_page(const report::ReportOptions& o) {
  try {
    if (!store::store_exists(o.store_url)) {
      std::fprintf(stderr, "runlens report: no store at %s\n", o.store_url.c_str());
      return kExitUsage;
    }
    auto page = report::failure_page(o);
    if (!page) {
      std::fprintf(stderr, "runlens report: no run '%s' in %s\n", o.run_id.c_str(), o.store_url.c_str());
      return kExitUsage;
    }
    std::fwrite(page->data(), 1, page->size(), stdout);
    return kExitOk;
  } catch (const store::StoreError& e) {
    std::fprintf(stderr, "runlens report: %s\n", e.what());
    return kExitFailure;
  }
}

// Replays telemetry through the default pipeline into a scratch store in `dir`,
// built whole as `replay` builds a new store (nothing reads it meanwhile).
void replay_into_scratch(const std::vector<std::string>& inputs, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::map<std::string, std::string> vars{{"RUNLENS_OUT", dir},
                                          {"RUNLENS_STORE", store::default_store_url(dir)},
                                          {"RUNLENS_PUBLISH", "ipc://" + dir + "/alerts"},
                                          {"RUNLENS_NEW_STORE", "whole"}};
  auto spec = load_pipeline("", vars);
  spec.settings.overflow = runtime::OverflowPolicy::kBlock;
  // The console sink would print every alert before the page: keep the page alone on stdout.
  std::erase_if(spec.components, [](const runtime::ComponentSpec& c) { return c.type == "console"; });
  EngineOptions eo;
  eo.replay_inputs = inputs;
  eo.out_dir = dir;
  Engine(std::move(spec), eo).run();
}

int run_report(ReportFlags& f) {
  namespace fs = std::filesystem;
  report::ReportOptions& o = f.options;
  o.json = f.format == "json";
  // The store: --store (or --db), else INPUT, else RUNLENS_STORE.
  o.store_url = flag_store_url("report", f.store);
  std::string tmp;
  if (o.store_url.empty() && !f.inputs.empty()) {
    const std::string& first = f.inputs[0];
    if (f.inputs.size() == 1 && fs::is_directory(first)) {
      o.store_url = store::default_store_url(first);
    } else if (auto url = f.inputs.size() == 1 ? store::probe_store(first) : std::nullopt) {
      o.store_url = *url;
    } else {
      tmp = (fs::temp_directory_path() / ("runlens-report-" + std::to_string(getpid()))).string();
      replay_into_scratch(f.inputs, tmp);
      o.store_url = store::default_store_url(tmp);
    }
  }
  if (o.store_url.empty()) o.store_url = env_store_url();
  if (o.store_url.empty()) {
    std::fprintf(stderr,
                 "runlens report: give a store (--store URL or RUNLENS_STORE), a directory, or telemetry files\n");
    return kExitUsage;
  }
  int rc = print_page(o);
  if (!tmp.empty()) fs::remove_all(tmp);
  return rc;
}

}  // namespace

Command add_report(CLI::App& app) {
  auto f = std::make_shared<ReportFlags>();
  auto* sub = app.add_subcommand("report",
                                 "Print a run's failure page (spec section 24) from a store, a replay's "
                                 "output directory, or telemetry files (replayed first)");
  sub->add_option("INPUT", f->inputs,
                  "A store file, a directory holding runlens.db (e.g. a replay's --out), or telemetry files to "
                  "replay");
  add_store_flags(sub, &f->store);
  sub->add_option("--run", f->options.run_id, "Run id")->required();
  sub->add_option("--format", f->format, "text or json")->capture_default_str()->check(CLI::IsMember({"text", "json"}));
  return {sub, [f] { return run_report(*f); }};
}

}  // namespace runlens::cli
