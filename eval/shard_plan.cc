#include "eval/shard_plan.h"

#include <stdexcept>

namespace runlens::eval {

std::string ItemRange::str() const { return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")"; }

std::string Shard::name() const { return evaluation_id + "/" + std::to_string(partition); }

std::vector<Shard> plan_shards(const std::string& evaluation_id, int64_t items, int64_t partition_size,
                               int64_t first_item) {
  if (items < 0)
    throw std::invalid_argument("an evaluation cannot have a negative item count, got " + std::to_string(items));
  if (partition_size < 1)
    throw std::invalid_argument("the partition size must be at least 1, got " + std::to_string(partition_size));
  if (first_item < 0)
    throw std::invalid_argument("the first item index must not be negative, got " + std::to_string(first_item));
  const int64_t count = (items + partition_size - 1) / partition_size;
  if (count > 10000000)
    throw std::invalid_argument("partition size " + std::to_string(partition_size) + " splits " +
                                std::to_string(items) + " items into more than 10^7 shards");
  std::vector<Shard> shards;
  shards.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t b = first_item + i * partition_size;
    const int64_t e = first_item + std::min(items, (i + 1) * partition_size);
    shards.push_back(Shard{evaluation_id, static_cast<int>(i), ItemRange{b, e}});
  }
  return shards;
}

}  // namespace runlens::eval
