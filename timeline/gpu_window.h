// The last failure_window_time of GPU samples, kept by the timeline sink so
// that a failure window can reach back into it (section 34), packed: each
// sample as its time and the fields it has (schema/gpu_packed.h), not as a
// whole Gpu. A sample of the seven measurements a DCGM exporter typically
// sends takes 76 bytes here against 168 as (time, Gpu); one of all eighteen,
// 164. At 1024 GPUs in a replay of issue 13's GPU-every-step mix the window
// held 33.7 MB unpacked, a third of the heap, and 14.4 MB packed (heaptrack).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <utility>

#include "schema/gpu_packed.h"
#include "schema/record.h"

namespace runlens::timeline {

class GpuWindow {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  // The bytes of the chunks held (the spare aside).
  size_t bytes() const { return chunks_.size() * kChunkBytes; }
  int64_t front_time() const { return time_at(*chunks_.front(), head_); }

  // The sample as it now lies packed (valid until it is popped).
  gpu_packed::View push_back(int64_t time, const Gpu& g) {
    if (chunks_.empty() || chunks_.back()->end + kMaxEntry > kChunkBytes) {
      chunks_.push_back(spare_ ? std::move(spare_) : std::unique_ptr<Chunk>(new Chunk));  // not zeroed
      chunks_.back()->end = 0;
    }
    Chunk& c = *chunks_.back();
    char* p = c.data + c.end;
    std::memcpy(p, &time, sizeof time);
    char* sample = p + sizeof time;
    p = gpu_packed::put(sample, g);
    c.end = static_cast<size_t>(p - c.data);
    ++count_;
    return {sample, static_cast<size_t>(p - sample)};
  }

  void pop_front() {
    Chunk& c = *chunks_.front();
    head_ += entry_bytes(present_at(c, head_));
    --count_;
    if (head_ < c.end) return;
    head_ = 0;
    if (chunks_.size() == 1) {
      c.end = 0;  // the last chunk: emptied, filled again from its start
    } else {
      spare_ = std::move(chunks_.front());
      chunks_.pop_front();
    }
  }

  // f(time, gpu) for each sample, oldest first. The Gpu passed has the
  // sample's present fields and the defaults elsewhere.
  template <class F>
  void for_each(F&& f) const {
    for_each_since(INT64_MIN, std::forward<F>(f));
  }
  // The same for the samples of time `from` or later, which (samples are
  // pushed in time order) end the window. The ones before are passed over
  // by whole chunks (by the time of each chunk's first sample), then by
  // their headers: a failure window that reaches back into samples written
  // already does not unpack them.
  template <class F>
  void for_each_since(int64_t from, F&& f) const {
    for_each_packed_since(from, [&f](int64_t time, gpu_packed::View v) {
      Gpu g;
      gpu_packed::get(v.p, &g);
      f(time, g);
    });
  }
  // The same, each sample as it lies packed (valid during the call), not
  // unpacked: f(time, gpu_packed::View).
  template <class F>
  void for_each_packed_since(int64_t from, F&& f) const {
    size_t first = 0;  // the last chunk that starts before `from`
    for (size_t i = 1; i < chunks_.size() && chunks_[i]->end > 0 && time_at(*chunks_[i], 0) < from; ++i) first = i;
    size_t at = first == 0 ? head_ : 0;
    for (size_t i = first; i < chunks_.size(); ++i, at = 0) {
      const Chunk& c = *chunks_[i];
      while (at < c.end && time_at(c, at) < from) at += entry_bytes(present_at(c, at));
      while (at < c.end) {
        const char* p = c.data + at + sizeof(int64_t);
        const size_t n = gpu_packed::bytes(gpu_packed::present_at(p));
        f(time_at(c, at), gpu_packed::View{p, n});
        at += sizeof(int64_t) + n;
      }
    }
  }

 private:
  static constexpr size_t kChunkBytes = 256 * 1024;
  static constexpr size_t kMaxEntry = sizeof(int64_t) + gpu_packed::kMaxBytes;  // time, then the packed sample
  struct Chunk {
    size_t end = 0;  // the bytes used
    char data[kChunkBytes];
  };

  // The entry at `at`: its time, then its presence bits.
  static int64_t time_at(const Chunk& c, size_t at) {
    int64_t t;
    std::memcpy(&t, c.data + at, sizeof t);
    return t;
  }
  static uint32_t present_at(const Chunk& c, size_t at) {
    return gpu_packed::present_at(c.data + at + sizeof(int64_t));
  }
  static size_t entry_bytes(uint32_t present) { return sizeof(int64_t) + gpu_packed::bytes(present); }

  std::deque<std::unique_ptr<Chunk>> chunks_;
  std::unique_ptr<Chunk> spare_;  // the chunk emptied last, for the next to fill
  size_t head_ = 0;               // the oldest sample's offset in the first chunk
  size_t count_ = 0;
};

}  // namespace runlens::timeline
