#include "cli/allocator.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <latch>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace runlens::cli {

namespace {

// Batches of rows (hundreds of KiB each) are made and freed thousands of
// times a second. glibc's defaults hand such blocks back to the kernel on
// free (mmap above 128 KiB, trimming the heap's top and the threads' arenas)
// and take every page again on the next batch: a twelfth of a replay's CPU
// went to page faults. Keeping freed memory for reuse costs 10-15 MiB of peak
// RSS.
constexpr int kMmapThreshold = 64 << 20;
constexpr int kTrimThreshold = 256 << 20;
constexpr int kTopPad = 64 << 20;

// The heaps' pages: 4 KiB or transparent huge pages. Which is cheaper to
// touch first depends on the machine and its host, not on runlens:
//   - where each 4 KiB page's first touch cost 11 us (2.7 ms a MiB, a VM of
//     2026-12-02..05), huge pages were cheaper in every state (1.1-1.8 ms a
//     MiB at worst), and the main heap was put on them;
//   - in a VM whose host takes back the memory its guest leaves free (a
//     virtio balloon reporting free 2 MiB blocks, the machine since
//     2026-12-06), a huge page that has been given back costs 1.7-4.2 ms a
//     MiB at first touch, one freed a moment before 0.1 ms, and 4 KiB pages
//     0.4-0.5 ms every time. There a replay on 4 KiB pages took 7-27 % less
//     time than with its main heap on huge pages (alone, back to back or
//     after a pause: 3 files, 6-8 runs each), side by side with the peers as
//     long, and live as much (docs/performance.md, "4 KiB pages by default");
//   - in a VM whose host fills the guest's page tables on first use too
//     (the machine of 2026-12-07), a 4 KiB page's first touch cost 7.5-9.5
//     us every time, a huge page 1.4 ms a MiB cold and 0.06 warm: replays
//     with every heap on huge pages took 15-17 % less time than on 4 KiB
//     pages, and 6-12 % less than with the main heap alone on them.
// So by default (`auto`) a command that moves rows times the first touch of
// a few 4 KiB pages as it starts (decide(), below) and puts every heap on
// huge pages where that is dear, else none. RUNLENS_HUGE_PAGES=never, heap
// or always choose without the probe (bench/first_touch_bench tells which
// kind a machine is at more length). glibc would put the heaps on huge
// pages itself only under glibc.malloc.hugetlb=1, which it reads when a
// process starts (starting the binary again with it cost 10-25 ms a
// command); runlens advises the heaps instead (docs/cli.md, "Memory
// allocator settings").
//
// A thread arena's heap is a 64 MiB reservation aligned to its size
// (glibc's HEAP_MAX_SIZE: it finds a chunk's heap by masking the address),
// so the heap of the arena a pointer came from is known from the pointer.
constexpr uintptr_t kThreadHeapBytes = uintptr_t{64} << 20;

// RUNLENS_HUGE_PAGES: which heaps are on transparent huge pages.
//   auto (the default, also when unset or empty): `always` where this
//     machine's first touch of a 4 KiB page is dear, else `never` (below);
//   never: none, every heap advised against them (the kernel's "always"
//     mode would use them regardless);
//   heap: the main heap, where the operators' state lives; the threads'
//     arenas, where a source's batches stream through, on 4 KiB pages;
//   always: the threads' arenas too.
// Anything else is reported and taken as the default.
enum class HugePages { kAuto, kHeap, kAlways, kNever };

bool tuned = false;                        // runlens set the allocator (not the operator's GLIBC_TUNABLES)
bool advised = false;                      // ...and advises its heaps (the command moves rows)
HugePages huge_pages = HugePages::kNever;  // ...which way (never kAuto once decided)
HugePages huge_pages_asked = HugePages::kAuto;
double first_touch_ns = -1;  // auto's probe: a 4 KiB page's first touch, median (ns); -1 when not probed

HugePages huge_pages_wanted() {
  const char* v = std::getenv("RUNLENS_HUGE_PAGES");
  const std::string_view value = v == nullptr ? "" : v;
  if (value.empty() || value == "auto") return HugePages::kAuto;
  if (value == "never") return HugePages::kNever;
  if (value == "heap") return HugePages::kHeap;
  if (value == "always") return HugePages::kAlways;
  std::fprintf(stderr, "runlens: RUNLENS_HUGE_PAGES is auto, never, heap or always, not '%s': using auto\n", v);
  return HugePages::kAuto;
}

const char* name(HugePages h) {
  switch (h) {
    case HugePages::kAuto:
      return "auto";
    case HugePages::kHeap:
      return "heap";
    case HugePages::kAlways:
      return "always";
    case HugePages::kNever:
      break;
  }
  return "never";
}

// What `auto` measures: the first write to each of 16 fresh 4 KiB pages of
// a mapping of its own (advised against huge pages), each timed, the
// median taken (a preempted touch is one outlier). It takes 16 faults:
// 25-150 us. The mapping is unmapped after.
double probe_first_touch_ns() {
  constexpr size_t kPages = 16, kPage = 4096;
  void* m = mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return -1;
  madvise(m, kPages * kPage, MADV_NOHUGEPAGE);
  auto* bytes = static_cast<volatile char*>(m);
  std::array<double, kPages> ns{};
  for (size_t i = 0; i < kPages; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    bytes[i * kPage] = 1;
    ns[i] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  munmap(m, kPages * kPage);
  std::nth_element(ns.begin(), ns.begin() + kPages / 2, ns.end());
  return ns[kPages / 2];
}

// `auto`: huge pages for every heap where a 4 KiB page's first touch costs
// more than this. What was measured (docs/performance.md, "Huge pages where
// a small page is dear"): where it cost 11 us (the VM of 2026-12-02..05)
// and 7.5-9.5 us (the VM of 2026-12-07, whose host fills the guest's page
// tables on the first touch too), replays on huge pages were the faster, by
// 15-17 % on the second; where it cost 1.5 us (the VM of 2026-12-06, whose
// host takes back free 2 MiB blocks, so a huge page costs 1.7-4.2 ms a MiB
// cold), 4 KiB pages were faster by 7-27 %. 4 us lies between the kinds.
constexpr double kHugeAboveNs = 4000;

HugePages decide(HugePages asked) {
  if (asked != HugePages::kAuto) return asked;
  first_touch_ns = probe_first_touch_ns();
  return first_touch_ns > kHugeAboveNs ? HugePages::kAlways : HugePages::kNever;
}

bool moves_rows(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view command = argv[1];
  for (std::string_view c : {"replay", "run", "convert", "record", "send", "synth"}) {
    if (command == c) return true;
  }
  return false;
}

// The kernel's transparent huge pages are off ("never"): then runlens asks
// for none (MADV_COLLAPSE would make them regardless).
bool thp_never() {
  FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
  if (f == nullptr) return true;
  char line[128] = {};
  const bool read = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  return !read || std::string_view(line).find("[never]") != std::string_view::npos;
}

// The main arena's heap, [heap] in /proc/self/maps: where it begins.
uintptr_t main_heap_begin() {
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return 0;
  char line[512];
  uintptr_t begin = 0;
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    if (std::string_view(line).find("[heap]") != std::string_view::npos) {
      unsigned long b = 0;
      if (std::sscanf(line, "%lx-", &b) == 1) begin = b;
      break;
    }
  }
  std::fclose(maps);
  return begin;
}

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
constexpr uintptr_t align_up(uintptr_t a, uintptr_t to) { return (a + to - 1) & ~(to - 1); }

// A 2 MiB piece that was touched before its advice is already on 4 KiB
// pages (the kernel maps a huge page only where nothing is mapped yet):
// MADV_COLLAPSE (Linux 6.1) puts it on one huge page now. Where the kernel
// lacks it, the piece stays on 4 KiB pages.
void collapse(uintptr_t begin, uintptr_t end) {
#ifndef MADV_COLLAPSE
  constexpr int MADV_COLLAPSE = 25;
#endif
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_COLLAPSE);
}

uintptr_t main_heap_first = 0;  // [heap]'s first byte, once advised

// The main arena grows its heap with brk, by what it needs plus M_TOP_PAD.
// It grows here by kMainHeapRoom at once, by one block freed at once (with
// no pad, and not mapped apart) to an end on a 2 MiB boundary (glibc: brk
// grows by the block, plus MINSIZE, less the top chunk, rounded up to a
// page), and all of it is advised. Its pages are not touched, so RSS does not
// change; the block's header is where the heap's top was. Growth past that
// room gets no advice and is on 4 KiB pages.
constexpr uintptr_t kMainHeapRoom = uintptr_t{128} << 20;

// `huge`: advised MADV_HUGEPAGE, else MADV_NOHUGEPAGE (the kernel's "always"
// mode would use huge pages regardless, and khugepaged collapse pieces).
void advise_main_heap(bool huge) {
  const uintptr_t begin = main_heap_begin();
  const auto touched_end = reinterpret_cast<uintptr_t>(sbrk(0));
  if (begin == 0 || touched_end < begin) return;
  const uintptr_t target = (touched_end + kMainHeapRoom) & ~(kHugePage - 1);
  mallopt(M_TOP_PAD, 0);
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(2 * kMainHeapRoom));           // the block comes from brk
  const size_t chunk = (target - touched_end) + mallinfo2().keepcost - 32;  // keepcost: the top chunk
  void* block = std::malloc(chunk - 16);                                    // a chunk of exactly `chunk` bytes
  const auto end = reinterpret_cast<uintptr_t>(sbrk(0));
  std::free(block);
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TOP_PAD, kTopPad);
  // Not from brk (another allocator, as under a sanitizer): nothing to advise.
  if (block == nullptr || end == touched_end) return;
  if (!huge) {
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_NOHUGEPAGE);
    return;
  }
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) != 0) return;
  main_heap_first = begin;
  // What was allocated before main() (a few hundred KiB) may reach past the
  // heap's first whole 2 MiB piece.
  collapse(align_up(begin, kHugePage), align_up(touched_end, kHugePage));
}

// The heaps advised so far (tune_allocator's and cap_arenas's threads may
// meet the same arenas).
std::mutex advised_mu;
std::vector<uintptr_t> advised_heaps;
std::vector<void*> fillers;  // see advise_own_arena

// Advises the heap of the arena the calling thread allocates from, `huge`
// or not (MADV_NOHUGEPAGE: the kernel's "always" mode would use huge pages
// regardless). glibc wrote the heap's header, and so mapped its first 2 MiB
// on 4 KiB pages, before the advice: in a heap just made and advised huge,
// one block that is never freed takes the rest of those 2 MiB (address
// space only: it is not touched), so that what the arena hands out starts on
// a huge page.
void advise_own_arena(bool huge) {
  void* p = std::malloc(64);
  const auto at = reinterpret_cast<uintptr_t>(p);
  const auto brk_end = reinterpret_cast<uintptr_t>(sbrk(0));
  if (p == nullptr || (at >= main_heap_first && at < brk_end)) {
    std::free(p);  // the main arena: advised already
    return;
  }
  const uintptr_t heap = at & ~(kThreadHeapBytes - 1);
  {
    std::lock_guard lock(advised_mu);
    if (std::find(advised_heaps.begin(), advised_heaps.end(), heap) != advised_heaps.end()) {
      std::free(p);
      return;
    }
    advised_heaps.push_back(heap);
  }
  const bool advised_huge =
      madvise(reinterpret_cast<void*>(heap), kThreadHeapBytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0 && huge;
  if (!advised_huge) {  // the filler below is for a heap on huge pages only
    std::free(p);
    return;
  }
  // The first block from a heap just made (glibc's heap header and arena
  // take a few KiB): the top chunk starts right after it, at at + 64.
  const uintptr_t top = at + 64;
  if (top - heap < (uintptr_t{64} << 10)) {
    // A chunk up to the 2 MiB boundary; kept (never freed) where the
    // compiler cannot drop it.
    std::lock_guard lock(advised_mu);
    fillers.push_back(std::malloc(heap + kHugePage - top - 16));
  }
  std::free(p);
}

// Makes `arenas` thread arenas ahead of the threads that will use them:
// as many threads at once, each with an arena of its own (glibc makes one
// for a thread that allocates while every other is held, up to the cap),
// advise their heaps (`huge` or not) and end. glibc hands an ended thread's
// arena to the next thread that allocates, so the engine's threads take these.
void advise_thread_arenas(int arenas, bool huge) {
  if (arenas <= 0) return;
  std::latch all_allocated(arenas);
  std::vector<std::thread> threads;
  int started = 0;
  try {
    threads.reserve(static_cast<size_t>(arenas));
    for (; started < arenas; ++started) {
      threads.emplace_back([&] {
        advise_own_arena(huge);
        all_allocated.arrive_and_wait();  // hold the arena until every thread has one
      });
    }
  } catch (const std::exception&) {
    // No thread to spare (a limit on threads): the advice is only a hint.
    // Release the threads that did start.
    all_allocated.count_down(arenas - started);
  }
  for (auto& t : threads) t.join();
}

}  // namespace

void tune_allocator(int argc, char** argv) {
  // An operator's GLIBC_TUNABLES decide alone.
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return;
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
  mallopt(M_TOP_PAD, kTopPad);
  tuned = true;
  if (!moves_rows(argc, argv) || thp_never()) return;
  advised = true;
  huge_pages_asked = huge_pages_wanted();
  huge_pages = decide(huge_pages_asked);
  advise_main_heap(huge_pages != HugePages::kNever);
  // The arenas of a command's two busiest threads besides main's; one for
  // `replay` and `run`, whose cap_arenas makes as many more as their cap
  // allows (an arena made here would outlast a lower cap: glibc hands it to
  // a thread whatever the cap).
  const std::string_view command = argv[1];
  const bool engine = command == "replay" || command == "run";
  advise_thread_arenas(engine ? 1 : 2, huge_pages == HugePages::kAlways);
}

// glibc gives each thread that allocates an arena of its own, up to eight a
// core. Memory one arena freed is reused only by the threads on it, and a
// replay's operators run on whichever executor thread is free (and on a
// source's thread, when it drains a full inbox itself), so their state
// spreads over the arenas and each keeps its own spare: with 2 executor
// threads, peak RSS grew from 140 to 151 MiB between 500 and 8,000 steps, and
// from 132 to 138 MiB with three arenas, in the same time (docs/performance.md,
// "Fewer malloc arenas"). A thread created past the cap shares an arena.
//
// The cap: three with one executor thread (the main thread's arena, where
// the executor runs, and two that the source, the store's writer and
// ZeroMQ's I/O thread share; with two, the writer shared the main thread's
// and replays were up to a tenth slower), and one an executor thread with
// more. In a replay with two, the main thread, the TBB
// worker and the source then share the main arena, and the writer and
// ZeroMQ's I/O thread the other (gdb: each thread's `thread_arena`); peak RSS
// over 8,000 steps fell from 118 to 106 MiB (1.11 to 1.06 times the 500-step
// peak) in the same time, where with three arenas the worker shared one with
// the source or the writer, never the main thread's. Live, at 2 M events/s,
// nothing was shed either way and bursts were taken in at 2.49 against 2.60
// M events/s (medians of 10 and 16 runs that each spread over 2.2-3.0)
// (docs/performance.md, "Operators' windows in rings; one arena fewer").
// Which thread takes which arena follows the order in which they first
// allocate; glibc has no call that chooses.
void cap_arenas(int executor_threads) {
  if (!tuned) return;
  const int arenas = executor_threads <= 1 ? 3 : executor_threads;
  mallopt(M_ARENA_MAX, arenas);
  if (advised) advise_thread_arenas(arenas - 1, huge_pages == HugePages::kAlways);
}

std::string allocator_summary() {
  if (!advised) return "";
  std::string s = huge_pages == HugePages::kNever  ? "every heap on 4 KiB pages"
                  : huge_pages == HugePages::kHeap ? "the main heap on huge pages, the threads' arenas on 4 KiB pages"
                                                   : "every heap on huge pages";
  s += " (RUNLENS_HUGE_PAGES=";
  s += name(huge_pages_asked);
  if (first_touch_ns >= 0) {
    char probe[96];
    std::snprintf(probe, sizeof probe, ": a 4 KiB page's first touch took %.1f us here", first_touch_ns / 1000);
    s += probe;
  }
  return s + ")";
}

}  // namespace runlens::cli
