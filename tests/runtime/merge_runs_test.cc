// merge_runs must give exactly what a sort gives, however the input is cut
// into runs: it orders every reorder buffer of the executor.
#include "runtime/merge_runs.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace rt = runlens::runtime;

namespace {

using Item = std::pair<int, int>;  // (key, unique id): a total order, like the canonical one

bool less(const Item& a, const Item& b) { return a < b; }

std::vector<Item> merged(std::vector<Item> v) {
  std::vector<Item> scratch;
  std::vector<size_t> runs;
  rt::merge_runs(v, scratch, runs, less);
  return v;
}

std::vector<Item> sorted(std::vector<Item> v) {
  std::sort(v.begin(), v.end(), less);
  return v;
}

// `runs` ascending runs of random length over keys 0..key_range (ties across runs).
std::vector<Item> runs_of(std::mt19937& rng, int runs, int max_len, int key_range) {
  std::vector<Item> v;
  int id = 0;
  for (int r = 0; r < runs; ++r) {
    int len = std::uniform_int_distribution<int>(0, max_len)(rng);
    std::vector<Item> run;
    for (int i = 0; i < len; ++i) run.push_back({std::uniform_int_distribution<int>(0, key_range)(rng), id++});
    std::sort(run.begin(), run.end());
    v.insert(v.end(), run.begin(), run.end());
  }
  return v;
}

}  // namespace

TEST_CASE("merge_runs: small cases") {
  struct Case {
    const char* name;
    std::vector<Item> in;
  };
  std::vector<Case> cases = {
      {"empty", {}},
      {"one", {{5, 0}}},
      {"sorted", {{1, 0}, {2, 1}, {3, 2}}},
      {"reversed", {{3, 0}, {2, 1}, {1, 2}}},
      {"two runs", {{1, 0}, {4, 1}, {7, 2}, {2, 3}, {5, 4}}},
      {"three runs, odd count", {{5, 0}, {6, 1}, {1, 2}, {9, 3}, {0, 4}, {2, 5}}},
      {"equal keys across runs", {{1, 0}, {1, 2}, {1, 1}, {1, 3}}},
      {"a run of one at the end", {{1, 0}, {2, 1}, {3, 2}, {0, 3}}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(merged(c.in) == sorted(c.in));
  }
}

TEST_CASE("merge_runs: random runs, few or many, equal a sort") {
  std::mt19937 rng(7);
  for (int runs : {1, 2, 3, 5, 8, 17, 64, 65, 200, 1000}) {
    for (int max_len : {1, 3, 50, 700}) {
      for (int key_range : {3, 1000000}) {
        auto v = runs_of(rng, runs, max_len, key_range);
        CAPTURE(runs);
        CAPTURE(max_len);
        CAPTURE(key_range);
        CHECK(merged(v) == sorted(v));
      }
    }
  }
}

TEST_CASE("merge_runs: working space is reused across calls") {
  std::mt19937 rng(11);
  std::vector<Item> scratch;
  std::vector<size_t> runs;
  for (int i = 0; i < 20; ++i) {
    auto v = runs_of(rng, 1 + i % 7, 40, 100);
    auto want = sorted(v);
    rt::merge_runs(v, scratch, runs, less);
    CHECK(v == want);
  }
}

TEST_CASE("merge_runs: segments known to be sorted are not scanned, and the result still equals a sort") {
  // Segments: sorted ones (as a source's batch in canonical order) beside
  // unsorted ones (runs of several orderings), empty ones, and segments
  // whose first element is below the last of the one before.
  std::mt19937 rng(13);
  for (int round = 0; round < 300; ++round) {
    std::vector<Item> v;
    std::vector<rt::Segment> segments;
    const int parts = std::uniform_int_distribution<int>(1, 12)(rng);
    int id = 0;
    for (int s = 0; s < parts; ++s) {
      const bool sorted_part = rng() % 2;
      const int len = std::uniform_int_distribution<int>(0, 60)(rng);
      std::vector<Item> part;
      for (int i = 0; i < len; ++i) part.push_back({std::uniform_int_distribution<int>(0, 40)(rng), id++});
      if (sorted_part) std::sort(part.begin(), part.end());
      segments.push_back({v.size(), sorted_part});
      v.insert(v.end(), part.begin(), part.end());
    }
    auto want = sorted(v);
    std::vector<Item> scratch;
    std::vector<size_t> runs;
    rt::merge_runs(v, scratch, runs, less, segments);
    CAPTURE(round);
    CHECK(v == want);
  }
  // A segment marked sorted is not read but at its first element: comparisons
  // counted on one long sorted segment after a short unsorted one.
  std::vector<Item> v = {{5, 0}, {1, 1}, {3, 2}};
  for (int i = 0; i < 1000; ++i) v.push_back({10 + i, 3 + i});
  int compared = 0;
  auto counting = [&](const Item& a, const Item& b) {
    ++compared;
    return a < b;
  };
  std::vector<Item> scratch;
  std::vector<size_t> runs;
  rt::merge_runs(v, scratch, runs, counting, {{0, false}, {3, true}});
  CHECK(v == sorted(v));
  CHECK(compared < 20);  // 2 within the first segment, 1 at the second's start, then the merge of 3 with 1000
}
