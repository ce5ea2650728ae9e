// The exposition server: GET /metrics answers a MetricsHub's text in the
// Prometheus format 0.0.4 (`runlens run --metrics-port`). It lives with the
// connectors, not in server/: it is a transport of the pipeline's output,
// like the zmq_pub sink, and server/ is handed a store and knows no pipeline.
#pragma once

#include <memory>
#include <string>

#include "connectors/metrics/metrics_hub.h"

namespace runlens::connectors::metrics {

class MetricsServer {
 public:
  // Port 0 picks a free port (port() tells which).
  MetricsServer(std::shared_ptr<MetricsHub> hub, std::string host, int port);
  ~MetricsServer();
  // Binds and serves on its own threads; false (and *error) when it cannot bind.
  bool start(std::string* error);
  int port() const;
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace runlens::connectors::metrics
