#include "connectors/builtin.h"

#include "connectors/sinks.h"
#include "connectors/sources.h"

namespace runlens::connectors {

void RegisterBuiltinConnectors(ops::Registry& registry) {
  RegisterFileSource(registry);
  RegisterZmqSource(registry);
  RegisterJsonlSink(registry);
  RegisterConsoleSink(registry);
  RegisterZmqPubSink(registry);
}

}  // namespace runlens::connectors
