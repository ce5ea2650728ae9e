// The asynchronous sink writer: batches are written in order, at most
// `capacity` wait (the sink waits beyond that), a failed write surfaces at the
// sink's next call and at close(), deferred batches merge into the next one or
// are written by their deadline, and closing writes everything handed over.
#include "runtime/async_writer.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace rt = runlens::runtime;
using namespace std::chrono_literals;

namespace {

using Batch = std::vector<int>;
using Writer = rt::AsyncWriter<Batch>;

// What the writer's thread wrote, and a gate that holds its writes back.
struct Disk {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Batch> written;
  bool open = true;  // writes pass
  int fail_at = -1;  // the write (0-based) that throws
  int attempts = 0;
  int entered = 0;  // writes begun (held or not)

  void write(Batch& b) {
    std::unique_lock l(mu);
    ++entered;
    cv.notify_all();
    cv.wait(l, [&] { return open; });
    if (attempts++ == fail_at) throw std::runtime_error("disk full at batch " + std::to_string(b.front()));
    written.push_back(b);
    cv.notify_all();
  }
  void hold() {
    std::lock_guard l(mu);
    open = false;
  }
  void release() {
    std::lock_guard l(mu);
    open = true;
    cv.notify_all();
  }
  std::vector<Batch> snapshot() {
    std::lock_guard l(mu);
    return written;
  }
  // Until the writer's thread has taken n batches (and waits on the gate, if held).
  bool wait_entered(int n, std::chrono::milliseconds limit = 5s) {
    std::unique_lock l(mu);
    return cv.wait_for(l, limit, [&] { return entered >= n; });
  }
  bool wait_written(size_t n, std::chrono::milliseconds limit = 5s) {
    std::unique_lock l(mu);
    return cv.wait_for(l, limit, [&] { return written.size() >= n; });
  }
};

Writer::Options options(Disk& disk, size_t capacity = 2, rt::WriterCounters* counters = nullptr) {
  Writer::Options o;
  o.capacity = capacity;
  o.write = [&disk](Batch& b) { disk.write(b); };
  o.merge = [](Batch& into, Batch& next) {
    if (!next.empty() && next.front() < 0) return false;  // a negative batch stands alone
    into.insert(into.end(), next.begin(), next.end());
    return true;
  };
  o.counters = counters;
  return o;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST_CASE("batches are written one at a time, in the order handed over") {
  Disk disk;
  rt::WriterCounters c;
  {
    Writer w(options(disk, 2, &c));
    for (int i = 0; i < 100; ++i) w.push({i});
    w.close();
  }
  auto written = disk.snapshot();
  REQUIRE(written.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(written[static_cast<size_t>(i)] == Batch{i});
  CHECK(c.queued == 100);
  CHECK(c.written == 100);
  CHECK(c.errors == 0);
  CHECK(c.peak >= 1);
  CHECK(c.peak <= 2);
}

TEST_CASE("at most `capacity` batches wait: the sink waits for room (backpressure), nothing is dropped") {
  Disk disk;
  disk.hold();
  Writer w(options(disk, 2));
  w.push({1});  // taken by the writer's thread, which waits on the disk...
  REQUIRE(disk.wait_written(0));
  // ...or still queued: either way at most 1 + capacity fit before a push waits.
  std::atomic<int> pushed{0};
  std::thread sink([&] {
    for (int i = 2; i <= 5; ++i) {
      w.push({i});
      pushed.store(i);
    }
  });
  std::this_thread::sleep_for(100ms);
  int stuck_at = pushed.load();
  CHECK(stuck_at <= 3);  // batch 1 being written (or queued), then two queued
  CHECK(w.counters().waits >= 1);
  CHECK(w.counters().peak == 2);
  disk.release();
  sink.join();
  w.close();
  CHECK(disk.snapshot() == std::vector<Batch>{{1}, {2}, {3}, {4}, {5}});
  CHECK(w.counters().written == 5);
}

TEST_CASE("a failed write surfaces at the sink's next call and at close, never lost; later batches are not written") {
  Disk disk;
  disk.fail_at = 1;  // the second write throws
  rt::WriterCounters c;
  Writer w(options(disk, 2, &c));
  w.push({10});
  w.push({11});
  REQUIRE(disk.wait_written(1));
  // Wait until the writer has seen the failure.
  for (int i = 0; i < 5000 && c.errors == 0; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(c.errors == 1);
  CHECK(message_of([&] { w.check(); }) == "disk full at batch 11");
  CHECK(message_of([&] { w.push({12}); }) == "disk full at batch 11");
  CHECK(message_of([&] { w.push_deferred({13}, Writer::Clock::now()); }) == "disk full at batch 11");
  CHECK(message_of([&] { w.drain(); }) == "disk full at batch 11");
  CHECK(message_of([&] { w.close(); }) == "disk full at batch 11");
  CHECK(message_of([&] { w.close(); }) == "disk full at batch 11");  // and again: it stays reported
  CHECK(disk.snapshot() == std::vector<Batch>{{10}});
  CHECK(c.written == 1);
}

TEST_CASE("a failure while batches wait discards them and wakes a sink waiting for room") {
  Disk disk;
  disk.hold();
  disk.fail_at = 0;
  Writer w(options(disk, 1));
  w.push({1});
  std::string seen;
  std::thread sink([&] {
    seen = message_of([&] {
      for (int i = 2; i < 10; ++i) w.push({i});
    });
  });
  std::this_thread::sleep_for(50ms);
  disk.release();  // the first write fails; the waiting push must not hang
  sink.join();
  CHECK(seen == "disk full at batch 1");
  CHECK(disk.snapshot().empty());
  CHECK(message_of([&] { w.close(); }) == "disk full at batch 1");
}

TEST_CASE("a deferred batch is merged into the next one handed over, or written alone by its deadline") {
  Disk disk;
  rt::WriterCounters c;
  Writer w(options(disk, 2, &c));
  auto later = Writer::Clock::now() + 1h;
  w.push_deferred({1}, later);
  w.push_deferred({2}, later);
  w.push({3});
  w.drain();
  CHECK(disk.snapshot() == std::vector<Batch>{{1, 2, 3}});
  // A batch that declines to merge is written after the deferred one, apart.
  w.push_deferred({4}, later);
  w.push({-5});
  w.drain();
  CHECK(disk.snapshot() == std::vector<Batch>{{1, 2, 3}, {4}, {-5}});
  // Quiet: nothing comes after a deferred batch; the writer writes it once its deadline passes.
  w.push_deferred({6}, Writer::Clock::now() + 30ms);
  CHECK(disk.wait_written(4, 2s));
  CHECK(disk.snapshot().back() == Batch{6});
  // The earlier deadline wins when batches merge.
  w.push_deferred({7}, Writer::Clock::now() + 20ms);
  w.push_deferred({8}, later);
  CHECK(disk.wait_written(5, 2s));
  CHECK(disk.snapshot().back() == Batch{7, 8});
  w.close();
  CHECK(c.written == 5);
}

TEST_CASE("close writes everything handed over, the deferred batch too; so does the destructor") {
  Disk disk;
  disk.hold();
  {
    Writer w(options(disk, 4));
    w.push({1});
    w.push({2});
    w.push_deferred({3}, Writer::Clock::now() + 1h);
    std::thread later([&] {
      std::this_thread::sleep_for(30ms);
      disk.release();
    });
    w.close();
    later.join();
  }
  CHECK(disk.snapshot() == std::vector<Batch>{{1}, {2}, {3}});
  Disk other;
  {
    Writer w(options(other, 4));
    w.push({1});
    w.push_deferred({2}, Writer::Clock::now() + 1h);
  }  // no close(): the destructor writes and joins
  CHECK(other.snapshot() == std::vector<Batch>{{1}, {2}});
}

TEST_CASE("drain waits until every batch handed over is written") {
  Disk disk;
  Writer w(options(disk, 2));
  for (int round = 0; round < 20; ++round) {
    w.push({round});
    w.push_deferred({100 + round}, Writer::Clock::now() + 1h);
    w.drain();
    auto written = disk.snapshot();
    REQUIRE(!written.empty());
    CHECK(written.back() == Batch{100 + round});
  }
  w.close();
}

// A batch prepared carries this mark at its end (what `prepare` does here).
constexpr int kPrepared = 1000000;

// Which batches were prepared, in order, and on which thread.
struct Preparations {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> order;  // each batch's first value
  std::vector<std::thread::id> threads;
  int hold_first = -1;  // a batch whose preparation waits for `go`
  bool go = false;
  bool holding = false;

  void prepare(Batch& b) {
    std::unique_lock l(mu);
    if (b.front() == hold_first) {
      holding = true;
      cv.notify_all();
      cv.wait(l, [&] { return go; });
    }
    order.push_back(b.front());
    threads.push_back(std::this_thread::get_id());
    b.push_back(kPrepared);
  }
};

TEST_CASE("a sink that waits for room prepares its batch, then the queued ones newest first; the writer writes them") {
  Disk disk;
  disk.hold();
  Preparations prep;
  auto o = options(disk, 2);
  o.prepare = [&](Batch& b) { prep.prepare(b); };
  Writer w(std::move(o));
  w.push({1});
  // The writer takes batch 1 and waits on the disk; 2 and 3 wait in the queue.
  REQUIRE(disk.wait_entered(1));
  w.push({2});
  w.push({3});
  std::thread::id sink_id;
  std::thread sink([&] {
    sink_id = std::this_thread::get_id();
    w.push({4});  // full: prepares 4, then 3 and 2 (or 3 alone, should 2's write start), then waits
  });
  std::this_thread::sleep_for(100ms);
  disk.release();
  sink.join();
  w.close();
  const auto written = disk.snapshot();
  REQUIRE(written.size() == 4);
  CHECK(written[0] == Batch{1});  // taken before anyone could prepare it
  CHECK(written[1] == Batch{2, kPrepared});
  CHECK(written[2] == Batch{3, kPrepared});
  CHECK(written[3] == Batch{4, kPrepared});
  CHECK(prep.order == std::vector<int>{4, 3, 2});
  for (auto id : prep.threads) CHECK(id == sink_id);
}

TEST_CASE("the writer does not take a batch while the sink prepares it") {
  Disk disk;
  disk.hold();
  Preparations prep;
  prep.hold_first = 2;
  auto o = options(disk, 1);
  o.prepare = [&](Batch& b) { prep.prepare(b); };
  Writer w(std::move(o));
  w.push({1});
  REQUIRE(disk.wait_entered(1));
  w.push({2});                             // queued (the writer holds 1)
  std::thread sink([&] { w.push({3}); });  // full: prepares 3, then 2, which it holds
  {
    std::unique_lock l(prep.mu);
    REQUIRE(prep.cv.wait_for(l, 5s, [&] { return prep.holding; }));
  }
  disk.release();  // the writer finishes 1 and must wait for 2's preparation
  REQUIRE(disk.wait_written(1));
  std::this_thread::sleep_for(50ms);
  CHECK(disk.snapshot() == std::vector<Batch>{{1}});
  {
    std::lock_guard l(prep.mu);
    prep.go = true;
    prep.cv.notify_all();
  }
  sink.join();
  w.close();
  CHECK(disk.snapshot() == std::vector<Batch>{{1}, {2, kPrepared}, {3, kPrepared}});
}

TEST_CASE("close prepares what waits; a prepare that throws leaves the batch to the write") {
  Disk disk;
  disk.hold();
  Preparations prep;
  auto o = options(disk, 4);
  o.prepare = [&](Batch& b) {
    if (b.front() == 3) throw std::runtime_error("cannot prepare 3");
    prep.prepare(b);
  };
  Writer w(std::move(o));
  w.push({1});
  REQUIRE(disk.wait_entered(1));
  w.push({2});
  w.push({3});
  w.push({4});  // room for four: nothing prepared yet
  {
    std::lock_guard l(prep.mu);
    CHECK(prep.order.empty());
  }
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    disk.release();
  });
  w.close();
  later.join();
  CHECK(disk.snapshot() == std::vector<Batch>{{1}, {2, kPrepared}, {3}, {4, kPrepared}});
  CHECK(w.counters().errors == 0);
}

}  // namespace
