// telemetry_gaps: the `telemetry_gap` events a source writes when a
// producer's sequence numbers show batches lost between it and the collector
// (connectors/sources/producer_ledger.h) become one `telemetry_gap` info
// alert per run, never a silent loss. The alert is raised at the run's first
// gap and published again (same alert_id, revision + 1) when the run's count
// of lost batches has doubled since, or another producer of the run lost
// batches: a flaky link makes a few revisions, not a storm. Gaps of a
// producer with no run (a scraper of GPU samples) make one alert without a run.
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct TelemetryGapsOptions {};

void RegisterTelemetryGaps(Registry& registry);
std::unique_ptr<OperatorDef> MakeTelemetryGaps(const TelemetryGapsOptions& options);

}  // namespace runlens::ops
