#include "connectors/metrics/metrics_server.h"

#include <httplib.h>

#include <chrono>
#include <thread>

namespace runlens::connectors::metrics {

struct MetricsServer::Impl {
  std::shared_ptr<MetricsHub> hub;
  std::string host;
  int requested_port = 0;
  int port = 0;
  httplib::Server server;
  std::thread thread;
};

MetricsServer::MetricsServer(std::shared_ptr<MetricsHub> hub, std::string host, int port)
    : impl_(std::make_unique<Impl>()) {
  impl_->hub = std::move(hub);
  impl_->host = std::move(host);
  impl_->requested_port = port;
  auto* hub_ptr = impl_->hub.get();
  impl_->server.Get("/metrics", [hub_ptr](const httplib::Request&, httplib::Response& res) {
    res.set_content(hub_ptr->render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  impl_->server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    res.set_content(res.status == 404 ? "no such path: " + req.path + " (the metrics are at /metrics)\n"
                                      : std::string("request failed\n"),
                    "text/plain");
  });
}

MetricsServer::~MetricsServer() { stop(); }

bool MetricsServer::start(std::string* error) {
  auto& svr = impl_->server;
  if (impl_->requested_port == 0) {
    impl_->port = svr.bind_to_any_port(impl_->host);
  } else if (svr.bind_to_port(impl_->host, impl_->requested_port)) {
    impl_->port = impl_->requested_port;
  }
  if (impl_->port <= 0) {
    impl_->port = 0;
    *error = "cannot listen on " + impl_->host + ":" + std::to_string(impl_->requested_port);
    return false;
  }
  impl_->thread = std::thread([&svr] { svr.listen_after_bind(); });
  // stop() only takes effect once the server runs.
  for (int i = 0; i < 5000 && !svr.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

int MetricsServer::port() const { return impl_->port; }

void MetricsServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace runlens::connectors::metrics
