// The query API over the store (docs/api.md): runs, ranks, timeline, steps,
// alerts, run comparison and lineage, as JSON over HTTP (cpp-httplib).
// `runlens serve --store URL` serves a store; `runlens run --api-port N` serves
// the store its pipeline is writing (the command line finds which).
//
// One file per resource (server/runs.cc, ranks.cc, ...); server/serve.cc holds
// the route table and the middleware chain. Each request opens its own
// read-only connection to the store, so requests never wait for one another
// or for the writer (store/store.h). Bad parameters are answered 400 and
// unknown identifiers 404, both with a JSON body {"error": ..., "status": ...};
// nothing in a request becomes SQL text.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace runlens::api {

struct ServeOptions {
  std::string store_url;  // store/store.h: open_store()
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (port() tells which)
};

// Header names compare without regard to case, as HTTP has it.
struct HeaderNameLess {
  bool operator()(const std::string& a, const std::string& b) const;
};

struct HttpRequest {
  std::string method;                                               // GET, POST, ...
  std::string path;                                                 // decoded, without the query
  std::multimap<std::string, std::string> params;                   // the query, decoded
  std::multimap<std::string, std::string, HeaderNameLess> headers;  // as sent
  std::vector<std::string> matches;                                 // the route's captures, [0] the whole path
  std::string body;                                                 // as sent (POST, PUT)
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

// A middleware runs before the handler of every request (unknown routes
// included), in the order they were added: it calls `next()` to pass the
// request on (and may then look at or change the response), or answers itself
// and returns without calling it. Errors get the JSON envelope
// ({"error", "status"}; an HttpError keeps its status, anything else is a
// 500): a handler's before the chain sees the answer, so every middleware
// sees the final status; a middleware's own in place of the answer.
using Middleware = std::function<void(const HttpRequest&, HttpResponse&, const std::function<void()>& next)>;

// A request answered with an error status (400, 401, 404, ...) and a message.
struct HttpError {
  int status;
  std::string message;
};

// The handler of a route added with add_route(): it fills the response
// (status 200 unless it says otherwise) or throws HttpError.
using RouteHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

class ApiServer {
 public:
  explicit ApiServer(ServeOptions options);
  ~ApiServer();  // stops
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Adds a middleware to the end of the chain (auth and tenants come here
  // later). Before start() only.
  void use(Middleware middleware);

  // Adds a route (matched after the run-graph routes, in the order added):
  // `method` and a regular expression the whole path must match, its
  // captures in HttpRequest::matches. Before start() only. This is how
  // other layers serve on the same port (eval/service/http.h).
  void add_route(const std::string& method, const std::string& pattern, RouteHandler handler);

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
