// schema/bytes.h against memcmp, at every length up to 40 and every position
// of a difference, with each string ending right before a page the process
// may not read: a load past either end faults. And the symbol table's
// per-thread cache, which compares with it.
#include "schema/bytes.h"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "schema/symbol.h"

namespace runlens {
namespace {

// Two readable pages, each followed by one that is not.
struct GuardedPages {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* base = nullptr;
  GuardedPages() {
    void* m = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    base = static_cast<char*>(m);
    REQUIRE(mprotect(base + page, page, PROT_NONE) == 0);
    REQUIRE(mprotect(base + 3 * page, page, PROT_NONE) == 0);
  }
  ~GuardedPages() { munmap(base, 4 * page); }
  // n bytes ending where the first (second) readable page ends.
  char* a(size_t n) const { return base + page - n; }
  char* b(size_t n) const { return base + 3 * page - n; }
};

TEST_CASE("same_bytes: as memcmp at every length and difference, reading nothing past either end") {
  GuardedPages g;
  for (size_t n = 0; n <= 40; ++n) {
    char* a = g.a(n);
    char* b = g.b(n);
    for (size_t i = 0; i < n; ++i) a[i] = b[i] = static_cast<char>('a' + i % 26);
    CHECK(same_bytes(a, b, n));
    CHECK(same_text({a, n}, {b, n}));
    for (size_t i = 0; i < n; ++i) {
      b[i] ^= 0x20;
      CHECK_FALSE(same_bytes(a, b, n));
      CHECK(same_bytes(a, b, n) == (std::memcmp(a, b, n) == 0));
      b[i] ^= 0x20;
    }
    if (n > 0) CHECK_FALSE(same_text({a, n}, {b, n - 1}));
  }
}

TEST_CASE("Symbol::intern: texts that share their first and last eight bytes and length stay apart") {
  // The per-thread cache keys on those bytes and the length, then compares the texts.
  std::string x = "gpu-node-0000-aaaaaaaa-rack-01", y = x;
  y[14] = 'b';
  const Symbol sx = Symbol::intern(x), sy = Symbol::intern(y);
  CHECK(sx != sy);
  for (int i = 0; i < 3; ++i) {
    CHECK(Symbol::intern(x) == sx);
    CHECK(Symbol::intern(y) == sy);
    CHECK(Symbol::intern(x).str() == x);
  }
}

}  // namespace
}  // namespace runlens
