// A bounded multi-producer, single-consumer ring of Slots (Dmitry Vyukov's
// bounded queue: one sequence number per cell). A producer claims a cell with
// one CAS on the write position, fills the slot in place and publishes it with
// a release store; it never waits for the consumer and never allocates, and a
// full ring is reported at once so the caller can drop and count.
//
// The cells live in anonymous pages that are zero until first written, and a
// cell keeps its sequence number less its own index, so a new ring is all
// zeros and costs no page until events reach it: a process with many
// emitters (a benchmark multiplexing ranks, a test) does not fault in 9 MiB
// of rings per emitter when it makes them.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "slot.h"

namespace runlens::sdk {

class EventRing {
 public:
  explicit EventRing(size_t min_capacity)
      : capacity_(std::bit_ceil(min_capacity < 2 ? size_t{2} : min_capacity)),
        mask_(capacity_ - 1),
        bytes_(capacity_ * sizeof(Cell)),
        cells_(Map(bytes_)) {}
  ~EventRing() { munmap(cells_, bytes_); }
  EventRing(const EventRing&) = delete;
  EventRing& operator=(const EventRing&) = delete;

  // Claims a cell, calls fill(Slot&) on it and publishes it. Returns false,
  // without calling fill, when the ring is full.
  template <class Fill>
  bool TryPush(Fill&& fill) noexcept {
    uint64_t pos = write_pos_.load(std::memory_order_relaxed);
    Cell* cell;
    for (;;) {
      cell = &cells_[pos & mask_];
      const uint64_t seq = Sequence(*cell, pos & mask_);
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
    SetSequence(*cell, pos & mask_, pos + 1);
    return true;
  }

  // Consumer only. Copies the oldest published slot out and frees its cell.
  bool TryPop(Slot& out) noexcept {
    const size_t index = read_pos_ & mask_;
    Cell& cell = cells_[index];
    const uint64_t seq = Sequence(cell, index);
    if (seq != read_pos_ + 1) return false;  // empty, or the producer is still filling it
    out = cell.slot;
    SetSequence(cell, index, read_pos_ + capacity_);
    ++read_pos_;
    return true;
  }

  // Events ever taken in: the write position only moves on a successful claim.
  uint64_t pushed() const noexcept { return write_pos_.load(std::memory_order_relaxed); }
  // Consumer only: events ever popped (the position of the oldest cell not yet popped).
  uint64_t popped() const noexcept { return read_pos_; }
  size_t capacity() const noexcept { return capacity_; }

 private:
  // Trivial, so zeroed pages are cells (accessed through std::atomic_ref).
  struct alignas(64) Cell {
    uint64_t relative_sequence;  // the sequence number less the cell's index
    Slot slot;
  };
  static_assert(sizeof(Cell) <= 512, "keep a cell within 8 cache lines");
  static_assert(std::is_trivially_default_constructible_v<Cell> && std::is_trivially_destructible_v<Cell>);

  static Cell* Map(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();  // at construction only, never on the hot path
    return static_cast<Cell*>(p);
  }
  static uint64_t Sequence(Cell& cell, size_t index) noexcept {
    return std::atomic_ref<uint64_t>(cell.relative_sequence).load(std::memory_order_acquire) + index;
  }
  static void SetSequence(Cell& cell, size_t index, uint64_t sequence) noexcept {
    std::atomic_ref<uint64_t>(cell.relative_sequence).store(sequence - index, std::memory_order_release);
  }

  const size_t capacity_;
  const size_t mask_;
  const size_t bytes_;
  Cell* const cells_;
  alignas(64) std::atomic<uint64_t> write_pos_{0};
  alignas(64) uint64_t read_pos_ = 0;  // touched by the consumer only
};

}  // namespace runlens::sdk
