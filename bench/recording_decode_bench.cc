// Cap'n Proto batches decoded into rows on one thread: recording_decode_bench FILE.rlrec [RUNS]
//
// Reads the recording into memory, then steps through its frames as the
// recording reader does (recording::FrameCursor) and decodes every batch with
// capnpc::decode_batch into a vector of rows it reuses. Prints the median MB/s
// (file bytes) and events/s of RUNS runs (default 5), wall and this thread's
// CPU time; the CPU figure is the steadier one on a shared machine. This is
// the source thread's share of `runlens replay FILE.rlrec` and of a live
// collector's (docs/performance.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "formats/capnp_codec.h"
#include "formats/recording.h"

int main(int argc, char** argv) {
  using namespace runlens;
  using bench::median;
  using bench::thread_cpu;
  if (argc < 2) {
    std::fprintf(stderr, "usage: recording_decode_bench FILE.rlrec [RUNS]\n");
    return 2;
  }
  const int runs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  std::ifstream f(argv[1], std::ios::binary);
  if (!f) return std::fprintf(stderr, "cannot read %s\n", argv[1]), 1;
  // Word-aligned, as the cursor's window is: frames are decoded where they lie.
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<uint64_t> words((raw.size() + 7) / 8);
  std::memcpy(words.data(), raw.data(), raw.size());
  const char* d = reinterpret_cast<const char*>(words.data());
  if (std::string why = recording::header_problem(d, raw.size(), raw.size()); !why.empty()) {
    return std::fprintf(stderr, "%s: %s\n", argv[1], why.c_str()), 1;
  }

  std::vector<double> wall, cpu;
  size_t events = 0, issues_seen = 0, frames = 0;
  for (int r = 0; r < runs; ++r) {
    std::vector<Record> rows;
    std::vector<capnpc::EventIssue> issues;
    std::string error;
    recording::FrameCursor cursor;
    cursor.open(d, raw.size());
    cursor.seek(recording::kHeaderBytes);
    size_t n = 0, bad = 0, fr = 0;
    auto t0 = std::chrono::steady_clock::now();
    double c0 = thread_cpu();
    for (;;) {
      recording::FrameStep step = cursor.next();
      if (step.kind == recording::FrameStep::Kind::kEnd) break;
      if (step.kind != recording::FrameStep::Kind::kFrame) continue;
      rows.clear();
      issues.clear();
      ++fr;
      if (!capnpc::decode_batch(step.payload, step.size, &rows, &issues, &error)) ++bad;
      n += rows.size();
      bad += issues.size();
    }
    cpu.push_back(thread_cpu() - c0);
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    events = n, issues_seen = bad, frames = fr;
  }
  const double w = median(wall), c = median(cpu), mb = static_cast<double>(raw.size()) / 1e6;
  std::printf("%s: %zu frames, %zu events, %zu bad\n", argv[1], frames, events, issues_seen);
  std::printf(
      "wall %.3f s (%.0f MB/s, %.2f M events/s); CPU %.3f s (%.0f MB/s, %.2f M events/s, %.0f ns/event)"
      "   medians of %d\n",
      w, mb / w, static_cast<double>(events) / w / 1e6, c, mb / c, static_cast<double>(events) / c / 1e6,
      c * 1e9 / static_cast<double>(events), runs);
  return 0;
}
