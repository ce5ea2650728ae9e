// The last failure_window_time of GPU samples, kept by the timeline sink so
// that a failure window can reach back into it (section 34), packed: each
// sample as its time, its presence bits and the fields it has, not as a
// whole Gpu: 12 bytes of header, 4 each for node and GPU, 8 for each other
// field. A sample of the seven measurements a DCGM exporter typically sends
// takes 76 bytes here against 168 as (time, Gpu); one of all eighteen, 164.
// At 1024 GPUs in a replay of issue 13's GPU-every-step mix the window held
// 33.7 MB unpacked, a third of the heap, and 14.4 MB packed (heaptrack).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <utility>

#include "schema/record.h"

namespace runlens::timeline {

class GpuWindow {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  // The bytes of the chunks held (the spare aside).
  size_t bytes() const { return chunks_.size() * kChunkBytes; }
  int64_t front_time() const { return time_at(*chunks_.front(), head_); }

  void push_back(int64_t time, const Gpu& g) {
    if (chunks_.empty() || chunks_.back()->end + kMaxEntry > kChunkBytes) {
      chunks_.push_back(spare_ ? std::move(spare_) : std::unique_ptr<Chunk>(new Chunk));  // not zeroed
      chunks_.back()->end = 0;
    }
    Chunk& c = *chunks_.back();
    char* p = c.data + c.end;
    put(p, time);
    put(p, g.present);
#define RUNLENS_GPU_WINDOW_PUT_(T, name, Camel, req) \
  if (g.has(Gpu::F::name)) put(p, g.name);
    RUNLENS_GPU_FIELDS(RUNLENS_GPU_WINDOW_PUT_)
#undef RUNLENS_GPU_WINDOW_PUT_
    c.end = static_cast<size_t>(p - c.data);
    ++count_;
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
    size_t first = 0;  // the last chunk that starts before `from`
    for (size_t i = 1; i < chunks_.size() && chunks_[i]->end > 0 && time_at(*chunks_[i], 0) < from; ++i) first = i;
    size_t at = first == 0 ? head_ : 0;
    for (size_t i = first; i < chunks_.size(); ++i, at = 0) {
      const Chunk& c = *chunks_[i];
      while (at < c.end && time_at(c, at) < from) at += entry_bytes(present_at(c, at));
      while (at < c.end) {
        const char* p = c.data + at;
        int64_t time;
        Gpu g;
        get(p, &time);
        get(p, &g.present);
#define RUNLENS_GPU_WINDOW_GET_(T, name, Camel, req) \
  if (g.has(Gpu::F::name)) get(p, &g.name);
        RUNLENS_GPU_FIELDS(RUNLENS_GPU_WINDOW_GET_)
#undef RUNLENS_GPU_WINDOW_GET_
        at = static_cast<size_t>(p - c.data);
        f(time, g);
      }
    }
  }

 private:
  static constexpr size_t kChunkBytes = 256 * 1024;
  static constexpr size_t kHeader = sizeof(int64_t) + sizeof(uint32_t);  // time, presence bits
  static constexpr size_t kMaxEntry = kHeader + sizeof(Gpu);             // more than every field together
  struct Chunk {
    size_t end = 0;  // the bytes used
    char data[kChunkBytes];
  };

  // The header of the entry at `at`: its time, then its presence bits.
  static int64_t time_at(const Chunk& c, size_t at) {
    int64_t t;
    std::memcpy(&t, c.data + at, sizeof t);
    return t;
  }
  static uint32_t present_at(const Chunk& c, size_t at) {
    uint32_t present;
    std::memcpy(&present, c.data + at + sizeof(int64_t), sizeof present);
    return present;
  }
  template <class V>
  static void put(char*& p, const V& v) {
    std::memcpy(p, &v, sizeof v);
    p += sizeof v;
  }
  template <class V>
  static void get(const char*& p, V* v) {
    std::memcpy(v, p, sizeof *v);
    p += sizeof *v;
  }
  static size_t entry_bytes(uint32_t present) {
    size_t n = kHeader;
#define RUNLENS_GPU_WINDOW_SIZE_(T, name, Camel, req) \
  if ((present >> static_cast<unsigned>(Gpu::F::name)) & 1u) n += sizeof(Gpu::name);
    RUNLENS_GPU_FIELDS(RUNLENS_GPU_WINDOW_SIZE_)
#undef RUNLENS_GPU_WINDOW_SIZE_
    return n;
  }

  std::deque<std::unique_ptr<Chunk>> chunks_;
  std::unique_ptr<Chunk> spare_;  // the chunk emptied last, for the next to fill
  size_t head_ = 0;               // the oldest sample's offset in the first chunk
  size_t count_ = 0;
};

}  // namespace runlens::timeline
