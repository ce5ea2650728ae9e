#include "connectors/sources/scrape_mapping.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace runlens::connectors {

const char* scrape_format_name(ScrapeFormat f) {
  switch (f) {
    case ScrapeFormat::kDetect:
      return "detect";
    case ScrapeFormat::kNodeExporter:
      return "node_exporter";
    case ScrapeFormat::kDcgm:
      return "dcgm";
  }
  return "?";
}

std::optional<double> RunningTotal::update(double raw) {
  if (!std::isfinite(raw))
    return std::nullopt;  // NaN / Inf: not a count; the next value is compared with the last good one
  if (!seen_) {
    seen_ = true;
    raw_ = raw;
    total_ = raw;
    return std::nullopt;
  }
  if (raw < raw_) {  // a reset: the exporter counts again from zero
    raw_ = raw;
    return std::nullopt;
  }
  double inc = raw - raw_;
  raw_ = raw;
  total_ += inc;
  return inc;
}

namespace {

int64_t event_time(const prom::Sample& s, int64_t scrape_ns) {
  return s.timestamp_ms ? *s.timestamp_ms * 1'000'000 : scrape_ns;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

int64_t to_i64(double v) {
  if (!std::isfinite(v)) return 0;
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(std::llround(v));
}

// The CPU modes of node_cpu_seconds_total that make up a CPU's time (guest and
// guest_nice are already counted in user and nice by the kernel).
constexpr const char* kCpuModes[] = {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"};

}  // namespace

bool ScrapeMapper::map(const prom::Exposition& e, int64_t scrape_ns, std::vector<Record>* rows, std::string* why) {
  ScrapeFormat f = format_;
  if (f == ScrapeFormat::kDetect) {
    for (const auto& s : e.samples) {
      if (starts_with(s.name, "DCGM_FI_")) {
        f = ScrapeFormat::kDcgm;
        break;
      }
      if (starts_with(s.name, "node_")) f = ScrapeFormat::kNodeExporter;
    }
    if (f == ScrapeFormat::kDetect) {
      *why = "neither node_exporter (node_*) nor dcgm-exporter (DCGM_FI_*) metrics in " +
             std::to_string(e.samples.size()) + " samples (set the target's format)";
      return false;
    }
  }
  detected_ = f;
  stamped_ = false;
  if (f == ScrapeFormat::kDcgm)
    map_dcgm(e, scrape_ns, rows);
  else
    map_node(e, scrape_ns, rows);
  return true;
}

void ScrapeMapper::map_node(const prom::Exposition& e, int64_t scrape_ns, std::vector<Record>* rows) {
  NodeSample n;
  n.node = node_;
  n.set_present(NodeSample::F::node);
  bool any = false, stamped = false;
  int64_t t = INT64_MIN;
  std::map<std::string, std::map<std::string, double>> cpu;
  std::optional<double> mem_total, mem_available, load1, retrans;
  std::map<std::string, double> disk_read, disk_write, net_rx, net_tx;
  for (const auto& s : e.samples) {
    if (!starts_with(s.name, "node_")) continue;
    auto device = [&](std::map<std::string, double>& into, bool skip_lo) {
      const std::string* d = s.label("device");
      if (!d || (skip_lo && *d == "lo")) return;
      into[*d] = s.value;
      any = true;
    };
    bool used = true;
    if (s.name == "node_uname_info") {
      const std::string* nodename = s.label("nodename");
      if (!node_given_ && nodename && !nodename->empty()) n.node = Symbol::intern(*nodename);
      continue;
    }
    if (s.name == "node_cpu_seconds_total") {
      const std::string* c = s.label("cpu");
      const std::string* m = s.label("mode");
      if (c && m) cpu[*c][*m] = s.value;
    } else if (s.name == "node_memory_MemTotal_bytes") {
      mem_total = s.value;
    } else if (s.name == "node_memory_MemAvailable_bytes") {
      mem_available = s.value;
    } else if (s.name == "node_load1") {
      load1 = s.value;
    } else if (s.name == "node_netstat_Tcp_RetransSegs") {
      retrans = s.value;
    } else if (s.name == "node_disk_read_bytes_total") {
      device(disk_read, false);
    } else if (s.name == "node_disk_written_bytes_total") {
      device(disk_write, false);
    } else if (s.name == "node_network_receive_bytes_total") {
      device(net_rx, true);
    } else if (s.name == "node_network_transmit_bytes_total") {
      device(net_tx, true);
    } else {
      used = false;
    }
    if (used) {
      any = true;
      if (s.timestamp_ms) stamped = true, t = std::max(t, event_time(s, scrape_ns));
    }
  }
  if (!any) return;
  if (!stamped) t = scrape_ns;
  stamped_ = stamped;
  double dt = have_node_time_ ? static_cast<double>(t - node_time_) / 1e9 : 0;
  bool rates = have_node_time_ && dt > 0;

  // CPU: the share of each mode over the interval, summed over the CPUs seen both times.
  if (rates && !cpu.empty()) {
    std::map<std::string, double> delta;
    double total = 0;
    bool reset = false;
    for (const auto& [c, modes] : cpu) {
      auto before = cpu_.find(c);
      if (before == cpu_.end()) continue;
      for (const char* m : kCpuModes) {
        auto now_it = modes.find(m);
        auto was_it = before->second.find(m);
        if (now_it == modes.end() || was_it == before->second.end()) continue;
        double d = now_it->second - was_it->second;
        if (!std::isfinite(d)) continue;
        if (d < 0) reset = true;
        delta[m] += d;
        total += d;
      }
    }
    if (!reset && total > 0) {
      auto pct = [&](std::initializer_list<const char*> modes) {
        double sum = 0;
        for (const char* m : modes) sum += delta[m];
        return std::clamp(100 * sum / total, 0.0, 100.0);
      };
      n.cpu_pct = 100 - pct({"idle", "iowait"});
      n.cpu_user_pct = pct({"user", "nice"});
      n.cpu_system_pct = pct({"system", "irq", "softirq"});
      n.cpu_iowait_pct = pct({"iowait"});
      n.cpu_steal_pct = pct({"steal"});
      for (auto f : {NodeSample::F::cpu_pct, NodeSample::F::cpu_user_pct, NodeSample::F::cpu_system_pct,
                     NodeSample::F::cpu_iowait_pct, NodeSample::F::cpu_steal_pct})
        n.set_present(f);
    }
  }
  if (!cpu.empty()) cpu_ = std::move(cpu);

  if (mem_total && std::isfinite(*mem_total)) {
    n.mem_total_bytes = to_i64(*mem_total);
    n.set_present(NodeSample::F::mem_total_bytes);
    if (mem_available && std::isfinite(*mem_available)) {
      n.mem_used_bytes = std::max<int64_t>(0, to_i64(*mem_total - *mem_available));
      n.set_present(NodeSample::F::mem_used_bytes);
    }
  }
  if (load1 && std::isfinite(*load1)) {
    n.load1 = *load1;
    n.set_present(NodeSample::F::load1);
  }
  if (retrans) {
    retrans_.update(*retrans);
    if (retrans_.seen()) {
      n.tcp_retransmits_total = to_i64(retrans_.total());
      n.set_present(NodeSample::F::tcp_retransmits_total);
    }
  }
  // A byte counter summed over devices, as bytes/s; none when a device was
  // reset (or when this is the first scrape of every device).
  auto rate = [&](Rate& state, const std::map<std::string, double>& now, double NodeSample::*field, NodeSample::F f) {
    double sum = 0;
    bool reset = false, any_pair = false;
    for (const auto& [d, v] : now) {
      bool seen = state.devices[d].seen();
      auto inc = state.devices[d].update(v);
      if (!seen) continue;
      if (!inc) {
        reset = true;
        continue;
      }
      sum += *inc, any_pair = true;
    }
    if (rates && any_pair && !reset) {
      n.*field = sum / dt;
      n.set_present(f);
    }
  };
  rate(disk_read_, disk_read, &NodeSample::disk_read_bps, NodeSample::F::disk_read_bps);
  rate(disk_write_, disk_write, &NodeSample::disk_write_bps, NodeSample::F::disk_write_bps);
  rate(net_rx_, net_rx, &NodeSample::net_rx_bps, NodeSample::F::net_rx_bps);
  rate(net_tx_, net_tx, &NodeSample::net_tx_bps, NodeSample::F::net_tx_bps);
  node_time_ = t;
  have_node_time_ = true;

  Record r;
  r.time_ns = t;
  r.body = std::move(n);
  rows->push_back(std::move(r));
}

void ScrapeMapper::map_dcgm(const prom::Exposition& e, int64_t scrape_ns, std::vector<Record>* rows) {
  struct Pending {
    Gpu g;
    int64_t t = INT64_MIN;
    bool stamped = false;
    std::optional<double> fb_used, fb_free, fb_reserved, xid;
    std::map<std::string, double> counters;  // family -> raw value
    std::optional<double> ecc_sbe_vol, ecc_sbe_agg, ecc_dbe_vol, ecc_dbe_agg;
  };
  std::map<std::pair<std::string, int32_t>, Pending> by_gpu;
  static const std::set<std::string, std::less<>> kNvlinkErrors = {
      "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
      "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"};
  for (const auto& s : e.samples) {
    if (!starts_with(s.name, "DCGM_FI_")) continue;
    const std::string* gpu = s.label("gpu");
    if (!gpu) continue;
    int32_t index = 0;
    try {
      size_t used = 0;
      long v = std::stol(*gpu, &used);
      if (used != gpu->size() || v < 0 || v > INT32_MAX) continue;
      index = static_cast<int32_t>(v);
    } catch (...) {
      continue;  // not a GPU index
    }
    const std::string* host = s.label("Hostname");
    std::string node = host && !host->empty() ? *host : node_.string();
    Pending& p = by_gpu[{node, index}];
    Gpu& g = p.g;
    auto set = [&](double Gpu::*field, Gpu::F f, double scale = 1) {
      if (!std::isfinite(s.value)) return;
      g.*field = s.value * scale;
      g.set_present(f);
    };
    std::string_view name = s.name;
    bool used = true;
    if (name == "DCGM_FI_DEV_GPU_UTIL")
      set(&Gpu::util_pct, Gpu::F::util_pct);
    else if (name == "DCGM_FI_DEV_SM_CLOCK")
      set(&Gpu::sm_clock_mhz, Gpu::F::sm_clock_mhz);
    else if (name == "DCGM_FI_DEV_MEM_CLOCK")
      set(&Gpu::mem_clock_mhz, Gpu::F::mem_clock_mhz);
    else if (name == "DCGM_FI_DEV_GPU_TEMP")
      set(&Gpu::temp_c, Gpu::F::temp_c);
    else if (name == "DCGM_FI_DEV_POWER_USAGE")
      set(&Gpu::power_w, Gpu::F::power_w);
    else if (name == "DCGM_FI_DEV_POWER_MGMT_LIMIT")
      set(&Gpu::power_limit_w, Gpu::F::power_limit_w);
    else if (name == "DCGM_FI_PROF_SM_ACTIVE")
      set(&Gpu::sm_active_pct, Gpu::F::sm_active_pct, 100);
    else if (name == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
      set(&Gpu::tensor_active_pct, Gpu::F::tensor_active_pct, 100);
    else if (name == "DCGM_FI_PROF_NVLINK_TX_BYTES")
      set(&Gpu::nvlink_tx_bps, Gpu::F::nvlink_tx_bps);
    else if (name == "DCGM_FI_PROF_NVLINK_RX_BYTES")
      set(&Gpu::nvlink_rx_bps, Gpu::F::nvlink_rx_bps);
    else if (name == "DCGM_FI_DEV_FB_USED")
      p.fb_used = s.value;
    else if (name == "DCGM_FI_DEV_FB_FREE")
      p.fb_free = s.value;
    else if (name == "DCGM_FI_DEV_FB_RESERVED")
      p.fb_reserved = s.value;
    else if (name == "DCGM_FI_DEV_XID_ERRORS")
      p.xid = s.value;
    else if (name == "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" || name == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS") {
      if (std::isfinite(s.value)) {
        g.throttle_reasons = to_i64(s.value);
        g.set_present(Gpu::F::throttle_reasons);
      }
    } else if (name == "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL")
      p.ecc_sbe_vol = s.value;
    else if (name == "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL")
      p.ecc_sbe_agg = s.value;
    else if (name == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
      p.ecc_dbe_vol = s.value;
    else if (name == "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL")
      p.ecc_dbe_agg = s.value;
    else if (name == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER" || kNvlinkErrors.count(name)) {
      // Per link where dcgm-exporter labels links; summed over them by the running totals below.
      const std::string* link = s.label("link");
      p.counters[s.name + (link ? "#" + *link : std::string())] = s.value;
    } else
      used = false;
    if (used && s.timestamp_ms) p.stamped = true, p.t = std::max(p.t, event_time(s, scrape_ns));
  }
  for (auto& [key, p] : by_gpu) {
    Gpu& g = p.g;
    g.node = Symbol::intern(key.first);
    g.gpu = key.second;
    g.set_present(Gpu::F::node);
    g.set_present(Gpu::F::gpu);
    GpuState& st = gpus_[key];
    constexpr double kMiB = 1024.0 * 1024.0;
    if (p.fb_used && std::isfinite(*p.fb_used)) {
      g.mem_used_bytes = to_i64(*p.fb_used * kMiB);
      g.set_present(Gpu::F::mem_used_bytes);
      if (p.fb_free && std::isfinite(*p.fb_free)) {
        double reserved = p.fb_reserved && std::isfinite(*p.fb_reserved) ? *p.fb_reserved : 0;
        g.mem_total_bytes = to_i64((*p.fb_used + *p.fb_free + reserved) * kMiB);
        g.set_present(Gpu::F::mem_total_bytes);
      }
    }
    if (p.xid && std::isfinite(*p.xid)) {
      int64_t code = to_i64(*p.xid);
      bool seen = st.xid.has_value();
      bool changed = seen && *st.xid != code;
      st.xid = code;
      if (changed && code != 0) {
        g.xid = code;
        g.set_present(Gpu::F::xid);
      }
    }
    // Running totals: the volatile ECC counts where exported, else the aggregate ones.
    auto total = [&](const std::string& name, std::optional<double> raw, int64_t Gpu::*field, Gpu::F f) {
      if (!raw) return;
      RunningTotal& c = st.counters[name];
      c.update(*raw);
      if (!c.seen()) return;
      g.*field = to_i64(c.total());
      g.set_present(f);
    };
    total("ecc_sbe", p.ecc_sbe_vol ? p.ecc_sbe_vol : p.ecc_sbe_agg, &Gpu::ecc_sbe_total, Gpu::F::ecc_sbe_total);
    total("ecc_dbe", p.ecc_dbe_vol ? p.ecc_dbe_vol : p.ecc_dbe_agg, &Gpu::ecc_dbe_total, Gpu::F::ecc_dbe_total);
    // Sums of several counters: each is kept as its own running total.
    auto sum = [&](auto accept, int64_t Gpu::*field, Gpu::F f) {
      double t = 0;
      bool any = false;
      for (const auto& [name, raw] : p.counters) {
        if (!accept(name)) continue;
        RunningTotal& c = st.counters[name];
        c.update(raw);
        if (!c.seen()) continue;
        t += c.total();
        any = true;
      }
      if (!any) return;
      g.*field = to_i64(t);
      g.set_present(f);
    };
    sum([](const std::string& n) { return starts_with(n, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"); }, &Gpu::pcie_replay_total,
        Gpu::F::pcie_replay_total);
    sum([](const std::string& n) { return starts_with(n, "DCGM_FI_DEV_NVLINK_"); }, &Gpu::nvlink_errors_total,
        Gpu::F::nvlink_errors_total);
    Record r;
    r.time_ns = p.stamped ? p.t : scrape_ns;
    stamped_ |= p.stamped;
    r.body = std::move(g);
    rows->push_back(std::move(r));
  }
}

}  // namespace runlens::connectors
