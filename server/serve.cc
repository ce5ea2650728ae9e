// The API server: the route table, the middleware chain every request passes
// before its handler, and cpp-httplib underneath.
#include "server/serve.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>
#include <thread>

#include "formats/json_writer.h"
#include "runtime/status.h"
#include "server/portal.h"
#include "server/route.h"

namespace runlens::api {

namespace {

std::string error_body(int status, const std::string& message) {
  std::string s;
  json::Writer(&s).begin_object().key("error").str(message).key("status").integer(status).end_object();
  return s;
}

// What the handler, or a middleware, throws becomes a JSON error.
void error_envelope(const HttpRequest&, HttpResponse& res, const std::function<void()>& next) {
  try {
    next();
  } catch (const HttpError& e) {
    res.status = e.status;
    res.body = error_body(e.status, e.message);
    res.content_type = "application/json";
  } catch (const std::exception& e) {
    res.status = 500;
    res.body = error_body(500, e.what());
    res.content_type = "application/json";
  }
}

struct Route {
  std::string method;
  std::regex pattern;
  Handler handler;
  RouteHandler added = nullptr;  // a route from add_route()
};

// Every route, in the order they are matched (compare before {runId}).
std::vector<Route> route_table() {
  return {
      {"GET", std::regex("/v1/health"), get_health, nullptr},
      {"GET", std::regex("/v1/runs"), get_runs, nullptr},
      {"GET", std::regex("/v1/runs/compare"), get_compare, nullptr},
      {"GET", std::regex(R"(/v1/runs/([^/]+))"), get_run, nullptr},
      {"GET", std::regex(R"(/v1/runs/([^/]+)/ranks)"), get_ranks, nullptr},
      {"GET", std::regex(R"(/v1/runs/([^/]+)/timeline)"), get_timeline, nullptr},
      {"GET", std::regex(R"(/v1/runs/([^/]+)/steps)"), get_steps, nullptr},
      {"GET", std::regex(R"(/v1/runs/([^/]+)/report)"), get_report, nullptr},
      {"GET", std::regex(R"(/v1/runs/([^/]+)/heatmap)"), get_heatmap, nullptr},
      {"GET", std::regex(R"(/v1/runs/([^/]+)/ranks/([^/]+))"), get_rank, nullptr},
      {"GET", std::regex(R"(/v1/runs/([^/]+)/gpus)"), get_gpus, nullptr},
      {"GET", std::regex("/v1/search"), get_search, nullptr},
      {"GET", std::regex("/v1/alerts"), get_alerts, nullptr},
      // ids may hold '/' (checkpoint ids do), sent as %2F
      {"GET", std::regex(R"(/v1/lineage/(.+))"), get_lineage, nullptr},
      // the portal, compiled in (server/portal.h)
      {"GET", std::regex("/"), nullptr, portal::get_index},
      {"GET", std::regex("/portal/(.*)"), nullptr, portal::get_asset},
  };
}

}  // namespace

bool HeaderNameLess::operator()(const std::string& a, const std::string& b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](unsigned char x, unsigned char y) {
    return std::tolower(x) < std::tolower(y);
  });
}

struct ApiServer::Impl {
  ServeOptions options;
  std::vector<Route> routes = route_table();
  std::vector<Middleware> chain;
  httplib::Server server;
  std::thread thread;
  int port = 0;

  // The handler at the end of the chain: the route the path matches, or 404.
  void route(HttpRequest& req, HttpResponse& res) const {
    std::smatch m;
    for (const auto& r : routes) {
      // HEAD is answered as GET (as cpp-httplib does).
      if ((req.method == r.method || (req.method == "HEAD" && r.method == "GET")) &&
          std::regex_match(req.path, m, r.pattern)) {
        req.matches.assign(m.begin(), m.end());
        if (r.added)
          r.added(req, res);
        else
          res.body = r.handler(Call(req, options.store_url));
        return;
      }
    }
    throw HttpError{404, "no such route: " + req.method + " " + req.path};
  }

  // Runs chain[i..] and then the route. The handler's errors are answered
  // before the chain sees the answer, so a middleware sees every status.
  void pass(size_t i, HttpRequest& req, HttpResponse& res) const {
    if (i == chain.size()) return error_envelope(req, res, [&] { route(req, res); });
    chain[i](req, res, [&, i] { pass(i + 1, req, res); });
  }

  void handle(const httplib::Request& in, httplib::Response& out) const {
    HttpRequest req;
    req.method = in.method;
    req.path = in.path;
    req.params = in.params;
    req.headers.insert(in.headers.begin(), in.headers.end());
    req.body = in.body;
    HttpResponse res;
    error_envelope(req, res, [&] { pass(0, req, res); });
    out.status = res.status;
    for (const auto& [k, v] : res.headers) out.set_header(k, v);
    out.set_content(res.body, res.content_type);
  }
};

ApiServer::ApiServer(ServeOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  auto& svr = impl_->server;
  const Impl* impl = impl_.get();
  auto handle = [impl](const httplib::Request& req, httplib::Response& res) { impl->handle(req, res); };
  // Every path of every method goes through the chain; the route table decides.
  svr.Get(".*", handle);
  svr.Post(".*", handle);
  svr.Put(".*", handle);
  svr.Patch(".*", handle);
  svr.Delete(".*", handle);
  svr.Options(".*", handle);
  // SO_REUSEADDR (a restart may bind at once) but not httplib's default
  // SO_REUSEPORT: a second server on a taken port must fail, not share it.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
  });
  // No Nagle: httplib writes the headers and the body separately, and a
  // keep-alive client's delayed ACK would hold the body back ~40 ms.
  svr.set_tcp_nodelay(true);
  // What cpp-httplib answers itself (a malformed request, ...) gets a JSON body too.
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 404 ? "no such route: " + req.method + " " + req.path : "request failed";
    res.set_content(error_body(res.status, msg), "application/json");
  });
}

ApiServer::~ApiServer() { stop(); }

void ApiServer::use(Middleware middleware) {
  RUNLENS_CHECK(!impl_->thread.joinable(), "ApiServer::use after start: the chain is read by the server's threads");
  impl_->chain.push_back(std::move(middleware));
}

void ApiServer::add_route(const std::string& method, const std::string& pattern, RouteHandler handler) {
  RUNLENS_CHECK(!impl_->thread.joinable(),
                "ApiServer::add_route after start: the routes are read by the server's threads");
  impl_->routes.push_back(Route{method, std::regex(pattern), nullptr, std::move(handler)});
}

bool ApiServer::start(std::string* error) {
  auto& svr = impl_->server;
  const auto& o = impl_->options;
  if (o.port == 0) {
    impl_->port = svr.bind_to_any_port(o.host);
    if (impl_->port < 0) impl_->port = 0;
  } else if (svr.bind_to_port(o.host, o.port)) {
    impl_->port = o.port;
  }
  if (impl_->port <= 0) {
    *error = "cannot listen on " + o.host + ":" + std::to_string(o.port);
    return false;
  }
  impl_->thread = std::thread([&svr] { svr.listen_after_bind(); });
  // stop() only takes effect once the server runs.
  for (int i = 0; i < 5000 && !svr.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

int ApiServer::port() const { return impl_->port; }

void ApiServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace runlens::api
