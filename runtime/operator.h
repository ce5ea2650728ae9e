// The component interfaces of the runtime: operators (and sinks, which are
// operators without outputs) and sources. The runtime is generic over the
// row type R; it learns the few things it needs of a row from RowTraits<R>.
//
// Threading contract (the same for every operator):
//  - An OperatorDef is immutable once built and shared by all partitions.
//  - Each partition owns one Operator instance; the runtime never calls one
//    instance from two threads at once, so operator state needs no locks.
//  - Rows arrive at process() in canonical event-time order (RowTraits::compare),
//    all older than the watermark that released them; on_watermark(w) follows.
//    The order is a function of the input alone, not of thread count, batch
//    size or arrival order: that is what makes outputs deterministic.
//  - Rows emitted while handling watermark w must not be older than the
//    previous watermark (emit at the time of the row or timer that caused it).
//  - on_shed(report) tells what the runtime dropped from this partition's
//    inbox (overflow: shed). It is called when the report reaches the
//    partition, before any watermark that would have released the rows it
//    counts, so an operator knows of the loss before it judges that time.
//    Unlike rows, reports depend on timing (what was shed), not on the input
//    alone. The runtime does not forward them: the operator that is told
//    says so in its own output (docs/architecture.md, "Edges").
//  - finish() is called once, after the final watermark, at end of input.
//  - snapshot() and restore() (docs/state.md) are called between those calls,
//    never during one, by the thread that owns the partition.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/counters.h"
#include "runtime/state/state_error.h"
#include "runtime/status.h"

namespace runlens::runtime {

constexpr int64_t kEndOfTime = INT64_MAX;
constexpr int64_t kBeginningOfTime = INT64_MIN;

// Specialize for the row type:
//   static int64_t time_ns(const R&);
//   static unsigned kind(const R&);      // < 32, matches ComponentInfo masks
//   static int priority(const R&);       // 0 (P0, most important) .. 3
//   static int compare(const R&, const R&);  // total order, time first
//   static int64_t weight(const R&);     // queue units a row takes (1 for a plain row;
//                                        // more for a row that holds many, so that
//                                        // queue bounds bound memory)
template <class R>
struct RowTraits;

// Rows and bytes that could not be used, with where and why. Thread-safe.
struct DeadLetter {
  std::string component;  // who rejected it
  std::string position;   // "file.jsonl:12", "file.rlrec@4096", "tcp://...#frame 7"
  std::string reason;
  std::string raw;  // the offending input, as text (may be truncated)
};
class DeadLetterSink {
 public:
  virtual ~DeadLetterSink() = default;
  virtual void write(const DeadLetter& d) = 0;
  virtual void flush() {}
};

// Rows the runtime shed from one inbox message (overflow: shed), those of one
// key of the consumer (OperatorDef::key; all of them when `broadcast`) and one
// priority. Domain-free: what the rows meant is the operator's to tell from
// `sample`.
template <class R>
struct ShedReport {
  R sample;                           // one dropped row (the earliest), so the operator can tell whose they were
  int priority = 0;                   // RowTraits::priority of every row counted
  int64_t rows = 0;                   // rows dropped
  int64_t first_ns = 0, last_ns = 0;  // event times of the earliest and the latest of them
  uint32_t kinds = 0;                 // mask of their RowTraits::kind
  bool broadcast = false;             // rows with no key (sent to every partition): `sample`'s key means nothing
};

template <class R>
class Emitter {
 public:
  Emitter(std::vector<R>* out, int64_t floor) : out_(out), floor_(floor) {}
  void emit(R row) {
    RUNLENS_CHECK(RowTraits<R>::time_ns(row) >= floor_,
                  "an operator emitted a row older than the watermark it had already passed");
    out_->push_back(std::move(row));
  }

 private:
  std::vector<R>* out_;
  int64_t floor_;
};

struct OperatorContext {
  std::string node_id;
  int partition = 0;
  int partitions = 1;
  DeadLetterSink* dead_letters = nullptr;
  NodeCounters* counters = nullptr;
};

template <class R>
class Operator {
 public:
  virtual ~Operator() = default;
  virtual void process(const R& row, Emitter<R>& out) = 0;
  virtual void on_watermark(int64_t watermark_ns, Emitter<R>& out) {}
  // Rows shed on the way to this partition (see the threading contract).
  virtual void on_shed(const ShedReport<R>& report, Emitter<R>& out) {}
  virtual void finish(Emitter<R>& out) {}
  // The partition's state as bytes (docs/state.md), and back: restore() into
  // a fresh instance opened from the same definition continues exactly where
  // snapshot() left off. Stateful operators implement them through
  // runtime/state/snapshot.h (Snapshottable); the default supports no snapshots.
  virtual std::string snapshot() const { throw state::StateError("this operator does not support snapshots"); }
  virtual void restore(std::string_view snapshot) {
    throw state::StateError("this operator does not support snapshots");
  }
};

template <class R>
class OperatorDef {
 public:
  virtual ~OperatorDef() = default;
  // Whether rows are spread over partitions by key(); false = one partition.
  virtual bool partitioned() const { return false; }
  // The row kinds this instance wants, narrowed from what its type declares
  // (a sink configured for alerts only need not be sent step records).
  virtual uint32_t accepts(uint32_t declared) const { return declared; }
  // Partition key of a row; nullopt sends the row to every partition.
  virtual std::optional<uint64_t> key(const R& row) const { return 0; }
  // Allocates one partition's state ("validate in the factory, allocate in open").
  virtual std::unique_ptr<Operator<R>> open(const OperatorContext& ctx) const = 0;
  // One line for `runlens graph` and error messages.
  virtual std::string describe() const { return {}; }
};

// A batch's progress, declared by the producer that sent it (docs/pipelines.md,
// "Event time"): who sent it (an id unique to the producer), its sequence
// number, and the producer's watermark: its promise that nothing it sends
// later is older. `final` marks its last batch. The runtime knows nothing else
// of producers: they are whatever a source's senders are.
struct Progress {
  std::string_view producer;  // not empty
  uint64_t seq = 0;
  int64_t watermark_ns = kBeginningOfTime;
  bool final = false;
};

// Handed to a running source. Not thread-safe: one source, one thread.
template <class R>
class SourceOutput {
 public:
  virtual ~SourceOutput() = default;
  // Rows in arrival order. Rows older than this source's watermark are late:
  // dead-lettered and counted, never silently lost. `where(i)` names the
  // position of row i for the dead letter. `progress` is the batch's
  // producer progress; without it (an old sender's batch) the rows advance
  // the watermark by the lateness rule.
  virtual void push(std::vector<R>& rows, const std::function<std::string(size_t)>& where = {},
                    const Progress* progress = nullptr) = 0;
  // Call when there is nothing to read (at least every 100 ms while idle;
  // a live source of producers every 10 ms, so that the watermark follows
  // the wall clock less join_grace): after the idle timeout the watermark
  // follows the wall clock.
  virtual void idle() = 0;
  // A watermark the source has not sent downstream yet (a live source sends
  // at most one every 250 us): call idle() once watermark_due() has passed.
  virtual bool watermark_pending() const { return false; }
  // How long a source may wait for input before it calls idle() so that the
  // pending watermark goes out on time: zero when it may go now, max() when
  // none is pending.
  virtual std::chrono::nanoseconds watermark_due() const { return std::chrono::nanoseconds::max(); }
  virtual bool stopping() const = 0;
  virtual DeadLetterSink& dead_letters() = 0;
  virtual NodeCounters& counters() = 0;
  virtual const std::string& node_id() const = 0;
};

template <class R>
class SourceDef {
 public:
  virtual ~SourceDef() = default;
  // Runs until end of input or until out.stopping(); throws only for fatal
  // set-up problems (e.g. cannot bind), reported as a ConfigError.
  virtual void run(SourceOutput<R>& out) = 0;
  // Wakes run() so that it notices stopping() soon. Thread-safe.
  virtual void interrupt() {}
  virtual std::string describe() const { return {}; }
  // Whether its input arrives as it happens (a socket) rather than as fast
  // as it is read (a file): only a live source's producers go idle after
  // idle_timeout of wall-clock silence, so a replay does not depend on how
  // fast it runs.
  virtual bool live() const { return false; }
};

}  // namespace runlens::runtime
