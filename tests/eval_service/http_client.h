// A JSON-over-HTTP client for the evaluation routes' tests: every answer is
// parsed (errors included, which are JSON too).
#pragma once

#include <doctest/doctest.h>
#include <httplib.h>

#include <memory>
#include <string>
#include <utility>

#include "formats/json_reader.h"

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

}  // namespace runlens::testing
