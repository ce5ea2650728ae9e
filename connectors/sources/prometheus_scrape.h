// The `prometheus_scrape` source: scrapes node_exporter and dcgm-exporter
// targets (the Prometheus text format over HTTP) at an interval and emits
// runlens node and gpu samples (connectors/sources/scrape_mapping.h).
//
// Threads. Scrapes run on a pool of `concurrency` worker threads, each target
// on its own schedule (a tick every `interval`; a scrape that overruns skips
// the ticks it missed) with its own `timeout`, so a slow or dead target holds
// one worker, never the others, and never the pipeline: the source thread
// only hands finished scrapes to the executor.
//
// Event time and producers. Each target is a producer (its URL). A sample's
// event time is when its scrape began (or the sample's own timestamp); after
// a scrape the target promises nothing older than its next tick (or, where
// the exposition carries timestamps, than the scrape's oldest row), so a
// healthy target never holds the watermark back. A target that fails
// (down, timeout, non-200, malformed) is a dead letter and leaves as a
// producer (a final batch): it stops holding the watermark back, and
// rejoins with its next good scrape.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "connectors/sources/scrape_mapping.h"
#include "schema/row.h"

namespace runlens::connectors {

struct ScrapeTarget {
  std::string url;        // as configured, normalised to http://host:port/path
  std::string host_port;  // host:port, as `nodes` and `formats` name it
  std::string host;
  int port = 80;
  std::string path = "/metrics";
  std::string node;         // the node its node_exporter samples name
  bool node_given = false;  // `node` is from `nodes` (else: uname's nodename, else the host)
  ScrapeFormat format = ScrapeFormat::kDetect;
};

struct PrometheusScrapeOptions {
  std::vector<ScrapeTarget> targets;
  int64_t interval_ns = 5'000'000'000;
  int64_t timeout_ns = 0;  // 0: the interval
  int64_t concurrency = 8;
  int64_t max_bytes = 16 << 20;
};

// Parses a target: http://host:port/path, host:port (path /metrics), or
// http://host:port (path /metrics). False with `why`.
bool parse_scrape_target(const std::string& text, ScrapeTarget* out, std::string* why);

std::unique_ptr<runtime::SourceDef<Record>> MakePrometheusScrapeSource(PrometheusScrapeOptions options);
void RegisterPrometheusScrapeSource(Registry& registry);

}  // namespace runlens::connectors
