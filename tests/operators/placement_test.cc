// locate_rank is the one way operators set an alert's locators about a rank:
// rank, and node and GPU from the run's rank map, each where it is known.
#include "operators/placement.h"

#include <doctest/doctest.h>

using namespace runlens;
using namespace runlens::ops;

namespace {

std::shared_ptr<const RunInfo> run_with(std::vector<RankPlacement> ranks, int32_t world_size) {
  RunStart rs;
  rs.run_id = Symbol::intern("placement-run");
  rs.world_size = world_size;
  rs.ranks = std::move(ranks);
  return RunInfo::from(rs);
}

TEST_CASE("locate_rank: rank, node and GPU from the rank map, and the words for a summary") {
  auto run = run_with({{0, Symbol::intern("gpu-node-0"), 0},
                       {5, Symbol::intern("gpu-node-1"), 1},
                       {6, Symbol::intern("gpu-node-1"), -1},
                       {7, Symbol(), 3}},
                      8);
  struct Case {
    const RunInfo* run;
    int32_t rank;
    const char* words;
    const char* node;
    std::optional<int32_t> gpu;
  };
  const Case cases[] = {
      {run.get(), 5, "rank 5 (node gpu-node-1, GPU 1)", "gpu-node-1", 1},
      {run.get(), 6, "rank 6 (node gpu-node-1)", "gpu-node-1", std::nullopt},  // GPU unknown
      {run.get(), 7, "rank 7", "", 3},                                         // node unknown: GPU still set
      {run.get(), 3, "rank 3", "", std::nullopt},                              // in the world, not in the map
      {run.get(), 12, "rank 12", "", std::nullopt},                            // beyond the world
      {nullptr, 5, "rank 5", "", std::nullopt},                                // no run_start seen
  };
  for (const Case& c : cases) {
    CAPTURE(c.words);
    Alert a;
    CHECK(locate_rank(a, c.run, c.rank) == c.words);
    CHECK(a.rank == c.rank);
    CHECK(a.node.str() == c.node);
    CHECK(a.gpu == c.gpu);
  }
}

TEST_CASE("locate_rank then make_alert_id: the id follows the locators") {
  auto run = run_with({{5, Symbol::intern("gpu-node-1"), 1}}, 8);
  Alert a;
  a.kind = alert_kind::kStraggler;
  a.run_id = Symbol::intern("placement-run");
  locate_rank(a, run.get(), 5);
  CHECK(make_alert_id(a, 30) == make_alert_id("straggler", a.run_id, 5, Symbol::intern("gpu-node-1"), 1, 30));
}

TEST_CASE("node_gpu_words") {
  CHECK(node_gpu_words(Symbol::intern("n1"), 2) == "node n1, GPU 2");
  CHECK(node_gpu_words(Symbol::intern("n1"), std::nullopt) == "node n1");
  CHECK(node_gpu_words(Symbol::intern("n1"), -1) == "node n1");
}

}  // namespace
