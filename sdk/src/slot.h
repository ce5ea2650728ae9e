// The fixed-size, trivially copyable record one event occupies in a ring.
// Numbers are stored as they go on the wire; texts are copied into the slot's
// own small arena, because the caller's string_views die when emit returns
// and the hot path must not allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace runlens::sdk {

enum class SlotKind : uint8_t {
  kRunStart,
  kStep,
  kTrain,
  kData,
  kCollective,
  kCheckpoint,
  kEvent,
  kRunEnd,
  kNode,  // a host sample (host_sampler.h), queued by the exporter itself
};

// A text in the slot arena; size 0 means "none".
struct TextRef {
  uint16_t offset;
  uint16_t size;
};

enum class ValueKind : uint8_t { kNone, kNumber, kText };

struct ValueSlot {
  ValueKind kind;
  double number;
  TextRef text;
};

// `present` uses the bit layout of the matching wire struct (presence.h).
struct StepBody {
  uint32_t present;
  int64_t step;
  double step_ms, forward_ms, backward_ms, optimizer_ms, comm_ms, data_wait_ms;
  int64_t tokens, samples, seq_len;
  TextRef dataset_shard;
  int64_t mem_allocated_bytes, mem_reserved_bytes, mem_peak_bytes;
};

struct TrainBody {
  uint32_t present;
  int64_t step;
  double loss, val_loss, lr, grad_norm, weight_norm, loss_scale;
  int64_t nan_count, inf_count;
};

struct DataBody {
  uint32_t present;
  int64_t step;
  double batch_load_ms, decode_ms, tokenize_ms;
  int64_t prefetch_queue_depth;
  double cache_hit_rate, storage_read_ms;
  int64_t bytes_read;
  TextRef dataset_shard, dataset_version;
};

struct CollectiveBody {
  uint32_t present;
  int64_t step;
  TextRef op;
  double latency_ms;
  int64_t bytes;
};

struct CheckpointBody {
  uint32_t present;
  TextRef checkpoint_id;
  int64_t step;
  double duration_ms;
  int64_t size_bytes;
  double upload_ms;
  bool ok;
  TextRef uri, sha256;
};

struct EventBody {
  uint32_t present;
  TextRef kind;
  TextRef node;  // size 0 with the node bit set: the emitter's node
  int32_t gpu, rank;
  int64_t step, code;
  TextRef message, key;
  ValueSlot old_value, new_value;
};

struct NodeBody {
  uint32_t present;
  TextRef node;
  double cpu_pct, cpu_user_pct, cpu_system_pct, cpu_iowait_pct, cpu_steal_pct, load1;
  int64_t mem_used_bytes, mem_total_bytes;
};

struct RunEndBody {
  TextRef status, reason;
};

inline constexpr size_t kSlotTextBytes = 352;

struct Slot {
  int64_t time_ns;
  SlotKind kind;
  bool truncated;  // some text did not fit the arena and was cut
  uint16_t text_used;
  union {
    StepBody step;
    TrainBody train;
    DataBody data;
    CollectiveBody collective;
    CheckpointBody checkpoint;
    EventBody event;
    RunEndBody run_end;
    NodeBody node;
  };
  char text[kSlotTextBytes];

  std::string_view Text(TextRef ref) const { return {text + ref.offset, ref.size}; }

  // Copies `s` into the arena, cutting it at a UTF-8 character boundary when
  // the arena is short, so a decoder never meets a broken code point.
  TextRef PutText(std::string_view s) noexcept {
    size_t room = kSlotTextBytes - text_used;
    size_t n = s.size();
    if (n > room) {
      truncated = true;
      n = room;
      while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    }
    TextRef ref{text_used, static_cast<uint16_t>(n)};
    if (n != 0) std::memcpy(text + text_used, s.data(), n);
    text_used = static_cast<uint16_t>(text_used + n);
    return ref;
  }
};

static_assert(std::is_trivially_copyable_v<Slot>);
static_assert(kSlotTextBytes <= UINT16_MAX);

}  // namespace runlens::sdk
