// A JSON-over-HTTP client for the evaluation routes' tests (every answer is
// parsed, errors included, which are JSON too), and the service with its
// routes on loopback ports chosen at run time.
#pragma once

#include <doctest/doctest.h>
#include <httplib.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "eval/service/http.h"
#include "eval/service/service.h"
#include "formats/json_reader.h"
#include "server/serve.h"
#include "store/store.h"

namespace runlens::testing {

inline json::Value parse(const std::string& text) {
  json::Value v;
  json::ParseError err;
  REQUIRE_MESSAGE(json::parse(text, &v, &err), err.message << " in " << text);
  return v;
}

inline const json::Value& at(const json::Value& v, const char* key) {
  const json::Value* f = v.find(key);
  REQUIRE_MESSAGE(f, "no key " << key);
  return *f;
}

struct Http {
  std::unique_ptr<httplib::Client> client;
  explicit Http(int port) : client(std::make_unique<httplib::Client>("127.0.0.1", port)) {}
  std::pair<int, json::Value> get(const std::string& path) {
    auto res = client->Get(path.c_str());
    REQUIRE_MESSAGE(res, "no answer for " << path);
    CHECK(res->get_header_value("Content-Type") == "application/json");
    return {res->status, parse(res->body)};
  }
  // POSTs `body` as `type`; `user`, when given, is the X-Runlens-User header.
  std::pair<int, json::Value> post(const std::string& path, const std::string& body,
                                   const char* type = "application/json", const std::string& user = "") {
    httplib::Headers h;
    if (!user.empty()) h.emplace("X-Runlens-User", user);
    auto res = client->Post(path.c_str(), h, body, type);
    REQUIRE_MESSAGE(res, "no answer for " << path);
    return {res->status, parse(res->body)};
  }
};

// Options for a service over DIR/runlens.db with the suites of DIR/suites and
// the gate policies of DIR/gates (when there is one), its ROUTER on a port chosen at bind time.
inline eval::service::ServiceOptions service_options(const std::string& dir) {
  eval::service::ServiceOptions so;
  so.store_url = store::store_url_of_file(dir + "/runlens.db");
  so.suite_paths = {dir + "/suites"};
  if (std::filesystem::is_directory(dir + "/gates")) so.gate_paths = {dir + "/gates"};
  so.endpoint = "tcp://127.0.0.1:0";
  return so;
}

// The evaluation service over `options` and an ApiServer with its routes,
// both started (the test fails here if either cannot start), stopped by stop()
// or when it goes out of scope; `http` talks to the server.
struct ServedEval {
  eval::service::EvalService svc;
  api::ApiServer server;
  std::optional<Http> http;

  explicit ServedEval(const eval::service::ServiceOptions& options)
      : svc(options), server(api::ServeOptions{options.store_url, "127.0.0.1", 0}) {
    std::string error;
    REQUIRE_MESSAGE(svc.start(&error), error);
    eval::service::add_routes(server, svc);
    REQUIRE_MESSAGE(server.start(&error), error);
    http.emplace(server.port());
  }
  // The server first: no request reaches a stopped service.
  void stop() {
    server.stop();
    svc.stop();
  }
};

}  // namespace runlens::testing
