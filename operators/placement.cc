#include "operators/placement.h"

#include <algorithm>

namespace runlens::ops {

std::string node_gpu_words(Symbol node, std::optional<int32_t> gpu) {
  std::string s = "node " + node.string();
  if (gpu && *gpu >= 0) s += ", GPU " + std::to_string(*gpu);
  return s;
}

std::string locate_rank(Alert& a, const RunInfo* run, int32_t rank) {
  a.rank = rank;
  std::string where = "rank " + std::to_string(rank);
  if (!run) return where;
  const RankPlacement* p = run->place(rank);
  if (!p) return where;
  a.node = p->node;
  if (p->gpu >= 0) a.gpu = p->gpu;
  if (p->node.empty()) return where;
  return where + " (" + node_gpu_words(p->node, a.gpu) + ")";
}

const Step* rank_report(const StepRecord& rec, int32_t rank) {
  if (rank >= 0 && static_cast<size_t>(rank) < rec.ranks.size() && rec.ranks[rank].rank == rank)
    return &rec.ranks[rank];
  auto it =
      std::lower_bound(rec.ranks.begin(), rec.ranks.end(), rank, [](const Step& s, int32_t r) { return s.rank < r; });
  return it != rec.ranks.end() && it->rank == rank ? &*it : nullptr;
}

void NodePlacement::on_run_start(const RunStart& rs) {
  on_run_end(rs.run_id);  // a second run_start replaces the first
  RunNodes rn;
  rn.info = RunInfo::from(rs);
  for (const RankPlacement& p : rn.info->placement) {
    if (p.node.empty() || !owns(p.node)) continue;
    auto [it, fresh] = rn.ranks.try_emplace(p.node);
    if (fresh) rn.nodes.push_back(p.node);
    it->second.push_back(p.rank);
    if (p.gpu >= 0) gpus_[p.node][p.gpu] = GpuTenant{rs.run_id, p.rank, rn.info};
  }
  std::sort(rn.nodes.begin(), rn.nodes.end(), [](Symbol a, Symbol b) { return Symbol::compare(a, b) < 0; });
  runs_[rs.run_id] = std::move(rn);
}

void NodePlacement::on_run_end(Symbol run_id) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  for (Symbol node : it->second.nodes) {
    auto g = gpus_.find(node);
    if (g == gpus_.end()) continue;
    for (auto t = g->second.begin(); t != g->second.end();) {
      t = t->second.run_id == run_id ? g->second.erase(t) : std::next(t);
    }
    if (g->second.empty()) gpus_.erase(g);
  }
  runs_.erase(it);
}

const GpuTenant* NodePlacement::tenant(Symbol node, int32_t gpu) const {
  auto g = gpus_.find(node);
  if (g == gpus_.end()) return nullptr;
  auto t = g->second.find(gpu);
  return t == g->second.end() ? nullptr : &t->second;
}

const std::vector<int32_t>* NodePlacement::ranks_on(Symbol run_id, Symbol node) const {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return nullptr;
  auto r = it->second.ranks.find(node);
  return r == it->second.ranks.end() ? nullptr : &r->second;
}

const std::vector<Symbol>* NodePlacement::nodes_of(Symbol run_id) const {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : &it->second.nodes;
}

const RunInfo* NodePlacement::run(Symbol run_id) const {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : it->second.info.get();
}

}  // namespace runlens::ops
