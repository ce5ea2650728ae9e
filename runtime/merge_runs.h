// Sorting input that is mostly ordered already: a few ascending runs (a
// reorder buffer fed batch by batch from several producers, each in order).
// The runs are found in one pass and merged pairwise, log2(runs) passes over
// the data; input with many short runs is sorted outright.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace runlens::runtime {

// Sorts `v` by `less` (a strict weak order; the result is a sorted
// permutation, stable for equal elements only when `less` is a total order).
// `scratch` and `runs` are working space the caller keeps between calls.
template <class T, class Less>
void merge_runs(std::vector<T>& v, std::vector<T>& scratch, std::vector<size_t>& runs, Less less) {
  const size_t n = v.size();
  runs.clear();
  runs.push_back(0);
  for (size_t i = 1; i < n; ++i) {
    if (!less(v[i], v[i - 1])) continue;
    runs.push_back(i);
    if (runs.size() > 64 && runs.size() * 16 > n) {  // hardly ordered at all
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

}  // namespace runlens::runtime
