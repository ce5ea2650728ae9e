#pragma once

#include "schema/row.h"

namespace runlens::connectors {
// Registers every built-in source and sink (connectors/builtin.cc).
void RegisterBuiltinConnectors(Registry& registry);
}  // namespace runlens::connectors
