#include "schema/symbol.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "schema/bytes.h"
#include "schema/record.h"  // fnv1a: the one FNV-1a of the schema

namespace runlens {
namespace {

// Append-only table: chunks never move, so a reader holding an id (which it
// received through a synchronizing queue) reads its text without a lock.
constexpr uint32_t kChunkBits = 14;
constexpr uint32_t kChunkSize = 1u << kChunkBits;
constexpr uint32_t kMaxChunks = 1u << 14;  // 268M symbols

// A symbol's text, its hash, and its first 16 bytes as two big-endian
// integers (zero-padded): when those differ they order two texts as the
// bytes do, without reading the texts.
struct Entry {
  std::string text;
  uint64_t hash = 0;
  uint64_t order[2] = {0, 0};
};

struct Table {
  std::mutex mu;
  std::unordered_map<std::string_view, uint32_t> ids;
  std::atomic<Entry*> chunks[kMaxChunks] = {};
  uint32_t next = 1;

  Table() { chunks[0].store(new Entry[kChunkSize], std::memory_order_release); }
};

Table& table() {
  static Table* t = new Table();  // never destroyed: symbols outlive statics
  return *t;
}

const Entry& entry(uint32_t id) {
  const Entry* c = table().chunks[id >> kChunkBits].load(std::memory_order_acquire);
  return c[id & (kChunkSize - 1)];
}

// A small per-thread cache in front of the table: decoders intern the same
// run ids and node names over and over (a fleet's hundreds of nodes). It is
// found by a hash of the text's first and last eight bytes and its length,
// cheaper than the table's FNV-1a, and checked against the text itself; two
// ways a set, so that two texts hashing alike do not evict each other.
struct CacheEntry {
  uint64_t key = 0;
  uint32_t id = 0;
};
constexpr int kCacheSetBits = 10;  // two entries a set, the last used first
thread_local CacheEntry tl_cache[size_t{2} << kCacheSetBits];

uint64_t cache_key(std::string_view text) {
  uint64_t head = 0, tail = 0;
  const size_t n = text.size();
  if (n >= 8) {
    std::memcpy(&head, text.data(), 8);
    std::memcpy(&tail, text.data() + n - 8, 8);
  } else {
    std::memcpy(&head, text.data(), n);
  }
  // One 64x64->128 multiplication folded: every bit of both words reaches the
  // high bits, which pick the slot (the texts differ in their last bytes).
  const unsigned __int128 m =
      static_cast<unsigned __int128>(head ^ 0x9E3779B97F4A7C15ull) * (tail ^ 0xC2B2AE3D27D4EB4Full ^ n);
  return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
}

}  // namespace

Symbol Symbol::intern(std::string_view text) {
  if (text.empty()) return Symbol();
  const uint64_t key = cache_key(text);
  CacheEntry* set = &tl_cache[2 * (key >> (64 - kCacheSetBits))];
  for (int way = 0; way < 2; ++way) {
    if (set[way].id != 0 && set[way].key == key && same_text(Symbol(set[way].id).str(), text))
      return Symbol(set[way].id);
  }
  const uint64_t h = fnv1a(text);

  Table& t = table();
  std::lock_guard lock(t.mu);
  auto it = t.ids.find(text);
  uint32_t id;
  if (it != t.ids.end()) {
    id = it->second;
  } else {
    id = t.next;
    uint32_t chunk = id >> kChunkBits;
    if (chunk >= kMaxChunks) throw std::length_error("symbol table full");
    Entry* c = t.chunks[chunk].load(std::memory_order_relaxed);
    if (c == nullptr) {
      c = new Entry[kChunkSize];
      t.chunks[chunk].store(c, std::memory_order_release);
    }
    Entry& e = c[id & (kChunkSize - 1)];
    e.text = std::string(text);
    e.hash = h;
    for (size_t i = 0; i < 16; ++i) {
      uint64_t byte = i < text.size() ? static_cast<unsigned char>(text[i]) : 0;
      e.order[i / 8] |= byte << (8 * (7 - i % 8));
    }
    t.ids.emplace(std::string_view(e.text), id);
    ++t.next;
  }
  set[1] = set[0];
  set[0] = {key, id};
  return Symbol(id);
}

std::string_view Symbol::str() const {
  if (id_ == 0) return {};
  return entry(id_).text;
}

uint64_t Symbol::text_hash() const { return id_ == 0 ? fnv1a({}) : entry(id_).hash; }

int Symbol::compare(Symbol a, Symbol b) {
  if (a.id_ == b.id_) return 0;
  if (a.id_ == 0 || b.id_ == 0) return a.id_ == 0 ? -1 : 1;  // the empty text sorts first
  const Entry& x = entry(a.id_);
  const Entry& y = entry(b.id_);
  if (x.order[0] != y.order[0]) return x.order[0] < y.order[0] ? -1 : 1;
  if (x.order[1] != y.order[1]) return x.order[1] < y.order[1] ? -1 : 1;
  return x.text.compare(y.text);
}

}  // namespace runlens
