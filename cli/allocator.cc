#include "cli/allocator.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace runlens::cli {

namespace {

// Batches of rows (hundreds of KiB each) are made and freed thousands of
// times a second. glibc's defaults hand such blocks back to the kernel on
// free (mmap above 128 KiB, trimming the heap's top and the threads' arenas)
// and take every page again on the next batch: a twelfth of a replay's CPU
// went to page faults. Keeping freed memory for reuse costs 10-15 MiB of peak
// RSS. The heap's first touch of each page was still a tenth of a replay's
// CPU (in a VM a fault costs microseconds), so the commands that move rows
// also ask for transparent huge pages on the heap (glibc's hugetlb=1, which
// has no mallopt: glibc reads it at start, so runlens starts itself again
// once with it in GLIBC_TUNABLES (same pid and name), and clears that for
// the processes it starts).
constexpr const char* kTunables =
    "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456:"
    "glibc.malloc.top_pad=67108864";
constexpr const char* kTunedMark = "RUNLENS_MALLOC_TUNED";

bool tuned = false;  // runlens set the allocator (not the operator's GLIBC_TUNABLES)

bool moves_rows(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view command = argv[1];
  for (std::string_view c : {"replay", "run", "convert", "record", "send", "synth"}) {
    if (command == c) return true;
  }
  return false;
}

}  // namespace

void tune_allocator(int argc, char** argv) {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const bool started_again = std::getenv(kTunedMark) != nullptr;
  unsetenv(kTunedMark);
  if (started_again && tunables != nullptr && std::string_view(tunables) == kTunables) {
    // What this process starts gets glibc's defaults.
    unsetenv("GLIBC_TUNABLES");
    tuned = true;
    return;
  }
  if (tunables != nullptr) return;
  if (moves_rows(argc, argv)) {
    setenv("GLIBC_TUNABLES", kTunables, 1);
    setenv(kTunedMark, "1", 1);
    // The binary's own path, not /proc/self/exe: the kernel names a process
    // after the file it executes, and ps, pgrep and perf would show "exe".
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = '\0';
      execv(self, argv);
    }
    execv("/proc/self/exe", argv);
    // Not possible here (no /proc): go on without huge pages.
    unsetenv(kTunedMark);
    unsetenv("GLIBC_TUNABLES");
  }
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  tuned = true;
}

// glibc gives each thread that allocates an arena of its own, up to eight a
// core. Memory one arena freed is reused only by the threads on it, and a
// replay's operators run on whichever executor thread is free, so their state
// spreads over the arenas and each keeps its own spare: with 2 executor
// threads, peak RSS grew from 140 to 151 MiB between 500 and 8,000 steps, and
// from 132 to 138 MiB with three arenas, in the same time (docs/performance.md,
// "Fewer malloc arenas"). A thread created past the cap shares an arena.
void cap_arenas(int executor_threads) {
  if (tuned) mallopt(M_ARENA_MAX, std::max(3, executor_threads + 1));
}

}  // namespace runlens::cli
