#include "connectors/builtin.h"

#include "connectors/sinks/sinks.h"
#include "connectors/sinks/timeline/timeline_sink.h"
#include "connectors/sources/prometheus_scrape.h"
#include "connectors/sources/sources.h"

namespace runlens::connectors {

void RegisterBuiltinConnectors(Registry& registry) {
  RegisterFileSource(registry);
  RegisterZmqSource(registry);
  RegisterPrometheusScrapeSource(registry);
  RegisterJsonlSink(registry);
  RegisterConsoleSink(registry);
  RegisterZmqPubSink(registry);
  RegisterMetricsSink(registry);
  RegisterAlertmanagerSink(registry);
  RegisterTimelineSink(registry);
}

}  // namespace runlens::connectors
