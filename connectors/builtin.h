#pragma once

#include "operators/operator.h"

namespace runlens::connectors {
// Registers every built-in source and sink (connectors/builtin.cc).
void RegisterBuiltinConnectors(ops::Registry& registry);
}  // namespace runlens::connectors
