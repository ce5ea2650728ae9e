// The telemetry contract v1 in memory: one struct per JSONL `type`, and the
// Record envelope that flows through pipelines.
//
// Each struct's fields are declared once, in an X-macro list, in contract
// order. That one list generates the struct, the field table used by the JSONL
// and Cap'n Proto codecs and by the docs, and the presence bits; the Cap'n
// Proto schema (schema/telemetry.capnp) declares the same fields in the same
// order, and tests/schema/contract_test.cc checks that they agree.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "schema/symbol.h"

namespace runlens {

// A number or a string: config values and config_change old/new.
struct Value {
  enum class Kind : uint8_t { kNone, kNumber, kString };
  Kind kind = Kind::kNone;
  double number = 0;
  std::string text;

  static Value of(double d) { return Value{Kind::kNumber, d, {}}; }
  static Value of(std::string s) { return Value{Kind::kString, 0, std::move(s)}; }
  bool operator==(const Value& o) const;
};

using ConfigMap = std::vector<std::pair<std::string, Value>>;  // in input order

struct RankPlacement {
  int32_t rank = 0;
  Symbol node;
  int32_t gpu = -1;
  Symbol gpu_model{};  // optional (empty: absent), e.g. "NVIDIA H100 80GB HBM3"
  Symbol node_type{};  // optional (empty: absent), e.g. an instance type
  bool operator==(const RankPlacement&) const = default;
};
using RankList = std::vector<RankPlacement>;

// Field storage types of the X-macro lists.
using FieldI32 = int32_t;
using FieldI64 = int64_t;
using FieldF64 = double;
using FieldBOOL = bool;
using FieldSYM = Symbol;
using FieldSTR = std::string;
using FieldCONFIG = ConfigMap;
using FieldRANKS = RankList;
using FieldVALUE = Value;

enum class FieldType : uint8_t { kI32, kI64, kF64, kBOOL, kSYM, kSTR, kCONFIG, kRANKS, kVALUE };

// X(type, json_name, CapnpName, required)
#define RUNLENS_RUN_START_FIELDS(X)                        \
  X(SYM, run_id, RunId, true)                              \
  X(SYM, experiment_id, ExperimentId, false)               \
  X(SYM, job_id, JobId, false)                             \
  X(SYM, model_id, ModelId, false)                         \
  X(SYM, model_version, ModelVersion, false)               \
  X(SYM, dataset_version, DatasetVersion, false)           \
  X(STR, code_commit, CodeCommit, false)                   \
  X(I32, world_size, WorldSize, true)                      \
  X(F64, gpu_peak_flops, GpuPeakFlops, false)              \
  X(F64, model_flops_per_token, ModelFlopsPerToken, false) \
  X(CONFIG, config, Config, false)                         \
  X(RANKS, ranks, Ranks, false)                            \
  X(SYM, cluster_id, ClusterId, false)

#define RUNLENS_STEP_FIELDS(X)                          \
  X(SYM, run_id, RunId, true)                           \
  X(I32, rank, Rank, true)                              \
  X(I64, step, Step, true)                              \
  X(F64, step_ms, StepMs, true)                         \
  X(F64, forward_ms, ForwardMs, false)                  \
  X(F64, backward_ms, BackwardMs, false)                \
  X(F64, optimizer_ms, OptimizerMs, false)              \
  X(F64, comm_ms, CommMs, false)                        \
  X(F64, data_wait_ms, DataWaitMs, false)               \
  X(I64, tokens, Tokens, false)                         \
  X(I64, samples, Samples, false)                       \
  X(I64, seq_len, SeqLen, false)                        \
  X(SYM, dataset_shard, DatasetShard, false)            \
  X(I64, mem_allocated_bytes, MemAllocatedBytes, false) \
  X(I64, mem_reserved_bytes, MemReservedBytes, false)   \
  X(I64, mem_peak_bytes, MemPeakBytes, false)

#define RUNLENS_TRAIN_FIELDS(X)          \
  X(SYM, run_id, RunId, true)            \
  X(I64, step, Step, true)               \
  X(I32, rank, Rank, false)              \
  X(F64, loss, Loss, false)              \
  X(F64, val_loss, ValLoss, false)       \
  X(F64, lr, Lr, false)                  \
  X(F64, grad_norm, GradNorm, false)     \
  X(F64, weight_norm, WeightNorm, false) \
  X(F64, loss_scale, LossScale, false)   \
  X(I64, nan_count, NanCount, false)     \
  X(I64, inf_count, InfCount, false)

#define RUNLENS_GPU_FIELDS(X)                           \
  X(SYM, node, Node, true)                              \
  X(I32, gpu, Gpu, true)                                \
  X(F64, util_pct, UtilPct, false)                      \
  X(F64, sm_active_pct, SmActivePct, false)             \
  X(F64, tensor_active_pct, TensorActivePct, false)     \
  X(I64, mem_used_bytes, MemUsedBytes, false)           \
  X(I64, mem_total_bytes, MemTotalBytes, false)         \
  X(F64, temp_c, TempC, false)                          \
  X(F64, power_w, PowerW, false)                        \
  X(F64, power_limit_w, PowerLimitW, false)             \
  X(F64, sm_clock_mhz, SmClockMhz, false)               \
  X(F64, mem_clock_mhz, MemClockMhz, false)             \
  X(I64, throttle_reasons, ThrottleReasons, false)      \
  X(I64, ecc_sbe_total, EccSbeTotal, false)             \
  X(I64, ecc_dbe_total, EccDbeTotal, false)             \
  X(I64, xid, Xid, false)                               \
  X(I64, pcie_replay_total, PcieReplayTotal, false)     \
  X(I64, nvlink_errors_total, NvlinkErrorsTotal, false) \
  X(F64, nvlink_tx_bps, NvlinkTxBps, false)             \
  X(F64, nvlink_rx_bps, NvlinkRxBps, false)

#define RUNLENS_NODE_FIELDS(X)                              \
  X(SYM, node, Node, true)                                  \
  X(F64, cpu_pct, CpuPct, false)                            \
  X(I64, mem_used_bytes, MemUsedBytes, false)               \
  X(I64, mem_total_bytes, MemTotalBytes, false)             \
  X(F64, disk_read_bps, DiskReadBps, false)                 \
  X(F64, disk_write_bps, DiskWriteBps, false)               \
  X(F64, net_tx_bps, NetTxBps, false)                       \
  X(F64, net_rx_bps, NetRxBps, false)                       \
  X(I64, tcp_retransmits_total, TcpRetransmitsTotal, false) \
  X(I64, rdma_errors_total, RdmaErrorsTotal, false)         \
  X(F64, cpu_user_pct, CpuUserPct, false)                   \
  X(F64, cpu_system_pct, CpuSystemPct, false)               \
  X(F64, cpu_iowait_pct, CpuIowaitPct, false)               \
  X(F64, cpu_steal_pct, CpuStealPct, false)                 \
  X(F64, load1, Load1, false)

#define RUNLENS_COLLECTIVE_FIELDS(X)  \
  X(SYM, run_id, RunId, true)         \
  X(I32, rank, Rank, true)            \
  X(I64, step, Step, false)           \
  X(SYM, op, Op, false)               \
  X(F64, latency_ms, LatencyMs, true) \
  X(I64, bytes, Bytes, false)

#define RUNLENS_DATA_FIELDS(X)                            \
  X(SYM, run_id, RunId, true)                             \
  X(I32, rank, Rank, true)                                \
  X(I64, step, Step, false)                               \
  X(F64, batch_load_ms, BatchLoadMs, false)               \
  X(F64, decode_ms, DecodeMs, false)                      \
  X(F64, tokenize_ms, TokenizeMs, false)                  \
  X(I64, prefetch_queue_depth, PrefetchQueueDepth, false) \
  X(F64, cache_hit_rate, CacheHitRate, false)             \
  X(F64, storage_read_ms, StorageReadMs, false)           \
  X(I64, bytes_read, BytesRead, false)                    \
  X(SYM, dataset_shard, DatasetShard, false)              \
  X(SYM, dataset_version, DatasetVersion, false)

#define RUNLENS_CHECKPOINT_FIELDS(X)        \
  X(SYM, run_id, RunId, true)               \
  X(SYM, checkpoint_id, CheckpointId, true) \
  X(I64, step, Step, false)                 \
  X(F64, duration_ms, DurationMs, false)    \
  X(I64, size_bytes, SizeBytes, false)      \
  X(F64, upload_ms, UploadMs, false)        \
  X(BOOL, ok, Ok, false)                    \
  X(STR, uri, Uri, false)                   \
  X(STR, sha256, Sha256, false)

// The contract's `event` type; the struct is called Occurrence so that
// "event" keeps meaning any telemetry record.
#define RUNLENS_OCCURRENCE_FIELDS(X) \
  X(SYM, kind, Kind, true)           \
  X(SYM, run_id, RunId, false)       \
  X(SYM, node, Node, false)          \
  X(I32, gpu, Gpu, false)            \
  X(I32, rank, Rank, false)          \
  X(I64, step, Step, false)          \
  X(I64, code, Code, false)          \
  X(STR, message, Message, false)    \
  X(SYM, key, Key, false)            \
  X(VALUE, old, Old, false)          \
  X(VALUE, new_, New, false) /* JSONL name "new" */

#define RUNLENS_RUN_END_FIELDS(X) \
  X(SYM, run_id, RunId, true)     \
  X(SYM, status, Status, false)   \
  X(STR, reason, Reason, false)

#define RUNLENS_MEMBER_(T, name, Camel, req) Field##T name{};
#define RUNLENS_ENUM_(T, name, Camel, req) name,

// Generates: the struct with one member per field, an enum F of its fields,
// and presence helpers. `new` is a C++ keyword: its member is `new_` and the
// field tables strip the trailing '_' to get the JSONL name.
#define RUNLENS_DEFINE_BODY(Struct, LIST)                                      \
  struct Struct {                                                              \
    enum class F : uint8_t { LIST(RUNLENS_ENUM_) kCount };                     \
    LIST(RUNLENS_MEMBER_)                                                      \
    uint32_t present = 0;                                                      \
    bool has(F f) const { return (present >> static_cast<unsigned>(f)) & 1u; } \
    void set_present(F f) { present |= 1u << static_cast<unsigned>(f); }       \
    void clear(F f) { present &= ~(1u << static_cast<unsigned>(f)); }          \
    bool operator==(const Struct&) const = default;                            \
  };

RUNLENS_DEFINE_BODY(RunStart, RUNLENS_RUN_START_FIELDS)
RUNLENS_DEFINE_BODY(Step, RUNLENS_STEP_FIELDS)
RUNLENS_DEFINE_BODY(Train, RUNLENS_TRAIN_FIELDS)
RUNLENS_DEFINE_BODY(Gpu, RUNLENS_GPU_FIELDS)
RUNLENS_DEFINE_BODY(NodeSample, RUNLENS_NODE_FIELDS)
RUNLENS_DEFINE_BODY(Collective, RUNLENS_COLLECTIVE_FIELDS)
RUNLENS_DEFINE_BODY(DataSample, RUNLENS_DATA_FIELDS)
RUNLENS_DEFINE_BODY(Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
RUNLENS_DEFINE_BODY(Occurrence, RUNLENS_OCCURRENCE_FIELDS)
RUNLENS_DEFINE_BODY(RunEnd, RUNLENS_RUN_END_FIELDS)

struct StepRecord;
struct StepStats;
struct Alert;

// What one run's train series did at one step (train_marks): an LR change
// (a step-to-step factor that breaks the trend of the step before) and loss
// or gradient-norm jumps (a factor over the previous step's value), each as
// the value before and the value at the step. The timeline keeps them as
// lr_change, loss_jump and grad_norm_jump entries. Emitted at the time of the
// train row it describes, and sorted right after it (compare_canonical).
struct TrainMarks {
  struct Change {
    double before = 0, after = 0;
    bool operator==(const Change&) const = default;
  };
  Symbol run_id;
  int64_t step = 0;
  std::optional<Change> lr, loss, grad_norm;
  bool operator==(const TrainMarks&) const = default;
};

// Kinds of rows that travel through a pipeline: the ten contract types, then
// the rows operators derive. The numeric value is the runtime's row kind.
enum class Kind : uint8_t {
  kRunStart,
  kStep,
  kTrain,
  kGpu,
  kNode,
  kCollective,
  kData,
  kCheckpoint,
  kEvent,
  kRunEnd,
  kStepRecord,  // one step of one run joined across ranks (rank_join)
  kStepStats,   // per-step aggregates of a run (step_stats)
  kAlert,       // an alert or diagnosis (alert contract v1)
  kTrainMarks,  // LR changes and loss / grad-norm jumps of a train row (train_marks)
  kCount
};
constexpr int kContractKinds = 10;

std::string_view kind_name(Kind k);                // "run_start", ..., "step_record", "alert"
bool kind_from_name(std::string_view, Kind* out);  // contract and derived names

// Shed priorities (spec section 47): lower is more important.
enum class Priority : uint8_t { kP0 = 0, kP1 = 1, kP2 = 2, kP3 = 3 };

// The envelope: event time, tenant and one body. Large, rare bodies are held
// by shared pointer so that a Record stays cheap to move.
struct Record {
  int64_t time_ns = 0;
  Symbol tenant;  // empty means "default"
  std::variant<std::shared_ptr<const RunStart>, Step, Train, Gpu, NodeSample, Collective, DataSample, Checkpoint,
               Occurrence, RunEnd, std::shared_ptr<const StepRecord>, std::shared_ptr<const StepStats>,
               std::shared_ptr<const Alert>, TrainMarks>
      body;

  Kind kind() const { return static_cast<Kind>(body.index()); }
  template <class T>
  const T& as() const {
    return std::get<T>(body);
  }
  template <class T>
  const T* get_if() const {
    return std::get_if<T>(&body);
  }
  const RunStart& run_start() const { return *std::get<0>(body); }
  const StepRecord& step_record() const { return *std::get<10>(body); }
  const StepStats& step_stats() const { return *std::get<11>(body); }
  const Alert& alert() const { return *std::get<12>(body); }

  Priority priority() const;
  // The run this record belongs to, or empty (gpu/node samples carry none).
  Symbol run_id() const;
};

// Canonical total order: event time first, then kind, then content. Every
// operator sees its input in this order, which is what makes output
// independent of thread count, batch size and arrival order. A row that
// annotates another (train_marks: a train row) sorts with the kind it
// annotates, after every row of that kind with its run and step: a consumer
// of both sees the annotation where the annotated row was.
int compare_canonical(const Record& a, const Record& b);

// 64-bit fingerprint of a record's content (text of symbols, not their ids).
uint64_t content_hash(const Record& r);

// Field tables, generated from the lists above, for codecs and docs.
struct FieldInfo {
  std::string_view name;   // JSONL name
  std::string_view camel;  // Cap'n Proto name, capitalized (RunId)
  FieldType type;
  bool required;
};
struct BodyInfo {
  Kind kind;
  std::string_view type_name;
  const FieldInfo* fields;
  int field_count;
};
const BodyInfo& body_info(Kind k);  // contract kinds only

// Small helper for hashing text deterministically (FNV-1a 64).
uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull);

}  // namespace runlens
