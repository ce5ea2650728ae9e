#include "operators/median.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using runlens::ops::lower_median_in_place;
using runlens::ops::median_certainly_above;
using runlens::ops::median_in_place;
using runlens::ops::select_nth;

namespace {

// select_nth's contract at position k of v: the value a sort puts there, and
// the range split around it.
template <class T>
void check_select(std::vector<T> v, size_t k) {
  std::vector<T> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  select_nth(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  REQUIRE(v[k] == sorted[k]);
  for (size_t i = 0; i < k; ++i) REQUIRE_FALSE(v[k] < v[i]);
  for (size_t i = k + 1; i < v.size(); ++i) REQUIRE_FALSE(v[i] < v[k]);
  std::sort(v.begin(), v.end());
  REQUIRE(v == sorted);  // a permutation: nothing lost or duplicated
}

}  // namespace

TEST_CASE("select_nth puts the sorted value at every position, with the range split around it") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> work(1900, 30);
  std::uniform_int_distribution<int> few(0, 3);
  for (size_t n : {1u, 2u, 3u, 31u, 32u, 33u, 64u, 100u, 1000u, 1024u, 4097u}) {
    CAPTURE(n);
    std::vector<double> distinct(n), ties(n), sorted_up(n), sorted_down(n), equal(n, 1980.0);
    for (size_t i = 0; i < n; ++i) {
      distinct[i] = work(rng);
      ties[i] = few(rng);  // few values, many ties (a fleet's clocks)
      sorted_up[i] = static_cast<double>(i);
      sorted_down[i] = static_cast<double>(n - i);
    }
    std::vector<size_t> positions = {0, n / 2, (n - 1) / 2, n - 1, n / 3, n * 95 / 100, n * 99 / 100};
    for (size_t k : positions) {
      CAPTURE(k);
      check_select(distinct, k);
      check_select(ties, k);
      check_select(sorted_up, k);
      check_select(sorted_down, k);
      check_select(equal, k);
    }
  }
}

TEST_CASE("select_nth on integers, and on a range with a NaN as std::nth_element") {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> steps(-5, 500);
  std::vector<int64_t> v(777);
  for (auto& x : v) x = steps(rng);
  for (size_t k : {0u, 1u, 388u, 776u}) check_select(v, k);

  std::vector<double> with_nan(200);
  for (size_t i = 0; i < with_nan.size(); ++i) with_nan[i] = static_cast<double>((i * 37) % 200);
  with_nan[50] = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> expect = with_nan;
  auto mid = [](std::vector<double>& x) { return x.begin() + 100; };
  std::nth_element(expect.begin(), mid(expect), expect.end());
  select_nth(with_nan.begin(), mid(with_nan), with_nan.end());
  for (size_t i = 0; i < expect.size(); ++i) {
    CAPTURE(i);
    CHECK((with_nan[i] == expect[i] || (std::isnan(with_nan[i]) && std::isnan(expect[i]))));
  }
}

TEST_CASE("the medians: mean of the middle two, and the lower one") {
  std::vector<double> odd = {5, 1, 4, 2, 3};
  CHECK(median_in_place(odd) == 3);
  std::vector<double> even = {4, 1, 3, 2};
  CHECK(median_in_place(even) == 2.5);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> big(1024);
  for (auto& x : big) x = u(rng);
  std::vector<double> sorted = big;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> copy = big;
  CHECK(median_in_place(copy) == (sorted[511] + sorted[512]) / 2);
  CHECK(lower_median_in_place(big) == sorted[511]);
}

TEST_CASE("a median certainly above a value: never where the median is not, and whenever more than half are") {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> len(1, 60), small(0, 6);
  int told = 0, not_told = 0;
  for (int round = 0; round < 20000; ++round) {
    // Few distinct values, so that thresholds fall on and between them.
    std::vector<double> v(static_cast<size_t>(len(rng)));
    for (auto& x : v) x = 7.0 + 0.25 * small(rng);
    const double t = 7.0 + 0.125 * small(rng) * 2 + (round % 3 == 0 ? 0.125 : 0);
    const bool certain = median_certainly_above(v, t);
    std::vector<double> copy = v;
    const double median = median_in_place(copy);
    size_t above = 0;
    for (double x : v) above += x > t ? 1 : 0;
    CAPTURE(v.size());
    CAPTURE(t);
    CAPTURE(median);
    if (certain) CHECK(median > t);
    CHECK(certain == (above > v.size() / 2));
    (certain ? told : not_told) += 1;
  }
  CHECK(told > 1000);
  CHECK(not_told > 1000);
  // Two middle values on either side of t: the mean is above, the count cannot tell.
  CHECK_FALSE(median_certainly_above({1, 2, 10, 11}, 5));
  CHECK(median_certainly_above({1, 9, 10, 11}, 5));
}
