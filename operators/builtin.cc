#include "operators/nan_detect.h"
#include "operators/operator.h"
#include "operators/rank_join.h"
#include "operators/step_stats.h"
#include "operators/straggler.h"

namespace runlens::ops {

std::vector<std::string> kind_names() {
  std::vector<std::string> names;
  for (int k = 0; k < static_cast<int>(Kind::kCount); ++k) names.emplace_back(kind_name(static_cast<Kind>(k)));
  return names;
}

void RegisterBuiltinOperators(Registry& registry) {
  RegisterRankJoin(registry);
  RegisterStraggler(registry);
  RegisterStepStats(registry);
  RegisterNanDetect(registry);
}

}  // namespace runlens::ops
