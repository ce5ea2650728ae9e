// How fast this machine gives a process fresh memory: the first write to
// each page of an anonymous mapping, with 4 KiB pages and with transparent
// huge pages (MADV_HUGEPAGE), then a second pass over the same bytes
// (docs/performance.md, "What a fresh page costs here"). In a VM the first
// touch of a page the host has not backed is a fault in the host too, so
// the rate moves with the host's state; run it next to a benchmark to read
// the machine's phase. With PAUSE, each pass waits that many seconds first:
// a host that takes back the memory its guest leaves free (free page
// reporting, a few seconds after the free) then meets every pass cold, as a
// command run on its own does (docs/performance.md, "Huge pages after a
// pause"); without it, each pass but the first reuses what the
// pass before freed a moment ago.
//
//   build/bench/first_touch_bench [MiB (256)] [rounds (5)] [PAUSE seconds (0)]
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/timing.h"

namespace {

using runlens::bench::wall;

struct Pass {
  double first = 0, again = 0;  // seconds
};

// One fresh mapping of `bytes`, 2 MiB-aligned, touched a byte a page, then
// rewritten whole.
Pass touch(size_t bytes, bool huge) {
  constexpr size_t kHuge = size_t{2} << 20;
  void* raw = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  char* p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1));
  if (huge && madvise(p, bytes, MADV_HUGEPAGE) != 0) std::perror("madvise(MADV_HUGEPAGE)");
  Pass r;
  double t = wall();
  for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
  r.first = wall() - t;
  t = wall();
  std::memset(p, 2, bytes);
  r.again = wall() - t;
  munmap(raw, bytes + kHuge);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const int pause = argc > 3 ? std::atoi(argv[3]) : 0;
  if (mib == 0 || rounds <= 0 || pause < 0) {
    std::fprintf(stderr, "usage: first_touch_bench [MiB] [rounds] [pause seconds]\n");
    return 2;
  }
  const size_t bytes = mib << 20;
  std::vector<double> first[2], again[2];
  for (int r = 0; r < rounds; ++r) {
    for (int huge = 0; huge < 2; ++huge) {  // alternating
      if (pause > 0) sleep(static_cast<unsigned>(pause));
      Pass p = touch(bytes, huge != 0);
      first[huge].push_back(p.first);
      again[huge].push_back(p.again);
    }
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  for (int huge = 0; huge < 2; ++huge) {
    std::printf("%-18s first touch %7.1f ms (%5.2f GB/s), rewrite %6.1f ms (%5.2f GB/s), median of %d; firsts:",
                huge ? "huge pages (THP)" : "4 KiB pages", runlens::bench::median(first[huge]) * 1e3,
                gb / runlens::bench::median(first[huge]), runlens::bench::median(again[huge]) * 1e3,
                gb / runlens::bench::median(again[huge]), rounds);
    for (double s : first[huge]) std::printf(" %.0f", s * 1e3);
    std::printf(" ms\n");
  }
  return 0;
}
