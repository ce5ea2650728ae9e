// Presence bits of schema/telemetry.capnp: bit i of a struct's `present` is
// the i-th field after `present`, in declaration order. Written out by hand
// because the encoder sets them on the hot path of the exporter; the Python
// decoder (sdk/python/native_module.cc) reads presence by reflection over the
// schema instead, so the tests catch any bit that drifts from the schema.
#pragma once

#include <cstdint>

namespace runlens::sdk::presence {

constexpr uint32_t Bit(int i) { return uint32_t{1} << i; }

namespace run_start {
inline constexpr uint32_t kRunId = Bit(0), kExperimentId = Bit(1), kJobId = Bit(2), kModelId = Bit(3),
                          kModelVersion = Bit(4), kDatasetVersion = Bit(5), kCodeCommit = Bit(6), kWorldSize = Bit(7),
                          kGpuPeakFlops = Bit(8), kModelFlopsPerToken = Bit(9), kConfig = Bit(10), kRanks = Bit(11),
                          kClusterId = Bit(12);
}
namespace step {
inline constexpr uint32_t kRunId = Bit(0), kRank = Bit(1), kStep = Bit(2), kStepMs = Bit(3), kForwardMs = Bit(4),
                          kBackwardMs = Bit(5), kOptimizerMs = Bit(6), kCommMs = Bit(7), kDataWaitMs = Bit(8),
                          kTokens = Bit(9), kSamples = Bit(10), kSeqLen = Bit(11), kDatasetShard = Bit(12),
                          kMemAllocatedBytes = Bit(13), kMemReservedBytes = Bit(14), kMemPeakBytes = Bit(15);
}
namespace train {
inline constexpr uint32_t kRunId = Bit(0), kStep = Bit(1), kRank = Bit(2), kLoss = Bit(3), kValLoss = Bit(4),
                          kLr = Bit(5), kGradNorm = Bit(6), kWeightNorm = Bit(7), kLossScale = Bit(8),
                          kNanCount = Bit(9), kInfCount = Bit(10);
}
namespace collective {
inline constexpr uint32_t kRunId = Bit(0), kRank = Bit(1), kStep = Bit(2), kOp = Bit(3), kLatencyMs = Bit(4),
                          kBytes = Bit(5);
}
namespace data {
inline constexpr uint32_t kRunId = Bit(0), kRank = Bit(1), kStep = Bit(2), kBatchLoadMs = Bit(3), kDecodeMs = Bit(4),
                          kTokenizeMs = Bit(5), kPrefetchQueueDepth = Bit(6), kCacheHitRate = Bit(7),
                          kStorageReadMs = Bit(8), kBytesRead = Bit(9), kDatasetShard = Bit(10),
                          kDatasetVersion = Bit(11);
}
namespace checkpoint {
inline constexpr uint32_t kRunId = Bit(0), kCheckpointId = Bit(1), kStep = Bit(2), kDurationMs = Bit(3),
                          kSizeBytes = Bit(4), kUploadMs = Bit(5), kOk = Bit(6), kUri = Bit(7), kSha256 = Bit(8);
}
namespace occurrence {
inline constexpr uint32_t kKind = Bit(0), kRunId = Bit(1), kNode = Bit(2), kGpu = Bit(3), kRank = Bit(4),
                          kStep = Bit(5), kCode = Bit(6), kMessage = Bit(7), kKey = Bit(8), kOld = Bit(9),
                          kNew = Bit(10);
}
namespace node {
inline constexpr uint32_t kNode = Bit(0), kCpuPct = Bit(1), kMemUsedBytes = Bit(2), kMemTotalBytes = Bit(3),
                          kCpuUserPct = Bit(10), kCpuSystemPct = Bit(11), kCpuIowaitPct = Bit(12),
                          kCpuStealPct = Bit(13), kLoad1 = Bit(14);
}
namespace run_end {
inline constexpr uint32_t kRunId = Bit(0), kStatus = Bit(1), kReason = Bit(2);
}

}  // namespace runlens::sdk::presence
