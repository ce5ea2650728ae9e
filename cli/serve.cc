// runlens serve: the query API (docs/api.md) over a store until Ctrl-C.
#include "server/serve.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/store_option.h"
#include "store/store.h"

namespace runlens::cli {

namespace {

struct ServeFlags {
  StoreFlags store;
  api::ServeOptions options;
};

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
      std::fprintf(stderr, "runlens serve: no store at %s (replay or run a pipeline with a timeline sink first)\n",
                   o.store_url.c_str());
      return kExitUsage;
    }
    // Migrates an older store (a read-write open) before serving it read-only.
    store::open_store(o.store_url);
  } catch (const store::StoreError& e) {
    std::fprintf(stderr, "runlens serve: %s\n", e.what());
    return kExitFailure;
  }
  api::ApiServer server(o);
  std::string error;
  if (!server.start(&error)) {
    std::fprintf(stderr, "runlens serve: %s\n", error.c_str());
    return kExitUsage;
  }
  std::fprintf(stderr, "serving %s on http://%s:%d/v1/ until Ctrl-C\n", o.store_url.c_str(), o.host.c_str(),
               server.port());
  while (!stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.stop();
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
  return {sub, [f] { return serve(*f); }};
}

}  // namespace runlens::cli
