// runlens training-side SDK: emit telemetry from a training process without
// ever slowing it down or breaking it.
//
// Threading contract
//   * Emitter::emit(...) may be called from any number of threads at once. It
//     never blocks, never allocates, never makes a system call on its normal
//     path and never throws: the event is copied into a fixed-size slot of a
//     bounded lock-free ring (one ring per priority) or, when that ring is
//     full, dropped and counted.
//   * One background thread per process, shared by its emitters (with one
//     ZeroMQ context; sdk/src/hub.h), drains the rings (P0 first), encodes
//     the events as Cap'n Proto `Batch` messages (schema/telemetry.capnp) and
//     hands them to each emitter's ZeroMQ PUSH socket with ZMQ_DONTWAIT. A batch ZeroMQ
//     will not take yet is kept and retried; while it waits the rings fill
//     and new events are dropped by priority, so a dead collector costs the
//     training loop nothing but a few counters.
//   * close() flushes within its timeout and returns; the destructor closes.
//
// Priorities (seed sections 46-47: never drop failure signals first)
//   P0  run_start, run_end, failure events (event kinds oom, xid, exception,
//       nccl_timeout, abort, restart), train events with a non-finite loss
//       or grad_norm or with nan_count/inf_count > 0, checkpoints with
//       ok == false (the rows docs/telemetry.md calls P0)
//   P1  step, train, checkpoint, config_change events   (run health)
//   P2  data, collective                                 (detailed metrics)
//   P3  every other event kind                           (debug)
// Each priority has its own ring, so a flood of P2 metrics can never push a P0
// event out, and the exporter always sends what P0 holds before anything else.
//
// Presence: every optional field is std::optional (or an empty string_view,
// meaning "not given"); an unset field is absent on the wire (its `present`
// bit clear), never 0.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace runlens::sdk {

enum class Priority : uint8_t { kP0 = 0, kP1 = 1, kP2 = 2, kP3 = 3 };
inline constexpr size_t kPriorities = 4;

// A run_start config value: a number or a string.
using ConfigValue = std::variant<double, std::string>;

struct ConfigEntry {
  std::string key;
  ConfigValue value;
};

// Where one rank runs; run_start carries the whole map when rank 0 knows it.
struct RankInfo {
  int32_t rank = 0;
  std::string node;
  int32_t gpu = 0;
  std::string gpu_model;  // empty: not sent (e.g. "NVIDIA H100 80GB HBM3")
  std::string node_type;  // empty: not sent (e.g. a cloud instance type)
};

inline constexpr std::chrono::milliseconds kDefaultCloseTimeout{2000};

struct EmitterOptions {
  std::string endpoint = "tcp://127.0.0.1:5555";

  // Identity, stamped on every event this emitter sends.
  std::string run_id;  // required
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string node;            // empty: not sent
  std::optional<int32_t> gpu;  // on `event` events of this rank
  std::string tenant;          // empty: not sent (the collector reads "default")

  // Sent once, in rank 0's run_start.
  std::vector<ConfigEntry> config;
  std::string experiment_id, job_id, model_id, model_version, dataset_version, code_commit;
  std::optional<double> gpu_peak_flops;
  std::optional<double> model_flops_per_token;
  std::vector<RankInfo> ranks;  // empty: unknown, not sent
  std::string cluster_id;       // empty: not sent (a label of runlens's Prometheus series)

  // Exporter tuning. Ring capacities are rounded up to a power of two; each
  // slot takes 512 bytes, so the defaults hold about 9 MiB.
  std::array<uint32_t, kPriorities> buffer_capacity = {1024, 8192, 8192, 1024};
  uint32_t batch_size = 256;                     // events per ZeroMQ message, at most
  std::chrono::milliseconds flush_interval{50};  // longest a P1-P3 event waits in a ring
  int send_hwm = 64;                             // ZMQ_SNDHWM, in batches
  uint32_t checkpoint_queue = 64;                // files checkpoint_saved may have waiting to be hashed

  // Host samples (docs/sdk.md, "Host samples"): the exporter thread reads
  // /proc/stat, /proc/meminfo and /proc/loadavg every host_sample_interval
  // (250 ms at least) and sends them as `node` records for `node` (the host
  // name when empty). One emitter per host samples: the first of its
  // process whose LOCAL_RANK (environment) is 0 or unset and that takes the
  // host's lock file (flock on host_sample_lock; empty:
  // /tmp/runlens-host-samples-UID.lock). Turn off where a node exporter
  // already reports the host. Unset: on, unless the environment's
  // RUNLENS_HOST_SAMPLES is "0".
  std::optional<bool> host_samples;
  std::chrono::milliseconds host_sample_interval{1000};
  std::string host_sample_lock;
};

// A number, a text or nothing: config_change old/new values.
using EventValue = std::variant<std::monostate, double, std::string_view>;

// The payloads. Field names are the JSONL contract's (docs/telemetry.md);
// run_id and rank come from the emitter. time_ns, when unset, is the
// wall-clock time (CLOCK_REALTIME) of the emit call: emit when the thing ends.
// Every member has an initializer, so designated initializers
// (Event{.kind = "xid", .code = 79}) compile without warnings.
// Fields the contract requires are marked "required": an event without one is
// not queued (emit returns false) and is counted in Stats::invalid, because
// the collector would reject it anyway.
// Text longer than a slot can hold (about 350 bytes for all texts of one
// event together) is cut at a UTF-8 boundary and counted in
// Stats::truncated_texts.
struct Step {
  int64_t step = 0;
  std::optional<double> step_ms{};  // required
  std::optional<double> forward_ms{}, backward_ms{}, optimizer_ms{}, comm_ms{}, data_wait_ms{};
  std::optional<int64_t> tokens{}, samples{}, seq_len{};
  std::string_view dataset_shard{};
  std::optional<int64_t> mem_allocated_bytes{}, mem_reserved_bytes{}, mem_peak_bytes{};
  std::optional<int64_t> time_ns{};
};

struct Train {
  int64_t step = 0;
  std::optional<double> loss{}, val_loss{}, lr{}, grad_norm{}, weight_norm{}, loss_scale{};
  std::optional<int64_t> nan_count{}, inf_count{};
  std::optional<int64_t> time_ns{};
};

struct Data {
  std::optional<int64_t> step{};
  std::optional<double> batch_load_ms{}, decode_ms{}, tokenize_ms{};
  std::optional<int64_t> prefetch_queue_depth{};
  std::optional<double> cache_hit_rate{}, storage_read_ms{};
  std::optional<int64_t> bytes_read{};
  std::string_view dataset_shard{}, dataset_version{};
  std::optional<int64_t> time_ns{};
};

struct Collective {
  std::optional<int64_t> step{};
  std::string_view op{};               // "allreduce", "allgather", ...
  std::optional<double> latency_ms{};  // required
  std::optional<int64_t> bytes{};
  std::optional<int64_t> time_ns{};
};

struct Checkpoint {
  std::string_view checkpoint_id{};  // required
  std::optional<int64_t> step{};
  std::optional<double> duration_ms{};
  std::optional<int64_t> size_bytes{};
  std::optional<double> upload_ms{};
  std::optional<bool> ok{};
  std::string_view uri{}, sha256{};
  std::optional<int64_t> time_ns{};
};

// The contract's `event` type. rank, node and gpu default to the emitter's;
// set them to report an occurrence on behalf of another rank or device.
struct Event {
  std::string_view kind{};  // required: oom, xid, exception, config_change, ...
  std::optional<int64_t> step{};
  std::optional<int32_t> rank{};
  std::string_view node{};
  std::optional<int32_t> gpu{};
  std::optional<int64_t> code{};
  std::string_view message{}, key{};
  EventValue old_value{}, new_value{};  // JSONL `old` and `new`
  std::optional<int64_t> time_ns{};
};

// Once closed, sum(emitted) == sent + sum(dropped).
struct Stats {
  std::array<uint64_t, kPriorities> emitted{};  // emit calls (and run_start/run_end)
  std::array<uint64_t, kPriorities> dropped{};  // ring full, after close, unsendable, left at close
  uint64_t sent = 0;                            // events ZeroMQ accepted (queued), not "received"
  uint64_t batches_sent = 0;
  uint64_t send_retries = 0;  // sends ZeroMQ refused for now (EAGAIN); batch kept
  uint64_t send_errors = 0;   // sends or encodes that failed for good; batch dropped
  uint64_t truncated_texts = 0;
  uint64_t invalid = 0;       // events refused: a required field was missing
  std::string connect_error;  // why the endpoint could not be used; empty if it could
  bool closed = false;
  // checkpoint_saved: files queued, hashed and sent, dropped (queue full, left
  // at close, after close), missing or unreadable (sent with ok == false).
  // Counted apart from emitted/dropped: the event is emitted once hashed.
  uint64_t checkpoints_queued = 0, checkpoints_hashed = 0, checkpoints_dropped = 0, checkpoint_errors = 0;
  // Host samples: whether this emitter is its host's sampler, the samples
  // queued (counted in emitted[2] too), and the /proc reads that failed (skipped).
  bool host_sampler = false;
  uint64_t host_samples = 0, host_read_errors = 0;
};

// Which ring an event goes to; exposed so tests and docs can check the rules.
Priority PriorityOf(const Train& train) noexcept;
Priority PriorityOf(const Checkpoint& checkpoint) noexcept;
Priority PriorityOfEventKind(std::string_view kind) noexcept;

class CheckpointHasher;

class Emitter {
 public:
  // Joins the process's exporter (the first emitter starts it); rank 0
  // queues run_start. Throws
  // std::invalid_argument for options that are wrong whatever the network
  // does (empty run_id, rank outside [0, world_size)); an unusable endpoint
  // is not an error here: it shows in stats().connect_error and every event
  // is dropped and counted.
  explicit Emitter(EmitterOptions options);
  ~Emitter();  // close(kDefaultCloseTimeout) unless closed already
  Emitter(const Emitter&) = delete;
  Emitter& operator=(const Emitter&) = delete;

  // true when the event was taken into its ring, false when it was dropped.
  bool emit(const Step& step) noexcept;
  bool emit(const Train& train) noexcept;
  bool emit(const Data& data) noexcept;
  bool emit(const Collective& collective) noexcept;
  bool emit(const Checkpoint& checkpoint) noexcept;
  bool emit(const Event& event) noexcept;

  // A checkpoint file the job has written. Returns at once: a background
  // thread (started at the first call) hashes the file (SHA-256) and then
  // emits a Checkpoint with checkpoint_id (default "RUN_ID/step-STEP", or
  // "RUN_ID/FILE NAME" without a step), step, uri ("file://" + the absolute
  // path, percent-encoded), sha256, size_bytes, ok = true and time_ns = the
  // time of this call; a missing or unreadable file sends ok = false without
  // sha256. Unlike emit, it allocates (the path) and takes a mutex held only
  // for queue operations. false when dropped: queue full
  // (EmitterOptions::checkpoint_queue) or after close; close() first lets
  // the queued files be hashed and sent within its timeout.
  bool checkpoint_saved(std::string_view path, std::optional<int64_t> step = std::nullopt,
                        std::string_view checkpoint_id = {}) noexcept;

  // For an event stamped now and emitted later (a wrapper's background job:
  // the Python SDK's checkpoint_saved): holds this emitter's watermark
  // (docs/sdk.md, "Progress") at the time of the call, so that no batch
  // promises past that time until the hold is released. Release it once the
  // event was emitted, or given up. Returns the hold and the time it holds,
  // which the event should carry; id 0 when out of memory (nothing held).
  struct WatermarkHold {
    uint64_t id = 0;
    int64_t time_ns = 0;
  };
  WatermarkHold hold_watermark() noexcept;
  void release_watermark(uint64_t id) noexcept;

  // Rank 0 sends run_end{status, reason} after everything queued before it.
  // Sends what it can until `timeout` has passed, then drops (and counts) the
  // rest and returns; ZeroMQ's linger is bounded by what is left of the
  // timeout. Returns true when nothing was dropped at close. Later calls and
  // later emits do nothing (emits are counted as dropped).
  bool close(std::chrono::milliseconds timeout = kDefaultCloseTimeout, std::string_view status = "completed",
             std::string_view reason = {}) noexcept;

  Stats stats() const noexcept;
  const EmitterOptions& options() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<CheckpointHasher> hasher_;  // destroyed (stopped) before impl_
};

}  // namespace runlens::sdk
