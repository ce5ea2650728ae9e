#include "checkpoint_hasher.h"

#include <cerrno>
#include <cstdio>
#include <vector>

#include "formats/sha256.h"

namespace runlens::sdk {

CheckpointHasher::CheckpointHasher(Send send, size_t capacity, Release release)
    : send_(std::move(send)), release_(std::move(release)), capacity_(capacity == 0 ? 1 : capacity) {}

CheckpointHasher::~CheckpointHasher() { Stop(std::chrono::milliseconds(0)); }

bool CheckpointHasher::Submit(std::string path, std::string checkpoint_id, std::optional<int64_t> step, int64_t time_ns,
                              uint64_t hold) noexcept {
  try {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= capacity_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    queue_.push_back(Job{std::move(path), std::move(checkpoint_id), step, time_ns, hold});
    queued_.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {  // allocation or thread start failed: counted, never thrown
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  cv_.notify_one();
  return true;
}

bool CheckpointHasher::Hash(const std::string& path, std::string& hex, int64_t& size) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  sha256::Hasher h;
  std::vector<unsigned char> buf(1 << 20);
  size = 0;
  bool ok = true;
  while (true) {
    if (abandon_.load(std::memory_order_relaxed)) {
      ok = false;
      break;
    }
    const size_t n = std::fread(buf.data(), 1, buf.size(), f);
    if (n > 0) {
      h.update(buf.data(), n);
      size += static_cast<int64_t>(n);
    }
    if (n < buf.size()) {
      ok = std::ferror(f) == 0;
      break;
    }
  }
  std::fclose(f);
  if (ok) hex = sha256::to_hex(h.digest());
  return ok;
}

void CheckpointHasher::Run() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
      if (queue_.empty() || abandon_.load(std::memory_order_relaxed)) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    std::string hex, uri;
    int64_t size = 0;
    bool hashed = false;
    try {
      hashed = Hash(job.path, hex, size);
      uri = FileUri(job.path);
    } catch (...) {
      hashed = false;
    }
    std::unique_lock lock(mu_);
    busy_ = false;
    if (abandon_.load(std::memory_order_relaxed)) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      Released(job.hold);
    } else {
      Checkpoint c;
      c.checkpoint_id = job.checkpoint_id;
      c.step = job.step;
      c.uri = uri;
      c.time_ns = job.time_ns;
      c.ok = hashed;
      if (hashed) {
        c.sha256 = hex;
        c.size_bytes = size;
        hashed_.fetch_add(1, std::memory_order_relaxed);
      } else {
        errors_.fetch_add(1, std::memory_order_relaxed);
      }
      lock.unlock();
      send_(c);  // emit copies the texts into its slot
      Released(job.hold);
      lock.lock();
    }
    if (queue_.empty() && !busy_) idle_cv_.notify_all();
  }
}

void CheckpointHasher::Stop(std::chrono::milliseconds timeout) noexcept {
  std::unique_lock lock(mu_);
  if (stopped_) return;
  stopping_ = true;
  idle_cv_.wait_for(lock, timeout, [this] { return queue_.empty() && !busy_; });
  if (!queue_.empty() || busy_) {
    abandon_.store(true, std::memory_order_relaxed);
    dropped_.fetch_add(queue_.size(), std::memory_order_relaxed);
    for (const Job& job : queue_) Released(job.hold);
    queue_.clear();
  }
  stopped_ = true;
  lock.unlock();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();  // at most one 1 MiB read away
}

void CheckpointHasher::AddTo(Stats& s) const noexcept {
  s.checkpoints_queued = queued_.load(std::memory_order_relaxed);
  s.checkpoints_hashed = hashed_.load(std::memory_order_relaxed);
  s.checkpoints_dropped = dropped_.load(std::memory_order_relaxed);
  s.checkpoint_errors = errors_.load(std::memory_order_relaxed);
}

std::string FileUri(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "file://";
  for (unsigned char ch : path) {
    const bool keep = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                      ch == '.' || ch == '_' || ch == '~' || ch == '/';
    if (keep) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

}  // namespace runlens::sdk
