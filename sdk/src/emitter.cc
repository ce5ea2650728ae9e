#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "batch_encoder.h"
#include "checkpoint_hasher.h"
#include "event_ring.h"
#include "host_sampler.h"
#include "hub.h"
#include "presence.h"
#include "runlens/sdk.h"
#include "slot.h"

namespace runlens::sdk {
namespace {

namespace p = presence;
int64_t WallClockNs() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <class T, class U>
void SetIf(uint32_t& present, uint32_t bit, T& field, const std::optional<U>& value) noexcept {
  if (value) {
    field = static_cast<T>(*value);
    present |= bit;
  }
}

void SetText(Slot& slot, uint32_t& present, uint32_t bit, TextRef& field, std::string_view value) noexcept {
  if (value.empty()) return;
  field = slot.PutText(value);
  if (field.size != 0) present |= bit;
}

void SetValue(Slot& slot, uint32_t& present, uint32_t bit, ValueSlot& field, const EventValue& value) noexcept {
  if (const double* number = std::get_if<double>(&value)) {
    field.kind = ValueKind::kNumber;
    field.number = *number;
    present |= bit;
  } else if (const std::string_view* text = std::get_if<std::string_view>(&value)) {
    field.kind = ValueKind::kText;
    field.text = slot.PutText(*text);
    present |= bit;
  } else {
    field.kind = ValueKind::kNone;
  }
}

// Every slot starts like this; a slot is reused memory, so nothing may be
// left from the event that held it before.
void StartSlot(Slot& slot, SlotKind kind, const std::optional<int64_t>& time_ns) noexcept {
  slot.time_ns = time_ns ? *time_ns : WallClockNs();
  slot.kind = kind;
  slot.truncated = false;
  slot.text_used = 0;
}

constexpr bool NonFinite(const std::optional<double>& v) { return v && !std::isfinite(*v); }

// A producer id (contract v2): the run and rank it speaks for, then what makes
// it unique among emitters: host, process, the emitter's number in the
// process and its start time.
std::string ProducerId(const EmitterOptions& o) {
  static std::atomic<uint64_t> emitters{0};
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  const auto started = std::chrono::steady_clock::now().time_since_epoch().count();
  char unique[96];
  std::snprintf(unique, sizeof unique, "%lld.%llu.%llx", static_cast<long long>(getpid()),
                static_cast<unsigned long long>(emitters.fetch_add(1) + 1), static_cast<unsigned long long>(started));
  return o.run_id + "/" + std::to_string(o.rank) + "/" + (host[0] ? host : "host") + "/" + unique;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == 0) return "localhost";
  return host;
}

// The process's host sampler seat: one emitter of a process at a time (the
// pid tells a fork child's inherited seat from its own).
std::atomic<pid_t> g_sampler_pid{0};

// Whether the emitter that asks may sample its host: LOCAL_RANK 0 or unset,
// the process's seat free, and the host's lock file taken (held, through
// `lock_fd`, until the emitter closes). Never throws.
bool ElectHostSampler(const std::string& lock_path, int* lock_fd) noexcept {
  if (const char* local = std::getenv("LOCAL_RANK");
      local != nullptr && local[0] != 0 && std::strcmp(local, "0") != 0) {
    return false;
  }
  pid_t free = 0;
  const pid_t self = getpid();
  if (!g_sampler_pid.compare_exchange_strong(free, self)) {
    // A seat left by a parent process (fork) is free in the child.
    if (free == self || !g_sampler_pid.compare_exchange_strong(free, self)) return false;
  }
  char path[512];
  if (lock_path.empty()) {
    std::snprintf(path, sizeof path, "/tmp/runlens-host-samples-%u.lock", static_cast<unsigned>(getuid()));
  } else {
    std::snprintf(path, sizeof path, "%s", lock_path.c_str());
  }
  const int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    *lock_fd = fd;
    return true;
  }
  if (fd >= 0) ::close(fd);
  g_sampler_pid.store(0);
  return false;
}

bool HostSamplesWanted(const EmitterOptions& o) noexcept {
  if (o.host_samples) return *o.host_samples;
  const char* env = std::getenv("RUNLENS_HOST_SAMPLES");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

void LeaveHostSampler(int lock_fd) noexcept {
  ::close(lock_fd);  // releases the flock
  pid_t self = getpid();
  g_sampler_pid.compare_exchange_strong(self, 0);
}

}  // namespace

Priority PriorityOf(const Train& t) noexcept {
  const bool failing =
      NonFinite(t.loss) || NonFinite(t.grad_norm) || t.nan_count.value_or(0) > 0 || t.inf_count.value_or(0) > 0;
  return failing ? Priority::kP0 : Priority::kP1;
}

Priority PriorityOf(const Checkpoint& c) noexcept { return c.ok.has_value() && !*c.ok ? Priority::kP0 : Priority::kP1; }

Priority PriorityOfEventKind(std::string_view kind) noexcept {
  static constexpr std::string_view kFailures[] = {"oom", "xid", "exception", "nccl_timeout", "abort", "restart"};
  for (std::string_view failure : kFailures) {
    if (kind == failure) return Priority::kP0;
  }
  return kind == "config_change" ? Priority::kP1 : Priority::kP3;
}

class Emitter::Impl final : public HubClient {
 public:
  explicit Impl(EmitterOptions options) : options_(std::move(options)), encoder_(options_) {
    if (options_.run_id.empty()) throw std::invalid_argument("runlens Emitter: run_id is required");
    if (options_.world_size < 1) {
      throw std::invalid_argument("runlens Emitter: world_size must be at least 1, got " +
                                  std::to_string(options_.world_size));
    }
    if (options_.rank < 0 || options_.rank >= options_.world_size) {
      throw std::invalid_argument("runlens Emitter: rank must be in [0, world_size), got rank " +
                                  std::to_string(options_.rank) + " with world_size " +
                                  std::to_string(options_.world_size));
    }
    options_.batch_size = std::max<uint32_t>(options_.batch_size, 1);
    options_.flush_interval = std::max(options_.flush_interval, std::chrono::milliseconds(1));
    for (size_t i = 0; i < kPriorities; ++i) {
      rings_[i] = std::make_unique<EventRing>(std::max<uint32_t>(options_.buffer_capacity[i], 2));
    }
    wake_mask_ = std::bit_ceil(size_t{options_.batch_size}) - 1;
    batch_.resize(options_.batch_size);
    producer_ = ProducerId(options_);
    for (auto& marks : marks_) marks.reserve(kMaxMarks);  // the exporter never allocates for them
    // No hub (no context or thread could be made): events fill the rings
    // and are dropped, counted; Close() drains them.
    hub_ = Hub::Join(connect_error_);
    if (hub_ != nullptr) OpenSocket();
    if (hub_ != nullptr && HostSamplesWanted(options_) && ElectHostSampler(options_.host_sample_lock, &host_lock_fd_)) {
      try {
        sampler_ = std::make_unique<HostSampler>();
        host_node_ = options_.node.empty() ? HostName() : options_.node;
        host_interval_ = std::max(options_.host_sample_interval, std::chrono::milliseconds(250));
      } catch (...) {
        sampler_.reset();
      }
      if (!sampler_) {
        LeaveHostSampler(host_lock_fd_);
        host_lock_fd_ = -1;
      }
    }
    if (options_.rank == 0) {
      Push(Priority::kP0, [](Slot& slot) { StartSlot(slot, SlotKind::kRunStart, std::nullopt); });
    }
    if (hub_ != nullptr) hub_->Add(this);
  }

  ~Impl() { Close(kDefaultCloseTimeout, "completed", {}); }

  // The hot path: one ring claim, a fill in place, a release store.
  template <class Fill>
  bool Push(Priority priority, Fill&& fill) noexcept {
    const auto index = static_cast<size_t>(priority);
    if (closing_.load(std::memory_order_relaxed)) {
      Reject(index);
      return false;
    }
    bool truncated = false;
    const bool taken = rings_[index]->TryPush([&](Slot& slot) {
      fill(slot);
      truncated = slot.truncated;
    });
    if (!taken) {
      Reject(index);
      return false;
    }
    if (truncated) truncated_texts_.fetch_add(1, std::memory_order_relaxed);
    // Wake the exporter for every P0 event, and once per batch's worth of the
    // others so a burst is shipped before the ring fills; otherwise it wakes
    // by itself every flush_interval. notify_one costs a futex call only when
    // the exporter is actually asleep.
    if (priority == Priority::kP0 || (rings_[index]->pushed() & wake_mask_) == 0) Wake();
    return true;
  }

  bool Invalid() noexcept {
    invalid_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  // Holds of the watermark for events promised with an earlier time than they
  // are emitted (checkpoint_saved's, while their file is hashed). Hold() may
  // throw std::bad_alloc (the caller catches); a hold is released once its
  // event is in a ring (or dropped), and forgotten by the exporter once a pass
  // that saw it released has emptied the rings.
  uint64_t Hold() {
    std::lock_guard lock(hold_mu_);
    holds_.push_back({++hold_ids_, INT64_MIN, false, false});
    return hold_ids_;
  }
  void SetHold(uint64_t id, int64_t time_ns) noexcept {
    std::lock_guard lock(hold_mu_);
    for (auto& h : holds_) {
      if (h.id == id) h.time_ns = time_ns;
    }
  }
  void Release(uint64_t id) noexcept {
    std::lock_guard lock(hold_mu_);
    for (auto& h : holds_) {
      if (h.id == id) h.released = true;
    }
  }

  // An event that never got into a ring still counts as emitted, so that
  // after close sum(emitted) == sent + sum(dropped).
  void Reject(size_t index) noexcept {
    rejected_[index].count.fetch_add(1, std::memory_order_relaxed);
    dropped_[index].count.fetch_add(1, std::memory_order_relaxed);
  }

  bool Close(std::chrono::milliseconds timeout, std::string_view status, std::string_view reason) noexcept {
    // A second close (or the destructor after close) waits for the first
    // one on the mutex and reports its result.
    std::lock_guard lock(close_mu_);
    if (close_started_) return clean_close_;
    close_started_ = true;
    closing_.store(true, std::memory_order_relaxed);
    // The close is serviced on this thread, not handed to the hub's: a
    // process that closes many emitters one after another (a launcher
    // reporting for its ranks) would otherwise wait for a wake-up of that
    // thread per emitter, and on a busy host each costs a time slice.
    const bool inline_close = hub_ != nullptr && hub_->ours();
    if (inline_close) hub_->Detach(this);
    if (options_.rank == 0) {
      StartSlot(run_end_, SlotKind::kRunEnd, std::nullopt);
      run_end_.run_end.status = run_end_.PutText(status);
      run_end_.run_end.reason = run_end_.PutText(reason);
      run_end_wanted_ = true;
      // Counted as taken in, like every other event, though it skips the rings.
      run_end_emitted_.store(1, std::memory_order_relaxed);
    }
    deadline_ = SteadyClock::now() + std::max(timeout, std::chrono::milliseconds(0));
    stop_.store(true, std::memory_order_release);
    if (hub_ == nullptr) {
      Shutdown();  // no exporter ever ran
    } else if (inline_close) {
      // Until the final batch is handed to ZeroMQ and the socket closed
      // (lingering), or the deadline: ServiceRings ends by then.
      for (auto due = Service(SteadyClock::now()); due != kDone; due = Service(SteadyClock::now())) {
        std::this_thread::sleep_until(std::min(due, deadline_));
      }
    } else {
      // Inherited through fork(): the exporter and the socket belong to the
      // parent. Nothing here may touch them; what the rings hold is dropped.
      DropRings();
      stopped_.store(true, std::memory_order_release);
    }
    clean_close_ = dropped_at_close_ == 0;
    if (host_lock_fd_ >= 0) {
      LeaveHostSampler(host_lock_fd_);
      host_lock_fd_ = -1;
    }
    // The last emitter of the process out terminates the shared context,
    // which waits for queued batches within the lingers set from the close
    // timeouts.
    Hub::Leave(hub_);
    hub_ = nullptr;
    return clean_close_;
  }

  Stats GetStats() const noexcept {
    Stats s;
    for (size_t i = 0; i < kPriorities; ++i) {
      s.emitted[i] = rings_[i]->pushed() + rejected_[i].count.load(std::memory_order_relaxed);
      s.dropped[i] = dropped_[i].count.load(std::memory_order_relaxed);
    }
    s.emitted[0] += run_end_emitted_.load(std::memory_order_relaxed);
    s.sent = sent_.load(std::memory_order_relaxed);
    s.batches_sent = batches_sent_.load(std::memory_order_relaxed);
    s.send_retries = send_retries_.load(std::memory_order_relaxed);
    s.send_errors = send_errors_.load(std::memory_order_relaxed);
    s.truncated_texts = truncated_texts_.load(std::memory_order_relaxed);
    s.invalid = invalid_.load(std::memory_order_relaxed);
    s.connect_error = connect_error_;  // written once, before the exporter starts
    s.closed = stopped_.load(std::memory_order_acquire);
    s.host_sampler = sampler_ != nullptr;  // set in the constructor, never changed
    s.host_samples = host_samples_.load(std::memory_order_relaxed);
    s.host_read_errors = host_read_errors_.load(std::memory_order_relaxed);
    return s;
  }

  const EmitterOptions& options() const noexcept { return options_; }

 private:
  using Counts = std::array<uint64_t, kPriorities>;

  struct PendingBatch {
    kj::Array<capnp::word> words;
    Counts counts{};
    uint64_t events = 0;
  };

  // Opened here rather than on the exporter thread so that a bad endpoint
  // shows in stats() as soon as the constructor returns. zmq_connect does not
  // block: TCP name resolution and connecting happen on ZeroMQ's I/O thread.
  void OpenSocket() {
    socket_ = zmq_socket(hub_->context(), ZMQ_PUSH);
    if (socket_ == nullptr) {
      connect_error_ = std::string("zmq_socket: ") + zmq_strerror(errno);
      return;
    }
    // Bounded everywhere: ZeroMQ queues at most send_hwm batches; a dead
    // collector is retried at most every 2 s; close() sets the real linger.
    const int hwm = std::max(options_.send_hwm, 1);
    const int linger = 0;
    const int reconnect_max_ms = 2000;
    zmq_setsockopt(socket_, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(socket_, ZMQ_RECONNECT_IVL_MAX, &reconnect_max_ms, sizeof reconnect_max_ms);
    if (zmq_connect(socket_, options_.endpoint.c_str()) != 0) {
      connect_error_ = "cannot use endpoint '" + options_.endpoint + "': " + zmq_strerror(errno);
      zmq_close(socket_);
      socket_ = nullptr;
    }
  }

  void Wake() noexcept {
    if (hub_ != nullptr) hub_->Wake(this);
  }

  void Drop(const Counts& counts, bool at_close) noexcept {
    for (size_t i = 0; i < kPriorities; ++i) {
      if (counts[i] == 0) continue;
      dropped_[i].count.fetch_add(counts[i], std::memory_order_relaxed);
      if (at_close) dropped_at_close_ += counts[i];
    }
  }

  // The oldest time a hold keeps (INT64_MIN while one is being set; INT64_MAX:
  // none), marking the released holds as seen by this pass.
  int64_t ReadHolds() noexcept {
    std::lock_guard lock(hold_mu_);
    int64_t oldest = INT64_MAX;
    for (auto& h : holds_) {
      oldest = std::min(oldest, h.time_ns);
      if (h.released) h.seen = true;
    }
    return oldest;
  }
  // After a pass emptied the rings, the events of the holds it saw released are out.
  void ForgetHolds() noexcept {
    std::lock_guard lock(hold_mu_);
    std::erase_if(holds_, [](const HoldEntry& h) { return h.seen; });
  }

  // Fills `batch` with up to batch_size events, P0 first.
  size_t Collect(std::vector<Slot>& batch, Counts& counts) noexcept {
    counts = {};
    size_t n = 0;
    for (size_t i = 0; i < kPriorities; ++i) {
      while (n < batch.size() && rings_[i]->TryPop(batch[n])) {
        ++counts[i];
        ++n;
      }
    }
    return n;
  }

  // The watermark of the batch just collected (docs/sdk.md, "Progress"): the
  // oldest event still waiting in any ring or held (`held`), bounded by the
  // clock read before the rings were (`now`). An
  // event takes its clock stamp after it claims its cell, so every cell
  // claimed after a pass read the clock (at `now`, then the ring's write
  // position) holds an event no older than that `now`. The oldest event left
  // in a ring is then no older than the clock of the latest pass that had
  // not yet seen its cell claimed. Exact for clock-stamped events; an event
  // given an explicit older time_ns can be older (late at the collector).
  // Returns whether every ring was empty (nothing waits).
  bool Watermark(int64_t now, int64_t held, int64_t& watermark) noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the clock before the write positions
    int64_t bound = std::min(now, held);
    bool empty = true;
    for (size_t i = 0; i < kPriorities; ++i) {
      const uint64_t written = rings_[i]->pushed();
      const uint64_t read = rings_[i]->popped();
      auto& marks = marks_[i];
      if (written != read) {
        empty = false;
        // The latest pass whose write position is at or before the oldest cell left.
        size_t k = 0;
        while (k + 1 < marks.size() && marks[k + 1].written <= read) ++k;
        if (k > 0) marks.erase(marks.begin(), marks.begin() + static_cast<long>(k));
        bound = std::min(bound, !marks.empty() && marks[0].written <= read ? marks[0].now : watermark_);
      } else {
        marks.clear();
      }
      // Kept bounded: when full, the newest mark gives way (the older ones only ever answer lower).
      if (marks.size() == kMaxMarks) marks.pop_back();
      marks.push_back({written, now});
    }
    watermark_ = std::max(watermark_, bound);
    watermark = watermark_;
    return empty;
  }

  // true when the pending batch is gone (sent, or dropped on a hard error).
  bool TrySendPending() noexcept {
    const auto bytes = pending_->words.asBytes();
    if (zmq_send(socket_, bytes.begin(), bytes.size(), ZMQ_DONTWAIT) >= 0) {
      sent_.fetch_add(pending_->events, std::memory_order_relaxed);
      batches_sent_.fetch_add(1, std::memory_order_relaxed);
      pending_.reset();
      return true;
    }
    const int error = errno;
    if (error == EAGAIN || error == EINTR) {
      send_retries_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    send_errors_.fetch_add(1, std::memory_order_relaxed);
    Drop(pending_->counts, stop_.load(std::memory_order_relaxed));
    pending_.reset();
    return true;
  }

  // The exporter's work, on the hub's thread: ships what the rings hold (P0
  // first), a heartbeat once per tick, and at close the final batch; returns
  // when it wants to run again (kDone once shut down). While ZeroMQ refuses
  // a batch it is kept and retried, so the rings fill and new events are the
  // ones dropped.
  // The exporter's work (ServiceRings) and, on the host sampler, a host
  // sample when one is due: queued before the rings are read, so it leaves
  // in this call's batch.
  SteadyClock::time_point Service(SteadyClock::time_point now) noexcept override {
    if (sampler_ == nullptr) return ServiceRings();
    if (!stop_.load(std::memory_order_acquire) && now >= next_sample_) {
      SampleHost();
      next_sample_ = now + host_interval_;
    }
    const SteadyClock::time_point due = ServiceRings();
    return due == kDone ? kDone : std::min(due, next_sample_);
  }

  // One host sample into the P2 ring (pushed here, on the exporter thread:
  // the rings take any number of producers). Counted like an emit.
  void SampleHost() noexcept {
    const HostSample s = sampler_->Sample();
    host_read_errors_.store(sampler_->failed_reads(), std::memory_order_relaxed);
    if (s.Empty()) return;
    const size_t index = static_cast<size_t>(Priority::kP2);
    const bool taken = rings_[index]->TryPush([&](Slot& slot) {
      StartSlot(slot, SlotKind::kNode, std::nullopt);
      NodeBody& b = slot.node;
      b.present = p::node::kNode;
      b.node = slot.PutText(host_node_);
      if (s.cpu) {
        b.present |= p::node::kCpuPct | p::node::kCpuUserPct | p::node::kCpuSystemPct | p::node::kCpuIowaitPct |
                     p::node::kCpuStealPct;
        b.cpu_pct = s.cpu->busy;
        b.cpu_user_pct = s.cpu->user;
        b.cpu_system_pct = s.cpu->system;
        b.cpu_iowait_pct = s.cpu->iowait;
        b.cpu_steal_pct = s.cpu->steal;
      }
      if (s.mem) {
        b.present |= p::node::kMemUsedBytes | p::node::kMemTotalBytes;
        b.mem_used_bytes = s.mem->used_bytes;
        b.mem_total_bytes = s.mem->total_bytes;
      }
      if (s.load1) {
        b.present |= p::node::kLoad1;
        b.load1 = *s.load1;
      }
    });
    if (taken) {
      host_samples_.fetch_add(1, std::memory_order_relaxed);
    } else {
      Reject(index);
    }
  }

  SteadyClock::time_point ServiceRings() noexcept {
    static constexpr auto kClosingPoll = std::chrono::milliseconds(2);
    // A burst is shipped in slices, so one emitter cannot keep the others of
    // the process waiting: the hub calls it again at once.
    static constexpr int kBatchesPerCall = 16;
    for (int batches = 0;;) {
      const bool stopping = stop_.load(std::memory_order_acquire);
      const auto clock = SteadyClock::now();
      if (stopping && clock >= deadline_) return Finish();
      if (pending_ && !TrySendPending()) return stopping ? clock + kClosingPoll : NextTick(clock);
      if (final_encoded_) return Finish();  // the final batch is out: what came after close is dropped, counted
      if (batches == kBatchesPerCall) return clock;
      // The clock, then the holds, before the rings are read (Watermark).
      const int64_t now = WallClockNs();
      std::atomic_thread_fence(std::memory_order_seq_cst);
      const int64_t held = ReadHolds();
      size_t n = Collect(batch_, counts_);
      // run_end goes last, in the batch that empties the rings.
      if (stopping && run_end_wanted_ && !run_end_taken_ && n < batch_.size()) {
        batch_[n++] = run_end_;
        ++counts_[0];
        run_end_taken_ = true;
      }
      int64_t watermark = 0;
      const bool empty = Watermark(now, held, watermark);
      if (empty) ForgetHolds();
      // The batch that empties the rings at close is the producer's last.
      const bool final = stopping && empty && (!run_end_wanted_ || run_end_taken_);
      // With nothing to send, a batch without events still carries the
      // watermark forward once per tick of flush_interval (a heartbeat), so
      // that the collector can close what the other producers reported
      // meanwhile: its watermark is the minimum over producers.
      const bool heartbeat = n == 0 && !stopping && watermark > sent_watermark_ &&
                             hub_->TickOf(clock, options_.flush_interval) > last_batch_tick_;
      if (n == 0 && !final && !heartbeat) return stopping ? clock + kClosingPoll : NextTick(clock);
      if (socket_ == nullptr) {
        Drop(counts_, stopping);  // unusable endpoint: drain and count
        if (final) return Finish();
        ++batches;
        continue;
      }
      try {
        const BatchProgress progress{producer_, seq_ + 1, watermark, final};
        pending_ = PendingBatch{encoder_.Encode(std::span<const Slot>(batch_.data(), n), progress), counts_, n};
        ++seq_;
        ++batches;
        final_encoded_ = final;
        sent_watermark_ = watermark;
        last_batch_tick_ = hub_->TickOf(clock, options_.flush_interval);
      } catch (...) {
        send_errors_.fetch_add(1, std::memory_order_relaxed);
        Drop(counts_, stopping);
        if (final) return Finish();
      }
    }
  }

  SteadyClock::time_point NextTick(SteadyClock::time_point clock) const noexcept {
    return hub_->NextTick(clock, options_.flush_interval);
  }

  SteadyClock::time_point Finish() noexcept {
    Shutdown();
    return kDone;
  }

  // Counts what is left as dropped and releases ZeroMQ within the deadline.
  void Shutdown() noexcept {
    if (pending_) {
      Drop(pending_->counts, true);
      pending_.reset();
    }
    DropRings();
    if (socket_ != nullptr) {
      // What ZeroMQ still queues may use what is left of the timeout, no
      // more: the socket lingers in the hub's context, whose termination (at
      // the last close of the process) waits for it.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - SteadyClock::now());
      const int linger = static_cast<int>(std::max<int64_t>(left.count(), 0));
      zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof linger);
      zmq_close(socket_);
      socket_ = nullptr;
    }
    stopped_.store(true, std::memory_order_release);
  }

  // What the rings (and an untaken run_end) still hold, counted as dropped at close.
  void DropRings() noexcept {
    Slot slot;
    for (size_t i = 0; i < kPriorities; ++i) {
      Counts counts{};
      while (rings_[i]->TryPop(slot)) ++counts[i];
      Drop(counts, true);
    }
    if (run_end_wanted_ && !run_end_taken_) Drop(Counts{1, 0, 0, 0}, true);
  }

  EmitterOptions options_;
  BatchEncoder encoder_;
  std::array<std::unique_ptr<EventRing>, kPriorities> rings_;
  struct alignas(64) DropCounter {
    std::atomic<uint64_t> count{0};
  };
  std::array<DropCounter, kPriorities> dropped_;   // all drops
  std::array<DropCounter, kPriorities> rejected_;  // drops at emit (ring full, closed)
  size_t wake_mask_ = 0;

  // Written by the exporter, read by stats().
  std::atomic<uint64_t> sent_{0}, batches_sent_{0}, send_retries_{0}, send_errors_{0};
  std::atomic<uint64_t> truncated_texts_{0};
  std::atomic<uint64_t> invalid_{0};
  std::atomic<uint64_t> run_end_emitted_{0};
  std::atomic<bool> stopped_{false};

  std::string connect_error_;
  Hub* hub_ = nullptr;  // joined in the constructor, left at close
  void* socket_ = nullptr;

  // Close: set by the closing thread before stop_ is released.
  std::atomic<bool> closing_{false};
  std::atomic<bool> stop_{false};
  std::mutex close_mu_;
  SteadyClock::time_point deadline_{};
  Slot run_end_{};
  bool run_end_wanted_ = false;
  bool close_started_ = false;
  bool clean_close_ = false;

  // Exporter (the hub's thread) only.
  std::vector<Slot> batch_;
  Counts counts_{};
  std::optional<PendingBatch> pending_;
  std::string producer_;  // set before the exporter starts
  uint64_t seq_ = 0;      // of the last batch encoded
  int64_t watermark_ = INT64_MIN;
  int64_t sent_watermark_ = INT64_MIN;   // of the last batch encoded
  int64_t last_batch_tick_ = INT64_MIN;  // the tick of flush_interval the last batch was encoded in
  bool final_encoded_ = false;
  struct Mark {
    uint64_t written;  // a ring's write position at a pass
    int64_t now;       // the clock read just before it
  };
  static constexpr size_t kMaxMarks = 64;
  std::array<std::vector<Mark>, kPriorities> marks_;

  struct HoldEntry {
    uint64_t id;
    int64_t time_ns;
    bool released, seen;
  };
  std::mutex hold_mu_;
  std::vector<HoldEntry> holds_;
  uint64_t hold_ids_ = 0;
  bool run_end_taken_ = false;
  uint64_t dropped_at_close_ = 0;

  // Host samples: set in the constructor; the sampler is used on the exporter thread only.
  std::unique_ptr<HostSampler> sampler_;
  std::string host_node_;
  std::chrono::milliseconds host_interval_{1000};
  SteadyClock::time_point next_sample_{};
  int host_lock_fd_ = -1;
  std::atomic<uint64_t> host_samples_{0}, host_read_errors_{0};
};

Emitter::Emitter(EmitterOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))),
      hasher_(std::make_unique<CheckpointHasher>([this](const Checkpoint& c) { return emit(c); },
                                                 impl_->options().checkpoint_queue,
                                                 [this](uint64_t hold) { impl_->Release(hold); })) {}

Emitter::~Emitter() {
  // Queued checkpoints get the default close's time, then the rings close.
  close();
}

Emitter::WatermarkHold Emitter::hold_watermark() noexcept {
  WatermarkHold hold;
  try {
    // Held before the clock is read, so that no batch can promise past the
    // time meanwhile.
    hold.id = impl_->Hold();
  } catch (...) {
    hold.id = 0;  // allocation failed: nothing held
  }
  hold.time_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (hold.id != 0) impl_->SetHold(hold.id, hold.time_ns);
  return hold;
}

void Emitter::release_watermark(uint64_t id) noexcept {
  if (id != 0) impl_->Release(id);
}

bool Emitter::checkpoint_saved(std::string_view path, std::optional<int64_t> step,
                               std::string_view checkpoint_id) noexcept {
  // The event will carry the time of this call, but is sent once hashed:
  // until then it holds the emitter's watermark.
  const WatermarkHold hold = hold_watermark();
  if (hold.id == 0) return false;  // allocation failed: not queued
  try {
    std::filesystem::path file{std::string(path)};
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(file, ec);
    if (ec) absolute = file;
    std::string id(checkpoint_id);
    if (id.empty()) {
      id = impl_->options().run_id + "/" + (step ? "step-" + std::to_string(*step) : absolute.filename().string());
    }
    if (hasher_->Submit(absolute.lexically_normal().string(), std::move(id), step, hold.time_ns, hold.id)) return true;
  } catch (...) {
    // allocation failed: not queued
  }
  release_watermark(hold.id);
  return false;
}

bool Emitter::emit(const Step& v) noexcept {
  if (!v.step_ms) return impl_->Invalid();
  return impl_->Push(Priority::kP1, [&](Slot& slot) {
    StartSlot(slot, SlotKind::kStep, v.time_ns);
    StepBody& b = slot.step;
    b.present = p::step::kRunId | p::step::kRank | p::step::kStep | p::step::kStepMs;
    b.step = v.step;
    b.step_ms = *v.step_ms;
    SetIf(b.present, p::step::kForwardMs, b.forward_ms, v.forward_ms);
    SetIf(b.present, p::step::kBackwardMs, b.backward_ms, v.backward_ms);
    SetIf(b.present, p::step::kOptimizerMs, b.optimizer_ms, v.optimizer_ms);
    SetIf(b.present, p::step::kCommMs, b.comm_ms, v.comm_ms);
    SetIf(b.present, p::step::kDataWaitMs, b.data_wait_ms, v.data_wait_ms);
    SetIf(b.present, p::step::kTokens, b.tokens, v.tokens);
    SetIf(b.present, p::step::kSamples, b.samples, v.samples);
    SetIf(b.present, p::step::kSeqLen, b.seq_len, v.seq_len);
    SetText(slot, b.present, p::step::kDatasetShard, b.dataset_shard, v.dataset_shard);
    SetIf(b.present, p::step::kMemAllocatedBytes, b.mem_allocated_bytes, v.mem_allocated_bytes);
    SetIf(b.present, p::step::kMemReservedBytes, b.mem_reserved_bytes, v.mem_reserved_bytes);
    SetIf(b.present, p::step::kMemPeakBytes, b.mem_peak_bytes, v.mem_peak_bytes);
  });
}

bool Emitter::emit(const Train& v) noexcept {
  return impl_->Push(PriorityOf(v), [&](Slot& slot) {
    StartSlot(slot, SlotKind::kTrain, v.time_ns);
    TrainBody& b = slot.train;
    b.present = p::train::kRunId | p::train::kStep | p::train::kRank;
    b.step = v.step;
    SetIf(b.present, p::train::kLoss, b.loss, v.loss);
    SetIf(b.present, p::train::kValLoss, b.val_loss, v.val_loss);
    SetIf(b.present, p::train::kLr, b.lr, v.lr);
    SetIf(b.present, p::train::kGradNorm, b.grad_norm, v.grad_norm);
    SetIf(b.present, p::train::kWeightNorm, b.weight_norm, v.weight_norm);
    SetIf(b.present, p::train::kLossScale, b.loss_scale, v.loss_scale);
    SetIf(b.present, p::train::kNanCount, b.nan_count, v.nan_count);
    SetIf(b.present, p::train::kInfCount, b.inf_count, v.inf_count);
  });
}

bool Emitter::emit(const Data& v) noexcept {
  return impl_->Push(Priority::kP2, [&](Slot& slot) {
    StartSlot(slot, SlotKind::kData, v.time_ns);
    DataBody& b = slot.data;
    b.present = p::data::kRunId | p::data::kRank;
    SetIf(b.present, p::data::kStep, b.step, v.step);
    SetIf(b.present, p::data::kBatchLoadMs, b.batch_load_ms, v.batch_load_ms);
    SetIf(b.present, p::data::kDecodeMs, b.decode_ms, v.decode_ms);
    SetIf(b.present, p::data::kTokenizeMs, b.tokenize_ms, v.tokenize_ms);
    SetIf(b.present, p::data::kPrefetchQueueDepth, b.prefetch_queue_depth, v.prefetch_queue_depth);
    SetIf(b.present, p::data::kCacheHitRate, b.cache_hit_rate, v.cache_hit_rate);
    SetIf(b.present, p::data::kStorageReadMs, b.storage_read_ms, v.storage_read_ms);
    SetIf(b.present, p::data::kBytesRead, b.bytes_read, v.bytes_read);
    SetText(slot, b.present, p::data::kDatasetShard, b.dataset_shard, v.dataset_shard);
    SetText(slot, b.present, p::data::kDatasetVersion, b.dataset_version, v.dataset_version);
  });
}

bool Emitter::emit(const Collective& v) noexcept {
  if (!v.latency_ms) return impl_->Invalid();
  return impl_->Push(Priority::kP2, [&](Slot& slot) {
    StartSlot(slot, SlotKind::kCollective, v.time_ns);
    CollectiveBody& b = slot.collective;
    b.present = p::collective::kRunId | p::collective::kRank | p::collective::kLatencyMs;
    b.latency_ms = *v.latency_ms;
    SetIf(b.present, p::collective::kStep, b.step, v.step);
    SetText(slot, b.present, p::collective::kOp, b.op, v.op);
    SetIf(b.present, p::collective::kBytes, b.bytes, v.bytes);
  });
}

bool Emitter::emit(const Checkpoint& v) noexcept {
  if (v.checkpoint_id.empty()) return impl_->Invalid();
  return impl_->Push(PriorityOf(v), [&](Slot& slot) {
    StartSlot(slot, SlotKind::kCheckpoint, v.time_ns);
    CheckpointBody& b = slot.checkpoint;
    b.present = p::checkpoint::kRunId;
    SetText(slot, b.present, p::checkpoint::kCheckpointId, b.checkpoint_id, v.checkpoint_id);
    SetIf(b.present, p::checkpoint::kStep, b.step, v.step);
    SetIf(b.present, p::checkpoint::kDurationMs, b.duration_ms, v.duration_ms);
    SetIf(b.present, p::checkpoint::kSizeBytes, b.size_bytes, v.size_bytes);
    SetIf(b.present, p::checkpoint::kUploadMs, b.upload_ms, v.upload_ms);
    SetIf(b.present, p::checkpoint::kOk, b.ok, v.ok);
    SetText(slot, b.present, p::checkpoint::kUri, b.uri, v.uri);
    SetText(slot, b.present, p::checkpoint::kSha256, b.sha256, v.sha256);
  });
}

bool Emitter::emit(const Event& v) noexcept {
  if (v.kind.empty()) return impl_->Invalid();
  const EmitterOptions& o = impl_->options();
  return impl_->Push(PriorityOfEventKind(v.kind), [&](Slot& slot) {
    StartSlot(slot, SlotKind::kEvent, v.time_ns);
    EventBody& b = slot.event;
    b.present = p::occurrence::kKind | p::occurrence::kRunId | p::occurrence::kRank;
    // kind first: when texts must be cut, the kind is the one to keep whole.
    b.kind = slot.PutText(v.kind);
    b.rank = v.rank.value_or(o.rank);
    b.node = TextRef{0, 0};
    if (!v.node.empty()) {
      SetText(slot, b.present, p::occurrence::kNode, b.node, v.node);
    } else if (!o.node.empty()) {
      b.present |= p::occurrence::kNode;  // the encoder writes the emitter's node
    }
    SetIf(b.present, p::occurrence::kGpu, b.gpu, v.gpu ? v.gpu : o.gpu);
    SetIf(b.present, p::occurrence::kStep, b.step, v.step);
    SetIf(b.present, p::occurrence::kCode, b.code, v.code);
    SetText(slot, b.present, p::occurrence::kKey, b.key, v.key);
    SetValue(slot, b.present, p::occurrence::kOld, b.old_value, v.old_value);
    SetValue(slot, b.present, p::occurrence::kNew, b.new_value, v.new_value);
    // The message last: it is the text most likely to be long.
    SetText(slot, b.present, p::occurrence::kMessage, b.message, v.message);
  });
}

bool Emitter::close(std::chrono::milliseconds timeout, std::string_view status, std::string_view reason) noexcept {
  const auto start = std::chrono::steady_clock::now();
  hasher_->Stop(timeout);
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return impl_->Close(std::max(timeout - spent, std::chrono::milliseconds(0)), status, reason);
}

Stats Emitter::stats() const noexcept {
  Stats s = impl_->GetStats();
  hasher_->AddTo(s);
  return s;
}

const EmitterOptions& Emitter::options() const noexcept { return impl_->options(); }

}  // namespace runlens::sdk
