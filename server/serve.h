// The query API over the store (docs/api.md): runs, ranks, timeline, steps,
// alerts, run comparison and lineage, as JSON over HTTP (cpp-httplib).
// `runlens serve --store URL` serves a store; `runlens run --api-port N` serves
// the store its pipeline is writing (the command line finds which).
//
// Each request opens its own read-only connection to the store, so requests
// never wait for one another or for the writer (store/store.h). Bad
// parameters are answered 400 and unknown identifiers 404, both with a JSON
// body {"error": ..., "status": ...}; nothing in a request becomes SQL text.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace runlens::api {

struct ServeOptions {
  std::string store_url;  // store/store.h: open_store()
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (port() tells which)
};

class ApiServer {
 public:
  explicit ApiServer(ServeOptions options);
  ~ApiServer();  // stops
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds and serves on a background thread; false (and `error`) when the
  // address cannot be bound.
  bool start(std::string* error);
  int port() const;
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace runlens::api
