// Sorting input that is mostly ordered already: a few ascending runs (a
// reorder buffer fed batch by batch from several producers, each in order).
// The runs are found in one pass and merged pairwise, log2(runs) passes over
// the data; input with many short runs is sorted outright. Parts the caller
// knows to be sorted already are not scanned for runs at all.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace runlens::runtime {

// A part of the input: from `begin` to the next part's begin (or the end),
// and whether the caller knows it to be sorted.
struct Segment {
  size_t begin = 0;
  bool sorted = false;
};

// Sorts `v`, made of `segments` (the first begins at 0, each after the one
// before), by `less` (a strict weak order; the result is a sorted
// permutation, stable for equal elements only when `less` is a total order).
// A sorted segment is checked only at its first element, against the one
// before it. `scratch` and `runs` are working space the caller keeps
// between calls.
template <class T, class Less>
void merge_runs(std::vector<T>& v, std::vector<T>& scratch, std::vector<size_t>& runs, Less less,
                const std::vector<Segment>& segments) {
  const size_t n = v.size();
  runs.clear();
  runs.push_back(0);
  size_t scanned = 0;  // elements scanned one by one, for the fallback below
  for (size_t s = 0; s < segments.size(); ++s) {
    const size_t begin = std::min(segments[s].begin, n);
    const size_t end = s + 1 < segments.size() ? std::min(segments[s + 1].begin, n) : n;
    if (begin >= end) continue;
    if (begin > 0 && less(v[begin], v[begin - 1])) runs.push_back(begin);
    if (segments[s].sorted) continue;
    for (size_t i = begin + 1; i < end; ++i) {
      if (!less(v[i], v[i - 1])) continue;
      runs.push_back(i);
    }
    scanned += end - begin;
    if (runs.size() > 64 && runs.size() * 16 > scanned) {  // hardly ordered at all
      std::sort(v.begin(), v.end(), less);
      return;
    }
  }
  if (runs.size() == 1) return;
  runs.push_back(n);
  scratch.resize(n);
  while (runs.size() > 2) {
    size_t kept = 0;
    for (size_t r = 0; r + 1 < runs.size(); r += 2) {
      size_t lo = runs[r], mid = runs[r + 1], hi = r + 2 < runs.size() ? runs[r + 2] : mid;
      std::merge(v.begin() + static_cast<long>(lo), v.begin() + static_cast<long>(mid),
                 v.begin() + static_cast<long>(mid), v.begin() + static_cast<long>(hi),
                 scratch.begin() + static_cast<long>(lo), less);
      runs[kept++] = lo;
    }
    runs[kept++] = n;
    runs.resize(kept);
    v.swap(scratch);
  }
}

// As above, for input of which nothing is known.
template <class T, class Less>
void merge_runs(std::vector<T>& v, std::vector<T>& scratch, std::vector<size_t>& runs, Less less) {
  static const std::vector<Segment> kWhole{Segment{}};
  merge_runs(v, scratch, runs, less, kWhole);
}

}  // namespace runlens::runtime
