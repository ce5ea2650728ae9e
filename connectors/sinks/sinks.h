// Sinks that write rows out: `jsonl` (a file, one JSON object per line),
// `console` (alerts for people, on standard output) and `zmq_pub` (the live
// alert stream), and `metrics` (Prometheus series, connectors/metrics/). They receive rows in
// canonical order, so their output is byte-identical across thread counts
// and batch sizes.
#pragma once

#include "schema/row.h"

namespace runlens::connectors {

void RegisterJsonlSink(Registry& registry);
void RegisterConsoleSink(Registry& registry);
void RegisterZmqPubSink(Registry& registry);
void RegisterMetricsSink(Registry& registry);

namespace metrics {
class MetricsHub;
}
// Hands a `metrics` sink's definition the hub its series go to (before the
// executor asks what it accepts); false when `def` is not a metrics sink.
// Without a hub the sink is inert: it accepts no rows.
bool attach_metrics_hub(OperatorDef& def, std::shared_ptr<metrics::MetricsHub> hub);
void RegisterAlertmanagerSink(Registry& registry);

// Parses a `kinds` parameter (names of row kinds) into a mask; fails through ctx.
uint32_t kinds_mask(const runtime::BuildContext& ctx, const std::string& param);

}  // namespace runlens::connectors
