// Shard planning (seed section 20): an evaluation of N items with partition
// size P becomes ceil(N / P) contiguous item ranges, shard i covering items
// [first + i*P, first + min((i+1)*P, N)). Deterministic: the same N, P and
// first item always give the same shards, so a shard's identity
// (evaluation_id + dataset_partition) and its cache key are stable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace runlens::eval {

struct ItemRange {
  int64_t begin = 0;  // first item index
  int64_t end = 0;    // one past the last
  int64_t size() const { return end - begin; }
  bool contains(int64_t item) const { return item >= begin && item < end; }
  std::string str() const;  // "[1000, 2000)"
  bool operator==(const ItemRange&) const = default;
};

struct Shard {
  std::string evaluation_id;
  int partition = 0;  // dataset_partition: 0, 1, ...
  ItemRange items;
  std::string name() const;  // "e-17/3"
};

// Throws std::invalid_argument for items < 0, partition_size < 1, first < 0,
// or more than 10^7 shards (a partition size that small is a mistake).
std::vector<Shard> plan_shards(const std::string& evaluation_id, int64_t items, int64_t partition_size,
                               int64_t first_item = 0);

}  // namespace runlens::eval
