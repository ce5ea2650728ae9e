// glibc malloc's settings for runlens's commands (docs/cli.md, "Memory
// allocator settings"): thresholds that keep freed memory for reuse, which
// heaps are on transparent huge pages (RUNLENS_HUGE_PAGES), and a cap on
// malloc's arenas.
#pragma once

#include <string>

namespace runlens::cli {

// Called first in main(). Sets the thresholds with mallopt; the commands
// that move rows also advise the main heap and two thread arenas' heaps (one
// for `replay` and `run`, whose cap_arenas makes the rest) as
// RUNLENS_HUGE_PAGES says (by default `auto`: every heap on huge pages
// where this machine's first touch of a 4 KiB page is dear, else every heap
// on 4 KiB pages, advised against huge pages). An operator's own
// GLIBC_TUNABLES win: then nothing is set, here or in cap_arenas.
void tune_allocator(int argc, char** argv);

// Caps malloc's arenas at 3 for one executor thread and at executor_threads
// for more, when tune_allocator set the allocator, and makes (and advises)
// the arenas the cap allows. Called before the engine starts its threads
// (glibc makes a thread's arena at the thread's first allocation, and fixes
// its limit the first time it makes one with a cap set).
void cap_arenas(int executor_threads);

// Which heaps tune_allocator put on huge pages and why, for a command's
// summary ("every heap on huge pages (RUNLENS_HUGE_PAGES=auto: a 4 KiB
// page's first touch took 7.7 us here)"); empty where it advised nothing.
std::string allocator_summary();

}  // namespace runlens::cli
