// The API's middleware chain (server/serve.h): every request passes it, in
// order, before its handler; a middleware may answer early (as auth will), or
// look at the answer after next(); what it throws gets the JSON error
// envelope like a handler's errors.
#include <httplib.h>

#include "server/serve.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct Served {
  explicit Served(api::ApiServer& s) : server(s) {
    std::string error;
    REQUIRE_MESSAGE(server.start(&error), error);
    client = std::make_unique<httplib::Client>("127.0.0.1", server.port());
  }
  httplib::Result get(const std::string& path, const httplib::Headers& headers = {}) {
    auto res = client->Get(path.c_str(), headers);
    REQUIRE(res);
    return res;
  }
  api::ApiServer& server;
  std::unique_ptr<httplib::Client> client;
};

}  // namespace

TEST_CASE("middleware: runs in order before every handler, may answer early, and sees the answer") {
  api::ApiServer server(api::ServeOptions{url_of(scenarios().db), "127.0.0.1", 0});
  std::mutex mu;
  std::vector<std::string> seen;
  server.use([&](const api::HttpRequest& req, api::HttpResponse& res, const std::function<void()>& next) {
    {
      std::lock_guard lock(mu);
      seen.push_back("first " + req.method + " " + req.path);
    }
    next();
    res.headers.emplace_back("X-Status-Seen", std::to_string(res.status));
  });
  server.use([&](const api::HttpRequest& req, api::HttpResponse& res, const std::function<void()>& next) {
    {
      std::lock_guard lock(mu);
      seen.push_back("second");
    }
    auto token = req.headers.find("X-Token");
    if (token == req.headers.end() || token->second != "let-me-in") {
      res.status = 401;
      res.body = "{\"error\":\"no token\",\"status\":401}";
      return;  // the handler does not run
    }
    next();
  });
  Served s(server);

  auto denied = s.get("/v1/runs/straggle");
  CHECK(denied->status == 401);
  CHECK(denied->body == "{\"error\":\"no token\",\"status\":401}");
  CHECK(denied->get_header_value("X-Status-Seen") == "401");
  CHECK(denied->get_header_value("Content-Type") == "application/json");

  auto ok = s.get("/v1/runs/straggle", {{"x-token", "let-me-in"}});  // header names in any case
  CHECK(ok->status == 200);
  CHECK(parse_json(ok->body).find("runId")->text == "straggle");
  CHECK(ok->get_header_value("X-Status-Seen") == "200");

  // Unknown routes pass the chain too, and are answered by the route table.
  auto missing = s.get("/v1/nowhere", {{"X-Token", "let-me-in"}});
  CHECK(missing->status == 404);
  CHECK(missing->body == "{\"error\":\"no such route: GET /v1/nowhere\",\"status\":404}");
  CHECK(missing->get_header_value("X-Status-Seen") == "404");

  std::lock_guard lock(mu);
  CHECK(seen == std::vector<std::string>{"first GET /v1/runs/straggle", "second", "first GET /v1/runs/straggle",
                                         "second", "first GET /v1/nowhere", "second"});
}

TEST_CASE("middleware: what a middleware throws gets the error envelope") {
  api::ApiServer server(api::ServeOptions{url_of(scenarios().db), "127.0.0.1", 0});
  server.use([](const api::HttpRequest& req, api::HttpResponse&, const std::function<void()>& next) {
    if (req.params.count("tenant") == 0) throw api::HttpError{403, "which tenant?"};
    if (req.params.find("tenant")->second == "broken") throw std::runtime_error("tenant table unreadable");
    next();
  });
  Served s(server);
  auto forbidden = s.get("/v1/runs");
  CHECK(forbidden->status == 403);
  CHECK(forbidden->body == "{\"error\":\"which tenant?\",\"status\":403}");
  auto broken = s.get("/v1/runs?tenant=broken");
  CHECK(broken->status == 500);
  CHECK(broken->body == "{\"error\":\"tenant table unreadable\",\"status\":500}");
  // Past the middleware, the route checks its own parameters (it takes no tenant yet).
  auto bad = s.get("/v1/runs?tenant=t1");
  CHECK(bad->status == 400);
  CHECK(parse_json(bad->body).find("error")->text.find("unknown parameter 'tenant'") == 0);
}
