// eval/shard_plan: contiguous ranges covering the items exactly once.
#include "eval/shard_plan.h"

#include <doctest/doctest.h>

#include <stdexcept>

namespace runlens::eval {
namespace {

TEST_CASE("shard plan: table of plans") {
  struct Case {
    int64_t items, size, first;
    std::vector<ItemRange> expected;
  };
  const Case cases[] = {
      {10, 4, 0, {{0, 4}, {4, 8}, {8, 10}}},
      {8, 4, 0, {{0, 4}, {4, 8}}},
      {3, 10, 0, {{0, 3}}},
      {1, 1, 0, {{0, 1}}},
      {0, 5, 0, {}},
      {360, 100, 1437, {{1437, 1537}, {1537, 1637}, {1637, 1737}, {1737, 1797}}},
  };
  for (const auto& c : cases) {
    auto shards = plan_shards("e-1", c.items, c.size, c.first);
    REQUIRE(shards.size() == c.expected.size());
    for (size_t i = 0; i < shards.size(); ++i) {
      CHECK(shards[i].items == c.expected[i]);
      CHECK(shards[i].partition == static_cast<int>(i));
      CHECK(shards[i].evaluation_id == "e-1");
    }
  }
}

TEST_CASE("shard plan: the seed's MMLU example, deterministic, and every item once") {
  auto a = plan_shards("e-17", 14042, 1000);
  auto b = plan_shards("e-17", 14042, 1000);
  REQUIRE(a.size() == 15);
  CHECK(a[0].items.str() == "[0, 1000)");
  CHECK(a[1].items.str() == "[1000, 2000)");
  CHECK(a[14].items.str() == "[14000, 14042)");
  CHECK(a[3].name() == "e-17/3");
  int64_t next = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].items == b[i].items);
    CHECK(a[i].items.begin == next);
    next = a[i].items.end;
  }
  CHECK(next == 14042);
}

TEST_CASE("shard plan: invalid plans") {
  CHECK_THROWS_WITH_AS(plan_shards("e", 10, 0), "the partition size must be at least 1, got 0", std::invalid_argument);
  CHECK_THROWS_WITH_AS(plan_shards("e", -1, 5), "an evaluation cannot have a negative item count, got -1",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(plan_shards("e", 100000000, 1),
                       "partition size 1 splits 100000000 items into more than 10^7 shards", std::invalid_argument);
}

}  // namespace
}  // namespace runlens::eval
