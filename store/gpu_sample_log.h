// The GPU samples a store batch keeps at full resolution
// (MetricBatch::gpu_samples), packed: each as its time, node, GPU and why it
// was kept (20 bytes), then the sample as schema/gpu_packed.h packs it, so
// 88 bytes for the seven measurements a DCGM exporter typically sends. A
// failure window keeps every sample of every node of a run for twenty
// minutes, and the timeline builder keeps them on the executor's thread:
// made as GpuSampleRows (208 bytes) from samples unpacked out of the
// builder's packed window of recent samples, that was an eighth of that
// thread's samples in a replay of issue 13's GPU-every-step mix. Now the
// window's bytes are copied as they lie (docs/performance.md, "Kept GPU
// samples copied packed"), and the store's writer encodes them where they
// lie too (store/sqlite/gpu_blocks.h), a node at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "schema/gpu_packed.h"
#include "schema/record.h"

namespace runlens::store {

struct GpuSampleRow {
  int64_t time_ns = 0;
  Gpu sample;
  std::string kept_for;  // "failure" | "recent"
};

class GpuSampleLog {
 public:
  // A sample where it lies in the log: read in place, unpacked on request.
  class Entry {
   public:
    int64_t time_ns() const { return read<int64_t>(kTimeAt); }
    Symbol node() const { return read<Symbol>(kNodeAt); }
    Symbol kept_for() const { return read<Symbol>(kKeptForAt); }
    int32_t gpu() const { return read<int32_t>(kGpuAt); }
    // The sample packed (schema/gpu_packed.h), where it lies; its node and
    // GPU are the header's (node(), gpu()), whatever its presence bits say.
    const char* packed() const { return p_ + kHeader; }
    // The sample as it was pushed: the fields it has, node and GPU always.
    Gpu sample() const {
      Gpu g;
      gpu_packed::get(p_ + kHeader, &g);
      g.node = node();
      g.gpu = gpu();
      return g;
    }
    GpuSampleRow row() const { return {time_ns(), sample(), std::string(kept_for().str())}; }

   private:
    friend class GpuSampleLog;
    explicit Entry(const char* p) : p_(p) {}
    template <class V>
    V read(size_t at) const {
      V v;
      std::memcpy(&v, p_ + at, sizeof v);
      return v;
    }
    size_t bytes() const { return kHeader + gpu_packed::bytes(gpu_packed::present_at(p_ + kHeader)); }
    const char* p_;
  };

  GpuSampleLog() = default;
  GpuSampleLog(std::initializer_list<GpuSampleRow> rows) {
    for (const auto& r : rows) push_back(r);
  }
  explicit GpuSampleLog(const std::vector<GpuSampleRow>& rows) {
    for (const auto& r : rows) push_back(r);
  }
  GpuSampleLog(GpuSampleLog&& o) noexcept { swap(o); }
  GpuSampleLog& operator=(GpuSampleLog&& o) noexcept {
    GpuSampleLog(std::move(o)).swap(*this);
    return *this;
  }
  GpuSampleLog(const GpuSampleLog& o) { append_bytes(o); }
  GpuSampleLog& operator=(const GpuSampleLog& o) {
    if (this != &o) {
      clear();
      append_bytes(o);
    }
    return *this;
  }

  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  size_t bytes() const { return size_; }
  void clear() { size_ = count_ = 0; }
  // Room for `samples` more of any kind, so that a burst of them is not
  // copied as it grows (pages are touched only as samples are written).
  void reserve(size_t samples) { grow_to(size_ + samples * kMaxEntry); }

  void push_back(int64_t time_ns, const Gpu& g, Symbol kept_for) {
    char* body = put_header(time_ns, g.node, g.gpu, kept_for);
    size_ = static_cast<size_t>(gpu_packed::put(body, g) - data_.get());
    ++count_;
  }
  // A sample packed already (in the timeline's window of recent samples),
  // its bytes copied as they are; its node and GPU as they were.
  void push_back(int64_t time_ns, Symbol node, int32_t gpu, gpu_packed::View v, Symbol kept_for) {
    std::memcpy(put_header(time_ns, node, gpu, kept_for), v.p, v.n);
    size_ += kHeader + v.n;
    ++count_;
  }
  void push_back(const GpuSampleRow& r) { push_back(r.time_ns, r.sample, Symbol::intern(r.kept_for)); }

  // Moves `more`'s samples after these, leaving it empty.
  void append(GpuSampleLog& more) {
    if (empty()) {
      swap(more);
      more.clear();
      return;
    }
    append_bytes(more);
    more.clear();
  }

  // f(Entry) for each sample, in the order pushed.
  template <class F>
  void for_each(F&& f) const {
    for (size_t at = 0; at < size_;) {
      Entry e(data_.get() + at);
      at += e.bytes();
      f(e);
    }
  }
  std::vector<GpuSampleRow> rows() const {
    std::vector<GpuSampleRow> out;
    out.reserve(count_);
    for_each([&](const Entry& e) { out.push_back(e.row()); });
    return out;
  }

  void swap(GpuSampleLog& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
    std::swap(count_, o.count_);
  }

 private:
  static constexpr size_t kTimeAt = 0, kNodeAt = 8, kGpuAt = 12, kKeptForAt = 16, kHeader = 20;
  static constexpr size_t kMaxEntry = kHeader + gpu_packed::kMaxBytes;

  // Room for one more sample, and its header written at the end: where its body goes.
  char* put_header(int64_t time_ns, Symbol node, int32_t gpu, Symbol kept_for) {
    if (cap_ - size_ < kMaxEntry) grow_to(std::max(2 * cap_, size_ + 64 * kMaxEntry));
    char* p = data_.get() + size_;
    std::memcpy(p + kTimeAt, &time_ns, sizeof time_ns);
    std::memcpy(p + kNodeAt, &node, sizeof node);
    std::memcpy(p + kGpuAt, &gpu, sizeof gpu);
    std::memcpy(p + kKeptForAt, &kept_for, sizeof kept_for);
    return p + kHeader;
  }
  void grow_to(size_t cap) {
    if (cap <= cap_) return;
    std::unique_ptr<char[]> more(new char[cap]);  // not zeroed: only what is written is read
    if (size_) std::memcpy(more.get(), data_.get(), size_);
    data_ = std::move(more);
    cap_ = cap;
  }
  void append_bytes(const GpuSampleLog& o) {
    if (o.size_ == 0) return;
    grow_to(size_ + o.size_);
    std::memcpy(data_.get() + size_, o.data_.get(), o.size_);
    size_ += o.size_;
    count_ += o.count_;
  }

  std::unique_ptr<char[]> data_;
  size_t size_ = 0, cap_ = 0;  // bytes written, bytes held
  size_t count_ = 0;
};

}  // namespace runlens::store
