// A bounded multi-producer, single-consumer ring of Slots (Dmitry Vyukov's
// bounded queue: one sequence number per cell). A producer claims a cell with
// one CAS on the write position, fills the slot in place and publishes it with
// a release store; it never waits for the consumer and never allocates, and a
// full ring is reported at once so the caller can drop and count.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "slot.h"

namespace runlens::sdk {

class EventRing {
 public:
  explicit EventRing(size_t min_capacity)
      : capacity_(std::bit_ceil(min_capacity < 2 ? size_t{2} : min_capacity)),
        mask_(capacity_ - 1),
        cells_(new Cell[capacity_]) {
    for (size_t i = 0; i < capacity_; ++i) cells_[i].sequence.store(i, std::memory_order_relaxed);
  }

  // Claims a cell, calls fill(Slot&) on it and publishes it. Returns false,
  // without calling fill, when the ring is full.
  template <class Fill>
  bool TryPush(Fill&& fill) noexcept {
    uint64_t pos = write_pos_.load(std::memory_order_relaxed);
    Cell* cell;
    for (;;) {
      cell = &cells_[pos & mask_];
      const uint64_t seq = cell->sequence.load(std::memory_order_acquire);
      const auto diff = static_cast<int64_t>(seq - pos);
      if (diff == 0) {
        if (write_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (diff < 0) {
        return false;  // the consumer has not freed this cell yet: full
      } else {
        pos = write_pos_.load(std::memory_order_relaxed);
      }
    }
    fill(cell->slot);
    cell->sequence.store(pos + 1, std::memory_order_release);
    return true;
  }

  // Consumer only. Copies the oldest published slot out and frees its cell.
  bool TryPop(Slot& out) noexcept {
    Cell& cell = cells_[read_pos_ & mask_];
    const uint64_t seq = cell.sequence.load(std::memory_order_acquire);
    if (seq != read_pos_ + 1) return false;  // empty, or the producer is still filling it
    out = cell.slot;
    cell.sequence.store(read_pos_ + capacity_, std::memory_order_release);
    ++read_pos_;
    return true;
  }

  // Events ever taken in: the write position only moves on a successful claim.
  uint64_t pushed() const noexcept { return write_pos_.load(std::memory_order_relaxed); }
  // Consumer only: events ever popped (the position of the oldest cell not yet popped).
  uint64_t popped() const noexcept { return read_pos_; }
  size_t capacity() const noexcept { return capacity_; }

 private:
  struct alignas(64) Cell {
    std::atomic<uint64_t> sequence;
    Slot slot;
  };
  static_assert(sizeof(Cell) <= 512, "keep a cell within 8 cache lines");

  const size_t capacity_;
  const size_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<uint64_t> write_pos_{0};
  alignas(64) uint64_t read_pos_ = 0;  // touched by the consumer only
};

}  // namespace runlens::sdk
