// Emitter::checkpoint_saved's background thread: hashes checkpoint files
// (SHA-256) off the training loop and hands each `checkpoint` event to a send
// function. Jobs wait in a bounded queue; what does not fit, what is left at
// Stop and what is submitted after it are dropped and counted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "runlens/sdk.h"

namespace runlens::sdk {

class CheckpointHasher {
 public:
  using Send = std::function<bool(const Checkpoint&)>;
  // Called once per submitted job that was accepted, after its event was sent
  // (or once it is dropped): the emitter stops holding its watermark at the
  // job's time (docs/sdk.md, "Progress").
  using Release = std::function<void(uint64_t hold)>;

  CheckpointHasher(Send send, size_t capacity, Release release = {});
  ~CheckpointHasher();  // Stop(0)

  // Queues a file; the thread starts at the first call. Never throws.
  // `hold` is handed back to Release.
  bool Submit(std::string path, std::string checkpoint_id, std::optional<int64_t> step, int64_t time_ns,
              uint64_t hold = 0) noexcept;

  // Lets the queued files be hashed and sent until `timeout`, then abandons the
  // rest (counted as dropped) and joins the thread. Idempotent.
  void Stop(std::chrono::milliseconds timeout) noexcept;

  void AddTo(Stats& stats) const noexcept;

 private:
  struct Job {
    std::string path, checkpoint_id;
    std::optional<int64_t> step;
    int64_t time_ns = 0;
    uint64_t hold = 0;
  };
  void Released(uint64_t hold) noexcept {
    if (release_) release_(hold);
  }
  void Run();
  bool Hash(const std::string& path, std::string& hex, int64_t& size);

  Send send_;
  Release release_;
  size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;       // work arrives, or stop
  std::condition_variable idle_cv_;  // the queue drained
  std::deque<Job> queue_;
  bool busy_ = false, stopping_ = false, stopped_ = false;
  std::atomic<bool> abandon_{false};
  std::thread thread_;
  std::atomic<uint64_t> queued_{0}, hashed_{0}, dropped_{0}, errors_{0};
};

// "file://" + the absolute path, percent-encoded except for unreserved
// characters and '/' (RFC 8089; what Python's pathlib.Path.as_uri gives).
std::string FileUri(std::string_view absolute_path);

}  // namespace runlens::sdk
