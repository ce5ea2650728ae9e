// Where a rank runs, for alerts: locators (node, GPU) and the words that name
// them, and, for operators partitioned by node, the map from a node's GPUs
// back to the run and rank placed on them.
//
// gpu and node samples carry no run_id (telemetry contract): an operator that
// reads them is partitioned by node (node_key), receives every run_start and
// run_end (key() returns std::nullopt for them) and keeps, for the nodes its
// partition owns, which run and rank each GPU serves (NodePlacement).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "operators/operator.h"
#include "runtime/state/codec.h"
#include "schema/number_format.h"
#include "schema/state_codecs.h"

namespace runlens::ops {

// The ranks operators keep state by rank for: rank_join rejects a step
// report of a rank outside [0, kRankLimit), and operators drop other
// rows of such ranks.
constexpr int32_t kRankLimit = 1 << 20;
inline bool indexable_rank(int32_t rank) { return rank >= 0 && rank < kRankLimit; }

// The locators of an alert about one rank, for every operator: sets the
// alert's rank, and its node and GPU from the run's rank map (each where the
// map knows it; `run` may be null), and returns the rank's name for a summary:
// "rank 5 (node gpu-node-1, GPU 1)" ("rank 5" where the node is unknown).
// The alert's id then follows from its locators: make_alert_id(a, onset).
std::string locate_rank(Alert& a, const RunInfo* run, int32_t rank);

// "node gpu-node-1, GPU 1" (GPU left out when unknown).
std::string node_gpu_words(Symbol node, std::optional<int32_t> gpu);

// The report of `rank` in a joined step (its ranks are ordered by rank), or null.
const Step* rank_report(const StepRecord& rec, int32_t rank);

// Partition key of a node (partitioned by node, as gpu and node samples are).
inline uint64_t node_key(Symbol node) { return node.text_hash(); }

// The run and rank placed on one GPU.
struct GpuTenant {
  Symbol run_id;
  int32_t rank = -1;
  std::shared_ptr<const RunInfo> run;
  template <class Io>
  void fields(Io& io) {
    io(run_id, rank, run);
  }
};

// Rank maps of the runs on the nodes one partition owns. Fed every run_start
// and run_end; remembers only the owned nodes, so memory is split across
// partitions like the node samples are.
class NodePlacement {
 public:
  NodePlacement(int partition, int partitions) : partition_(partition), partitions_(partitions) {}

  bool owns(Symbol node) const {
    return partitions_ <= 1 || node_key(node) % static_cast<uint64_t>(partitions_) == static_cast<uint64_t>(partition_);
  }
  void on_run_start(const RunStart& rs);
  void on_run_end(Symbol run_id);

  // The run and rank on (node, gpu), or null. The latest run_start wins.
  const GpuTenant* tenant(Symbol node, int32_t gpu) const;
  // The ranks of `run` on `node`, in rank order (empty when none).
  const std::vector<int32_t>* ranks_on(Symbol run_id, Symbol node) const;
  // The owned nodes that `run` uses, sorted by name (a deterministic order).
  const std::vector<Symbol>* nodes_of(Symbol run_id) const;
  const RunInfo* run(Symbol run_id) const;

  // The rank maps are state (docs/state.md); the partition is the instance's.
  template <class Io>
  void fields(Io& io) {
    io(runs_, gpus_);
  }

 private:
  struct RunNodes {
    std::shared_ptr<const RunInfo> info;
    std::vector<Symbol> nodes;                               // owned, sorted by text
    std::unordered_map<Symbol, std::vector<int32_t>> ranks;  // owned node -> ranks
    template <class Io>
    void fields(Io& io) {
      io(info, nodes, ranks);
      if constexpr (runtime::state::kReading<Io>) {
        for (Symbol n : nodes) {
          if (!ranks.count(n)) io.fail("node " + n.string() + " of a run has no ranks");
        }
      }
    }
  };
  int partition_, partitions_;
  std::unordered_map<Symbol, RunNodes> runs_;
  std::unordered_map<Symbol, std::map<int32_t, GpuTenant>> gpus_;  // owned node -> gpu -> tenant
};

}  // namespace runlens::ops
