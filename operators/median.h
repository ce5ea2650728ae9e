// The median of a window of values, for the detectors and the store sink.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace runlens::ops {

// The median of `v` (the mean of the two middle values when their number is
// even), found by selection, not sorting; reorders `v`. `v` must not be empty.
inline double median_in_place(std::vector<double>& v) {
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*std::max_element(v.begin(), mid) + *mid) / 2;
}

// The lower median of `v` (the lower of the two middle values when their
// number is even: a value of `v`), by selection; reorders `v`, which must not
// be empty.
template <class T>
T lower_median_in_place(std::vector<T>& v) {
  auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace runlens::ops
