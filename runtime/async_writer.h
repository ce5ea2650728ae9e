// An asynchronous writer for sinks: the sink cuts batches on the thread the
// runtime calls it on, and a thread of the writer's own writes them, so that
// a pipeline never waits on a disk (or, later, a network) unless `capacity`
// batches are already waiting. Generic over the batch type; it knows nothing
// of what a batch holds or where it goes.
//
// Threading. push(), push_deferred(), drain(), check() and close() are the
// sink's: call them from one thread at a time (the runtime's contract for an
// operator, runtime/operator.h, gives exactly that). `write` and `merge` are
// the writer's and the sink's respectively; the two threads share nothing but
// the queue, its counters and the first error, all under one mutex (the
// counters are atomics, for readers elsewhere).
//
// Rules:
//  - Order: batches are written one at a time, in the order they were handed over.
//  - Bound: at most `capacity` batches wait; push() blocks while that many are
//    queued (backpressure: the sink, and so its inputs, slow down to the
//    writer's pace). Nothing is ever dropped while writes succeed.
//  - Help: where a `prepare` is given, the sink's thread does it while it
//    would otherwise only wait (push() on a full queue, drain(), close()):
//    to its own batch, then to each queued batch nobody has prepared, the
//    newest first (the writer takes the oldest). It is the part of a write
//    that a batch alone decides (encoding it), so that the writer's thread
//    has the rest to do. The writer never takes a batch while the sink
//    prepares it; `write` does whatever was not prepared. A prepare that
//    throws leaves the batch to `write` as it is.
//  - Deferral: push_deferred(b, deadline) hands over a batch that may wait
//    until `deadline`: the next batch handed over is merged into it (`merge`,
//    in order), and the writer writes it by itself once the deadline passes,
//    so that a quiet sink's last rows are not held back by its silence. When
//    `merge` declines, the deferred batch is queued first, unmerged.
//  - Errors: the first write that throws stops the writing: what is queued
//    then, and what comes later, is discarded, and the error is rethrown to
//    the sink by every later push(), push_deferred(), drain(), check() and
//    close(). It is never lost: close() after a failure always throws.
//  - Shutdown: close() writes everything handed over (the deferred batch
//    too), stops and joins the thread, then rethrows a write error. The
//    destructor does the same but swallows the error (a sink torn down by a
//    failing pipeline must not throw from its destructor).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "runtime/counters.h"
#include "runtime/status.h"

namespace runlens::runtime {

template <class Batch>
class AsyncWriter {
 public:
  using Clock = std::chrono::steady_clock;
  // Writes one batch; runs on the writer's thread. Throws to report a failure.
  using Write = std::function<void(Batch&)>;
  // Appends `next` to `into` (both the sink's, on the sink's thread); false
  // when the two must be written apart.
  using Merge = std::function<bool(Batch& into, Batch& next)>;
  // Does ahead, on the sink's thread, what of a write needs only the batch.
  using Prepare = std::function<void(Batch&)>;

  struct Options {
    size_t capacity = 2;  // batches that may wait for the writer
    Write write;
    Merge merge;                         // needed by push_deferred() only
    Prepare prepare;                     // optional: the sink helps while it would wait
    WriterCounters* counters = nullptr;  // the node's (NodeCounters::writer); null: the writer's own
  };

  explicit AsyncWriter(Options o) : o_(std::move(o)), counters_(o_.counters ? o_.counters : &own_counters_) {
    RUNLENS_CHECK(o_.capacity >= 1, "an asynchronous writer needs room for one batch");
    RUNLENS_CHECK(static_cast<bool>(o_.write), "an asynchronous writer needs a write function");
    thread_ = std::thread([this] { run(); });
  }
  ~AsyncWriter() {
    try {
      close();
    } catch (...) {  // reported by close() or finish() before, or the pipeline failed already
    }
  }
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // Hands `b` over to be written next; blocks while `capacity` batches wait.
  void push(Batch b) {
    check();
    if (std::optional<Batch> d = take_deferred()) {
      if (o_.merge(*d, b)) {
        enqueue(std::move(*d));
        return;
      }
      enqueue(std::move(*d));
    }
    enqueue(std::move(b));
  }

  // Hands `b` over to be written by `deadline`, merged with what comes next.
  void push_deferred(Batch b, Clock::time_point deadline) {
    RUNLENS_CHECK(static_cast<bool>(o_.merge), "push_deferred needs a merge function");
    check();
    Clock::time_point earlier = deadline;
    std::optional<Batch> d = take_deferred(&earlier);
    if (d && !o_.merge(*d, b)) {
      enqueue(std::move(*d));
      d.reset();
    }
    if (d) {
      deadline = std::min(deadline, earlier);  // the batch merged into waits no longer than it would have
    } else {
      d.emplace(std::move(b));
    }
    std::lock_guard l(mu_);
    deferred_ = std::move(d);
    deferred_deadline_ = deadline;
    cv_.notify_all();  // a new (or earlier) deadline for the writer
  }

  // Waits until everything handed over is written; rethrows a write error.
  void drain() {
    check();
    std::unique_lock l(mu_);
    queue_deferred_locked();
    help_locked(l, [] { return false; });
    cv_.wait(l, [&] { return (queue_.empty() && !writing_) || error_; });
    if (error_) std::rethrow_exception(error_);
  }

  // Rethrows a write error, if one happened. Cheap: one atomic load when none did.
  void check() {
    if (!failed_.load(std::memory_order_acquire)) return;
    std::lock_guard l(mu_);
    std::rethrow_exception(error_);
  }

  // Writes what is handed over, stops the writer's thread and joins it; rethrows a write error.
  void close() {
    {
      std::unique_lock l(mu_);
      if (!closed_) {
        queue_deferred_locked();
        help_locked(l, [] { return false; });
        cv_.wait(l, [&] { return (queue_.empty() && !writing_) || error_; });
        stop_ = true;
        closed_ = true;
        cv_.notify_all();
      }
    }
    if (thread_.joinable()) thread_.join();
    std::lock_guard l(mu_);
    if (error_) std::rethrow_exception(error_);
  }

  const WriterCounters& counters() const { return *counters_; }

 private:
  std::optional<Batch> take_deferred(Clock::time_point* deadline = nullptr) {
    std::lock_guard l(mu_);
    if (deadline && deferred_) *deadline = deferred_deadline_;
    std::optional<Batch> d = std::move(deferred_);
    deferred_.reset();
    return d;
  }

  void enqueue(Batch b) {
    std::unique_lock l(mu_);
    RUNLENS_CHECK(!closed_, "a batch handed to a closed writer");
    bool prepared = false;
    if (queue_.size() >= o_.capacity && !error_) {
      counters_->waits.fetch_add(1, std::memory_order_relaxed);
      if (o_.prepare) {
        l.unlock();
        prepare(b);
        l.lock();
        prepared = true;
      }
      help_locked(l, [&] { return queue_.size() < o_.capacity; });
      cv_.wait(l, [&] { return queue_.size() < o_.capacity || error_; });
    }
    if (error_) std::rethrow_exception(error_);
    push_locked(std::move(b), prepared);
  }

  void prepare(Batch& b) {
    try {
      o_.prepare(b);
    } catch (...) {  // the write does it, and reports what fails
    }
  }

  // The sink's help while it waits (`l` holds mu_): prepares the queued
  // batches nobody has, the newest first, until none is left or `enough`
  // holds. A batch being prepared stays where it is (the writer waits for
  // it), and a deque's other elements stay put as the writer pops the front.
  template <class Enough>
  void help_locked(std::unique_lock<std::mutex>& l, Enough enough) {
    if (!o_.prepare) return;
    while (!enough() && !error_) {
      auto it = std::find_if(queue_.rbegin(), queue_.rend(), [](const Entry& e) { return !e.prepared; });
      if (it == queue_.rend()) return;
      Entry& e = *it;
      e.prepared = e.preparing = true;
      l.unlock();
      prepare(e.batch);
      l.lock();
      e.preparing = false;
      cv_.notify_all();  // a writer waiting for this batch
    }
  }

  void push_locked(Batch b, bool prepared = false) {
    queue_.push_back(Entry{std::move(b), prepared, false});
    counters_->queued.fetch_add(1, std::memory_order_relaxed);
    uint64_t n = queue_.size(), cur = counters_->peak.load(std::memory_order_relaxed);
    while (n > cur && !counters_->peak.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
    }
    cv_.notify_all();
  }

  // The deferred batch joins the queue (beyond `capacity`: it was handed over already).
  void queue_deferred_locked() {
    if (!deferred_) return;
    Batch b = std::move(*deferred_);
    deferred_.reset();
    push_locked(std::move(b));
  }

  void run() {
    std::unique_lock l(mu_);
    for (;;) {
      if (deferred_ && Clock::now() >= deferred_deadline_) queue_deferred_locked();
      if (!queue_.empty()) {
        if (queue_.front().preparing) {  // the sink is on it: wait for it to finish
          cv_.wait(l);
          continue;
        }
        Batch b = std::move(queue_.front().batch);
        queue_.pop_front();
        if (error_) {  // after a failure nothing more is written
          cv_.notify_all();
          continue;
        }
        writing_ = true;
        l.unlock();
        std::exception_ptr e;
        try {
          o_.write(b);
        } catch (...) {
          e = std::current_exception();
        }
        l.lock();
        writing_ = false;
        if (e) {
          // The error is visible to check() before the counter says there is one.
          error_ = e;
          failed_.store(true, std::memory_order_release);
          counters_->errors.fetch_add(1, std::memory_order_release);
        } else {
          counters_->written.fetch_add(1, std::memory_order_relaxed);
        }
        cv_.notify_all();
        continue;
      }
      if (stop_) return;
      if (deferred_)
        cv_.wait_until(l, deferred_deadline_);
      else
        cv_.wait(l);
    }
  }

  Options o_;
  WriterCounters own_counters_;
  WriterCounters* counters_;
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  struct Entry {
    Batch batch;
    bool prepared = false;   // prepare() done or under way
    bool preparing = false;  // the sink is preparing it now: the writer must not take it
  };
  std::deque<Entry> queue_;
  std::optional<Batch> deferred_;
  Clock::time_point deferred_deadline_{};
  bool writing_ = false, stop_ = false, closed_ = false;
  std::exception_ptr error_;         // the first failed write's
  std::atomic<bool> failed_{false};  // error_ is set (for check()'s fast path)
  std::thread thread_;
};

}  // namespace runlens::runtime
