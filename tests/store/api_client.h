// A client of the query API for the store's tests: an ApiServer on a free
// loopback port over a store file, and GETs that check every answer is JSON.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>
#include <utility>

#include "server/serve.h"
#include "tests/store/store_scenarios.h"

namespace runlens::testing {

struct Api {
  explicit Api(const std::string& db) : server(api::ServeOptions{url_of(db), "127.0.0.1", 0}) {
    std::string error;
    REQUIRE_MESSAGE(server.start(&error), error);
    client = std::make_unique<httplib::Client>("127.0.0.1", server.port());
  }
  // Status and parsed body; every answer, errors included, is JSON.
  std::pair<int, json::Value> get(const std::string& path) {
    auto res = client->Get(path.c_str());
    REQUIRE_MESSAGE(res, "no answer for " << path);
    CHECK(res->get_header_value("Content-Type") == "application/json");
    return {res->status, parse_json(res->body)};
  }
  json::Value ok(const std::string& path) {
    auto [status, body] = get(path);
    REQUIRE_MESSAGE(status == 200, path << " -> " << status);
    return body;
  }
  // The status and error message of a request that must fail.
  std::pair<int, std::string> error(const std::string& path) {
    auto [status, body] = get(path);
    const json::Value* e = body.find("error");
    REQUIRE_MESSAGE(e, path << " has no error");
    return {status, e->text};
  }
  api::ApiServer server;
  std::unique_ptr<httplib::Client> client;
};

inline const json::Value& at(const json::Value& v, const char* key) {
  const json::Value* f = v.find(key);
  REQUIRE_MESSAGE(f, "no key " << key);
  return *f;
}
inline std::string str(const json::Value& v, const char* key) { return at(v, key).text; }
inline double number(const json::Value& v, const char* key) { return at(v, key).number; }
inline bool is_null(const json::Value& v, const char* key) { return at(v, key).type == json::Value::Type::kNull; }

}  // namespace runlens::testing
