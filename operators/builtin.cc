#include "operators/asof_join.h"
#include "operators/checkpoint_health.h"
#include "operators/comm_bottleneck.h"
#include "operators/data_starvation.h"
#include "operators/gpu_health.h"
#include "operators/host_bottleneck.h"
#include "operators/job_slowdown.h"
#include "operators/nan_detect.h"
#include "operators/oom_detect.h"
#include "operators/operator.h"
#include "operators/rank_join.h"
#include "operators/root_cause.h"
#include "operators/spike_detect.h"
#include "operators/step_stats.h"
#include "operators/straggler.h"
#include "operators/telemetry_gaps.h"
#include "operators/throughput_regression.h"
#include "operators/train_marks.h"

namespace runlens::ops {

void RegisterBuiltinOperators(Registry& registry) {
  RegisterRankJoin(registry);
  RegisterStraggler(registry);
  RegisterJobSlowdown(registry);
  RegisterStepStats(registry);
  RegisterNanDetect(registry);
  RegisterTelemetryGaps(registry);
  RegisterSpikeDetect(registry);
  RegisterTrainMarks(registry);
  RegisterThroughputRegression(registry);
  RegisterDataStarvation(registry);
  RegisterCommBottleneck(registry);
  RegisterCheckpointHealth(registry);
  RegisterOomDetect(registry);
  RegisterGpuHealth(registry);
  RegisterHostBottleneck(registry);
  RegisterAsofJoin(registry);
  RegisterRootCause(registry);
}

}  // namespace runlens::ops
