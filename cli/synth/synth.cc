#include "cli/synth/synth.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

#include "schema/vocabulary.h"

namespace runlens::synth {

bool parse_fault(const std::string& text, Fault* f, std::string* error) {
  *f = Fault();
  size_t colon = text.find(':');
  f->kind = text.substr(0, colon);
  static const char* kKinds[] = {"straggler",
                                 "nan",
                                 "missing_rank",
                                 "gc_pause",
                                 "lr_change",
                                 "thermal",
                                 "power_cap",
                                 "host_cpu",
                                 "slow_shard",
                                 "network",
                                 "oom",
                                 "xid",
                                 "ecc",
                                 "config_slowdown",
                                 "slow_checkpoint",
                                 "checkpoint_failure",
                                 "clock_low",
                                 "nvlink",
                                 "pcie_replay",
                                 "host_contention",
                                 "speed_groups",
                                 "slowdown"};
  if (std::find(std::begin(kKinds), std::end(kKinds), f->kind) == std::end(kKinds)) {
    std::string names;
    for (const char* k : kKinds) names += (names.empty() ? "" : ", ") + std::string(k);
    *error = "unknown fault '" + f->kind + "' (" + names + ")";
    return false;
  }
  // Defaults of the detail faults (see fault_help()).
  if (f->kind == "thermal") f->factor = 2.0;
  if (f->kind == "power_cap") f->factor = 1.3;
  if (f->kind == "host_cpu") f->factor = 400;
  if (f->kind == "slow_shard") f->factor = 30;
  if (f->kind == "network") f->factor = 8;
  if (f->kind == "config_slowdown") f->factor = 1.4;
  if (f->kind == "slow_checkpoint") f->factor = 15;
  if (f->kind == "xid") f->code = 79;
  if (f->kind == "clock_low") f->factor = 1.6;
  if (f->kind == "nvlink") f->factor = 8;
  if (f->kind == "pcie_replay") f->factor = 1;
  if (f->kind == "host_contention") f->factor = 1.5;
  if (f->kind == "speed_groups") f->factor = 2.5, f->from_step = 1;
  if (f->kind == "slowdown") f->factor = 1.3;
  if (colon == std::string::npos) return true;
  std::stringstream ss(text.substr(colon + 1));
  std::string kv;
  while (std::getline(ss, kv, ',')) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) return *error = "expected key=value in fault '" + text + "'", false;
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    try {
      if (k == "rank")
        f->rank = std::stoi(v);
      else if (k == "from")
        f->from_step = std::stoll(v);
      else if (k == "to")
        f->to_step = std::stoll(v);
      else if (k == "step")
        f->from_step = f->to_step = std::stoll(v);
      else if (k == "factor")
        f->factor = std::stod(v);
      else if (k == "code")
        f->code = std::stoll(v);
      else if (k == "shard")
        f->shard = std::stoi(v);
      else if (k == "count")
        f->count = std::stoi(v);
      else if (k == "label")
        f->label = std::stoi(v) != 0;
      else
        return *error = "unknown fault parameter '" + k + "' in '" + text + "'", false;
    } catch (...) {
      return *error = "invalid number '" + v + "' in fault '" + text + "'", false;
    }
  }
  static const char* kNeedRank[] = {"thermal", "power_cap",   "host_cpu",        "oom",     "xid", "ecc", "clock_low",
                                    "nvlink",  "pcie_replay", "host_contention", "slowdown"};
  bool need_rank = std::find(std::begin(kNeedRank), std::end(kNeedRank), f->kind) != std::end(kNeedRank);
  if (f->kind == "slowdown" && (f->count < 1 || f->factor < 1)) {
    *error = "fault 'slowdown' needs count >= 1 and factor >= 1 in '" + text + "'";
    return false;
  }
  if (f->kind == "speed_groups" && f->factor <= 0) {
    *error = "fault 'speed_groups' needs factor > 0 in '" + text + "'";
    return false;
  }
  if ((need_rank && f->rank < 0) || (f->kind == "slow_shard" && f->rank < 0 && f->shard < 0)) {
    *error =
        "fault '" + f->kind + "' needs rank=R" + (f->kind == "slow_shard" ? " or shard=S" : "") + " in '" + text + "'";
    return false;
  }
  return true;
}

std::string fault_help() {
  return "straggler:rank=R,from=K[,to=T][,factor=F] | nan:step=K | missing_rank:rank=R,from=K | "
         "gc_pause:rank=R,step=K | lr_change:step=K,factor=F | "
         "thermal:rank=R,from=K[,to=T][,factor=2] (GPU hot, hw thermal slowdown, clock / F, rank F x slower) | "
         "power_cap:rank=R,from=K[,to=T][,factor=1.3] (power limit lowered, power_cap bit, clock / F) | "
         "host_cpu:rank=R,from=K[,to=T][,factor=400] (the rank's node at ~97 % CPU, its ranks wait F ms more for data) "
         "| "
         "slow_shard:shard=S|rank=R,from=K[,to=T][,factor=30] (storage reads of a shard F x slower, its readers wait) "
         "| "
         "network:from=K[,to=T][,rank=R][,factor=8] (collectives F x slower on all ranks, retransmits on R's node) | "
         "oom:rank=R,step=K (long-sequence batches, then CUDA OOM at K; the run fails) | "
         "xid:rank=R,step=K[,code=79] (XID on R's GPU, which leaves the bus: R goes missing) | "
         "ecc:rank=R,from=K (ecc_dbe_total of R's GPU rises) | "
         "config_slowdown:step=K[,factor=1.4] (config_change event, then every rank F x slower) | "
         "slow_checkpoint:from=K[,to=T][,factor=15] (checkpoints F x longer) | "
         "checkpoint_failure:step=K | from=K,to=T (the checkpoint at or after K fails, and those up to T) | "
         "clock_low:rank=R,from=K[,to=T][,factor=1.6] (R's GPU clock / F with no throttle reason, at a normal "
         "temperature: clocks left locked low; R F x slower) | "
         "nvlink:rank=R,from=K[,to=T][,factor=8] (nvlink_errors_total of R's GPU rises; collectives F x slower on "
         "all ranks) | "
         "pcie_replay:rank=R,from=K[,to=T][,factor=1] (pcie_replay_total of R's GPU rises by ~100 a sample; R F x "
         "slower) | "
         "host_contention:rank=R,from=K[,to=T][,factor=1.5] (another job shares R's node: its CPUs ~97 % busy, and "
         "each of its ranks computes ~F x slower in a random 40 % of steps) | "
         "speed_groups[:factor=2.5][,label=1] (two speed groups from the first step: the ranks of the upper half of "
         "the nodes compute F x slower, each by its own 0.85..1.15 of it; label=1: the rank map names their GPU "
         "models) | "
         "slowdown:rank=R,from=K[,to=T][,count=4][,factor=1.3] (COUNT ranks, R and every 7th after it, each "
         "slower by its own share of 1 + (F - 1) / 3 .. F)";
}

namespace {
bool active(const Fault& f, int64_t step) { return step >= f.from_step && step <= f.to_step; }

// DCGM clock-event reasons (telemetry contract, gpu.throttle_reasons).
constexpr int64_t kPowerCap = 0x4, kHwSlowdown = 0x8, kHwThermal = 0x40;

bool is_detail_fault(const Fault& f) {
  static const char* kBasic[] = {"straggler", "nan",          "missing_rank", "gc_pause",
                                 "lr_change", "speed_groups", "slowdown"};
  return std::find(std::begin(kBasic), std::end(kBasic), f.kind) == std::end(kBasic);
}

// A number in [0, 1) fixed by (seed, rank): a rank's own speed within its group.
double rank_draw(uint64_t seed, int32_t rank) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(rank) + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// The fleet's shape: each rank's fixed work multiplier from speed_groups (the
// slow group: the upper half of the nodes, or of the ranks on one node) and
// the slowdown faults' ranks with their own factors.
struct FleetShape {
  std::vector<double> group_factor;  // by rank, 1 in the fast group
  std::vector<bool> slow_group;
  std::vector<std::vector<std::pair<int32_t, double>>> slowdowns;  // by fault: (rank, factor)
};

FleetShape fleet_shape(const Options& o) {
  FleetShape shape;
  shape.group_factor.assign(static_cast<size_t>(o.ranks), 1.0);
  shape.slow_group.assign(static_cast<size_t>(o.ranks), false);
  int32_t nodes = (o.ranks + o.gpus_per_node - 1) / o.gpus_per_node;
  for (const auto& f : o.faults) {
    if (f.kind == "speed_groups") {
      for (int32_t r = 0; r < o.ranks; ++r) {
        bool slow = nodes >= 2 ? r / o.gpus_per_node >= (nodes + 1) / 2 : r >= (o.ranks + 1) / 2;
        if (!slow) continue;
        shape.slow_group[static_cast<size_t>(r)] = true;
        shape.group_factor[static_cast<size_t>(r)] *= f.factor * (0.85 + 0.3 * rank_draw(o.seed, r));
      }
    }
    std::vector<std::pair<int32_t, double>> ranks;
    if (f.kind == "slowdown" && o.ranks > 0) {
      double lo = 1 + (f.factor - 1) / 3;
      for (int32_t i = 0; i < f.count; ++i) {
        int32_t r = ((f.rank + 7 * i) % o.ranks + o.ranks) % o.ranks;
        if (std::any_of(ranks.begin(), ranks.end(), [&](const auto& p) { return p.first == r; })) break;
        ranks.emplace_back(r, f.count == 1 ? f.factor : lo + (f.factor - lo) * i / (f.count - 1));
      }
    }
    shape.slowdowns.push_back(std::move(ranks));
  }
  return shape;
}

// Counters of one GPU or node (detail telemetry).
struct GpuCounters {
  int64_t sbe = 0, dbe = 0, pcie = 0, nvlink = 0;
};

Record make(int64_t t, auto body) {
  Record r;
  r.time_ns = t;
  r.body = std::move(body);
  return r;
}

// A rank's step in detail: its dataset shard and memory. A long-sequence
// batch (before an injected OOM) takes 8x the sequence length and nearly all
// the memory.
void add_step_detail(Step& s, Symbol shard, bool long_batch, std::mt19937_64& rng2) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  s.dataset_shard = shard;
  s.mem_allocated_bytes = static_cast<int64_t>((52 + 2 * u(rng2)) * 1e9);
  s.mem_reserved_bytes = static_cast<int64_t>((66 + 1 * u(rng2)) * 1e9);
  s.mem_peak_bytes = static_cast<int64_t>((63 + 2 * u(rng2)) * 1e9);
  if (long_batch) {
    s.seq_len = 32768;
    s.mem_allocated_bytes = static_cast<int64_t>(70e9);
    s.mem_reserved_bytes = static_cast<int64_t>(85.4e9);
    s.mem_peak_bytes = static_cast<int64_t>((84.9 + 0.3 * u(rng2)) * 1e9);
  }
  for (auto f :
       {Step::F::dataset_shard, Step::F::mem_allocated_bytes, Step::F::mem_reserved_bytes, Step::F::mem_peak_bytes}) {
    s.set_present(f);
  }
}

// The data-loader and collective samples of a rank's step (detail telemetry,
// and Options::detail_every): the batch took the step's data wait to load, the
// all_reduce the step's comm time.
void add_rank_samples(const Step& s, int64_t t_report, Symbol shard, double storage_factor, std::mt19937_64& rng2,
                      std::vector<Record>& out) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  DataSample d;
  d.run_id = s.run_id, d.rank = s.rank, d.step = s.step;
  d.storage_read_ms = (12 + 6 * u(rng2)) * storage_factor;
  d.batch_load_ms = s.data_wait_ms;
  d.decode_ms = 2 + u(rng2);
  d.tokenize_ms = 3 + u(rng2);
  d.prefetch_queue_depth = storage_factor > 1 ? 0 : 4;
  d.cache_hit_rate = storage_factor > 1 ? 0.05 : 0.9 + 0.05 * u(rng2);
  d.bytes_read = 64 << 20;
  d.dataset_shard = shard;
  for (auto f : {DataSample::F::run_id, DataSample::F::rank, DataSample::F::step, DataSample::F::batch_load_ms,
                 DataSample::F::decode_ms, DataSample::F::tokenize_ms, DataSample::F::prefetch_queue_depth,
                 DataSample::F::cache_hit_rate, DataSample::F::storage_read_ms, DataSample::F::bytes_read,
                 DataSample::F::dataset_shard}) {
    d.set_present(f);
  }
  out.push_back(make(t_report - static_cast<int64_t>((s.step_ms - s.data_wait_ms) * 1e6), d));
  Collective c;
  c.run_id = s.run_id, c.rank = s.rank, c.step = s.step, c.op = Symbol::intern("all_reduce");
  c.latency_ms = s.comm_ms;
  c.bytes = 14'000'000'000;
  for (auto f : {Collective::F::run_id, Collective::F::rank, Collective::F::step, Collective::F::op,
                 Collective::F::latency_ms, Collective::F::bytes}) {
    c.set_present(f);
  }
  out.push_back(make(t_report - 500'000, c));
}

// A GPU sample in detail: error counters (healthy: corrected ECC errors and a
// PCIe replay now and then, a reset by a driver reload now and then), throttle
// reasons and XID, and the GPU faults.
void add_gpu_detail(const Options& o, int64_t step, int32_t rank, Gpu& s, GpuCounters& c, std::mt19937_64& rng2) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> n(0.0, 1.0);
  if (u(rng2) < 0.3) c.sbe += 1 + static_cast<int64_t>(3 * u(rng2));
  if (u(rng2) < 0.05) c.pcie += 1;
  if (u(rng2) < 0.01) c = GpuCounters{};
  s.throttle_reasons = 0;
  s.xid = 0;
  s.sm_active_pct = 80 + 5 * u(rng2);
  s.mem_clock_mhz = 2619;
  for (const auto& f : o.faults) {
    if (f.rank != rank) continue;
    if (f.kind == "thermal" && active(f, step)) {
      s.temp_c = 91 + 1.5 * n(rng2);
      s.sm_clock_mhz = 1980 / f.factor;
      s.power_w = 520 + 20 * n(rng2);
      s.throttle_reasons = kHwThermal | kHwSlowdown;
    }
    if (f.kind == "power_cap" && active(f, step)) {
      s.power_limit_w = 450;
      s.power_w = 447 + 2 * u(rng2);
      s.sm_clock_mhz = 1980 / f.factor;
      s.throttle_reasons = kPowerCap;
    }
    if (f.kind == "ecc" && active(f, step)) c.dbe += 1, c.sbe += 5;
    if (f.kind == "clock_low" && active(f, step)) s.sm_clock_mhz = 1980 / f.factor;  // no reason, not hot
    if (f.kind == "nvlink" && active(f, step)) c.nvlink += 1 + static_cast<int64_t>(4 * u(rng2));
    if (f.kind == "pcie_replay" && active(f, step)) c.pcie += 50 + static_cast<int64_t>(100 * u(rng2));
    if (f.kind == "oom" && step >= f.from_step - 6) s.mem_used_bytes = static_cast<int64_t>(79.7 * (1LL << 30));
    if (f.kind == "xid" && step == f.from_step) s.xid = f.code;
  }
  s.ecc_sbe_total = c.sbe, s.ecc_dbe_total = c.dbe, s.pcie_replay_total = c.pcie, s.nvlink_errors_total = c.nvlink;
  for (auto f :
       {Gpu::F::throttle_reasons, Gpu::F::xid, Gpu::F::sm_active_pct, Gpu::F::mem_clock_mhz, Gpu::F::ecc_sbe_total,
        Gpu::F::ecc_dbe_total, Gpu::F::pcie_replay_total, Gpu::F::nvlink_errors_total}) {
    s.set_present(f);
  }
}
}  // namespace

void generate(const Options& o, const std::function<void(std::vector<Record>&)>& sink) {
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::uniform_real_distribution<double> uni2(0.0, 1.0);
  std::normal_distribution<double> noise2(0.0, 1.0);
  Symbol run = Symbol::intern(o.run_id);
  int32_t nodes = (o.ranks + o.gpus_per_node - 1) / o.gpus_per_node;
  std::vector<Symbol> node_names;
  for (int32_t n = 0; n < nodes; ++n) node_names.push_back(Symbol::intern(o.node_prefix + std::to_string(n)));

  std::vector<Record> out;
  int64_t t = o.start_ns;
  {
    auto rs = std::make_shared<RunStart>();
    rs->run_id = run;
    rs->world_size = o.ranks;
    rs->model_id = Symbol::intern("llama-x-7b");
    rs->dataset_version = Symbol::intern("v42");
    rs->gpu_peak_flops = 989e12;
    rs->model_flops_per_token = 6 * 7e9;
    rs->config = {
        {"lr", Value::of(3e-4)}, {"global_batch", Value::of(1024.0)}, {"optimizer", Value::of(std::string("adamw"))}};
    const FleetShape shape = fleet_shape(o);
    bool label = std::any_of(o.faults.begin(), o.faults.end(), [](const Fault& f) { return f.label; });
    for (int32_t r = 0; r < o.ranks; ++r) {
      rs->ranks.push_back({r, node_names[r / o.gpus_per_node], r % o.gpus_per_node});
      if (label) {
        rs->ranks.back().gpu_model = Symbol::intern(shape.slow_group[static_cast<size_t>(r)] ? "NVIDIA A100-SXM4-80GB"
                                                                                             : "NVIDIA H100 80GB HBM3");
      }
    }
    for (auto f :
         {RunStart::F::run_id, RunStart::F::world_size, RunStart::F::model_id, RunStart::F::dataset_version,
          RunStart::F::gpu_peak_flops, RunStart::F::model_flops_per_token, RunStart::F::config, RunStart::F::ranks}) {
      rs->set_present(f);
    }
    Record r;
    r.time_ns = t;
    r.body = std::shared_ptr<const RunStart>(std::move(rs));
    out.push_back(std::move(r));
    sink(out);
    out.clear();
  }
  t += 5'000'000'000;  // start-up

  // Detail telemetry (Options::detail) draws from its own stream, so that the
  // main stream, and every value it makes, is the same with it or without.
  bool detail = o.detail || std::any_of(o.faults.begin(), o.faults.end(), is_detail_fault);
  std::mt19937_64 rng2(o.seed * 0x9e3779b97f4a7c15ull + 0x5bd1e995ull);
  int32_t shards = o.shards > 0 ? o.shards : std::max(1, o.ranks / 2);
  auto shard_of = [&](int32_t rank) { return rank % shards; };
  auto shard_name = [&](int32_t shard) { return Symbol::intern("shard-" + std::to_string(shard)); };
  auto fault_on = [&](const char* kind, int64_t step, int32_t rank = -1) -> const Fault* {
    for (const auto& f : o.faults) {
      if (f.kind == kind && active(f, step) && (rank < 0 || f.rank == rank)) return &f;
    }
    return nullptr;
  };
  auto node_of = [&](int32_t rank) { return rank >= 0 ? rank / o.gpus_per_node : 0; };
  std::vector<GpuCounters> gpu_counters(static_cast<size_t>(o.ranks));
  std::vector<int64_t> tcp_retransmits(static_cast<size_t>(nodes));
  for (auto& c : gpu_counters)
    c.sbe = static_cast<int64_t>(uni2(rng2) * 200), c.pcie = static_cast<int64_t>(uni2(rng2) * 5);
  for (auto& n : tcp_retransmits) n = static_cast<int64_t>(uni2(rng2) * 10000);
  std::vector<double> extra_wait(static_cast<size_t>(o.ranks));
  bool checkpoint_failed_once = false;

  const FleetShape shape = fleet_shape(o);
  std::vector<double> work(static_cast<size_t>(o.ranks));
  double loss = 3.5;
  double lr_scale = 1.0;
  bool diverged = false;
  const int64_t seq_len = 4096, micro_batch = 4;
  for (int64_t step = 1; step <= o.steps; ++step) {
    // Per-rank work: noise, rare one-step pauses, and injected stragglers.
    for (int32_t r = 0; r < o.ranks; ++r) {
      double w = o.step_ms * (1.0 + o.jitter * noise(rng));
      if (uni(rng) < o.gc_pause_rate) w *= 1.6;
      for (const auto& f : o.faults) {
        if ((f.kind == "straggler") && f.rank == r && active(f, step)) w *= f.factor;
        if (f.kind == "gc_pause" && f.rank == r && active(f, step)) w *= 1.8;
        // Detail faults: a throttled GPU computes slower; a config change slows every rank.
        if ((f.kind == "thermal" || f.kind == "power_cap" || f.kind == "clock_low" || f.kind == "pcie_replay") &&
            f.rank == r && active(f, step)) {
          w *= f.factor;
        }
        if (f.kind == "config_slowdown" && step >= f.from_step) w *= f.factor;
        // Another job on the rank's host takes its CPUs in bursts: kernels launch late.
        if (f.kind == "host_contention" && active(f, step) && node_of(f.rank) == node_of(r) && uni2(rng2) < 0.4)
          w *= f.factor * (0.8 + 0.4 * uni2(rng2));
      }
      w *= shape.group_factor[static_cast<size_t>(r)];
      for (size_t i = 0; i < o.faults.size(); ++i) {
        if (!active(o.faults[i], step)) continue;
        for (const auto& [rank, factor] : shape.slowdowns[i]) w *= rank == r ? factor : 1.0;
      }
      work[static_cast<size_t>(r)] = std::max(1.0, w);
    }
    // Detail faults that make ranks wait for data: a saturated host, a slow shard.
    bool waits = false;
    if (detail) {
      for (int32_t r = 0; r < o.ranks; ++r) {
        double extra = 0;
        for (const auto& f : o.faults) {
          if (!active(f, step)) continue;
          if (f.kind == "host_cpu" && node_of(f.rank) == node_of(r)) extra += f.factor * (0.75 + 0.5 * uni2(rng2));
          if (f.kind == "slow_shard" && shard_of(r) == (f.shard >= 0 ? f.shard : shard_of(f.rank))) {
            extra += 15 * (f.factor - 1) * (0.8 + 0.4 * uni2(rng2));
          }
        }
        extra_wait[static_cast<size_t>(r)] = extra;
        waits |= extra > 0;
      }
    }
    double slowest = *std::max_element(work.begin(), work.end());
    if (waits) {
      // In synchronous training a rank that waits for data holds every rank back.
      for (int32_t r = 0; r < o.ranks; ++r) slowest = std::max(slowest, work[r] + extra_wait[r]);
    }
    double allreduce = 120 + 10 * uni(rng);
    if (const Fault* f = fault_on("network", step)) allreduce *= f->factor;
    if (const Fault* f = fault_on("nvlink", step)) allreduce *= f->factor;  // links retrain, traffic reroutes
    if (const Fault* f = fault_on("oom", step)) {
      // The OOM step never completes: the rank reports its batch, then runs out
      // of memory in the forward pass, and the job fails.
      const Fault& oom = *f;
      int32_t r = std::clamp(oom.rank, 0, o.ranks - 1);
      DataSample d;
      d.run_id = run, d.rank = r, d.step = step, d.batch_load_ms = 12, d.storage_read_ms = 14;
      d.dataset_shard = shard_name(shard_of(r));
      for (auto fl : {DataSample::F::run_id, DataSample::F::rank, DataSample::F::step, DataSample::F::batch_load_ms,
                      DataSample::F::storage_read_ms, DataSample::F::dataset_shard}) {
        d.set_present(fl);
      }
      out.push_back(make(t + 10'000'000, d));
      Occurrence e;
      e.kind = Symbol::intern(event_kind::kOom), e.run_id = run, e.rank = r, e.step = step;
      e.node = node_names[node_of(r)], e.gpu = r % o.gpus_per_node;
      e.message = "OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB";
      for (auto fl : {Occurrence::F::kind, Occurrence::F::run_id, Occurrence::F::rank, Occurrence::F::step,
                      Occurrence::F::node, Occurrence::F::gpu, Occurrence::F::message}) {
        e.set_present(fl);
      }
      out.push_back(make(t + 700'000'000, e));
      RunEnd end;
      end.run_id = run, end.status = Symbol::intern("failed"),
      end.reason = "CUDA out of memory on rank " + std::to_string(r);
      for (auto fl : {RunEnd::F::run_id, RunEnd::F::status, RunEnd::F::reason}) end.set_present(fl);
      out.push_back(make(t + 60'000'000'000, end));
      sink(out);
      return;
    }
    double step_wall = slowest + allreduce + 15;
    t += static_cast<int64_t>(step_wall * 1e6);
    // Options::detail_every: the data-loader and collective samples alone.
    bool samples_now = o.detail_every > 0 && step % o.detail_every == 0;

    for (int32_t r = 0; r < o.ranks; ++r) {
      bool missing = false;
      for (const auto& f : o.faults) missing |= f.kind == "missing_rank" && f.rank == r && step >= f.from_step;
      for (const auto& f : o.faults) missing |= f.kind == "xid" && f.rank == r && step >= f.from_step;
      if (missing) continue;
      double w = work[static_cast<size_t>(r)];
      double extra = extra_wait[static_cast<size_t>(r)];
      double data_wait = 5 + 10 * uni(rng) + extra;
      Step s;
      s.run_id = run;
      s.rank = r;
      s.step = step;
      s.data_wait_ms = data_wait;
      s.forward_ms = w * 0.33;
      s.backward_ms = w * 0.57;
      s.optimizer_ms = w * 0.10;
      s.comm_ms = slowest - w - extra + allreduce;
      s.step_ms = s.forward_ms + s.backward_ms + s.optimizer_ms + s.comm_ms + data_wait;
      s.tokens = seq_len * micro_batch;
      s.seq_len = seq_len;
      for (auto f :
           {Step::F::run_id, Step::F::rank, Step::F::step, Step::F::step_ms, Step::F::forward_ms, Step::F::backward_ms,
            Step::F::optimizer_ms, Step::F::comm_ms, Step::F::data_wait_ms, Step::F::tokens, Step::F::seq_len}) {
        s.set_present(f);
      }
      Record rec;
      rec.time_ns = t + static_cast<int64_t>(uni(rng) * 2e6);  // ranks report within 2 ms
      if (detail || samples_now) {
        double storage_factor = 1;
        bool long_batch = false;
        for (const auto& f : o.faults) {
          if (f.kind == "slow_shard" && active(f, step) && shard_of(r) == (f.shard >= 0 ? f.shard : shard_of(f.rank))) {
            storage_factor *= f.factor;
          }
          long_batch |= f.kind == "oom" && f.rank == r && step >= f.from_step - 2 && step < f.from_step;
        }
        Symbol shard = shard_name(shard_of(r));
        if (detail) add_step_detail(s, shard, long_batch, rng2);
        add_rank_samples(s, rec.time_ns, shard, storage_factor, rng2, out);
      }
      rec.body = s;
      out.push_back(std::move(rec));
    }
    if (detail) {
      if (const Fault* f = fault_on("xid", step); f && step == f->from_step) {
        Occurrence e;
        int32_t r = std::clamp(f->rank, 0, o.ranks - 1);
        e.kind = Symbol::intern(event_kind::kXid), e.run_id = run, e.rank = r, e.step = step, e.code = f->code;
        e.node = node_names[node_of(r)], e.gpu = r % o.gpus_per_node;
        e.message = "NVRM: Xid " + std::to_string(f->code) + ", GPU has fallen off the bus";
        for (auto fl : {Occurrence::F::kind, Occurrence::F::run_id, Occurrence::F::rank, Occurrence::F::step,
                        Occurrence::F::code, Occurrence::F::node, Occurrence::F::gpu, Occurrence::F::message}) {
          e.set_present(fl);
        }
        out.push_back(make(t - static_cast<int64_t>(step_wall * 0.5e6), e));
      }
      for (const auto& f : o.faults) {
        if (f.kind != "config_slowdown" || step != f.from_step) continue;
        Occurrence e;
        e.kind = Symbol::intern(event_kind::kConfigChange), e.run_id = run, e.step = step;
        e.key = Symbol::intern("activation_checkpointing");
        e.old = Value::of(std::string("selective")), e.new_ = Value::of(std::string("full"));
        for (auto fl : {Occurrence::F::kind, Occurrence::F::run_id, Occurrence::F::step, Occurrence::F::key,
                        Occurrence::F::old, Occurrence::F::new_}) {
          e.set_present(fl);
        }
        out.push_back(make(t - static_cast<int64_t>(step_wall * 1e6) + 10'000'000, e));
      }
    }

    // Training metrics from rank 0: warm-up then cosine LR, decaying loss.
    double warm = std::min(1.0, static_cast<double>(step) / 50.0);
    double cosine = 0.5 * (1 + std::cos(M_PI * static_cast<double>(step) / static_cast<double>(o.steps + 1)));
    for (const auto& f : o.faults) {
      if (f.kind == "lr_change" && step == f.from_step) lr_scale *= f.factor;
    }
    double lr = 3e-4 * warm * (0.1 + 0.9 * cosine) * lr_scale;
    loss = std::max(1.5, loss * 0.995 + 0.01 * noise(rng));
    double grad_norm = 0.8 + 0.05 * noise(rng);
    bool nan_now = false;
    for (const auto& f : o.faults) nan_now |= f.kind == "nan" && step >= f.from_step;
    if (lr_scale > 5 && !diverged) grad_norm *= 40, loss *= 3;
    Train tr;
    tr.run_id = run;
    tr.step = step;
    tr.rank = 0;
    tr.loss = nan_now ? std::numeric_limits<double>::quiet_NaN() : loss;
    tr.lr = lr;
    tr.grad_norm = nan_now ? std::numeric_limits<double>::infinity() : grad_norm;
    for (auto f :
         {Train::F::run_id, Train::F::step, Train::F::rank, Train::F::loss, Train::F::lr, Train::F::grad_norm}) {
      tr.set_present(f);
    }
    diverged |= nan_now;
    Record rec;
    rec.time_ns = t + 3'000'000;
    rec.body = tr;
    out.push_back(std::move(rec));

    if (o.gpu_every > 0 && step % o.gpu_every == 0) {
      for (int32_t n = 0; n < nodes; ++n) {
        for (int32_t g = 0; g < o.gpus_per_node && n * o.gpus_per_node + g < o.ranks; ++g) {
          int32_t rank = n * o.gpus_per_node + g;
          bool off_the_bus = false;
          for (const auto& f : o.faults) off_the_bus |= f.kind == "xid" && f.rank == rank && step > f.from_step;
          if (off_the_bus) continue;
          Gpu s;
          s.node = node_names[n];
          s.gpu = g;
          s.util_pct = 95 + 3 * noise(rng);
          s.temp_c = 70 + 3 * noise(rng);
          s.power_w = 680 + 15 * noise(rng);
          s.power_limit_w = 700;
          s.sm_clock_mhz = 1980;
          s.mem_used_bytes = 77LL << 30;
          s.mem_total_bytes = 80LL << 30;
          for (auto f :
               {Gpu::F::node, Gpu::F::gpu, Gpu::F::util_pct, Gpu::F::temp_c, Gpu::F::power_w, Gpu::F::power_limit_w,
                Gpu::F::sm_clock_mhz, Gpu::F::mem_used_bytes, Gpu::F::mem_total_bytes}) {
            s.set_present(f);
          }
          if (detail) add_gpu_detail(o, step, rank, s, gpu_counters[static_cast<size_t>(rank)], rng2);
          Record gr;
          gr.time_ns = t + 4'000'000 + g;
          gr.body = s;
          out.push_back(std::move(gr));
        }
        NodeSample ns;
        ns.node = node_names[n];
        ns.cpu_pct = 35 + 5 * uni(rng);
        ns.set_present(NodeSample::F::node);
        ns.set_present(NodeSample::F::cpu_pct);
        if (detail) {
          // Retransmits trickle in; a congested NIC sends thousands; a reboot resets the total.
          int64_t& tcp = tcp_retransmits[static_cast<size_t>(n)];
          tcp += static_cast<int64_t>(20 + 80 * uni2(rng2));
          for (const auto& f : o.faults) {
            if (f.kind == "network" && active(f, step) && node_of(f.rank) == n)
              tcp += static_cast<int64_t>(5000 + 2000 * uni2(rng2));
            if (f.kind == "host_cpu" && active(f, step) && node_of(f.rank) == n) ns.cpu_pct = 96 + 3 * uni2(rng2);
            if (f.kind == "host_contention" && active(f, step) && node_of(f.rank) == n) {
              // Busy in user space (a compiler, another job's loaders), some system time and steal.
              ns.cpu_user_pct = 82 + 4 * uni2(rng2);
              ns.cpu_system_pct = 9 + 2 * uni2(rng2);
              ns.cpu_steal_pct = 3 + 2 * uni2(rng2);
              ns.cpu_iowait_pct = 0.5 * uni2(rng2);
              ns.cpu_pct = ns.cpu_user_pct + ns.cpu_system_pct + ns.cpu_steal_pct + ns.cpu_iowait_pct;
              for (auto fl : {NodeSample::F::cpu_user_pct, NodeSample::F::cpu_system_pct, NodeSample::F::cpu_steal_pct,
                              NodeSample::F::cpu_iowait_pct})
                ns.set_present(fl);
            }
          }
          if (uni2(rng2) < 0.01) tcp = 0;
          ns.tcp_retransmits_total = tcp;
          ns.mem_used_bytes = static_cast<int64_t>((700 + 100 * uni2(rng2)) * 1e9);
          ns.mem_total_bytes = static_cast<int64_t>(2048e9);
          ns.net_tx_bps = ns.net_rx_bps = 40e9 * (0.8 + 0.2 * uni2(rng2));
          ns.disk_read_bps = 2e9 * (0.5 + uni2(rng2));
          for (auto f :
               {NodeSample::F::tcp_retransmits_total, NodeSample::F::mem_used_bytes, NodeSample::F::mem_total_bytes,
                NodeSample::F::net_tx_bps, NodeSample::F::net_rx_bps, NodeSample::F::disk_read_bps}) {
            ns.set_present(f);
          }
        }
        Record nr;
        nr.time_ns = t + 4'500'000;
        nr.body = ns;
        out.push_back(std::move(nr));
      }
    }
    if (detail && o.checkpoint_every > 0 && step % o.checkpoint_every == 0) {
      // A synchronous checkpoint: training stops while it is written.
      double duration = 2500 + 1000 * uni2(rng2);
      if (const Fault* f = fault_on("slow_checkpoint", step)) duration *= f->factor;
      bool fail = false;
      for (const auto& f : o.faults) {
        if (f.kind != "checkpoint_failure" || step < f.from_step) continue;
        if (step <= f.to_step || !checkpoint_failed_once) fail = true;
      }
      checkpoint_failed_once |= fail;
      Checkpoint c;
      c.run_id = run;
      c.checkpoint_id = Symbol::intern(o.run_id + "/step-" + std::to_string(step));
      c.step = step;
      c.duration_ms = fail ? duration * 0.4 : duration;
      c.size_bytes = 140'000'000'000;
      c.upload_ms = 30000 + 10000 * uni2(rng2);
      c.ok = !fail;
      c.uri = "s3://checkpoints/" + o.run_id + "/step-" + std::to_string(step);
      for (auto f :
           {Checkpoint::F::run_id, Checkpoint::F::checkpoint_id, Checkpoint::F::step, Checkpoint::F::duration_ms,
            Checkpoint::F::size_bytes, Checkpoint::F::upload_ms, Checkpoint::F::ok, Checkpoint::F::uri}) {
        c.set_present(f);
      }
      if (fail) c.clear(Checkpoint::F::upload_ms);
      int64_t took = static_cast<int64_t>(c.duration_ms * 1e6);
      out.push_back(make(t + 5'000'000 + took, c));
      t += took;
    }
    std::stable_sort(out.begin(), out.end(), [](const Record& a, const Record& b) { return a.time_ns < b.time_ns; });
    sink(out);
    out.clear();
  }
  RunEnd end;
  end.run_id = run;
  end.status = Symbol::intern("completed");
  end.set_present(RunEnd::F::run_id);
  end.set_present(RunEnd::F::status);
  Record rec;
  rec.time_ns = t + 60'000'000'000;
  rec.body = end;
  out.push_back(std::move(rec));
  sink(out);
}

bool parse_config_value(const std::string& text, std::pair<std::string, Value>* out, std::string* error) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return *error = "expected key=value, got '" + text + "'", false;
  std::string key = text.substr(0, eq), v = text.substr(eq + 1);
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  bool number = !v.empty() && end && *end == 0;
  *out = {key, number ? Value::of(d) : Value::of(v)};
  return true;
}

void apply_identity(const Identity& id, std::vector<Record>& rows) {
  if (id.empty()) return;
  for (Record& r : rows) {
    if (r.kind() == Kind::kRunStart) {
      auto rs = std::make_shared<RunStart>(r.run_start());
      auto set = [&](const std::string& text, Symbol* field, RunStart::F f) {
        if (text.empty()) return;
        *field = Symbol::intern(text);
        rs->set_present(f);
      };
      set(id.experiment_id, &rs->experiment_id, RunStart::F::experiment_id);
      set(id.job_id, &rs->job_id, RunStart::F::job_id);
      set(id.model_id, &rs->model_id, RunStart::F::model_id);
      set(id.model_version, &rs->model_version, RunStart::F::model_version);
      set(id.dataset_version, &rs->dataset_version, RunStart::F::dataset_version);
      if (!id.code_commit.empty()) rs->code_commit = id.code_commit, rs->set_present(RunStart::F::code_commit);
      for (const auto& [k, v] : id.config) {
        auto it = std::find_if(rs->config.begin(), rs->config.end(), [&](const auto& kv) { return kv.first == k; });
        if (it != rs->config.end())
          it->second = v;
        else
          rs->config.emplace_back(k, v);
        rs->set_present(RunStart::F::config);
      }
      r.body = std::shared_ptr<const RunStart>(std::move(rs));
    } else if (r.kind() == Kind::kRunEnd) {
      RunEnd e = r.as<RunEnd>();
      if (!id.end_status.empty()) e.status = Symbol::intern(id.end_status), e.set_present(RunEnd::F::status);
      if (!id.end_reason.empty()) e.reason = id.end_reason, e.set_present(RunEnd::F::reason);
      r.body = e;
    }
  }
}

}  // namespace runlens::synth
