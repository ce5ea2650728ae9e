// Documentation of the built-in components, generated from the registry:
// `runlens operators` (text) and docs/operators.md (markdown).
#pragma once

#include <string>

namespace runlens {
std::string operators_markdown();
std::string operators_text();
// The field table of the telemetry contract, from schema/record.h; docs/telemetry.md embeds it.
std::string contract_markdown();
}  // namespace runlens
