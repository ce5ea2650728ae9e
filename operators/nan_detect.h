// nan_detect: a NaN or Inf loss or grad_norm, or nan_count / inf_count > 0 on
// a train event, raises `nan_loss` (critical) at its step. One alert per
// incident and run: once raised, it re-arms once `rearm_steps` steps have
// passed without non-finite values (or on a restart).
#pragma once

#include "operators/operator.h"

namespace runlens::ops {

struct NanDetectOptions {
  int64_t rearm_steps = 100;
};

// Why a train event is non-finite, or empty when it is not.
std::string nan_reason(const Train& t);

void RegisterNanDetect(Registry& registry);
std::unique_ptr<OperatorDef> MakeNanDetect(const NanDetectOptions& options);

}  // namespace runlens::ops
