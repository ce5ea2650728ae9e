// A value per symbol, found by the symbol's id rather than by hashing: the
// hot paths that look up a node's state for every GPU sample (a hash lookup
// is two cache misses) keep an index of pointers into their own containers.
// Ids are small and dense for the symbols a fleet repeats (node names are
// interned as a run starts), so the index is a vector; a symbol whose id is
// past `kMaxId` has no slot and is looked up the slow way by the caller.
#pragma once

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

}  // namespace runlens
