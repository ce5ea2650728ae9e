// A first-in, first-out window of plain values in one block of storage, for
// operators' per-GPU and per-rank histories (issue 13).
//
// A std::deque takes a 512-byte block from malloc each time its back crosses
// into a new one, and frees one as its front leaves it: a window of a
// thousand GPUs' samples allocated and freed a block every few samples, on
// whichever executor thread ran the partition. A Ring's block is a power of
// two, doubled when full and otherwise kept: once a window has filled,
// pushing and popping allocate nothing.
//
// Snapshots encode a Ring as the sequence of its values, oldest first,
// exactly as they encode a std::deque (runtime/state/codec.h's SeqCodec), so a
// state written with either reads as the other.
#pragma once

#include <compare>
#include <cstddef>
#include <iterator>
#include <type_traits>
#include <vector>

#include "runtime/state/codec.h"

namespace runlens::ops {

template <class T>
class Ring {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                "a Ring holds plain values: a value that leaves is overwritten, not destroyed");

  template <class Owner, class V>
  class Iter {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;

    Iter() = default;
    Iter(Owner* ring, size_t i) : ring_(ring), i_(i) {}
    operator Iter<const Ring, const T>() const { return {ring_, i_}; }

    reference operator*() const { return (*ring_)[i_]; }
    pointer operator->() const { return &(*ring_)[i_]; }
    reference operator[](difference_type n) const { return (*ring_)[i_ + static_cast<size_t>(n)]; }
    Iter& operator++() { return ++i_, *this; }
    Iter& operator--() { return --i_, *this; }
    Iter operator++(int) { return {ring_, i_++}; }
    Iter operator--(int) { return {ring_, i_--}; }
    Iter& operator+=(difference_type n) { return i_ += static_cast<size_t>(n), *this; }
    Iter& operator-=(difference_type n) { return i_ -= static_cast<size_t>(n), *this; }
    friend Iter operator+(Iter it, difference_type n) { return it += n; }
    friend Iter operator+(difference_type n, Iter it) { return it += n; }
    friend Iter operator-(Iter it, difference_type n) { return it -= n; }
    friend difference_type operator-(const Iter& a, const Iter& b) {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend bool operator==(const Iter& a, const Iter& b) { return a.i_ == b.i_; }
    friend auto operator<=>(const Iter& a, const Iter& b) { return a.i_ <=> b.i_; }

   private:
    Owner* ring_ = nullptr;
    size_t i_ = 0;  // from the oldest value
  };

 public:
  using value_type = T;
  using size_type = size_t;
  using iterator = Iter<Ring, T>;
  using const_iterator = Iter<const Ring, const T>;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return slots_.size(); }

  // The i-th value from the oldest.
  T& operator[](size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  void push_back(const T& v) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = v;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }
  // Empty; the block is kept.
  void clear() { head_ = size_ = 0; }

  iterator begin() { return {this, 0}; }
  iterator end() { return {this, size_}; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

 private:
  // Twice the room (at least 8), the values moved to its start in order.
  void grow() {
    std::vector<T> more(slots_.empty() ? 8 : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) more[i] = (*this)[i];
    slots_.swap(more);
    head_ = 0;
  }

  std::vector<T> slots_;  // a power of two of them, or none
  size_t head_ = 0;       // the oldest value's slot
  size_t size_ = 0;
};

}  // namespace runlens::ops

namespace runlens::runtime::state {
template <class T>
struct Codec<ops::Ring<T>> : SeqCodec<ops::Ring<T>> {};
}  // namespace runlens::runtime::state
