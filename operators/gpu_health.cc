#include "operators/gpu_health.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "operators/median.h"
#include "operators/persistence.h"
#include "operators/placement.h"
#include "operators/ring.h"
#include "operators/run_state.h"
#include "schema/symbol_index.h"

namespace runlens::ops {
namespace {

constexpr int64_t kAllThrottle =
    kThrottlePowerCap | kThrottleHwSlowdown | kThrottleSwThermal | kThrottleHwThermal | kThrottleHwPowerBrake;
constexpr size_t kMinClockBaseline = 3;

// What a few well-known XID codes mean (NVIDIA's XID catalogue), for summaries.
const char* xid_meaning(int64_t code) {
  switch (code) {
    case 13:
      return "graphics engine exception";
    case 31:
      return "GPU memory page fault";
    case 43:
      return "GPU stopped processing";
    case 48:
      return "double-bit ECC error";
    case 61:
    case 62:
      return "internal micro-controller error";
    case 63:
    case 64:
      return "ECC page retirement";
    case 74:
      return "NVLink error";
    case 79:
      return "GPU has fallen off the bus";
    case 92:
      return "high single-bit ECC error rate";
    case 94:
      return "contained ECC error";
    case 95:
      return "uncontained ECC error";
    case 119:
    case 120:
      return "GSP error";
    default:
      return nullptr;
  }
}

struct CounterState {
  bool known = false;
  int64_t last = 0;
  bool active = false;
  int64_t quiet = 0;  // samples without an increase since the alert
  // The alert raised (until rearm_samples quiet samples close it): its closing revision goes out then.
  Incident open;
  template <class Io>
  void fields(Io& io) {
    io(known, last, active, quiet, open);
  }
};

struct GpuState {
  int64_t samples = 0;
  Ring<double> clocks;  // recent busy, unthrottled clocks: the baseline
  // The largest of `clocks` and how many hold it (0: not known, worked out
  // when next read). Not state: made again from `clocks` after a restore.
  double clock_max = 0;
  int64_t clock_max_count = 0;
  // Bit i: incident i (thermal, power, clock, memory) has hits in its window
  // or is open. Observing no hit on one without is a no-op, skipped without
  // reading it (four incidents are most of this state's cache lines). Not
  // state: every bit is set after a restore, and cleared by the next sample.
  uint8_t stirred = 0xF;
  Incident thermal, power, clock, memory;
  int64_t last_xid = 0;
  std::map<int64_t, int64_t> xid_seen;  // code -> event time it was last seen
  CounterState dbe, nvlink, pcie;
  int64_t mem_total = 0;  // the last total a sample reported
  int64_t reserved = -1;  // the latest mem_reserved_bytes of the rank on this GPU
  template <class Io>
  void fields(Io& io) {
    io(samples, clocks, thermal, power, clock, memory, last_xid, xid_seen, dbe, nvlink, pcie, mem_total, reserved);
  }
};

// A GPU of a node (gpu -1: the node, where an XID does not name the GPU).
struct GpuKey {
  Symbol node;
  int32_t gpu = -1;
  bool operator==(const GpuKey&) const = default;
  template <class Io>
  void fields(Io& io) {
    io(node, gpu);
  }
};
struct GpuKeyHash {
  size_t operator()(const GpuKey& k) const {
    return std::hash<uint64_t>()((static_cast<uint64_t>(k.node.id()) << 32) | static_cast<uint32_t>(k.gpu));
  }
};

// Median of `values`, using `scratch` (no allocation once it has grown).
double median(const Ring<double>& values, std::vector<double>& scratch) {
  scratch.assign(values.begin(), values.end());
  return median_in_place(scratch);
}

class GpuHealth final : public runtime::state::Snapshottable<Record, GpuHealth> {
 public:
  // Version 2: an open incident keeps the alert it raised, for its closing revision (ends_ns).
  // Version 3: rank entries (run_start, rank maps) carry gpu_model and node_type.
  static constexpr runtime::state::StateType kState{"gpu_health", 3};
  GpuHealth(const GpuHealthOptions& o, const runtime::OperatorContext& ctx)
      : o_(o), placement_(ctx.partition, ctx.partitions) {}
  template <class Io>
  void state_fields(Io& io) {
    io(placement_, gpus_, steps_);
    if constexpr (runtime::state::kReading<Io>) index_.clear();
  }

  void process(const Record& r, Emitter& out) override {
    switch (r.kind()) {
      case Kind::kRunStart:
        placement_.on_run_start(r.run_start());
        break;
      case Kind::kRunEnd:
        placement_.on_run_end(r.as<RunEnd>().run_id);
        steps_.erase(r.as<RunEnd>().run_id);
        break;
      case Kind::kStepRecord:
        on_step(r.step_record());
        break;
      case Kind::kGpu:
        on_sample(r, out);
        break;
      case Kind::kEvent:
        on_event(r, out);
        break;
      default:
        break;
    }
  }

 private:
  static GpuKey gpu_id(Symbol node, int32_t gpu) { return GpuKey{node, gpu}; }

  // The state of a node's GPU, found through an index by the node's symbol id
  // and GPU (every sample looks one up; a hash lookup was two cache misses).
  // gpus_ never erases, and its elements never move: the index holds
  // pointers, and is dropped when a snapshot is restored.
  GpuState& state_of(Symbol node, int32_t gpu) {
    return remembered(index_.slot(node, gpu + 1), [&]() -> GpuState& { return gpus_[gpu_id(node, gpu)]; });
  }

  void on_step(const StepRecord& rec) {
    const RunInfo* info = placement_.run(rec.run_id);
    if (!info) return;
    int64_t& s = steps_[rec.run_id];
    s = std::max(s, rec.step);
    // The memory the ranks' allocators hold: memory_headroom where a sample has no mem_used_bytes.
    if (rec.ranks.empty() || !rec.ranks.front().has(Step::F::mem_reserved_bytes)) return;
    for (Symbol node : *placement_.nodes_of(rec.run_id)) {
      for (int32_t rank : *placement_.ranks_on(rec.run_id, node)) {
        const Step* st = rank_report(rec, rank);
        const RankPlacement* p = info->place(rank);
        if (!st || !p || p->gpu < 0 || !st->has(Step::F::mem_reserved_bytes)) continue;
        state_of(node, p->gpu).reserved = st->mem_reserved_bytes;
      }
    }
  }

  // Four incidents a sample, and almost always nothing to do: the test is
  // here, where the compiler inlines it, and the work in observe_stirred.
  // With counter() below, the calls were a fifth of on_sample's
  // instructions (callgrind, g.rlrec: 0.330 -> 0.262 G; docs/performance.md).
  static Incident::Change observe(GpuState& st, Incident& inc, int bit, int64_t seq, bool hit, int64_t tag) {
    if (!hit && !(st.stirred & (1u << bit))) return Incident::Change::kNone;
    return observe_stirred(st, inc, bit, seq, hit, tag);
  }
  static Incident::Change observe_stirred(GpuState& st, Incident& inc, int bit, int64_t seq, bool hit, int64_t tag) {
    const uint8_t mask = static_cast<uint8_t>(1u << bit);
    Incident::Change c = inc.observe(seq, hit, tag);
    if (inc.hits() > 0 || inc.active()) {
      st.stirred |= mask;
    } else {
      st.stirred &= static_cast<uint8_t>(~mask);
    }
    return c;
  }

  // The window's largest clock, read on every busy sample: kept as samples
  // join and leave, and counted again only when the last sample holding it
  // has left (a GPU's clock mostly sits at one value).
  static double largest_clock(GpuState& st) {
    if (st.clock_max_count == 0 && !st.clocks.empty()) {
      st.clock_max = *std::max_element(st.clocks.begin(), st.clocks.end());
      st.clock_max_count = std::count(st.clocks.begin(), st.clocks.end(), st.clock_max);
    }
    return st.clock_max;
  }
  static void add_clock(GpuState& st, double v) {
    st.clocks.push_back(v);
    if (st.clock_max_count == 0) return;  // not known: counted when read
    if (v > st.clock_max) {
      st.clock_max = v;
      st.clock_max_count = 1;
    } else if (v == st.clock_max) {
      ++st.clock_max_count;
    }
  }

  void on_sample(const Record& r, Emitter& out) {
    const Gpu& g = r.as<Gpu>();
    GpuState& st = state_of(g.node, g.gpu);
    if (st.samples == 0) {
      st.thermal = st.power = st.clock = st.memory = Incident(o_.persist_k, o_.persist_n);
    }
    int64_t seq = ++st.samples;
    int64_t tr = g.has(Gpu::F::throttle_reasons) ? g.throttle_reasons : 0;
    bool hot = g.has(Gpu::F::temp_c) && std::isfinite(g.temp_c) && g.temp_c >= o_.temp_threshold_c;
    bool thermal = (tr & (kThrottleSwThermal | kThrottleHwThermal)) || hot;
    bool has_clock = g.has(Gpu::F::sm_clock_mhz) && std::isfinite(g.sm_clock_mhz);
    // The clock baseline, the median of the window before this sample joins
    // it, is taken only where it is read: for a clock below (1 - clock_drop)
    // of the window's largest value (the median is no larger), and for an
    // alert's text. A sample that joins the window is neither throttled nor
    // slow, so no alert that reads the baseline opens on it.
    bool base_known = !(has_clock && st.clocks.size() >= kMinClockBaseline);
    bool joined = false;
    double base_value = NAN;
    auto base = [&] {
      RUNLENS_CHECK(base_known || !joined, "gpu_health read its clock baseline after the sample joined it");
      if (!base_known) base_value = median(st.clocks, scratch_), base_known = true;
      return base_value;
    };
    bool busy = !g.has(Gpu::F::util_pct) || !std::isfinite(g.util_pct) || g.util_pct >= o_.min_util_pct;
    bool clock_down = false;
    if (has_clock && busy && !base_known) {
      const double cut = 1 - o_.clock_drop;
      if (cut < 0 || g.sm_clock_mhz < cut * largest_clock(st)) {
        clock_down = std::isfinite(base()) && g.sm_clock_mhz < cut * base();
      }
    }
    bool power = (tr & kThrottleHwPowerBrake) || ((tr & kThrottleHwSlowdown) && !thermal) ||
                 ((tr & kThrottlePowerCap) && clock_down);
    bool clock_low = clock_down && !(tr & kAllThrottle) && !hot;
    if (has_clock && busy && !thermal && !power && !clock_down) {
      add_clock(st, g.sm_clock_mhz);
      while (static_cast<int64_t>(st.clocks.size()) > o_.clock_window) {
        if (st.clocks.front() == st.clock_max && st.clock_max_count > 0) --st.clock_max_count;
        st.clocks.pop_front();
      }
      joined = true;
    }
    if (g.has(Gpu::F::mem_total_bytes) && g.mem_total_bytes > 0) st.mem_total = g.mem_total_bytes;
    int64_t used = g.has(Gpu::F::mem_used_bytes) ? g.mem_used_bytes : st.reserved;
    double headroom = NAN;
    if (used >= 0 && st.mem_total > 0) headroom = 1.0 - static_cast<double>(used) / static_cast<double>(st.mem_total);
    bool pressure = std::isfinite(headroom) && headroom < o_.min_headroom;

    if (Incident::Change c = observe(st, st.thermal, 0, seq, thermal, r.time_ns); c == Incident::Change::kClosed) {
      st.thermal.close(r.time_ns, out);
    } else if (c == Incident::Change::kOpened) {
      Alert a = base_alert(alert_kind::kThermalThrottle, Severity::kWarning, r, g.node, g.gpu, st.thermal.onset_tag());
      std::string why = (tr & kThrottleHwThermal)   ? "hardware thermal slowdown"
                        : (tr & kThrottleSwThermal) ? "software thermal slowdown"
                                                    : "temperature at or above " + fmt_num(o_.temp_threshold_c) + " C";
      if (g.has(Gpu::F::temp_c)) a.value = g.temp_c;
      a.threshold = o_.temp_threshold_c;
      a.summary = "THERMAL THROTTLING: " + who(a) + ": " + why + readings(g, base()) + " in " +
                  std::to_string(st.thermal.hits()) + " of the last " + std::to_string(o_.persist_n) + " samples";
      add_readings(a, g, base());
      st.thermal.raise(std::move(a), out);
    }
    if (Incident::Change c = observe(st, st.power, 1, seq, power, r.time_ns); c == Incident::Change::kClosed) {
      st.power.close(r.time_ns, out);
    } else if (c == Incident::Change::kOpened) {
      Alert a = base_alert(alert_kind::kPowerThrottle, Severity::kWarning, r, g.node, g.gpu, st.power.onset_tag());
      std::string why = (tr & kThrottleHwPowerBrake) ? "hardware power brake"
                        : (tr & kThrottleHwSlowdown) ? "hardware slowdown without a thermal reason"
                                                     : "power cap holding the clock down";
      if (g.has(Gpu::F::power_w)) a.value = g.power_w;
      if (g.has(Gpu::F::power_limit_w)) a.threshold = g.power_limit_w;
      a.summary = "POWER THROTTLING: " + who(a) + ": " + why + readings(g, base()) + " in " +
                  std::to_string(st.power.hits()) + " of the last " + std::to_string(o_.persist_n) + " samples";
      add_readings(a, g, base());
      st.power.raise(std::move(a), out);
    }
    if (Incident::Change c = observe(st, st.clock, 2, seq, clock_low, r.time_ns); c == Incident::Change::kClosed) {
      st.clock.close(r.time_ns, out);
    } else if (c == Incident::Change::kOpened) {
      Alert a = base_alert(alert_kind::kClockLow, Severity::kWarning, r, g.node, g.gpu, st.clock.onset_tag());
      a.value = g.sm_clock_mhz;
      a.threshold = (1 - o_.clock_drop) * base();
      a.summary = "GPU CLOCK LOW: " + who(a) + " runs at " + fmt_num(g.sm_clock_mhz) + " MHz against its recent " +
                  fmt_num(base()) + " MHz with no throttle reason reported";
      add_readings(a, g, base());
      st.clock.raise(std::move(a), out);
    }
    if (Incident::Change c = observe(st, st.memory, 3, seq, pressure, r.time_ns); c == Incident::Change::kClosed) {
      st.memory.close(r.time_ns, out);
    } else if (c == Incident::Change::kOpened) {
      Alert a = base_alert(alert_kind::kMemoryPressure, Severity::kWarning, r, g.node, g.gpu, st.memory.onset_tag());
      a.value = headroom;
      a.threshold = o_.min_headroom;
      const char* what = g.has(Gpu::F::mem_used_bytes) ? "" : " (reserved by the rank's allocator)";
      a.summary = "GPU MEMORY PRESSURE: " + who(a) + " uses " + fmt_num(used / 1e9, "%.1f") + " of " +
                  fmt_num(st.mem_total / 1e9, "%.1f") + " GB" + what + ", headroom " + fmt_num(100 * headroom, "%.1f") +
                  " %";
      a.attrs = {{"mem_used_bytes", static_cast<double>(used)},
                 {"mem_total_bytes", static_cast<double>(st.mem_total)},
                 {"memory_headroom", headroom}};
      st.memory.raise(std::move(a), out);
    }

    if (g.has(Gpu::F::xid)) {
      if (g.xid != 0 && g.xid != st.last_xid) raise_xid(st, r, g.node, g.gpu, g.xid, "", out);
      st.last_xid = g.xid;
    }
    counter(st.dbe, g.has(Gpu::F::ecc_dbe_total), g.ecc_dbe_total, o_.ecc_dbe_min_increase, alert_kind::kEccUncorrected,
            Severity::kCritical, "UNCORRECTED ECC ERRORS", "ecc_dbe_total", r, g, out);
    counter(st.nvlink, g.has(Gpu::F::nvlink_errors_total), g.nvlink_errors_total, o_.nvlink_min_increase,
            alert_kind::kNvlinkError, Severity::kWarning, "NVLINK ERRORS", "nvlink_errors_total", r, g, out);
    counter(st.pcie, g.has(Gpu::F::pcie_replay_total), g.pcie_replay_total, o_.pcie_replay_min_increase,
            alert_kind::kPcieReplay, Severity::kWarning, "PCIE REPLAYS", "pcie_replay_total", r, g, out);
  }

  void on_event(const Record& r, Emitter& out) {
    static const Symbol kXid = Symbol::intern(event_kind::kXid);
    const Occurrence& e = r.as<Occurrence>();
    if (e.kind != kXid) return;
    Symbol node = e.node;
    std::optional<int32_t> gpu;
    if (e.has(Occurrence::F::gpu)) gpu = e.gpu;
    if ((node.empty() || !gpu) && e.has(Occurrence::F::rank)) {
      // Name the device through the run's rank map.
      if (const RunInfo* info = placement_.run(e.run_id)) {
        if (const RankPlacement* p = info->place(e.rank)) {
          if (node.empty()) node = p->node;
          if (!gpu && p->gpu >= 0 && p->node == node) gpu = p->gpu;
        }
      }
    }
    if (node.empty() || !placement_.owns(node)) return;
    int64_t code = e.has(Occurrence::F::code) ? e.code : 0;
    if (!gpu) {
      // The node, but not which GPU: one alert for the node.
      GpuState& st = state_of(node, -1);
      raise_xid(st, r, node, -1, code, e.message, out);
      return;
    }
    raise_xid(state_of(node, *gpu), r, node, *gpu, code, e.message, out);
  }

  void raise_xid(GpuState& st, const Record& r, Symbol node, int32_t gpu, int64_t code, const std::string& message,
                 Emitter& out) {
    auto seen = st.xid_seen.find(code);
    bool repeat = seen != st.xid_seen.end() && r.time_ns - seen->second < o_.xid_dedupe_ns;
    st.xid_seen[code] = r.time_ns;
    if (repeat) return;
    Alert a = base_alert(alert_kind::kXidError, Severity::kCritical, r, node, gpu, r.time_ns);
    a.value = static_cast<double>(code);
    std::string what = code ? "XID " + std::to_string(code) : std::string("an XID error");
    if (const char* m = xid_meaning(code)) what += " (" + std::string(m) + ")";
    a.summary = "XID ERROR: " + what + " on " + who(a) + (message.empty() ? "" : ": " + message);
    a.attrs = {{"xid", static_cast<double>(code)}};
    out.emit(alert_record(std::move(a)));
  }

  // Most samples carry none of the counters: as observe() above.
  void counter(CounterState& c, bool present, int64_t total, int64_t min_increase, std::string_view kind, Severity sev,
               const char* headline, const char* field, const Record& r, const Gpu& g, Emitter& out) {
    if (present) count(c, total, min_increase, kind, sev, headline, field, r, g, out);
  }
  void count(CounterState& c, int64_t total, int64_t min_increase, std::string_view kind, Severity sev,
             const char* headline, const char* field, const Record& r, const Gpu& g, Emitter& out) {
    if (!c.known) {
      c.known = true;
      c.last = total;
      return;
    }
    int64_t previous = c.last;
    int64_t inc = counter_increase(previous, total);
    c.last = total;
    if (inc > 0 && inc >= min_increase) {
      c.quiet = 0;
      if (c.active) return;
      c.active = true;
      Alert a = base_alert(kind, sev, r, g.node, g.gpu, r.time_ns);
      a.value = static_cast<double>(inc);
      a.threshold = static_cast<double>(min_increase);
      a.summary = std::string(headline) + ": " + std::to_string(inc) + " new on " + who(a) +
                  " since the previous sample (" + field + " " + std::to_string(total) +
                  (total < previous ? ", after a counter reset" : "") + ")";
      a.attrs = {{"increase", static_cast<double>(inc)}, {field, static_cast<double>(total)}};
      c.open.raise(std::move(a), out);
    } else if (c.active && ++c.quiet >= o_.rearm_samples) {
      c.active = false;
      c.open.close(r.time_ns, out);
    }
  }

  // An alert located on a GPU, with the run, rank and current step placed on it.
  Alert base_alert(std::string_view kind, Severity sev, const Record& r, Symbol node, int32_t gpu, int64_t onset_time) {
    Alert a;
    a.kind = kind;
    a.severity = sev;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.node = node;
    if (gpu >= 0) a.gpu = gpu;
    if (gpu >= 0) {
      if (const GpuTenant* t = placement_.tenant(node, gpu)) {
        a.run_id = t->run_id;
        a.rank = t->rank;
        if (auto s = steps_.find(t->run_id); s != steps_.end()) a.step = s->second;
      }
    }
    if (r.kind() == Kind::kEvent) {
      const Occurrence& e = r.as<Occurrence>();
      if (a.run_id.empty() && !e.run_id.empty()) a.run_id = e.run_id;
      if (!a.rank && e.has(Occurrence::F::rank)) a.rank = e.rank;
      if (e.has(Occurrence::F::step)) a.step = e.step;
    }
    a.alert_id = make_alert_id(a, onset_time);
    return a;
  }

  static std::string who(const Alert& a) {
    std::string s = a.gpu ? "GPU " + std::to_string(*a.gpu) + " of node " + a.node.string() : "node " + a.node.string();
    if (a.rank)
      s += " (rank " + std::to_string(*a.rank) + (a.run_id.empty() ? "" : " of run " + a.run_id.string()) + ")";
    return s;
  }

  static std::string readings(const Gpu& g, double base) {
    std::string s;
    if (g.has(Gpu::F::temp_c)) s += ", " + fmt_num(g.temp_c) + " C";
    if (g.has(Gpu::F::sm_clock_mhz)) {
      s += ", clock " + fmt_num(g.sm_clock_mhz) + " MHz";
      if (std::isfinite(base)) s += " (recently " + fmt_num(base) + " MHz)";
    }
    if (g.has(Gpu::F::power_w)) {
      s += ", " + fmt_num(g.power_w) + " W";
      if (g.has(Gpu::F::power_limit_w)) s += " of a " + fmt_num(g.power_limit_w) + " W limit";
    }
    return s;
  }

  static void add_readings(Alert& a, const Gpu& g, double base) {
    if (g.has(Gpu::F::temp_c)) a.attrs.push_back({"temp_c", g.temp_c});
    if (g.has(Gpu::F::sm_clock_mhz)) a.attrs.push_back({"sm_clock_mhz", g.sm_clock_mhz});
    if (std::isfinite(base)) a.attrs.push_back({"clock_baseline_mhz", base});
    if (g.has(Gpu::F::power_w)) a.attrs.push_back({"power_w", g.power_w});
    if (g.has(Gpu::F::power_limit_w)) a.attrs.push_back({"power_limit_w", g.power_limit_w});
    if (g.has(Gpu::F::throttle_reasons))
      a.attrs.push_back({"throttle_reasons", static_cast<double>(g.throttle_reasons)});
  }

  GpuHealthOptions o_;
  NodePlacement placement_;
  runtime::state::KeyedState<GpuKey, GpuState, GpuKeyHash> gpus_;  // lookups only, never iterated
  SymbolSlots<GpuState, 65> index_;                                // state_of(): by node, GPU + 1 (-1: the node)
  runtime::state::KeyedState<Symbol, int64_t> steps_;              // latest joined step per run
  std::vector<double> scratch_;
};

class GpuHealthDef final : public OperatorDef {
 public:
  explicit GpuHealthDef(GpuHealthOptions o) : o_(o) {}
  bool partitioned() const override { return true; }
  std::optional<uint64_t> key(const Record& r) const override {
    static const Symbol kXid = Symbol::intern(event_kind::kXid);
    switch (r.kind()) {
      case Kind::kGpu:
        return node_key(r.as<Gpu>().node);
      case Kind::kEvent: {
        const Occurrence& e = r.as<Occurrence>();
        if (!e.node.empty()) return node_key(e.node);
        if (e.kind == kXid) return std::nullopt;  // resolved through the rank map by every partition
        return 0;
      }
      default:
        return std::nullopt;  // run_start, run_end, step records: every partition
    }
  }
  std::unique_ptr<Operator> open(const runtime::OperatorContext& ctx) const override {
    return std::make_unique<GpuHealth>(o_, ctx);
  }
  std::string describe() const override {
    return "temp_threshold=" + fmt_num(o_.temp_threshold_c, "%g") + " clock_drop=" + fmt_num(o_.clock_drop, "%g") +
           " persist=" + std::to_string(o_.persist_k) + "/" + std::to_string(o_.persist_n);
  }

 private:
  GpuHealthOptions o_;
};

}  // namespace

std::unique_ptr<OperatorDef> MakeGpuHealth(const GpuHealthOptions& options) {
  return std::make_unique<GpuHealthDef>(options);
}

void RegisterGpuHealth(Registry& registry) {
  ComponentInfo info;
  info.type = "gpu_health";
  info.role = Role::kOperator;
  info.doc =
      "Per GPU, from gpu samples and xid events: `thermal_throttle` (thermal throttle reasons or temperature), "
      "`power_throttle` (power brake, or a power cap that holds the clock down), `clock_low` (clock below the "
      "GPU's own recent clock with no reason), `memory_pressure` (memory_headroom = 1 - used / total), each "
      "persistent over samples; `xid_error`, and `ecc_uncorrected`, `nvlink_error`, `pcie_replay` when their "
      "totals rise (a total that goes down is a counter reset). Partitioned by node; names the run and rank on "
      "the GPU from run_start.";
  const GpuHealthOptions defaults;  // each default is written once, in GpuHealthOptions
  info.params = {
      {.name = "temp_threshold",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.temp_threshold_c),
       .doc = "GPU temperature (C) at or above which a sample counts as thermal throttling.",
       .min = 0,
       .max = 200},
      {.name = "clock_drop",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.clock_drop),
       .doc = "Fraction below the GPU's own recent SM clock that counts as a clock drop.",
       .min = 0.01,
       .max = 0.99},
      {.name = "clock_window",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.clock_window),
       .doc = "Busy, unthrottled samples in the GPU's clock baseline (median).",
       .min = 3,
       .max = 10000},
      {.name = "min_util",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.min_util_pct),
       .doc = "GPU utilization (%) below which the clock is not judged (idle GPUs clock down).",
       .min = 0,
       .max = 100},
      {.name = "min_headroom",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.min_headroom),
       .doc = "memory_headroom (1 - used / total) below which a sample counts as memory pressure.",
       .min = 0,
       .max = 1},
      {.name = "persist_k",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_k),
       .doc = "Samples of a GPU that must show throttling, a low clock or memory pressure within the window.",
       .min = 1,
       .max = 1e6},
      {.name = "persist_n",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_n),
       .doc = "Window length in samples of that GPU; also the samples without that re-arm it.",
       .min = 1,
       .max = 1e6},
      {.name = "xid_dedupe",
       .type = ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.xid_dedupe_ns),
       .doc = "The same XID code on the same GPU within this time is one incident.",
       .min = 0},
      {.name = "ecc_dbe_min_increase",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.ecc_dbe_min_increase),
       .doc = "Rise of ecc_dbe_total between two samples that raises ecc_uncorrected.",
       .min = 1},
      {.name = "nvlink_min_increase",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.nvlink_min_increase),
       .doc = "Rise of nvlink_errors_total between two samples that raises nvlink_error.",
       .min = 1},
      {.name = "pcie_replay_min_increase",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.pcie_replay_min_increase),
       .doc = "Rise of pcie_replay_total between two samples that raises pcie_replay (a few replays are normal).",
       .min = 1},
      {.name = "rearm_samples",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.rearm_samples),
       .doc = "Samples without a counter increase after which that counter can alert again.",
       .min = 1},
  };
  info.accepts =
      mask(Kind::kRunStart) | mask(Kind::kGpu) | mask(Kind::kEvent) | mask(Kind::kRunEnd) | mask(Kind::kStepRecord);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    GpuHealthOptions o;
    o.temp_threshold_c = ctx.params->get_double("temp_threshold");
    o.clock_drop = ctx.params->get_double("clock_drop");
    o.clock_window = ctx.params->get_int("clock_window");
    o.min_util_pct = ctx.params->get_double("min_util");
    o.min_headroom = ctx.params->get_double("min_headroom");
    o.persist_k = ctx.params->get_int("persist_k");
    o.persist_n = ctx.params->get_int("persist_n");
    o.xid_dedupe_ns = ctx.params->get_duration_ns("xid_dedupe");
    o.ecc_dbe_min_increase = ctx.params->get_int("ecc_dbe_min_increase");
    o.nvlink_min_increase = ctx.params->get_int("nvlink_min_increase");
    o.pcie_replay_min_increase = ctx.params->get_int("pcie_replay_min_increase");
    o.rearm_samples = ctx.params->get_int("rearm_samples");
    if (o.persist_k > o.persist_n) {
      ctx.fail("persist_k", "persist_k (" + std::to_string(o.persist_k) + ") must not exceed persist_n (" +
                                std::to_string(o.persist_n) + ")");
    }
    return MakeGpuHealth(o);
  });
}

}  // namespace runlens::ops
