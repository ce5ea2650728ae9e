// glibc malloc's settings for runlens's commands (docs/cli.md, "Memory
// allocator settings"): thresholds that keep freed memory for reuse, the heap
// on transparent huge pages, and a cap on malloc's arenas.
#pragma once

namespace runlens::cli {

// Called first in main(). The commands that move rows start the binary again
// once with the settings in GLIBC_TUNABLES (glibc reads hugetlb only when a
// process starts); the others set the thresholds with mallopt. An operator's
// own GLIBC_TUNABLES win: then nothing is set, here or in cap_arenas.
void tune_allocator(int argc, char** argv);

// Caps malloc's arenas at executor_threads + 1, and at least 3, when
// tune_allocator set the allocator. Called before the engine starts its
// threads (glibc makes a thread's arena at its first allocation and keeps
// the limit it read when it made the first one).
void cap_arenas(int executor_threads);

}  // namespace runlens::cli
