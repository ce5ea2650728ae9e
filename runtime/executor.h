// The executor: runs a graph of sources, operators and sinks on a oneTBB
// flow graph.
//
// Layout. Every operator is split into partitions (one when it is not
// partitioned); rows are routed to a partition by the operator's key, so each
// key's state has exactly one owner. Each partition has a bounded inbox (the
// edge queue) and a tbb::flow::function_node task that drains it; a partition
// is never drained by two threads at once (an atomic `running` flag), so the
// hot path takes no lock but the inbox's own short critical section, once per
// batch.
//
// Time. Sources stamp watermarks (the minimum of their producers' declared
// watermarks; for rows without one, max event time seen - allowed lateness;
// class Output below) that travel in-band behind the rows. A partition keeps
// the watermark of each of its producers and uses their minimum; rows wait in
// a reorder buffer until the watermark passes them and are then handed to the
// operator in canonical order. End of input is the watermark kEndOfTime, which fires every window.
// A watermark carries when the source received the batch it came from, so a
// sink's NodeCounters::latency measures how long after the arrival of the
// evidence that released them its rows were handled.
//
// Overflow. `block` (replay): a producer facing a full inbox first tries to
// drain that partition itself, then waits; nothing is ever dropped. Because
// the graph is acyclic this cannot deadlock. `shed` (live): backpressure
// first: a producer facing a full inbox drains and waits as `block` does, but
// for at most `backpressure_ns` (a source that waits stops reading, so its
// transport pushes back to the senders); then the lowest priority rows queued
// are dropped first; P0 is dropped only when nothing of lower priority is
// queued. What is dropped is reported to the consumer (ShedReport, in-band at
// the dropped message's place, so before the watermark that would have
// released it). Watermarks are never dropped.
#pragma once

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/counters.h"
#include "runtime/merge_runs.h"
#include "runtime/operator.h"
#include "runtime/pipeline_spec.h"
#include "runtime/state/state_error.h"
#include "runtime/status.h"

namespace runlens::runtime {

struct ExecutorOptions {
  int threads = 0;  // operator worker threads; 0 = hardware concurrency
  int64_t queue_capacity = 16384;
  OverflowPolicy overflow = OverflowPolicy::kBlock;
  // `shed` only: how long a producer facing a full inbox waits for room
  // (draining it meanwhile) before rows are shed; 0 sheds at once.
  int64_t backpressure_ns = 1'000'000'000;
  int64_t lateness_ns = 5'000'000'000;
  int64_t idle_timeout_ns = 30'000'000'000;
  // Live sources: a producer not yet heard from may still send events this
  // far behind the wall clock (its first batch in flight, clocks a little
  // apart), so while producers are joining (within 2 s of the last new one)
  // producers' watermarks take the source's no further than the wall clock
  // less this. 0: no cap.
  int64_t join_grace_ns = 500'000'000;
  DeadLetterSink* dead_letters = nullptr;  // required
};

template <class R>
class Executor {
 public:
  // Renders a row as text for dead letters (late rows).
  using RowText = std::function<std::string(const R&)>;

  explicit Executor(ExecutorOptions opts, RowText row_text = {}) : opts_(opts), row_text_(std::move(row_text)) {
    if (opts_.threads <= 0) opts_.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    RUNLENS_CHECK(opts_.dead_letters != nullptr, "an executor needs a dead-letter sink");
  }
  ~Executor() { join_sources(); }

  void add_source(const std::string& id, const std::string& type, uint32_t emits, std::unique_ptr<SourceDef<R>> def) {
    auto n = std::make_unique<Node>();
    n->id = id, n->type = type, n->emits = emits, n->source = std::move(def);
    nodes_.push_back(std::move(n));
  }

  // `inputs` must name nodes added before (add in topological order).
  void add_operator(const std::string& id, const std::string& type, uint32_t accepts, uint32_t emits,
                    const std::vector<std::string>& inputs, int parallelism, std::unique_ptr<OperatorDef<R>> def) {
    auto n = std::make_unique<Node>();
    n->id = id, n->type = type, n->emits = emits, n->def = std::move(def);
    n->accepts = n->def->accepts(accepts);
    int parts = n->def->partitioned() ? (parallelism > 0 ? parallelism : opts_.threads) : 1;
    for (const auto& in : inputs) {
      Node* up = find(in);
      RUNLENS_CHECK(up != nullptr, "input '" + in + "' of '" + id + "' was not added before it");
      up->consumers.push_back(n.get());
      n->upstream.push_back(up);
    }
    for (int p = 0; p < parts; ++p) {
      auto part = std::make_unique<Partition>();
      part->node = n.get();
      part->index = p;
      n->parts.push_back(std::move(part));
    }
    nodes_.push_back(std::move(n));
  }

  // Runs until every source has ended (or stop() was called) and every row
  // has been processed and flushed. Rethrows the first operator failure.
  void run() {
    prepare();
    // The thread count is this executor's own: its graph runs in its own
    // arena, and nothing process-wide (tbb::global_control) is set, so
    // executors with different counts run side by side in one process.
    arena_ = std::make_unique<tbb::task_arena>(arena_concurrency(opts_.threads), 1);
    arena_->execute([&] {
      graph_ = std::make_unique<tbb::flow::graph>();
      for (auto& n : nodes_) {
        if (n->source) continue;
        n->task = std::make_unique<tbb::flow::function_node<Partition*, tbb::flow::continue_msg>>(
            *graph_, tbb::flow::unlimited, [this](Partition* p) {
              drain(p);
              return tbb::flow::continue_msg();
            });
      }
    });
    // This thread works in the arena while the sources run, not only once
    // they have ended: the sources hold the graph open (reserve_wait), so
    // wait_for_all runs tasks until the last source's thread is joined.
    // Before, a pipeline of --threads 2 on a 2-core machine had one thread
    // for its operators while the sources ran (TBB's pool has one worker
    // there), and an alert waited behind whatever that thread was doing: a
    // timeline sink closing a run took 58 ms (measured with 1024 ranks).
    graph_->reserve_wait();
    for (auto& n : nodes_) {
      if (!n->source) continue;
      Node* node = n.get();
      source_threads_.emplace_back([this, node] { run_source(node); });
    }
    std::thread closer([this] {
      join_sources();
      graph_->release_wait();
    });
    graph_->wait_for_all();
    closer.join();
    if (failure_) std::rethrow_exception(failure_);
    for (auto& n : nodes_) {
      for (auto& p : n->parts) {
        RUNLENS_CHECK(p->finished || stop_requested(), "partition of '" + n->id + "' did not reach end of input");
      }
    }
  }

  // Asks sources to stop; the graph then drains and flushes. Thread- and signal-safe flag.
  void stop() {
    stopping_.store(true);
    for (auto& n : nodes_) {
      if (n->source) n->source->interrupt();
    }
  }
  bool stop_requested() const { return stopping_.load(); }

  std::vector<CounterSnapshot> counters() const {
    std::vector<CounterSnapshot> out;
    for (const auto& n : nodes_) out.push_back(snapshot(n->id, n->type, n->counters));
    return out;
  }
  int threads() const { return opts_.threads; }

  // The concurrency of the arena an executor of `threads` runs in: the
  // thread that waits on the graph (run() keeps it in the arena while the
  // sources run) and a worker slot for each of the others. TBB's workers
  // are one pool per process, sized by the machine (the default concurrency
  // less one); an arena that asks for more gets no more (and makes TBB
  // warn), so it asks for at most that many. `threads` still sets the
  // number of partitions.
  static int arena_concurrency(int threads) {
    return std::min(std::max(threads, 1) - 1, std::max(0, tbb::info::default_concurrency() - 1)) + 1;
  }

  // Snapshots of every partition of operator `id` (docs/state.md), in
  // partition order. Call it after run() has returned: at end of input, or
  // after stop() once the graph has drained. Throws StateError (naming the
  // operator and partition) when an operator does not support snapshots.
  std::vector<std::string> snapshot_state(const std::string& id) const {
    const Node* n = find(id);
    RUNLENS_CHECK(n != nullptr && !n->source, "snapshot of '" + id + "', which is not an operator of this graph");
    std::vector<std::string> out;
    for (const auto& p : n->parts) {
      RUNLENS_CHECK(p->op != nullptr, "snapshot of '" + id + "' before run()");
      out.push_back(with_where(id, p->index, [&] { return p->op->snapshot(); }));
    }
    return out;
  }
  // Restores operator `id` from `snapshots` (one per partition, as snapshot_state()
  // returned them) when run() opens its partitions, before the first row.
  // Call before run(). Keys are not moved between partitions: the partition
  // count must be the one the snapshots were taken with.
  void restore_state(const std::string& id, std::vector<std::string> snapshots) {
    Node* n = find(id);
    RUNLENS_CHECK(n != nullptr && !n->source, "restore of '" + id + "', which is not an operator of this graph");
    if (snapshots.size() != n->parts.size())
      throw state::StateError("operator '" + id + "' has " + std::to_string(n->parts.size()) +
                              " partitions; the snapshots are of " + std::to_string(snapshots.size()));
    n->restore_from = std::move(snapshots);
  }

 private:
  struct Node;
  struct Partition;

  // A row of a reorder buffer and its event time (read once, for sorting).
  struct Ref {
    int64_t time;
    const R* row;
  };

  // Canonical order of references: event time decides almost every
  // comparison; the full canonical compare only breaks ties.
  static bool canonical_less(const Ref& a, const Ref& b) {
    if (a.time != b.time) return a.time < b.time;
    return RowTraits<R>::compare(*a.row, *b.row) < 0;
  }
  // Sorts rows into canonical order. A reorder buffer is mostly a few
  // ordered runs (sources order their batches, below; operators emit in the
  // order they process; several inputs interleave batch by batch), which
  // merge_runs merges rather than sorts.
  // The comparison goes to merge_runs as a type of its own, not as a
  // function pointer, so that it is inlined into the merge. (A file's batch
  // is in time order, but its rows of one time are not in canonical order:
  // 72-136 runs to merge in issue 13's files.) Ordering a replay's batches
  // took 6 % fewer instructions so.
  struct CanonicalLess {
    bool operator()(const Ref& a, const Ref& b) const { return canonical_less(a, b); }
  };
  static void canonical_order(std::vector<Ref>& order, std::vector<Ref>& scratch, std::vector<size_t>& runs) {
    merge_runs(order, scratch, runs, CanonicalLess{});
  }
  // As above, for `order` made of `segments`, those marked sorted in canonical order already.
  static void canonical_order(std::vector<Ref>& order, std::vector<Ref>& scratch, std::vector<size_t>& runs,
                              const std::vector<Segment>& segments) {
    merge_runs(order, scratch, runs, CanonicalLess{}, segments);
  }

  // Rows travel by reference (docs/architecture.md, "How rows move, and
  // why"): a batch of rows is made once (a source's batch, an operator's
  // output) and shared, immutable, by every consumer that reads it; a
  // message carries the batch and the (time, row) references its consumer
  // takes, in order. A row is large (a GPU sample is 208 bytes): copying it
  // into a batch per consumer was a tenth of a replay's CPU.
  using Batch = std::vector<R>;
  using BatchRef = std::shared_ptr<const Batch>;

  // Rows of the reorder buffer in event-time order; rows before `head` are
  // released. `batches` keeps what `rows` point into alive.
  struct PendingRun {
    std::vector<Ref> rows;
    bool canonical = false;  // in canonical order, not only by time: advance() need not look for runs in it
    std::vector<std::pair<size_t, BatchRef>> batches;  // each from its first row in `rows` to the next's
    size_t head = 0;
    size_t released = 0;  // how far the watermark being handled releases
  };

  struct Msg {
    bool is_watermark = false;
    int producer = -1;   // global producer id
    int priority = 0;    // for shedding: the least important row's priority
    int64_t weight = 0;  // queue units: the sum of RowTraits::weight
    int64_t watermark = kBeginningOfTime;
    // Watermarks: when the source received the batch this watermark came
    // from (steady clock, ns); 0 when it came from no batch (idle, end of input).
    int64_t arrival_ns = 0;
    BatchRef batch;          // what `rows` point into
    std::vector<Ref> rows;   // in the order sent
    bool canonical = false;  // `rows` are in canonical order (a source's batch), not only by time
    // Rows shed from this message (or in its place), for the consumer's
    // on_shed, with each report's key of the consumer (grouping).
    std::vector<ShedReport<R>> shed;
    std::vector<std::optional<uint64_t>> shed_keys;
  };

  // A partition's inbox: the bounded edge queue.
  struct Inbox {
    std::mutex mu;
    std::condition_variable space;
    std::deque<Msg> q;
    int64_t rows = 0;
    int64_t rows_by_priority[kPriorities] = {};
  };

  struct Partition {
    Node* node = nullptr;
    int index = 0;
    Inbox inbox;
    std::atomic<bool> running{false};
    std::unique_ptr<Operator<R>> op;
    std::vector<int> slot_of;          // global producer id -> slot, -1 if not a producer
    std::vector<int64_t> producer_wm;  // by slot
    // What a source's producer reads (deliver(), block): mirrors of
    // producer_wm, input_wm and pending_rows, written by the partition's
    // thread.
    std::unique_ptr<std::atomic<int64_t>[]> seen_wm;
    std::atomic<int64_t> released_wm{kBeginningOfTime};
    std::atomic<size_t> held{0};
    int64_t input_wm = kBeginningOfTime;
    int64_t forwarded_wm = kBeginningOfTime;
    int64_t arrival_ns = 0;  // of the watermark message being handled
    // The messages drain() is handling, taken from the inbox whole: empty
    // between drains, it keeps the deque's map and first block, which the
    // inbox takes in exchange, so that taking a queue allocates nothing (a
    // deque made for each take had been two allocations and two frees a drain).
    std::deque<Msg> drained;
    bool finished = false;
    // The reorder buffer: rows not yet released by the watermark, as the
    // messages brought them, each message's rows sorted by event time (a
    // run). A watermark releases a prefix of each run; rows the watermark
    // keeps back are never moved.
    std::vector<PendingRun> pending;
    size_t pending_rows = 0;  // rows of `pending` not released yet
    std::vector<R> emitted;
    std::vector<Ref> order;  // the released rows of `pending`, in canonical order
    std::vector<Ref> scratch;
    std::vector<size_t> runs;
    std::vector<Segment> segments;    // where each run's released rows begin in `order`
    std::vector<int> last_watermark;  // collapse_watermarks' scratch
  };

  struct Node {
    std::string id, type;
    uint32_t accepts = 0, emits = 0;
    std::unique_ptr<OperatorDef<R>> def;
    std::unique_ptr<SourceDef<R>> source;
    std::vector<std::unique_ptr<Partition>> parts;
    std::vector<Node*> consumers, upstream;
    int producer_base = 0;  // global producer id of partition 0 (or of the source)
    NodeCounters counters;
    std::vector<std::string> restore_from;  // one snapshot per partition, or empty
    std::unique_ptr<tbb::flow::function_node<Partition*, tbb::flow::continue_msg>> task;
  };

  Node* find(const std::string& id) const {
    for (auto& n : nodes_) {
      if (n->id == id) return n.get();
    }
    return nullptr;
  }

  template <class F>
  static auto with_where(const std::string& id, int partition, F&& f) {
    try {
      return f();
    } catch (const state::StateError& e) {
      throw state::StateError("operator '" + id + "' partition " + std::to_string(partition) + ": " + e.what());
    }
  }

  void prepare() {
    int next = 0;
    for (auto& n : nodes_) {
      n->producer_base = next;
      next += n->source ? 1 : static_cast<int>(n->parts.size());
    }
    producers_ = next;
    live_pipeline_ =
        std::any_of(nodes_.begin(), nodes_.end(), [](const auto& n) { return n->source && n->source->live(); });
    producer_is_source_.assign(static_cast<size_t>(producers_), false);
    for (auto& n : nodes_) {
      if (n->source) producer_is_source_[static_cast<size_t>(n->producer_base)] = true;
    }
    for (auto& n : nodes_) {
      if (n->source) continue;
      n->counters.queue_capacity.store(static_cast<uint64_t>(opts_.queue_capacity));
      for (auto& p : n->parts) {
        p->slot_of.assign(producers_, -1);
        int slots = 0;
        for (Node* up : n->upstream) {
          int count = up->source ? 1 : static_cast<int>(up->parts.size());
          for (int i = 0; i < count; ++i) p->slot_of[up->producer_base + i] = slots++;
        }
        p->producer_wm.assign(slots, kBeginningOfTime);
        p->seen_wm = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(slots));
        for (int i = 0; i < slots; ++i) p->seen_wm[i].store(kBeginningOfTime, std::memory_order_relaxed);
        OperatorContext ctx{n->id, p->index, static_cast<int>(n->parts.size()), opts_.dead_letters, &n->counters};
        p->op = n->def->open(ctx);
        if (!n->restore_from.empty()) {
          with_where(n->id, p->index, [&] { p->op->restore(n->restore_from[static_cast<size_t>(p->index)]); });
        }
      }
    }
  }

  // --- sources -----------------------------------------------------------------
  // A source's watermark (docs/pipelines.md, "Event time"). Batches that
  // declare their producer's progress move the producer's own watermark; the
  // source's is the minimum over its active producers, and, while rows
  // without progress (old senders) keep arriving, the lateness rule's value
  // (largest such event time seen - lateness). A live source's producer
  // silent for idle_timeout is no longer active (it rejoins when it speaks:
  // its rows older than the watermark by then are late); a final batch
  // retires it. With no active producer the watermark is what the departed
  // ones promised, and once the source is silent for idle_timeout, the wall
  // clock less idle_timeout. A source that is not live (a replay) has no
  // wall clock to be silent on: its producers go idle only by a final batch.
  // Monotone always.
  class Output final : public SourceOutput<R> {
   public:
    Output(Executor* ex, Node* node) : ex_(ex), node_(node), live_(node->source->live()) {}

    void push(std::vector<R>& rows, const std::function<std::string(size_t)>& where,
              const Progress* progress) override {
      auto now = std::chrono::steady_clock::now();
      last_data_ = now;
      idle_ = false;
      if (live_ && now - last_sweep_ >= kSweepEvery) sweep(now);
      Producer* from = progress && !progress->producer.empty() ? &producer(progress->producer) : nullptr;
      if (!from) {
        legacy_heard_ = now;
        legacy_active_ = true;
      }
      // The active producers' minimum does not change within a batch.
      const int64_t producers_min = active_.empty() ? kEndOfTime : active_.begin()->first;
      size_t kept = 0;
      int64_t late = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        int64_t t = RowTraits<R>::time_ns(rows[i]);
        if (t < watermark_) {
          ++late;
          dead_letter_late(rows[i], t, where ? where(i) : std::string(), from);
          continue;
        }
        if (!from) {
          // Per row, so that lateness does not depend on how input is batched.
          legacy_seen_ = std::max(legacy_seen_, t);
          watermark_ = std::max(watermark_, std::min(producers_min, legacy_value()));
        }
        if (kept != i) rows[kept] = std::move(rows[i]);
        ++kept;
      }
      rows.resize(kept);
      if (from) {
        heard(*from, *progress, now);
        // A retired producer is forgotten (a long-lived source meets many).
        if (progress->final) producers_.erase(producers_.find(progress->producer));
      }
      watermark_ = std::max(watermark_, candidate());
      const std::vector<uint32_t>* permutation = order(rows);
      if (late) {
        node_->counters.add(node_->counters.late, late);
        node_->counters.add(node_->counters.dead_lettered, late);
      }
      node_->counters.add(node_->counters.in, rows.size() + late);
      node_->counters.add(node_->counters.out, rows.size());
      ex_->route(node_, node_->producer_base, rows, permutation, /*canonical=*/true);
      publish_watermark(now, steady_ns(), /*force=*/false);
    }

    void idle() override {
      auto now = std::chrono::steady_clock::now();
      live_ = true;  // only a live source waits for input
      sweep(now);
      watermark_ = std::max(watermark_, candidate());
      if (!idle_) {
        auto silent = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_data_).count();
        if (silent >= ex_->opts_.idle_timeout_ns) idle_ = true;
      }
      // Idle with no producer holding it: the watermark follows the wall
      // clock, less the idle timeout, so that a silent source (or a hung job)
      // no longer holds every window open.
      if (idle_ && active_.empty() && !legacy_active_) {
        watermark_ = std::max(watermark_, sat_sub(wall_ns(), ex_->opts_.idle_timeout_ns));
      }
      publish_watermark(now, 0, /*force=*/true);
    }

    bool watermark_pending() const override { return watermark_ > sent_wm_; }
    std::chrono::nanoseconds watermark_due() const override {
      if (!watermark_pending()) return std::chrono::nanoseconds::max();
      if (!live_) return std::chrono::nanoseconds::zero();
      auto left = kCoalesce - (std::chrono::steady_clock::now() - sent_at_);
      return std::max(std::chrono::duration_cast<std::chrono::nanoseconds>(left), std::chrono::nanoseconds::zero());
    }

    bool stopping() const override { return ex_->stopping_.load(std::memory_order_relaxed) || ex_->failed_.load(); }
    DeadLetterSink& dead_letters() override { return *ex_->opts_.dead_letters; }
    NodeCounters& counters() override { return node_->counters; }
    const std::string& node_id() const override { return node_->id; }

   private:
    static constexpr auto kSweepEvery = std::chrono::milliseconds(100);
    static constexpr auto kJoinWindow = std::chrono::seconds(2);
    // A live source with many producers (1024 ranks' heartbeats) moves its
    // watermark thousands of times a second, and each move is a message to
    // every partition downstream: it sends one at most every kCoalesce, and
    // a deferred one when the source calls idle() at watermark_due(): the
    // source waits for input no longer than that.
    static constexpr auto kCoalesce = std::chrono::microseconds(250);

    // Sends the watermark downstream when it moved. `arrival` is when the
    // batch that moved it was received (0: none); a deferred watermark keeps
    // the arrival of the first batch it waited for, so sinks' latency
    // includes the wait.
    void publish_watermark(std::chrono::steady_clock::time_point now, int64_t arrival, bool force) {
      if (watermark_ <= sent_wm_) return;
      if (pending_arrival_ == 0) pending_arrival_ = arrival;
      if (live_ && !force && now - sent_at_ < kCoalesce) return;
      ex_->send_watermark(node_, node_->producer_base, watermark_, pending_arrival_);
      sent_wm_ = watermark_;
      sent_at_ = now;
      pending_arrival_ = 0;
    }

    struct Producer {
      int64_t watermark = kBeginningOfTime;
      std::chrono::steady_clock::time_point heard{};
      bool active = false;
    };

    static int64_t sat_sub(int64_t a, int64_t b) { return a < kBeginningOfTime + b ? kBeginningOfTime : a - b; }
    static int64_t wall_ns() {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    }

    Producer& producer(std::string_view id) {
      auto it = producers_.find(id);
      if (it == producers_.end()) {
        it = producers_.emplace(std::string(id), Producer{}).first;
        last_join_ = std::chrono::steady_clock::now();
      }
      return it->second;
    }

    int64_t legacy_value() const { return sat_sub(legacy_seen_, ex_->opts_.lateness_ns); }

    // What the watermark may be now, before the monotone max.
    int64_t candidate() const {
      if (active_.empty() && !legacy_active_) return join_cap(floor_);
      int64_t c = active_.empty() ? kEndOfTime : active_.begin()->first;
      if (legacy_active_) c = std::min(c, legacy_value());
      return join_cap(c);
    }

    // Live, a producer's watermark only speaks for the producers heard so
    // far: one that starts now (a rank whose emitter was created a moment
    // later, or whose first batch is still in flight while its connection is
    // set up) sends events stamped with its own clock. The ranks of a job
    // start together, so while producers are joining (one was first heard
    // within the last kJoinWindow) the promises of the others are honoured
    // only up to the wall clock less join_grace. Without the cap, a rank's
    // run_start was measured arriving 13-16 ms behind the watermark at the
    // start of a job, and was late; in steady state the cap costs nothing.
    int64_t join_cap(int64_t c) const {
      if (!live_ || ex_->opts_.join_grace_ns <= 0 || producers_.empty()) return c;
      if (std::chrono::steady_clock::now() - last_join_ >= kJoinWindow) return c;
      return std::min(c, sat_sub(wall_ns(), ex_->opts_.join_grace_ns));
    }

    void heard(Producer& p, const Progress& progress, std::chrono::steady_clock::time_point now) {
      p.heard = now;
      if (p.active) active_.erase({p.watermark, &p});
      // A promise is never taken back, and the end of time is not a
      // producer's to declare (it would end the input of every consumer).
      p.watermark = std::max(p.watermark, std::min(progress.watermark_ns, kEndOfTime - 1));
      bool was_active = p.active;
      if (progress.final) {
        p.active = false;
        floor_ = std::max(floor_, p.watermark);
      } else {
        p.active = true;
        active_.insert({p.watermark, &p});
      }
      if (p.active != was_active) {
        node_->counters.producers.fetch_add(p.active ? 1 : static_cast<uint64_t>(-1), std::memory_order_relaxed);
      }
    }

    // Producers (and old senders) silent for idle_timeout stop holding the watermark back.
    void sweep(std::chrono::steady_clock::time_point now) {
      last_sweep_ = now;
      auto timeout = std::chrono::nanoseconds(ex_->opts_.idle_timeout_ns);
      for (auto& [id, p] : producers_) {
        if (!p.active || now - p.heard < timeout) continue;
        active_.erase({p.watermark, &p});
        p.active = false;
        floor_ = std::max(floor_, p.watermark);
        node_->counters.producers.fetch_sub(1, std::memory_order_relaxed);
        node_->counters.add(node_->counters.producers_idle, 1);
      }
      if (legacy_active_ && now - legacy_heard_ >= timeout) {
        legacy_active_ = false;
        floor_ = std::max(floor_, legacy_value());
      }
    }

    void dead_letter_late(const R& row, int64_t t, std::string position, const Producer* from) {
      DeadLetter d;
      d.component = node_->id;
      d.position = std::move(position);
      d.reason = "late: event time " + std::to_string(t) + " is " + std::to_string((watermark_ - t) / 1000000) +
                 " ms behind the watermark (" +
                 (from ? std::string("the producers' progress")
                       : "allowed lateness " + std::to_string(ex_->opts_.lateness_ns / 1000000) + " ms") +
                 ")";
      if (ex_->row_text_) d.raw = ex_->row_text_(row);
      ex_->opts_.dead_letters->write(d);
    }

    // Puts a batch into canonical order, once here rather than in every
    // consumer: a consumer's reorder buffer then holds ordered runs, which it
    // checks rather than sorts. The rows stay where they are: what comes back
    // is the order to send them in (null: as they are), which route() follows
    // when it hands out references. (Late rows were dead-lettered with their
    // position before this: `where` indexes the batch as pushed.)
    const std::vector<uint32_t>* order(const std::vector<R>& rows) {
      refs_.clear();
      for (const auto& r : rows) refs_.push_back({RowTraits<R>::time_ns(r), &r});
      canonical_order(refs_, scratch_, runs_);
      bool moved = false;
      for (size_t i = 0; i < refs_.size() && !moved; ++i) moved = refs_[i].row != &rows[i];
      if (!moved) return nullptr;
      permutation_.clear();
      for (const Ref& ref : refs_) permutation_.push_back(static_cast<uint32_t>(ref.row - rows.data()));
      return &permutation_;
    }

    std::vector<Ref> refs_, scratch_;
    std::vector<size_t> runs_;
    std::vector<uint32_t> permutation_;
    Executor* ex_;
    Node* node_;
    bool live_;
    int64_t watermark_ = kBeginningOfTime;
    // Producers by id, and the active ones ordered by watermark (the first is the minimum).
    std::map<std::string, Producer, std::less<>> producers_;
    std::set<std::pair<int64_t, Producer*>> active_;
    int64_t floor_ = kBeginningOfTime;  // the most any departed producer (or old sender) promised
    // Rows without progress: the lateness rule.
    int64_t legacy_seen_ = kBeginningOfTime;
    bool legacy_active_ = false;
    std::chrono::steady_clock::time_point legacy_heard_{};
    bool idle_ = false;
    std::chrono::steady_clock::time_point last_data_ = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point last_sweep_ = last_data_;
    std::chrono::steady_clock::time_point last_join_{};  // a producer was first heard
    int64_t sent_wm_ = kBeginningOfTime;                 // the last watermark sent downstream
    std::chrono::steady_clock::time_point sent_at_{};
    int64_t pending_arrival_ = 0;
  };

  void run_source(Node* node) {
    Output out(this, node);
    try {
      node->source->run(out);
    } catch (...) {
      fail(std::current_exception());
    }
    // End of this source's input: its final watermark fires every window.
    send_watermark(node, node->producer_base, kEndOfTime);
  }

  void join_sources() {
    for (auto& t : source_threads_) {
      if (t.joinable()) t.join();
    }
    source_threads_.clear();
  }

  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(fail_mu_);
      if (!failure_) failure_ = e;
      failed_.store(true);
      stopping_.store(true);
    }
    for (auto& n : nodes_) {
      if (n->source) n->source->interrupt();  // a source blocked in a read must notice
    }
  }

  // --- routing -----------------------------------------------------------------
  // Sends `rows` from producer `producer` of `from` to every consumer, each
  // row to the partition that owns its key. Consumes `rows`.
  //
  // The rows become one shared batch, and each partition is sent references
  // to the rows it takes (a partition that takes few of a large batch gets
  // copies instead, so that it does not hold the whole batch while it holds
  // them). What every consumer needs of a row (time, kind, priority, weight)
  // is read once, into a compact array: a source has a consumer per detector
  // (twenty in the default pipeline), and most take a rare kind or two.
  // `canonical`: the rows, in `order` when given, are in canonical order (a
  // source's batch is put in it; an operator's output is ordered by time).
  void route(Node* from, int producer, std::vector<R>& rows, const std::vector<uint32_t>* order = nullptr,
             bool canonical = false) {
    if (rows.empty()) return;
    const bool shed = opts_.overflow == OverflowPolicy::kShed;
    const size_t n = rows.size();
    struct Meta {
      int64_t time;
      int64_t weight;
      const R* row;
      uint8_t kind;
      uint8_t priority;
    };
    // Local, not cached: delivering may drain a consumer inline, which routes
    // again. meta[i] is the i-th row to send (of `order`, when given).
    std::vector<Meta> meta(n);
    uint32_t kinds = 0;
    size_t of_kind[33] = {};  // rows per kind, then (prefix sums) where each kind's rows start in by_kind
    for (size_t i = 0; i < n; ++i) {
      const R& r = rows[order ? (*order)[i] : i];
      const unsigned kind = RowTraits<R>::kind(r);
      // A row's priority matters only to shedding (a replay blocks instead).
      meta[i] = {RowTraits<R>::time_ns(r), RowTraits<R>::weight(r), nullptr, static_cast<uint8_t>(kind),
                 static_cast<uint8_t>(shed ? RowTraits<R>::priority(r) : 0)};
      kinds |= 1u << kind;
      ++of_kind[kind + 1];
    }
    for (int k = 0; k < 32; ++k) of_kind[k + 1] += of_kind[k];
    std::vector<uint32_t> by_kind(n);
    {
      size_t next[32];
      std::copy(of_kind, of_kind + 32, next);
      for (size_t i = 0; i < n; ++i) by_kind[next[meta[i].kind]++] = static_cast<uint32_t>(i);
    }
    // A source's batch lends its storage back once every consumer lets go of
    // it, and the source reads its next batch into storage let go before.
    const bool from_source = producer_is_source_[static_cast<size_t>(producer)];
    auto batch = from_source ? spare_batches_->share(std::move(rows)) : std::make_shared<Batch>(std::move(rows));
    rows = from_source ? spare_batches_->take() : Batch();
    for (size_t i = 0; i < n; ++i) meta[i].row = &(*batch)[order ? (*order)[i] : i];
    // Each row's slot (partition x lane) of the consumer at hand, found in a
    // first pass so that every slot's references are allocated once, at their size.
    constexpr uint32_t kEveryPartition = UINT32_MAX;
    std::vector<uint32_t> slot_of_row(n);
    std::vector<uint32_t> sel;  // the rows the consumer at hand accepts, in order
    for (Node* to : from->consumers) {
      const uint32_t accepted = to->accepts & kinds;
      if (!accepted) continue;
      const size_t parts = to->parts.size();
      const size_t lanes = shed ? kPriorities : 1;
      const size_t slots = parts * lanes;
      sel.clear();
      size_t taken = 0;
      for (int k = 0; k < 32; ++k) {
        if (accepted & (1u << k)) taken += of_kind[k + 1] - of_kind[k];
      }
      // The rows it takes, in order. One kind's are a range of by_kind; a few
      // rows of several kinds, their ranges sorted; more rows of several
      // kinds (a sixteenth of the batch or over), a pass over every row,
      // cheaper than sorting them (a consumer of a quarter of a batch sorted
      // 4,000 indexes a batch).
      const bool one_kind = std::has_single_bit(accepted);
      if (one_kind || taken * 16 < n) {
        for (int k = 0; k < 32; ++k) {
          if (accepted & (1u << k))
            sel.insert(sel.end(), by_kind.begin() + of_kind[k], by_kind.begin() + of_kind[k + 1]);
        }
        if (!one_kind) std::sort(sel.begin(), sel.end());
      } else {
        for (size_t i = 0; i < n; ++i) {
          if (accepted & (1u << meta[i].kind)) sel.push_back(static_cast<uint32_t>(i));
        }
      }
      std::vector<size_t> count(slots, 0);
      std::vector<size_t> everywhere(lanes, 0);  // rows without a key (every partition takes them), by lane
      for (uint32_t i : sel) {
        const size_t lane = shed ? meta[i].priority : 0;
        if (parts == 1) {
          slot_of_row[i] = static_cast<uint32_t>(lane);
          ++count[lane];
          continue;
        }
        std::optional<uint64_t> key = to->def->key(*meta[i].row);
        if (!key) {
          slot_of_row[i] = kEveryPartition;
          ++everywhere[lane];
          continue;
        }
        uint32_t s = static_cast<uint32_t>((*key % parts) * lanes + lane);
        slot_of_row[i] = s;
        ++count[s];
      }
      std::vector<Msg> out(slots);
      for (size_t s = 0; s < slots; ++s) {
        size_t c = count[s] + everywhere[s % lanes];
        if (!c) continue;
        out[s].rows.reserve(c);
        out[s].batch = batch;
      }
      auto add = [&](Msg& m, uint32_t i) {
        m.rows.push_back({meta[i].time, meta[i].row});
        m.weight += meta[i].weight;
        m.priority = std::max(m.priority, static_cast<int>(meta[i].priority));
      };
      for (uint32_t i : sel) {
        uint32_t s = slot_of_row[i];
        if (s == kEveryPartition) {
          size_t lane = shed ? meta[i].priority : 0;
          for (size_t p = 0; p < parts; ++p) add(out[p * lanes + lane], i);
          continue;
        }
        add(out[s], i);
      }
      for (size_t p = 0; p < parts; ++p) {
        for (size_t lane = 0; lane < lanes; ++lane) {
          Msg& m = out[p * lanes + lane];
          if (m.rows.empty()) continue;
          m.producer = producer;
          m.canonical = canonical;
          if (shed) m.priority = static_cast<int>(lane);
          // A few rows of a large batch: copies, so that the batch is not held for them.
          if (m.rows.size() * 8 < n) own_rows(m);
          if (shed && m.weight > opts_.queue_capacity && m.rows.size() > 1) {
            deliver_in_parts(to->parts[p].get(), std::move(m));
            continue;
          }
          deliver(to->parts[p].get(), std::move(m));
        }
      }
    }
  }

  // Makes `m` hold copies of its rows in a batch of its own.
  static void own_rows(Msg& m) {
    auto own = std::make_shared<Batch>();
    own->reserve(m.rows.size());
    for (const Ref& r : m.rows) own->push_back(*r.row);
    for (size_t i = 0; i < m.rows.size(); ++i) m.rows[i].row = &(*own)[i];
    m.batch = std::move(own);
  }

  // `shed`: rows weighing more than a whole queue go as several messages of
  // at most a queue each (a row heavier than that alone), in order, so that
  // each can wait for room: one such message would be shed at once (it can
  // never fit). A live operator that falls behind and then releases many
  // steps in one watermark (a joined step weighs its ranks) sends that much.
  void deliver_in_parts(Partition* to, Msg whole) {
    size_t begin = 0;
    const std::vector<Ref>& rows = whole.rows;
    while (begin < rows.size()) {
      Msg m;
      m.producer = whole.producer;
      m.priority = whole.priority;
      m.batch = whole.batch;
      m.canonical = whole.canonical;
      size_t end = begin;
      while (end < rows.size()) {
        const int64_t w = RowTraits<R>::weight(*rows[end].row);
        if (end > begin && m.weight + w > opts_.queue_capacity) break;
        m.weight += w;
        ++end;
      }
      m.rows.assign(rows.begin() + static_cast<std::ptrdiff_t>(begin), rows.begin() + static_cast<std::ptrdiff_t>(end));
      deliver(to, std::move(m));
      begin = end;
    }
  }

  static int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void send_watermark(Node* from, int producer, int64_t wm, int64_t arrival_ns = 0) {
    for (Node* to : from->consumers) {
      for (auto& p : to->parts) {
        Msg m;
        m.is_watermark = true;
        m.producer = producer;
        m.watermark = wm;
        m.arrival_ns = arrival_ns;
        deliver(p.get(), std::move(m));
      }
    }
  }

  // Puts a message into a partition's inbox, applying the overflow policy.
  void deliver(Partition* p, Msg m) {
    Node* node = p->node;
    int64_t n = m.weight;
    int64_t cap = opts_.queue_capacity;
    if (!m.is_watermark && opts_.overflow == OverflowPolicy::kBlock) {
      for (int spins = 0;; ++spins) {
        {
          std::unique_lock lock(p->inbox.mu);
          // An oversized batch is let into an empty queue, or it could never pass.
          if (((p->inbox.rows + n <= cap || p->inbox.rows == 0) && !source_ahead(p, m.producer)) || failed_.load()) {
            enqueue_locked(p, std::move(m));
            break;
          }
        }
        // Full: help the consumer along if nobody is draining it...
        drain(p);
        // ...or wait for it to make room.
        std::unique_lock lock(p->inbox.mu);
        if (((p->inbox.rows + n > cap && p->inbox.rows != 0) || source_ahead(p, m.producer)) && !failed_.load()) {
          p->inbox.space.wait_for(lock, std::chrono::microseconds(200));
        }
      }
    } else if (!m.is_watermark) {
      // Backpressure first: wait for room (helping the consumer along) for
      // at most backpressure_ns, then shed.
      // (Clamped to a day, so that the deadline cannot overflow the clock.)
      auto until = std::chrono::steady_clock::now() +
                   std::chrono::nanoseconds(std::clamp<int64_t>(opts_.backpressure_ns, 0, 86'400'000'000'000));
      for (;;) {
        {
          std::unique_lock lock(p->inbox.mu);
          if (p->inbox.rows + n <= cap || failed_.load()) {
            enqueue_locked(p, std::move(m));
            break;
          }
          // A batch larger than the whole queue cannot wait for room.
          if (p->inbox.rows == 0 || std::chrono::steady_clock::now() >= until) {
            shed_locked(p, m);
            if (!m.rows.empty()) {
              enqueue_locked(p, std::move(m));
            } else if (!m.shed.empty()) {
              // Only reports are left: they join the last message's, so
              // that a consumer that does not drain is not sent one per
              // message dropped (earlier in the queue is still before the
              // watermark that would release the rows).
              Inbox& in = p->inbox;
              if (!in.q.empty() && !in.q.back().is_watermark) {
                merge_reports(in.q.back(), m);
              } else {
                enqueue_locked(p, std::move(m));
              }
            }
            break;
          }
        }
        drain(p);
        std::unique_lock lock(p->inbox.mu);
        if (p->inbox.rows + n > cap && p->inbox.rows != 0 && !failed_.load()) {
          p->inbox.space.wait_until(lock,
                                    std::min(until, std::chrono::steady_clock::now() + std::chrono::microseconds(200)));
        }
      }
    } else {
      std::unique_lock lock(p->inbox.mu);
      enqueue_locked(p, std::move(m));
    }
    node->task->try_put(p);
  }

  // Block only: a source waits while the consumer's reorder buffer holds more
  // than a queue's worth of rows and the source's watermark there is ahead of
  // the consumer's (another input lags: a chain of operators behind the
  // source). Without it the buffer of a node with several inputs (the store
  // sink, asof_join) is bounded only by every queue on the slowest path, and
  // fills up to that over a long run. Only a source, on its own thread,
  // waits: a lagging input needs nothing the source has not delivered (its
  // watermark went to every consumer before these rows), while an operator
  // waiting here could hold the only thread the lagging input needs.
  bool source_ahead(Partition* p, int producer) const {
    if (!producer_is_source_[static_cast<size_t>(producer)]) return false;
    if (p->held.load(std::memory_order_relaxed) <= static_cast<size_t>(opts_.queue_capacity)) return false;
    int slot = p->slot_of[static_cast<size_t>(producer)];
    return p->seen_wm[slot].load(std::memory_order_relaxed) > p->released_wm.load(std::memory_order_relaxed);
  }

  void enqueue_locked(Partition* p, Msg&& m) {
    int64_t n = m.weight;
    p->inbox.rows += n;
    p->inbox.rows_by_priority[m.priority] += n;
    p->node->counters.add(p->node->counters.queue_rows, static_cast<uint64_t>(n));
    p->node->counters.raise_peak(static_cast<uint64_t>(p->inbox.rows));
    p->inbox.q.push_back(std::move(m));
  }

  // Makes room for `m` by dropping the least important rows first. Drops from
  // `m` itself when everything queued is at least as important.
  void shed_locked(Partition* p, Msg& m) {
    Inbox& in = p->inbox;
    NodeCounters& c = p->node->counters;
    int64_t n = m.weight;
    int64_t cap = opts_.queue_capacity;
    while (in.rows + n > cap) {
      int worst = -1;
      for (int pr = kPriorities - 1; pr > m.priority; --pr) {
        if (in.rows_by_priority[pr] > 0) {
          worst = pr;
          break;
        }
      }
      if (worst < 0) break;
      // Drop the newest queued batch of that priority (the oldest are closest to being used).
      for (auto it = in.q.rbegin(); it != in.q.rend(); ++it) {
        if (!it->is_watermark && it->priority == worst && !it->rows.empty()) {
          int64_t k = it->weight;
          in.rows -= k;
          in.rows_by_priority[worst] -= k;
          c.queue_rows.fetch_sub(static_cast<uint64_t>(k), std::memory_order_relaxed);
          c.add(c.dropped[worst], it->rows.size());
          // The report takes the dropped message's place in the queue.
          for (const Ref& r : it->rows) report_dropped(p, *it, worst, *r.row);
          it->rows.clear();
          it->batch.reset();
          it->weight = 0;
          break;
        }
      }
    }
    if (in.rows + n <= cap) return;
    // P0 is never dropped while anything less important is queued; with only
    // P0 left it may overflow the queue up to 4x before it is dropped too.
    if (m.priority == 0 && in.rows + n <= 4 * cap) return;
    // Keep the oldest rows of the batch that fit.
    int64_t room = std::max<int64_t>(0, cap - in.rows);
    int64_t kept_weight = 0;
    size_t keep = 0;
    while (keep < m.rows.size() && kept_weight + RowTraits<R>::weight(*m.rows[keep].row) <= room) {
      kept_weight += RowTraits<R>::weight(*m.rows[keep].row);
      ++keep;
    }
    c.add(c.dropped[m.priority], m.rows.size() - keep);
    for (size_t i = keep; i < m.rows.size(); ++i) report_dropped(p, m, m.priority, *m.rows[i].row);
    m.rows.resize(keep);
    if (m.rows.empty()) m.batch.reset();
    m.weight = kept_weight;
  }

  // Counts `row`, dropped from (or in place of) `m` on the way to `p`, in
  // m's report of the row's key and priority.
  static void report_dropped(Partition* p, Msg& m, int priority, const R& row) {
    std::optional<uint64_t> key = p->node->def->key(row);
    int64_t t = RowTraits<R>::time_ns(row);
    uint32_t kind = 1u << RowTraits<R>::kind(row);
    add_report(m,
               ShedReport<R>{.sample = row,
                             .priority = priority,
                             .rows = 1,
                             .first_ns = t,
                             .last_ns = t,
                             .kinds = kind,
                             .broadcast = !key.has_value()},
               key);
  }

  // Adds the reports of `from` to those of `into`, one per key and priority.
  static void merge_reports(Msg& into, Msg& from) {
    for (size_t i = 0; i < from.shed.size(); ++i) add_report(into, std::move(from.shed[i]), from.shed_keys[i]);
  }

  // Adds report `r` (of the consumer's `key`) to m's report of the same key
  // and priority, or as a report of its own; a report's sample is its
  // earliest row.
  static void add_report(Msg& m, ShedReport<R>&& r, std::optional<uint64_t> key) {
    for (size_t i = 0; i < m.shed.size(); ++i) {
      ShedReport<R>& s = m.shed[i];
      if (s.priority != r.priority || m.shed_keys[i] != key) continue;
      s.rows += r.rows;
      s.kinds |= r.kinds;
      s.last_ns = std::max(s.last_ns, r.last_ns);
      if (r.first_ns < s.first_ns) {
        s.first_ns = r.first_ns;
        s.sample = std::move(r.sample);
      }
      return;
    }
    m.shed.push_back(std::move(r));
    m.shed_keys.push_back(key);
  }

  // --- processing --------------------------------------------------------------
  void drain(Partition* p) {
    for (;;) {
      if (p->running.exchange(true, std::memory_order_acquire)) return;  // someone else is on it
      try {
        for (;;) {
          std::deque<Msg>& batch = p->drained;  // empty
          {
            std::lock_guard lock(p->inbox.mu);
            if (p->inbox.q.empty()) break;
            batch.swap(p->inbox.q);
            int64_t freed = p->inbox.rows;
            p->inbox.rows = 0;
            for (auto& r : p->inbox.rows_by_priority) r = 0;
            p->node->counters.queue_rows.fetch_sub(static_cast<uint64_t>(freed), std::memory_order_relaxed);
          }
          p->inbox.space.notify_all();
          if (live_pipeline_) collapse_watermarks(p, batch);
          for (auto& m : batch) {
            if (!m.is_watermark || m.producer >= 0) handle(p, m);
          }
          batch.clear();  // lets go of the messages' batches, as their end did
        }
      } catch (...) {
        fail(std::current_exception());
        p->drained.clear();
        std::lock_guard lock(p->inbox.mu);
        p->inbox.q.clear();
        p->node->counters.queue_rows.fetch_sub(static_cast<uint64_t>(p->inbox.rows), std::memory_order_relaxed);
        p->inbox.rows = 0;
        for (auto& r : p->inbox.rows_by_priority) r = 0;
      }
      p->running.store(false, std::memory_order_release);
      std::lock_guard lock(p->inbox.mu);
      if (p->inbox.q.empty()) return;
    }
  }

  // Live (a pipeline with a live source), of the watermarks one producer
  // sent, only the last of a drained batch is handled: an earlier one
  // releases a prefix of what the last releases (the producer's rows that
  // came between are not older than it), so skipping it is the same as its
  // message arriving later, which outputs never depend on (the source's
  // coalescing already varies how many there are). A skipped message is
  // marked by producer -1. The kept one takes the earliest arrival, for the
  // sinks' latency. A wave of
  // watermarks (1024 producers promising past a step within a few
  // milliseconds) otherwise queued several at every partition, and each made
  // it release, run its timers and forward one more to every consumer: at
  // 1024 ranks the alert stream's slowest releases took twice as long. A
  // replay handles every watermark, so that what an operator sees of a
  // recording does not depend on the threads' timing at all.
  static void collapse_watermarks(Partition* p, std::deque<Msg>& batch) {
    if (batch.size() < 2) return;
    std::vector<int>& last = p->last_watermark;  // by slot: index in `batch`, -1 none
    last.assign(p->producer_wm.size(), -1);
    for (size_t i = batch.size(); i-- > 0;) {
      Msg& m = batch[i];
      if (!m.is_watermark) continue;
      int& kept = last[static_cast<size_t>(p->slot_of[static_cast<size_t>(m.producer)])];
      if (kept < 0) {
        kept = static_cast<int>(i);
        continue;
      }
      Msg& k = batch[static_cast<size_t>(kept)];
      k.watermark = std::max(k.watermark, m.watermark);
      if (m.arrival_ns != 0 && (k.arrival_ns == 0 || m.arrival_ns < k.arrival_ns)) k.arrival_ns = m.arrival_ns;
      m.producer = -1;  // skipped
    }
  }

  void handle(Partition* p, Msg& m) {
    if (failed_.load(std::memory_order_relaxed)) return;
    if (!m.is_watermark) {
      p->node->counters.add(p->node->counters.in, m.rows.size());
      add_pending(p, m);
      p->held.store(p->pending_rows, std::memory_order_relaxed);
      if (!m.shed.empty()) report_shed(p, m.shed);
      return;
    }
    int slot = p->slot_of[m.producer];
    RUNLENS_CHECK(slot >= 0, "a watermark came from a node that is not an input");
    p->producer_wm[slot] = std::max(p->producer_wm[slot], m.watermark);
    p->seen_wm[slot].store(p->producer_wm[slot], std::memory_order_relaxed);
    int64_t wm = *std::min_element(p->producer_wm.begin(), p->producer_wm.end());
    if (wm <= p->input_wm) return;
    p->input_wm = wm;
    p->arrival_ns = m.arrival_ns;
    advance(p, wm);
  }

  // Tells the operator what was shed on its way to it; what it emits goes on
  // at once (not older than the watermark it last passed on).
  void report_shed(Partition* p, const std::vector<ShedReport<R>>& reports) {
    Node* node = p->node;
    std::vector<R> emitted;
    Emitter<R> out(&emitted, p->forwarded_wm);
    for (const auto& r : reports) p->op->on_shed(r, out);
    node->counters.add(node->counters.out, emitted.size());
    route(node, node->producer_base + p->index, emitted);
  }

  struct Earlier {  // a function object, so that the sorting loops inline it
    bool operator()(const Ref& a, const Ref& b) const { return a.time < b.time; }
  };

  // Adds a message's rows to the reorder buffer as a run sorted by event
  // time (sources and most operators send them in order already). A small
  // message that follows the last run in time joins it, so that many small
  // messages do not make many runs.
  static void add_pending(Partition* p, Msg& m) {
    std::vector<Ref>& rows = m.rows;
    if (rows.empty()) return;
    p->pending_rows += rows.size();
    if (!m.canonical && !std::is_sorted(rows.begin(), rows.end(), Earlier{}))
      std::stable_sort(rows.begin(), rows.end(), Earlier{});
    constexpr size_t kJoinBelow = 64;
    if (!p->pending.empty()) {
      PendingRun& last = p->pending.back();
      if (rows.size() < kJoinBelow && !Earlier{}(rows.front(), last.rows.back())) {
        // Still in canonical order if both parts are and they meet in order.
        last.canonical = last.canonical && m.canonical && !canonical_less(rows.front(), last.rows.back());
        if (last.batches.empty() || last.batches.back().second != m.batch) {
          last.batches.push_back({last.rows.size(), std::move(m.batch)});
        }
        last.rows.insert(last.rows.end(), rows.begin(), rows.end());
        return;
      }
    }
    PendingRun run;
    run.canonical = m.canonical;
    run.rows = std::move(rows);
    run.batches.push_back({0, std::move(m.batch)});
    p->pending.push_back(std::move(run));
  }

  // Hands the released rows to the operator, fetching each row's cache lines
  // a few rows ahead. The rows were made on the source's thread (another
  // core's cache) and are read where they lie, through references: without
  // it an operator's first read of a row waits on memory (the operators that
  // read GPU samples and step rows first took 16-21 % less time with it;
  // docs/performance.md, "Huge pages for the main heap only; rows fetched
  // ahead").
  static void process_in_order(Operator<R>* op, const std::vector<Ref>& order, Emitter<R>& out) {
    constexpr size_t kAhead = 6;
    const size_t n = order.size();
    const Ref* refs = order.data();
    for (size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) {
        const char* row = reinterpret_cast<const char*>(refs[i + kAhead].row);
        for (size_t at = 0; at < sizeof(R); at += 64) __builtin_prefetch(row + at);
        __builtin_prefetch(row + sizeof(R) - 1);  // a row that straddles one line more
      }
      op->process(*refs[i].row, out);
    }
  }

  // Lets go of what a run has released: the batches whose rows are all
  // before `head`, and, once most of the run is released, those rows.
  static void trim(PendingRun& run) {
    size_t gone = 0;  // batches wholly released
    while (gone + 1 < run.batches.size() && run.batches[gone + 1].first <= run.head) ++gone;
    if (gone) run.batches.erase(run.batches.begin(), run.batches.begin() + static_cast<std::ptrdiff_t>(gone));
    if (run.head < 4096 || run.head * 2 < run.rows.size()) return;
    run.rows.erase(run.rows.begin(), run.rows.begin() + static_cast<std::ptrdiff_t>(run.head));
    for (auto& b : run.batches) b.first = b.first > run.head ? b.first - run.head : 0;
    run.head = 0;
  }

  // Releases every pending row older than `wm` to the operator in canonical
  // order, lets it fire timers, and forwards the watermark.
  void advance(Partition* p, int64_t wm) {
    Node* node = p->node;
    // Rows stay where they are: the operator reads them in place. Each run
    // releases the prefix older than the watermark (the final watermark
    // releases everything, rows stamped at the end of time too).
    p->order.clear();
    p->segments.clear();
    for (PendingRun& run : p->pending) {
      auto begin = run.rows.begin() + static_cast<std::ptrdiff_t>(run.head);
      auto end = wm == kEndOfTime
                     ? run.rows.end()
                     : std::partition_point(begin, run.rows.end(), [wm](const Ref& r) { return r.time < wm; });
      p->segments.push_back({p->order.size(), run.canonical});
      p->order.insert(p->order.end(), begin, end);
      run.released = static_cast<size_t>(end - run.rows.begin());
    }
    canonical_order(p->order, p->scratch, p->runs, p->segments);
    p->pending_rows -= p->order.size();
    p->emitted.clear();
    Emitter<R> out(&p->emitted, p->forwarded_wm);
    process_in_order(p->op.get(), p->order, out);
    // A sink has handled (published, written) the rows this watermark released.
    if (node->consumers.empty() && p->arrival_ns != 0 && !p->order.empty())
      node->counters.latency.record(steady_ns() - p->arrival_ns, p->order.size());
    // Runs the watermark has released whole are dropped; the others keep
    // their rows where they are.
    size_t kept = 0;
    for (size_t i = 0; i < p->pending.size(); ++i) {
      PendingRun& run = p->pending[i];
      run.head = run.released;
      if (run.head == run.rows.size()) continue;
      trim(run);
      if (kept != i) p->pending[kept] = std::move(run);
      ++kept;
    }
    p->pending.resize(kept);
    p->held.store(p->pending_rows, std::memory_order_relaxed);
    p->released_wm.store(wm, std::memory_order_relaxed);
    p->op->on_watermark(wm, out);
    if (wm == kEndOfTime) {
      RUNLENS_CHECK(p->pending.empty(), "rows remained after the final watermark");
      p->op->finish(out);
      p->finished = true;
    }
    node->counters.add(node->counters.out, p->emitted.size());
    int producer = node->producer_base + p->index;
    route(node, producer, p->emitted);
    p->forwarded_wm = wm;
    send_watermark(node, producer, wm, p->arrival_ns);
  }

  ExecutorOptions opts_;
  bool live_pipeline_ = false;  // a source is live: queued watermarks collapse (collapse_watermarks)
  RowText row_text_;
  std::unique_ptr<tbb::task_arena> arena_;
  // Declared before nodes_, so destroyed after them: a flow-graph node's
  // destructor unregisters it from its graph (TSan found the reverse order).
  std::unique_ptr<tbb::flow::graph> graph_;
  // The storage of sources' batches, kept for the sources' next batches
  // (issue 13). A replay's source reads 16384 rows (3.4 MB) a batch and the
  // executor's thread lets each go: allocated on one thread and freed on
  // another, every batch took glibc's lock of the source's arena from the
  // other side and came back as fresh pages, and the replay of g.rlrec took
  // 8-13 % longer than with its storage reused (docs/performance.md, "A
  // source's batches reuse their storage"). At most kKept are kept, the
  // largest: what a batch lets go of while one is kept costs no more than
  // before. Shared with the batches' deleters, so that a batch let go of
  // after the executor's members (on whichever thread) still finds it.
  struct SpareBatches : std::enable_shared_from_this<SpareBatches> {
    static constexpr size_t kKept = 2;
    std::mutex mu;
    std::vector<Batch> kept;  // emptied, with their room

    // `rows` as a shared batch whose storage comes back here when the last
    // reference goes (on whichever thread lets it go).
    BatchRef share(Batch&& rows) {
      return BatchRef(new Batch(std::move(rows)), [self = this->shared_from_this()](const Batch* b) {
        std::unique_ptr<Batch> own(const_cast<Batch*>(b));
        own->clear();  // the rows are destroyed here, as before; the room stays
        self->keep(std::move(*own));
      });
    }
    static bool less_room(const Batch& x, const Batch& y) { return x.capacity() < y.capacity(); }
    void keep(Batch&& b) {
      if (b.capacity() == 0) return;
      std::lock_guard l(mu);
      if (kept.size() < kKept) {
        kept.push_back(std::move(b));
      } else {
        auto smallest = std::min_element(kept.begin(), kept.end(), less_room);
        if (smallest->capacity() < b.capacity()) std::swap(*smallest, b);  // the smaller goes with the batch
      }
    }
    // Empty storage with the most room kept, or none.
    Batch take() {
      std::lock_guard l(mu);
      if (kept.empty()) return {};
      auto largest = std::max_element(kept.begin(), kept.end(), less_room);
      Batch b = std::move(*largest);
      kept.erase(largest);
      return b;
    }
  };
  std::shared_ptr<SpareBatches> spare_batches_ = std::make_shared<SpareBatches>();
  std::vector<std::unique_ptr<Node>> nodes_;
  int producers_ = 0;
  std::vector<bool> producer_is_source_;  // by global producer id
  std::vector<std::thread> source_threads_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  std::mutex fail_mu_;
  std::exception_ptr failure_;
};

}  // namespace runlens::runtime
