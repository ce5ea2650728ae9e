#include "connectors/builtin.h"

#include "connectors/sinks/sinks.h"
#include "connectors/sinks/timeline/timeline_sink.h"
#include "connectors/sources/sources.h"

namespace runlens::connectors {

void RegisterBuiltinConnectors(Registry& registry) {
  RegisterFileSource(registry);
  RegisterZmqSource(registry);
  RegisterJsonlSink(registry);
  RegisterConsoleSink(registry);
  RegisterZmqPubSink(registry);
  RegisterAlertmanagerSink(registry);
  RegisterTimelineSink(registry);
}

}  // namespace runlens::connectors
