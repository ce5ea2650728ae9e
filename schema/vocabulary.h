// The one vocabulary of runlens: alert kinds, the causes and owners of a
// diagnosis, and the kinds of telemetry events. Each word is declared once,
// in the lists below, with its doc line; code names it by its constant
// (alert_kind::kStraggler, cause::kNetwork, owner::kTraining,
// event_kind::kRestart), and validation (the rule language, asof_join's
// `kinds`) and the docs (docs/alerts.md, `runlens operators --vocabulary`)
// iterate the tables. These words are a public interface (alert contract v1):
// adding one is one line in its list; renaming one is a contract change.
#pragma once

#include <span>
#include <string>
#include <string_view>

// X(constant, "word", "doc line"): one entry per word, in documentation order.
#define RUNLENS_ALERT_KINDS(X)                                                                                        \
  X(kStraggler, "straggler", "A rank works much slower than its run's median rank in most of its recent steps.")      \
  X(kRankHeterogeneity, "rank_heterogeneity",                                                                         \
    "Info: a run's ranks work at stably different speeds from the start (speed groups, or GPU models or node types "  \
    "that differ); each rank is judged against its own group.")                                                       \
  X(kJobSlowdown, "job_slowdown",                                                                                     \
    "The run's step time rose and stayed up, with a few ranks whose own work time rose at that step (named).")        \
  X(kRankMissing, "rank_missing", "A rank did not report a step before the deadline after the first rank did.")       \
  X(kJobStalled, "job_stalled",                                                                                       \
    "More than stall_fraction of a run's ranks did not report a step before its deadline (one alert for the run).")   \
  X(kNodeUnreachable, "node_unreachable",                                                                             \
    "Every rank of one node did not report a step before its deadline: one alert naming the node and its ranks.")     \
  X(kStepAnomaly, "step_anomaly",                                                                                     \
    "A rank reported a step far past its run's current step: a restarted or corrupted step counter.")                 \
  X(kTelemetryGap, "telemetry_gap",                                                                                   \
    "Batches of a run's telemetry were lost between an SDK emitter and the collector (a gap in a producer's "         \
    "sequence).")                                                                                                     \
  X(kTelemetryShed, "telemetry_shed",                                                                                 \
    "The collector shed rows of a run to keep up (counts by priority); the steps concerned are not judged.")          \
  X(kNanLoss, "nan_loss", "The loss or gradient norm is not finite (NaN or infinity), or the run counted NaNs/Infs.") \
  X(kLossSpike, "loss_spike", "The loss jumped far above its rolling median.")                                        \
  X(kGradSpike, "grad_spike", "The gradient norm jumped far above its rolling median.")                               \
  X(kDataStarvation, "data_starvation", "Ranks spend a large share of their step waiting for input data.")            \
  X(kCommBottleneck, "comm_bottleneck", "Every rank spends a large share of its step in communication.")              \
  X(kThroughputDrop, "throughput_drop", "The run's tokens/s fell well below its own baseline.")                       \
  X(kMfuDrop, "mfu_drop", "The run's model FLOP utilisation fell well below its own baseline.")                       \
  X(kThermalThrottle, "thermal_throttle", "A GPU is hot enough that its clocks are, or soon will be, reduced.")       \
  X(kPowerThrottle, "power_throttle", "A GPU runs at its power limit and its clocks are capped.")                     \
  X(kClockLow, "clock_low", "A GPU's SM clock is well below its recent clock with no throttle reason reported.")      \
  X(kXidError, "xid_error", "A GPU reported an XID error (a driver-detected fault).")                                 \
  X(kEccUncorrected, "ecc_uncorrected", "A GPU's count of uncorrectable (double-bit) ECC errors increased.")          \
  X(kNvlinkError, "nvlink_error", "A GPU's count of NVLink errors increased.")                                        \
  X(kPcieReplay, "pcie_replay", "A GPU's count of PCIe replays increased.")                                           \
  X(kOom, "oom", "A rank ran out of GPU memory.")                                                                     \
  X(kMemoryPressure, "memory_pressure", "A GPU has little memory left.")                                              \
  X(kCheckpointOverhead, "checkpoint_overhead", "Checkpoints take too large a share of the run's time.")              \
  X(kCheckpointFailure, "checkpoint_failure", "A checkpoint failed.")                                                 \
  X(kHostBottleneck, "host_bottleneck", "A node's CPUs are saturated while its ranks wait for data.")                 \
  X(kBenchmarkRegression, "benchmark_regression",                                                                     \
    "A model version scores worse than its baseline on a benchmark (a quality gate's metric shown inferior).")        \
  X(kSafetyRegression, "safety_regression",                                                                           \
    "A model version breaks a safety gate: a violation rate above its cap, or worse than its baseline's.")            \
  X(kLatencyRegression, "latency_regression",                                                                         \
    "A model version is slower than its baseline beyond the latency gate's margin.")                                  \
  X(kDiagnosis, "diagnosis", "Not a symptom: root_cause's explanation of other alerts, with a cause and an owner.")

#define RUNLENS_CAUSES(X)                                                                                        \
  X(kTrainingInstability, "training_instability",                                                                \
    "The optimisation diverged (loss or gradient blow-up) and no configuration change explains it.")             \
  X(kConfigChange, "config_change",                                                                              \
    "A change of the run's configuration (learning rate, batch, parallelism, activation checkpointing).")        \
  X(kHardwareThrottle, "hardware_throttle", "A GPU runs slow: thermal or power throttling, or low clocks.")      \
  X(kHardwareFault, "hardware_fault",                                                                            \
    "A GPU or link fails: XID, uncorrectable ECC, NVLink or PCIe errors, a hung rank.")                          \
  X(kDataPipeline, "data_pipeline", "Input data arrives too slowly: slow shard storage or a slow loader.")       \
  X(kNetwork, "network",                                                                                         \
    "Collectives are slow on the network: a lossy NIC (retransmits, RDMA errors), a slow fabric.")               \
  X(kHostBottleneck, "host_bottleneck", "A saturated host CPU starves its GPUs.")                                \
  X(kInefficientCompute, "inefficient_compute",                                                                  \
    "The GPUs are busy but do little useful work: a communication-bound or inefficient configuration.")          \
  X(kMemory, "memory",                                                                                           \
    "The job runs out of GPU memory: a long-sequence batch, a memory spike, a model that does not fit.")         \
  X(kCheckpoint, "checkpoint", "Checkpoints fail or take too large a share of the run's time.")                  \
  X(kDatasetChange, "dataset_change", "The training data changed: another dataset, dataset version or mixture.") \
  X(kEvaluationMismatch, "evaluation_mismatch",                                                                  \
    "The model did not get worse, its evaluation changed: another dataset, prompt or evaluator version.")        \
  X(kUnknown, "unknown", "The evidence names no cause.")

#define RUNLENS_OWNERS(X)                                                                                            \
  X(kTraining, "training", "Whoever trains the model: model code, hyperparameters, the run's configuration.")        \
  X(kInfrastructure, "infrastructure", "Whoever runs the cluster's hardware: GPUs, nodes, their cooling and power.") \
  X(kData, "data", "Whoever runs the data pipeline: datasets, shards, loaders and their storage.")                   \
  X(kNetwork, "network", "Whoever runs the network fabric: NICs, switches, the collectives' transport.")             \
  X(kPlatform, "platform", "Whoever runs the training platform's services: checkpoint storage, the scheduler.")      \
  X(kEvaluation, "evaluation", "Whoever runs the evaluations: benchmarks, their datasets, prompts and evaluators.")

// The owner each alert kind implies (alert contract v2): who acts on a symptom
// until a diagnosis that explains it names another (a diagnosis names its own,
// hence none here), and whether its incident closes visibly (true: the
// detector, or root_cause for a diagnosis, publishes a closing revision with
// ends_ns; false: an event-like kind, which a consumer resolves after a hold
// time, docs/alerts.md). One entry per alert kind, in the order of the list
// above (checked at compile time).
#define RUNLENS_ALERT_OWNERS(X)                 \
  X(kStraggler, kInfrastructure, true)          \
  X(kRankHeterogeneity, kInfrastructure, false) \
  X(kJobSlowdown, kInfrastructure, true)        \
  X(kRankMissing, kInfrastructure, false)       \
  X(kJobStalled, kInfrastructure, false)        \
  X(kNodeUnreachable, kInfrastructure, false)   \
  X(kStepAnomaly, kTraining, false)             \
  X(kTelemetryGap, kPlatform, false)            \
  X(kTelemetryShed, kPlatform, false)           \
  X(kNanLoss, kTraining, false)                 \
  X(kLossSpike, kTraining, false)               \
  X(kGradSpike, kTraining, false)               \
  X(kDataStarvation, kData, true)               \
  X(kCommBottleneck, kNetwork, true)            \
  X(kThroughputDrop, kTraining, true)           \
  X(kMfuDrop, kTraining, true)                  \
  X(kThermalThrottle, kInfrastructure, true)    \
  X(kPowerThrottle, kInfrastructure, true)      \
  X(kClockLow, kInfrastructure, true)           \
  X(kXidError, kInfrastructure, false)          \
  X(kEccUncorrected, kInfrastructure, true)     \
  X(kNvlinkError, kInfrastructure, true)        \
  X(kPcieReplay, kInfrastructure, true)         \
  X(kOom, kTraining, false)                     \
  X(kMemoryPressure, kTraining, true)           \
  X(kCheckpointOverhead, kPlatform, false)      \
  X(kCheckpointFailure, kPlatform, false)       \
  X(kHostBottleneck, kInfrastructure, true)     \
  X(kBenchmarkRegression, kEvaluation, false)   \
  X(kSafetyRegression, kEvaluation, false)      \
  X(kLatencyRegression, kEvaluation, false)     \
  X(kDiagnosis, kNone, true)

// The `kind` of a telemetry `event` (Occurrence); runs may send other words too.
#define RUNLENS_EVENT_KINDS(X)                                                                                      \
  X(kXid, "xid", "A GPU's XID error, with its `code` (node-level events name `node` and `gpu`).")                   \
  X(kOom, "oom", "A rank ran out of GPU memory.")                                                                   \
  X(kNcclTimeout, "nccl_timeout", "A collective timed out.")                                                        \
  X(kException, "exception", "The training process raised an exception.")                                           \
  X(kConfigChange, "config_change", "The run changed a setting: `key`, `old` and `new` (e.g. `lr`).")               \
  X(kRestart, "restart", "The run restarted: the steps that follow are a new attempt, and detectors start afresh.") \
  X(kAbort, "abort", "The run was aborted.")                                                                        \
  X(kTelemetryGap, "telemetry_gap",                                                                                 \
    "Written by the collector: batches of a producer were lost on the way (`key` the producer, `code` how many).")

// The kinds of a run's timeline entries (the store's `timeline`, the API's
// /timeline, timeline.jsonl) that are not event kinds: an event (`xid`,
// `config_change`, `restart`, ...) is entered under its own event kind.
#define RUNLENS_TIMELINE_KINDS(X)                                                                                    \
  X(kRunStart, "run_start", "The run started: its ranks, nodes, model and dataset.")                                 \
  X(kRunEnd, "run_end", "The run ended, with its status and reason.")                                                \
  X(kLrChange, "lr_change", "The learning rate changed beyond its schedule (from train_marks, or a config_change).") \
  X(kLossJump, "loss_jump", "The loss is several times the previous step's (train_marks).")                          \
  X(kGradNormJump, "grad_norm_jump", "The gradient norm is several times the previous step's (train_marks).")        \
  X(kNonFinite, "non_finite", "The first step of a run with a non-finite loss or gradient norm.")                    \
  X(kCheckpoint, "checkpoint", "A checkpoint was saved, or failed.")                                                 \
  X(kAlert, "alert", "An alert (a symptom), with its severity and summary.")                                         \
  X(kDiagnosis, "diagnosis", "The diagnosis of an incident by root_cause: its cause and owner.")

namespace runlens {

// One word of the vocabulary and the line that documents it.
struct Term {
  std::string_view name;
  std::string_view doc;
};

#define RUNLENS_VOCAB_CONSTANT_(id, word, doc) inline constexpr std::string_view id = word;
#define RUNLENS_VOCAB_TERM_(id, word, doc) Term{word, doc},

// The `kind` of an alert (Alert::kind).
namespace alert_kind {
RUNLENS_ALERT_KINDS(RUNLENS_VOCAB_CONSTANT_)
inline constexpr Term kAll[] = {RUNLENS_ALERT_KINDS(RUNLENS_VOCAB_TERM_)};
}  // namespace alert_kind

// The `cause` of a diagnosis.
namespace cause {
RUNLENS_CAUSES(RUNLENS_VOCAB_CONSTANT_)
inline constexpr Term kAll[] = {RUNLENS_CAUSES(RUNLENS_VOCAB_TERM_)};
}  // namespace cause

// The `owner` of a diagnosis: who acts on it.
namespace owner {
RUNLENS_OWNERS(RUNLENS_VOCAB_CONSTANT_)
inline constexpr Term kAll[] = {RUNLENS_OWNERS(RUNLENS_VOCAB_TERM_)};
}  // namespace owner

// The owner an alert kind implies (RUNLENS_ALERT_OWNERS): alert_owner(kind)
// is the owner's word, empty for `diagnosis` (it names its own) and for a
// kind this build does not know.
struct KindOwner {
  std::string_view kind, owner;
  bool closes = false;  // the kind's alerts get a closing revision (ends_ns)
};
namespace alert_kind {
namespace owner_ {
inline constexpr std::string_view kNone = "";
using namespace ::runlens::owner;
}  // namespace owner_
#define RUNLENS_VOCAB_OWNER_(k, o, c) KindOwner{k, owner_::o, c},
inline constexpr KindOwner kOwners[] = {RUNLENS_ALERT_OWNERS(RUNLENS_VOCAB_OWNER_)};
#undef RUNLENS_VOCAB_OWNER_
consteval bool owners_match_kinds() {
  if (std::size(kOwners) != std::size(kAll)) return false;
  for (size_t i = 0; i < std::size(kAll); ++i) {
    if (kOwners[i].kind != kAll[i].name) return false;
  }
  return true;
}
static_assert(owners_match_kinds(), "RUNLENS_ALERT_OWNERS must list every alert kind, in RUNLENS_ALERT_KINDS order");
}  // namespace alert_kind
std::string_view alert_owner(std::string_view kind);
// Whether alerts of `kind` get a closing revision (RUNLENS_ALERT_OWNERS).
bool alert_closes(std::string_view kind);

// The `kind` of a telemetry event (Occurrence::kind).
namespace event_kind {
RUNLENS_EVENT_KINDS(RUNLENS_VOCAB_CONSTANT_)
inline constexpr Term kAll[] = {RUNLENS_EVENT_KINDS(RUNLENS_VOCAB_TERM_)};
}  // namespace event_kind

// The `kind` of a timeline entry that is not an event kind.
namespace timeline_kind {
RUNLENS_TIMELINE_KINDS(RUNLENS_VOCAB_CONSTANT_)
inline constexpr Term kAll[] = {RUNLENS_TIMELINE_KINDS(RUNLENS_VOCAB_TERM_)};
}  // namespace timeline_kind

#undef RUNLENS_VOCAB_CONSTANT_
#undef RUNLENS_VOCAB_TERM_

// The term named `word` in `terms`, or null.
const Term* find_term(std::span<const Term> terms, std::string_view word);

// The vocabulary's tables (kinds, causes, owners, event and timeline kinds) as markdown:
// docs/alerts.md holds them, `runlens operators --vocabulary` prints them, and
// a test checks that the page is current.
std::string vocabulary_markdown();

}  // namespace runlens
