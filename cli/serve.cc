// runlens serve: the query API (docs/api.md) over a store and the evaluation
// service (docs/evaluation-service.md) on the same port, until Ctrl-C.
#include "server/serve.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/store_option.h"
#include "eval/service/http.h"
#include "eval/service/service.h"
#include "store/store.h"

namespace runlens::cli {

namespace {

struct ServeFlags {
  StoreFlags store;
  api::ServeOptions options;
  std::vector<std::string> suites;
  std::vector<std::string> gates;
  std::string workers = "tcp://127.0.0.1:5571";
  std::string alerts_pub, alerts_out;
  int64_t heartbeat_timeout_ms = 10000;
  bool create = false;
};

#ifndef RUNLENS_DEFAULT_SUITES
#define RUNLENS_DEFAULT_SUITES ""
#endif
#ifndef RUNLENS_DEFAULT_GATES
#define RUNLENS_DEFAULT_GATES ""
#endif

int serve(ServeFlags& f) {
  api::ServeOptions& o = f.options;
  o.store_url = flag_store_url("serve", f.store);
  if (o.store_url.empty()) o.store_url = env_store_url();
  if (o.store_url.empty()) {
    std::fprintf(stderr, "runlens serve: name the store: --store URL (or RUNLENS_STORE), e.g. --store %s\n",
                 store::default_store_url("out").c_str());
    return kExitUsage;
  }
  try {
    if (!store::store_exists(o.store_url)) {
      if (!f.create) {
        std::fprintf(stderr,
                     "runlens serve: no store at %s (replay or run a pipeline with a timeline sink first, or pass "
                     "--create to start an empty one)\n",
                     o.store_url.c_str());
        return kExitUsage;
      }
      std::fprintf(stderr, "runlens serve: created an empty store at %s\n", o.store_url.c_str());
    }
    // Migrates an older store (a read-write open) before serving it read-only.
    store::open_store(o.store_url);
  } catch (const store::StoreError& e) {
    std::fprintf(stderr, "runlens serve: %s\n", e.what());
    return kExitFailure;
  }
  eval::service::ServiceOptions so;
  so.store_url = o.store_url;
  so.suite_paths = f.suites;
  if (so.suite_paths.empty()) {
    std::error_code ec;
    if (std::string d = RUNLENS_DEFAULT_SUITES; !d.empty() && std::filesystem::is_directory(d, ec))
      so.suite_paths.push_back(d);
  }
  so.gate_paths = f.gates;
  if (so.gate_paths.empty()) {
    std::error_code ec;
    if (std::string d = RUNLENS_DEFAULT_GATES; !d.empty() && std::filesystem::is_directory(d, ec))
      so.gate_paths.push_back(d);
  }
  so.endpoint = f.workers;
  so.alerts_pub = f.alerts_pub;
  so.alerts_out = f.alerts_out;
  so.heartbeat_timeout_ms = f.heartbeat_timeout_ms;
  so.heartbeat_ms = std::max<int64_t>(10, std::min<int64_t>(1000, f.heartbeat_timeout_ms / 5));
  eval::service::EvalService service(so);
  std::string error;
  if (!service.start(&error)) {
    std::fprintf(stderr, "runlens serve: %s\n", error.c_str());
    return kExitUsage;
  }
  for (const auto& p : service.suite_problems()) std::fprintf(stderr, "runlens serve: suite skipped: %s\n", p.c_str());
  for (const auto& p : service.gate_problems())
    std::fprintf(stderr, "runlens serve: gate policy skipped: %s\n", p.c_str());
  for (const auto& n : service.resume_notes()) std::fprintf(stderr, "runlens serve: restart: %s\n", n.c_str());
  api::ApiServer server(o);
  eval::service::add_routes(server, service);
  if (!server.start(&error)) {
    std::fprintf(stderr, "runlens serve: %s\n", error.c_str());
    return kExitUsage;
  }
  std::fprintf(stderr, "evaluation workers connect to %s (%zu suites)\n", service.endpoint().c_str(),
               service.suites().size());
  std::fprintf(stderr, "serving %s on http://%s:%d/v1/ until Ctrl-C\n", o.store_url.c_str(), o.host.c_str(),
               server.port());
  std::fprintf(stderr, "portal: http://%s:%d/\n", o.host.c_str(), server.port());
  if (!service.alerts_endpoint().empty())
    std::fprintf(stderr, "evaluation alerts are published on %s\n", service.alerts_endpoint().c_str());
  while (!stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.stop();
  service.stop();
  return kExitOk;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  auto* sub = app.add_subcommand("serve", "Serve the query API (docs/api.md) over a store until Ctrl-C");
  add_store_flags(sub, &f->store);
  sub->add_option("--port", f->options.port, "TCP port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  sub->add_option("--host", f->options.host, "Address to bind")->capture_default_str();
  sub->add_option("--suites", f->suites,
                  "Evaluation suites: a directory of *.yaml or a suite file (repeatable; default: the source tree's "
                  "configs/eval)");
  sub->add_option("--gates", f->gates,
                  "Quality-gate policies: a directory of *.yaml or a policy file (repeatable; default: the source "
                  "tree's configs/gates)");
  sub->add_option("--workers", f->workers,
                  "ZeroMQ endpoint evaluation workers connect to (tcp://127.0.0.1:0: any port)")
      ->capture_default_str();
  sub->add_option("--alerts-pub", f->alerts_pub,
                  "ZeroMQ PUB endpoint to publish evaluation alerts on, as the zmq_pub sink does (runlens tail "
                  "--connect; tcp://127.0.0.1:0: any port)");
  sub->add_option("--alerts-out", f->alerts_out, "JSONL file to append evaluation alerts to");
  sub->add_flag("--create", f->create,
                "Create the store when there is none yet (an evaluation service starting on a fresh store)");
  sub->add_option("--heartbeat-timeout", f->heartbeat_timeout_ms,
                  "Milliseconds without a heartbeat after which a worker is lost and its shards retried")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{50}, int64_t{3600000}));
  return {sub, [f] { return serve(*f); }};
}

}  // namespace runlens::cli
