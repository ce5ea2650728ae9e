#include "connectors/builtin.h"

#include "connectors/sinks.h"
#include "connectors/sources.h"
#include "connectors/timeline_sink.h"

namespace runlens::connectors {

void RegisterBuiltinConnectors(ops::Registry& registry) {
  RegisterFileSource(registry);
  RegisterZmqSource(registry);
  RegisterJsonlSink(registry);
  RegisterConsoleSink(registry);
  RegisterZmqPubSink(registry);
  RegisterTimelineSink(registry);
}

}  // namespace runlens::connectors
