// Keyed state (docs/state.md): the state an operator keeps per key (a run, a
// node, a GPU), owned in a form the runtime can snapshot and restore.
//
// An operator declares the per-key state type (a struct with fields(), or any
// type with a Codec); KeyedState creates it on first use of a key, forgets it
// on reset(key) (it is created afresh on the next use) and encodes every key's
// state in the order of the encoded keys, so a snapshot does not depend on
// hashing or on the order keys arrived in. Lookups cost what a hash map's do:
// this is the container the hot path uses, not a copy of it.
//
// Nothing here knows what a key or a row is: the Record binding (operators/
// run_state.h) decides which rows reset which key.
#pragma once

#include <functional>
#include <unordered_map>
#include <utility>

#include "runtime/state/codec.h"

namespace runlens::runtime::state {

template <class Key, class State, class Hash = std::hash<Key>, class Eq = std::equal_to<Key>>
class KeyedState {
 public:
  using Map = std::unordered_map<Key, State, Hash, Eq>;
  using iterator = typename Map::iterator;
  using const_iterator = typename Map::const_iterator;
  using key_type = Key;
  using mapped_type = State;

  // The state of `key`, created (value-initialized) on first use.
  State& operator[](const Key& key) { return map_[key]; }
  // As operator[], and whether it was created now (the caller may initialize it).
  template <class... A>
  std::pair<iterator, bool> try_emplace(const Key& key, A&&... a) {
    return map_.try_emplace(key, std::forward<A>(a)...);
  }
  iterator find(const Key& key) { return map_.find(key); }
  const_iterator find(const Key& key) const { return map_.find(key); }
  size_t count(const Key& key) const { return map_.count(key); }

  // Forgets a key's state: the next use creates it afresh.
  size_t reset(const Key& key) { return map_.erase(key); }
  size_t erase(const Key& key) { return map_.erase(key); }
  iterator erase(const_iterator it) { return map_.erase(it); }
  iterator erase(iterator it) { return map_.erase(it); }
  void clear() { map_.clear(); }

  iterator begin() { return map_.begin(); }
  iterator end() { return map_.end(); }
  const_iterator begin() const { return map_.begin(); }
  const_iterator end() const { return map_.end(); }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }

  const Map& map() const { return map_; }
  Map& map() { return map_; }

 private:
  Map map_;
};

template <class K, class S, class H, class E>
struct Codec<KeyedState<K, S, H, E>> {
  static void encode(Writer& w, const KeyedState<K, S, H, E>& v) {
    Codec<typename KeyedState<K, S, H, E>::Map>::encode(w, v.map());
  }
  static void decode(Reader& r, KeyedState<K, S, H, E>& v) {
    Codec<typename KeyedState<K, S, H, E>::Map>::decode(r, v.map());
  }
};

}  // namespace runlens::runtime::state
