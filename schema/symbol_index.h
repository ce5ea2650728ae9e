// A value per symbol, found by the symbol's id rather than by hashing: the
// hot paths that look up a node's state for every GPU sample (a hash lookup
// is two cache misses) keep an index of pointers into their own containers.
// Ids are small and dense for the symbols a fleet repeats (node names are
// interned as a run starts), so the index is a vector; a symbol whose id is
// past `kMaxId` has no slot and is looked up the slow way by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "schema/symbol.h"

namespace runlens {

template <class V>
class SymbolIndex {
 public:
  static constexpr uint32_t kMaxId = 1u << 16;

  // The value of `s` (value-initialized on first use), or null when `s` has
  // no slot (the empty symbol has one, id 0).
  V* slot(Symbol s) {
    const uint32_t id = s.id();
    if (id >= kMaxId) return nullptr;
    if (id >= values_.size()) values_.resize(id + 1);
    return &values_[id];
  }
  // Forgets every value (the containers the values point into changed).
  void clear() { values_.clear(); }

 private:
  std::vector<V> values_;
};

// The element `find()` returns (a reference into a container whose elements
// never move), remembered in `*slot` so that it is looked up once; `find()`
// itself when there is no slot (`slot` null).
template <class T, class Find>
T& remembered(T** slot, Find&& find) {
  if (slot == nullptr) return find();
  if (*slot == nullptr) *slot = &find();
  return **slot;
}

// A pointer per (symbol, small index), such as a node's GPUs: a slot for an
// index in [0, kSlots) of a symbol SymbolIndex has one for, else none.
template <class T, int32_t kSlots>
class SymbolSlots {
 public:
  T** slot(Symbol s, int32_t i) {
    if (i < 0 || i >= kSlots) return nullptr;
    std::vector<T*>* slots = index_.slot(s);
    if (slots == nullptr) return nullptr;
    if (static_cast<size_t>(i) >= slots->size()) slots->resize(static_cast<size_t>(i) + 1, nullptr);
    return &(*slots)[static_cast<size_t>(i)];
  }
  void clear() { index_.clear(); }

 private:
  SymbolIndex<std::vector<T*>> index_;
};

}  // namespace runlens
