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
