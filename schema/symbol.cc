#include "schema/symbol.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace runlens {
namespace {

// Append-only table: chunks never move, so a reader holding an id (which it
// received through a synchronizing queue) reads its text without a lock.
constexpr uint32_t kChunkBits = 14;
constexpr uint32_t kChunkSize = 1u << kChunkBits;
constexpr uint32_t kMaxChunks = 1u << 14;  // 268M symbols

struct Table {
  std::mutex mu;
  std::unordered_map<std::string_view, uint32_t> ids;
  std::atomic<std::string*> chunks[kMaxChunks] = {};
  uint32_t next = 1;

  Table() { chunks[0].store(new std::string[kChunkSize], std::memory_order_release); }
};

Table& table() {
  static Table* t = new Table();  // never destroyed: symbols outlive statics
  return *t;
}

// A small per-thread cache in front of the table: decoders intern the same
// few run ids and node names over and over.
struct CacheEntry {
  uint64_t hash = 0;
  uint32_t id = 0;
};
thread_local CacheEntry tl_cache[256];

uint64_t hash_text(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

Symbol Symbol::intern(std::string_view text) {
  if (text.empty()) return Symbol();
  uint64_t h = hash_text(text);
  CacheEntry& slot = tl_cache[h & 255];
  if (slot.id != 0 && slot.hash == h && Symbol(slot.id).str() == text) return Symbol(slot.id);

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
    std::string* c = t.chunks[chunk].load(std::memory_order_relaxed);
    if (c == nullptr) {
      c = new std::string[kChunkSize];
      t.chunks[chunk].store(c, std::memory_order_release);
    }
    c[id & (kChunkSize - 1)] = std::string(text);
    t.ids.emplace(std::string_view(c[id & (kChunkSize - 1)]), id);
    ++t.next;
  }
  slot = {h, id};
  return Symbol(id);
}

std::string_view Symbol::str() const {
  if (id_ == 0) return {};
  std::string* c = table().chunks[id_ >> kChunkBits].load(std::memory_order_acquire);
  return c[id_ & (kChunkSize - 1)];
}

int Symbol::compare(Symbol a, Symbol b) {
  if (a.id_ == b.id_) return 0;
  return a.str().compare(b.str());
}

}  // namespace runlens
