// Sinks that write rows out: `jsonl` (a file, one JSON object per line),
// `console` (alerts for people, on standard output) and `zmq_pub` (the live
// alert stream). Both receive rows in
// canonical order, so their output is byte-identical across thread counts
// and batch sizes.
#pragma once

#include "schema/row.h"

namespace runlens::connectors {

void RegisterJsonlSink(Registry& registry);
void RegisterConsoleSink(Registry& registry);
void RegisterZmqPubSink(Registry& registry);
void RegisterAlertmanagerSink(Registry& registry);

// Parses a `kinds` parameter (names of row kinds) into a mask; fails through ctx.
uint32_t kinds_mask(const runtime::BuildContext& ctx, const std::string& param);

}  // namespace runlens::connectors
