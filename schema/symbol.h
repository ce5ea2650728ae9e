// Interned strings for identifiers that repeat on every event (run_id, node,
// dataset_shard, ...). A Symbol is 4 bytes, compares and hashes by id, and
// reads back its text without a lock. Ids depend on arrival order, so nothing
// that must be deterministic (ordering, alert ids) may use the id itself:
// compare and hash the text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace runlens {

class Symbol {
 public:
  constexpr Symbol() = default;
  // Returns the symbol for `text`, creating it on first use. Thread-safe.
  static Symbol intern(std::string_view text);

  std::string_view str() const;
  std::string string() const { return std::string(str()); }
  // FNV-1a 64 of the text (fnv1a(str()) in schema/record.h), computed once
  // when the symbol is made: what partitions rows by run or node.
  uint64_t text_hash() const;
  bool empty() const { return id_ == 0; }
  uint32_t id() const { return id_; }

  friend bool operator==(Symbol a, Symbol b) { return a.id_ == b.id_; }
  friend bool operator!=(Symbol a, Symbol b) { return a.id_ != b.id_; }
  // Orders by text, so that it is the same in every process. Two symbols
  // whose first 16 bytes differ compare by two integers kept with their text.
  static int compare(Symbol a, Symbol b);

 private:
  explicit constexpr Symbol(uint32_t id) : id_(id) {}
  uint32_t id_ = 0;  // 0 is the empty string
};

}  // namespace runlens

template <>
struct std::hash<runlens::Symbol> {
  size_t operator()(runlens::Symbol s) const noexcept { return std::hash<uint32_t>()(s.id()); }
};
