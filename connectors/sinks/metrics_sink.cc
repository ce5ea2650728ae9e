// The `metrics` sink: the hot operational metrics of spec section 29 as
// Prometheus series (docs/integrations.md, "Prometheus"), from what the
// pipeline computed: step_stats rows per job, GPU and node samples, xid and
// telemetry_gap events, alerts. Labels are bounded: job_id, model_id,
// cluster_id per job; node_id, gpu_id (and the job labels of the run placed
// on that GPU) per GPU; never rank, step, dataset shard or prompt.
//
// Inert without an exposition server: unless the engine attaches a
// MetricsHub (`--metrics-port`), it accepts no rows, so the executor routes
// it none. Attached, it keeps its series in a MetricSet and publishes a copy
// at most every publish_interval of wall-clock time, so a scrape reads that
// copy, never the operator's state.
#include <chrono>
#include <unordered_map>

#include "connectors/metrics/exposition.h"
#include "connectors/metrics/metrics_hub.h"
#include "connectors/sinks/sinks.h"
#include "schema/vocabulary.h"

namespace runlens::connectors {

using metrics::Family;
using metrics::MetricType;
using metrics::Series;

namespace {

// --- families ---------------------------------------------------------------
enum JobMetric {
  kJobStep,
  kJobWorkP50,
  kJobWorkMax,
  kJobTokens,
  kJobLoss,
  kJobMfu,
  kJobStraggler,
  kJobDataWait,
  kJobComm,
  kJobLastStep,
  kJobSteps,
  kJobLost,
  kJobMetrics
};
constexpr Family kJobFamilies[kJobMetrics] = {
    {"runlens_job_step_seconds", MetricType::kGauge,
     "Wall time of the job's last step: its slowest rank's step_ms (step_stats)."},
    {"runlens_job_step_work_p50_seconds", MetricType::kGauge,
     "Median over ranks of their own work time in the last step (step_ms less comm and data waits; step_stats "
     "work_p50)."},
    {"runlens_job_step_work_max_seconds", MetricType::kGauge,
     "Slowest rank's own work time in the last step (step_stats work_max)."},
    {"runlens_job_tokens_per_second", MetricType::kGauge, "Tokens of the last step over its wall time (step_stats)."},
    {"runlens_job_loss", MetricType::kGauge, "Training loss of the last step that reported one (step_stats)."},
    {"runlens_job_mfu_ratio", MetricType::kGauge,
     "Model FLOPs utilization of the last step, 0..1 (step_stats; needs gpu_peak_flops and model_flops_per_token)."},
    {"runlens_job_straggler_ratio", MetricType::kGauge,
     "Slowest rank's work over the median rank's in the last step (step_stats)."},
    {"runlens_job_data_wait_ratio", MetricType::kGauge,
     "Mean data-loader wait over step time in the last step, 0..1 (step_stats)."},
    {"runlens_job_communication_ratio", MetricType::kGauge,
     "Mean collective time over step time in the last step, 0..1 (step_stats)."},
    {"runlens_job_last_step", MetricType::kGauge, "Last step of the job that step_stats aggregated."},
    {"runlens_job_steps_total", MetricType::kCounter, "Steps of the job that step_stats aggregated."},
    {"runlens_job_telemetry_lost_batches_total", MetricType::kCounter,
     "Batches of the job's producers lost before the collector (telemetry_gap events)."},
};
constexpr Family kCollective{"runlens_job_collective_latency_seconds", MetricType::kSummary,
                             "Latency of the job's collectives (NCCL), summed over ranks, by op (collective rows)."};
constexpr Family kRunInfo{"runlens_job_run_info", MetricType::kGauge,
                          "1 for each run of a job that the sink knows (run_id is a label here only)."};

enum GpuMetric {
  kGpuUtil,
  kGpuSmActive,
  kGpuTensorActive,
  kGpuMemUsed,
  kGpuMemTotal,
  kGpuTemp,
  kGpuPower,
  kGpuPowerLimit,
  kGpuSmClock,
  kGpuMemClock,
  kGpuThrottle,
  kGpuEccSbe,
  kGpuEccDbe,
  kGpuPcie,
  kGpuNvlink,
  kGpuXid,
  kGpuMetrics
};
constexpr Family kGpuFamilies[kGpuMetrics] = {
    {"runlens_gpu_utilization_ratio", MetricType::kGauge, "GPU utilization, 0..1 (gpu sample util_pct / 100)."},
    {"runlens_gpu_sm_active_ratio", MetricType::kGauge, "SM activity, 0..1 (gpu sample sm_active_pct / 100)."},
    {"runlens_gpu_tensor_active_ratio", MetricType::kGauge,
     "Tensor core activity, 0..1 (gpu sample tensor_active_pct / 100)."},
    {"runlens_gpu_memory_used_bytes", MetricType::kGauge, "GPU memory in use."},
    {"runlens_gpu_memory_total_bytes", MetricType::kGauge, "GPU memory in all."},
    {"runlens_gpu_temperature_celsius", MetricType::kGauge, "GPU temperature."},
    {"runlens_gpu_power_watts", MetricType::kGauge, "GPU power draw."},
    {"runlens_gpu_power_limit_watts", MetricType::kGauge, "GPU power limit."},
    {"runlens_gpu_sm_clock_hertz", MetricType::kGauge, "SM clock."},
    {"runlens_gpu_memory_clock_hertz", MetricType::kGauge, "Memory clock."},
    {"runlens_gpu_throttle_reasons", MetricType::kGauge,
     "Clock throttle reasons of the last sample, NVML's bit mask (0: not throttled)."},
    {"runlens_gpu_ecc_sbe_errors_total", MetricType::kCounter,
     "Corrected (single-bit) ECC errors the samples' ecc_sbe_total counted; a drop of that total is a reset."},
    {"runlens_gpu_ecc_dbe_errors_total", MetricType::kCounter,
     "Uncorrected (double-bit) ECC errors the samples' ecc_dbe_total counted; a drop of that total is a reset."},
    {"runlens_gpu_pcie_replays_total", MetricType::kCounter,
     "PCIe replays the samples' pcie_replay_total counted; a drop of that total is a reset."},
    {"runlens_gpu_nvlink_errors_total", MetricType::kCounter,
     "NVLink errors the samples' nvlink_errors_total counted; a drop of that total is a reset."},
    {"runlens_gpu_xid_errors_total", MetricType::kCounter,
     "XIDs seen: xid events, and a gpu sample's xid when it changes to a new non-zero code."},
};
enum NodeMetric { kNodeCpu, kNodeMemUsed, kNodeMemTotal, kNodeMetrics };
constexpr Family kNodeFamilies[kNodeMetrics] = {
    {"runlens_node_cpu_ratio", MetricType::kGauge, "Node CPU utilization, 0..1 (node sample cpu_pct / 100)."},
    {"runlens_node_memory_used_bytes", MetricType::kGauge, "Node memory in use."},
    {"runlens_node_memory_total_bytes", MetricType::kGauge, "Node memory in all."},
};
constexpr Family kAlerts{"runlens_alerts_total", MetricType::kCounter,
                         "Alerts and diagnoses raised, by kind and severity (first publications; revisions are not "
                         "counted again)."};
constexpr Family kSeries{"runlens_metrics_series", MetricType::kGauge, "Series a metrics sink holds now."};
constexpr Family kSeriesLimit{"runlens_metrics_series_limit", MetricType::kGauge,
                              "Most series a metrics sink holds (max_series)."};
constexpr Family kRefused{"runlens_metrics_series_refused_total", MetricType::kCounter,
                          "New series a metrics sink refused because it held max_series."};

// The sample counters (*_total fields) of a gpu row, by GpuMetric.
constexpr std::pair<GpuMetric, Gpu::F> kGpuCounters[] = {{kGpuEccSbe, Gpu::F::ecc_sbe_total},
                                                         {kGpuEccDbe, Gpu::F::ecc_dbe_total},
                                                         {kGpuPcie, Gpu::F::pcie_replay_total},
                                                         {kGpuNvlink, Gpu::F::nvlink_errors_total}};
constexpr int64_t kXidSameWithinNs = 60'000'000'000;  // an xid event and a sample of one XID are one XID

// Kinds the sink reads when an exposition server is attached.
constexpr uint32_t kMetricsKinds = mask(Kind::kRunStart) | mask(Kind::kRunEnd) | mask(Kind::kStepStats) |
                                   mask(Kind::kCollective) | mask(Kind::kGpu) | mask(Kind::kNode) | mask(Kind::kEvent) |
                                   mask(Kind::kAlert);

struct MetricsSinkOptions {
  int64_t max_series = 10000;
  int64_t retain_ended_ns = 300'000'000'000;  // 5m of event time after run_end
  int64_t publish_interval_ns = 100'000'000;  // wall clock
  uint32_t kinds = ~0u;                       // row kinds read (of kMetricsKinds)
};

// --- state --------------------------------------------------------------------
struct JobEntity {
  std::string labels;  // label_text of job_id, model_id, cluster_id
  std::string base;    // the same without braces, to extend
  int runs = 0;        // runs of this job the sink knows (dropped ones not counted)
  Series* s[kJobMetrics] = {};
  uint64_t refused_at[kJobMetrics] = {};  // MetricSet::erasures() + 1 when its series was refused
  std::unordered_map<Symbol, std::pair<std::string, Series*>> collectives;  // by op
};

struct RunEntry {
  JobEntity* job = nullptr;
  std::string job_key;
  std::string info_labels;
  std::vector<uint64_t> gpus;  // placement keys of its ranks
  bool ended = false;
  int64_t ended_ns = 0;
};

struct GpuEntity {
  std::string labels;
  Symbol placed_run;  // the run whose placement `labels` has (empty: none)
  Series* s[kGpuMetrics] = {};
  uint64_t refused_at[kGpuMetrics] = {};  // MetricSet::erasures() + 1 when its series was refused
  double acc[kGpuMetrics] = {};           // counters: what the sink counted for this GPU
  int64_t raw[kGpuMetrics] = {};
  bool seen[kGpuMetrics] = {};
  int64_t xid_code = 0, xid_ns = INT64_MIN, sample_xid = 0;
};

struct NodeEntity {
  std::string labels;
  Series* s[kNodeMetrics] = {};
};

uint64_t gpu_key(Symbol node, int32_t gpu) {
  return (static_cast<uint64_t>(node.id()) << 32) | static_cast<uint32_t>(gpu);
}

class MetricsSink final : public Operator {
 public:
  MetricsSink(const MetricsSinkOptions& o, std::string node_id, std::shared_ptr<metrics::MetricsHub> hub)
      : o_(o), node_id_(std::move(node_id)), hub_(std::move(hub)), set_(static_cast<size_t>(o.max_series)) {}

  void process(const Record& r, Emitter&) override {
    switch (r.kind()) {
      case Kind::kRunStart:
        on_run_start(r.run_start());
        break;
      case Kind::kRunEnd:
        on_run_end(r.as<RunEnd>().run_id, r.time_ns);
        break;
      case Kind::kStepStats:
        on_stats(r.step_stats());
        break;
      case Kind::kCollective:
        on_collective(r.as<Collective>());
        break;
      case Kind::kGpu:
        on_gpu(r.as<Gpu>(), r.time_ns);
        break;
      case Kind::kNode:
        on_node(r.as<NodeSample>());
        break;
      case Kind::kEvent:
        on_event(r.as<Occurrence>(), r.time_ns);
        break;
      case Kind::kAlert:
        on_alert(r.alert());
        break;
      default:
        return;
    }
    dirty_ = true;
  }

  void on_watermark(int64_t w, Emitter&) override {
    if (w != runtime::kEndOfTime) expire(w);
    auto now = std::chrono::steady_clock::now();
    if (dirty_ && now - published_ >= std::chrono::nanoseconds(o_.publish_interval_ns)) publish(now);
  }
  void finish(Emitter&) override { publish(std::chrono::steady_clock::now()); }

 private:
  // --- jobs -----------------------------------------------------------------
  static metrics::Labels job_labels(const RunStart& rs) {
    metrics::Labels l{{"job_id", rs.job_id.empty() ? rs.run_id.string() : rs.job_id.string()}};
    if (!rs.model_id.empty()) l.emplace_back("model_id", rs.model_id.string());
    if (!rs.cluster_id.empty()) l.emplace_back("cluster_id", rs.cluster_id.string());
    return l;
  }

  // Null when the run is new and the sink is full: then its info series is
  // counted as refused and nothing of the run is kept (input cannot grow the
  // sink's state past the limit either).
  RunEntry* run_of(Symbol run_id, const RunStart* rs) {
    auto it = runs_.find(run_id);
    if (it != runs_.end()) return &it->second;
    RunStart fallback;
    fallback.run_id = run_id;
    metrics::Labels l = job_labels(rs ? *rs : fallback);
    std::string key = metrics::label_text(l);
    if (full()) {
      l.emplace_back("run_id", run_id.string());
      set_.series(kRunInfo, metrics::label_text(l));
      return nullptr;
    }
    auto& job = jobs_[key];
    if (job.labels.empty()) {
      job.labels = key;
      job.base = key.substr(1, key.size() - 2);
    }
    ++job.runs;
    RunEntry& e = runs_[run_id];
    e.job = &job;
    e.job_key = key;
    l.emplace_back("run_id", run_id.string());
    e.info_labels = metrics::label_text(l);
    if (Series* s = set_.series(kRunInfo, e.info_labels)) s->value = 1;
    return &e;
  }
  JobEntity* job_of(Symbol run_id) {
    RunEntry* e = run_of(run_id, nullptr);
    return e ? e->job : nullptr;
  }
  bool full() const { return set_.size() >= set_.max_series(); }

  void on_run_start(const RunStart& rs) {
    auto it = runs_.find(rs.run_id);
    // The run started again after it ended: its job series start afresh.
    if (it != runs_.end() && it->second.ended) drop_run(it);
    RunEntry* e = run_of(rs.run_id, &rs);  // a repeated run_start keeps the labels of the first
    if (!e) return;
    for (const auto& p : rs.ranks) {
      if (p.node.empty() || p.gpu < 0) continue;
      uint64_t k = gpu_key(p.node, p.gpu);
      if (placement_.emplace(k, rs.run_id).second) e->gpus.push_back(k);
    }
  }

  void on_run_end(Symbol run_id, int64_t t) {
    auto it = runs_.find(run_id);
    if (it == runs_.end() || it->second.ended) return;
    it->second.ended = true;
    it->second.ended_ns = t;
    // Its GPUs are no longer the job's: their next samples are unlabelled.
    unplace(it->second);
  }

  void unplace(RunEntry& e) {
    for (uint64_t k : e.gpus) {
      auto p = placement_.find(k);
      if (p == placement_.end()) continue;
      auto r = runs_.find(p->second);
      if (r != runs_.end() && &r->second == &e) placement_.erase(p);
    }
    e.gpus.clear();
  }

  // Series of runs that ended retain_ended ago (event time) are dropped.
  void expire(int64_t w) {
    for (auto it = runs_.begin(); it != runs_.end();) {
      if (it->second.ended && w - it->second.ended_ns >= o_.retain_ended_ns)
        it = drop_run(it);
      else
        ++it;
    }
  }

  std::unordered_map<Symbol, RunEntry>::iterator drop_run(std::unordered_map<Symbol, RunEntry>::iterator it) {
    RunEntry& e = it->second;
    unplace(e);
    set_.erase(kRunInfo, e.info_labels);
    auto job = jobs_.find(e.job_key);
    if (job != jobs_.end() && --job->second.runs <= 0) {
      JobEntity& j = job->second;
      for (int m = 0; m < kJobMetrics; ++m) set_.erase(kJobFamilies[m], j.labels);
      for (const auto& [op, c] : j.collectives) set_.erase(kCollective, c.first);
      jobs_.erase(job);
    }
    dirty_ = true;
    return runs_.erase(it);
  }

  // The series of an entity's metric; a refused one is not asked for again
  // until the set erased a series.
  template <class Entity>
  Series* entity_series(Entity& e, int m, const Family& family) {
    if (e.s[m]) return e.s[m];
    if (e.refused_at[m] == set_.erasures() + 1) return nullptr;
    e.s[m] = set_.series(family, e.labels);
    if (!e.s[m]) e.refused_at[m] = set_.erasures() + 1;
    return e.s[m];
  }
  Series* job_series(JobEntity& j, JobMetric m) { return entity_series(j, m, kJobFamilies[m]); }
  void set_job(JobEntity& j, JobMetric m, double v) {
    if (Series* s = job_series(j, m)) s->value = v;
  }
  void set_job(JobEntity& j, JobMetric m, const std::optional<double>& v, double scale = 1) {
    if (v) set_job(j, m, *v * scale);
  }

  void on_stats(const StepStats& st) {
    RunEntry* e = run_of(st.run_id, st.run ? &st.run->start : nullptr);
    if (!e) return;
    JobEntity& j = *e->job;
    set_job(j, kJobLastStep, static_cast<double>(st.step));
    if (Series* s = job_series(j, kJobSteps)) s->value += 1;
    if (st.shed) return;  // incomplete by shedding: not judged, its aggregates not exported
    set_job(j, kJobStep, st.step_ms / 1e3);
    set_job(j, kJobWorkP50, st.work_p50 / 1e3);
    set_job(j, kJobWorkMax, st.work_max / 1e3);
    set_job(j, kJobStraggler, st.straggler_ratio);
    set_job(j, kJobTokens, st.tokens_per_s);
    set_job(j, kJobMfu, st.mfu);
    set_job(j, kJobDataWait, st.data_wait_ratio);
    set_job(j, kJobComm, st.communication_ratio);
    set_job(j, kJobLoss, st.loss);
  }

  void on_collective(const Collective& c) {
    JobEntity* job = job_of(c.run_id);
    if (!job) return;
    JobEntity& j = *job;
    auto it = j.collectives.find(c.op);
    if (it == j.collectives.end()) {
      std::string labels = "{" + j.base + ",op=\"" + metrics::escape_label_value(c.op.str()) + "\"}";
      Series* s = set_.series(kCollective, labels);
      if (!s) return;
      it = j.collectives.emplace(c.op, std::make_pair(labels, s)).first;
    }
    it->second.second->value += c.latency_ms / 1e3;
    it->second.second->count += 1;
  }

  // --- GPUs and nodes ---------------------------------------------------------
  // Null when the GPU is new and the sink is full: then the series of
  // `metric` is counted as refused and nothing of the GPU is kept.
  GpuEntity* gpu_entity(Symbol node, int32_t gpu, GpuMetric metric) {
    uint64_t k = gpu_key(node, gpu);
    auto p = placement_.find(k);
    Symbol placed = p != placement_.end() ? p->second : Symbol();
    auto found = gpus_.find(k);
    // The hot path: a known GPU whose placement did not change.
    if (found != gpus_.end() && found->second.placed_run == placed && !found->second.labels.empty())
      return &found->second;
    std::string labels =
        "{node_id=\"" + metrics::escape_label_value(node.str()) + "\",gpu_id=\"" + std::to_string(gpu) + "\"";
    if (!placed.empty()) labels += "," + runs_[placed].job->base;
    labels += "}";
    if (found == gpus_.end() && full()) {
      set_.series(kGpuFamilies[metric], labels);
      return nullptr;
    }
    GpuEntity& g = found != gpus_.end() ? found->second : gpus_[k];
    g.placed_run = placed;
    if (g.labels != labels) {
      // A new job on this GPU (or none now): its series move to the new labels.
      for (int m = 0; m < kGpuMetrics; ++m) {
        if (g.s[m]) set_.erase(kGpuFamilies[m], g.labels);
        g.s[m] = nullptr;
      }
      g.labels = std::move(labels);
      // Counters carry what was counted for the device over to the new labels.
      for (auto [m, f] : kGpuCounters) {
        if (g.seen[m]) set_gpu(g, m, g.acc[m]);
      }
      if (g.acc[kGpuXid] > 0) set_gpu(g, kGpuXid, g.acc[kGpuXid]);
    }
    return &g;
  }
  Series* gpu_series(GpuEntity& g, GpuMetric m) { return entity_series(g, m, kGpuFamilies[m]); }
  void set_gpu(GpuEntity& g, GpuMetric m, double v) {
    if (Series* s = gpu_series(g, m)) s->value = v;
  }
  void count_xid(GpuEntity& g, int64_t code, int64_t t) {
    if (code == g.xid_code && t - g.xid_ns < kXidSameWithinNs) return;
    g.xid_code = code;
    g.xid_ns = t;
    g.acc[kGpuXid] += 1;
    set_gpu(g, kGpuXid, g.acc[kGpuXid]);
  }

  void on_gpu(const Gpu& s, int64_t t) {
    GpuEntity* entity = gpu_entity(s.node, s.gpu, kGpuTemp);
    if (!entity) return;
    GpuEntity& g = *entity;
    using F = Gpu::F;
    if (s.has(F::util_pct)) set_gpu(g, kGpuUtil, s.util_pct / 100);
    if (s.has(F::sm_active_pct)) set_gpu(g, kGpuSmActive, s.sm_active_pct / 100);
    if (s.has(F::tensor_active_pct)) set_gpu(g, kGpuTensorActive, s.tensor_active_pct / 100);
    if (s.has(F::mem_used_bytes)) set_gpu(g, kGpuMemUsed, static_cast<double>(s.mem_used_bytes));
    if (s.has(F::mem_total_bytes)) set_gpu(g, kGpuMemTotal, static_cast<double>(s.mem_total_bytes));
    if (s.has(F::temp_c)) set_gpu(g, kGpuTemp, s.temp_c);
    if (s.has(F::power_w)) set_gpu(g, kGpuPower, s.power_w);
    if (s.has(F::power_limit_w)) set_gpu(g, kGpuPowerLimit, s.power_limit_w);
    if (s.has(F::sm_clock_mhz)) set_gpu(g, kGpuSmClock, s.sm_clock_mhz * 1e6);
    if (s.has(F::mem_clock_mhz)) set_gpu(g, kGpuMemClock, s.mem_clock_mhz * 1e6);
    if (s.has(F::throttle_reasons)) set_gpu(g, kGpuThrottle, static_cast<double>(s.throttle_reasons));
    for (auto [m, f] : kGpuCounters) {
      if (!s.has(f)) continue;
      int64_t v = f == F::ecc_sbe_total       ? s.ecc_sbe_total
                  : f == F::ecc_dbe_total     ? s.ecc_dbe_total
                  : f == F::pcie_replay_total ? s.pcie_replay_total
                                              : s.nvlink_errors_total;
      if (v < 0) continue;
      // The first sample's total counts whole; then increases; a total that
      // went down was reset (the driver, the exporter restarted): all of the
      // new total is new.
      if (!g.seen[m])
        g.acc[m] += static_cast<double>(v);
      else
        g.acc[m] += static_cast<double>(v >= g.raw[m] ? v - g.raw[m] : v);
      g.raw[m] = v;
      g.seen[m] = true;
      set_gpu(g, m, g.acc[m]);
    }
    if (s.has(F::xid)) {
      if (s.xid != 0 && s.xid != g.sample_xid) count_xid(g, s.xid, t);
      g.sample_xid = s.xid;
    }
  }

  void on_node(const NodeSample& n) {
    auto found = nodes_.find(n.node);
    if (found == nodes_.end() && full()) {
      set_.series(kNodeFamilies[kNodeCpu], metrics::Labels{{"node_id", n.node.string()}});
      return;
    }
    auto [it, added] = nodes_.try_emplace(n.node);
    NodeEntity& ns = it->second;
    if (added) ns.labels = metrics::label_text({{"node_id", n.node.string()}});
    const std::string& labels = ns.labels;
    auto put = [&](NodeMetric m, double v) {
      if (!ns.s[m]) ns.s[m] = set_.series(kNodeFamilies[m], labels);
      if (ns.s[m]) ns.s[m]->value = v;
    };
    if (n.has(NodeSample::F::cpu_pct)) put(kNodeCpu, n.cpu_pct / 100);
    if (n.has(NodeSample::F::mem_used_bytes)) put(kNodeMemUsed, static_cast<double>(n.mem_used_bytes));
    if (n.has(NodeSample::F::mem_total_bytes)) put(kNodeMemTotal, static_cast<double>(n.mem_total_bytes));
  }

  void on_event(const Occurrence& e, int64_t t) {
    std::string_view kind = e.kind.str();
    if (kind == event_kind::kXid && e.has(Occurrence::F::node) && e.has(Occurrence::F::gpu) && e.gpu >= 0) {
      if (GpuEntity* g = gpu_entity(e.node, e.gpu, kGpuXid)) count_xid(*g, e.has(Occurrence::F::code) ? e.code : 0, t);
    } else if (kind == event_kind::kTelemetryGap && e.has(Occurrence::F::code) && e.code > 0) {
      if (!e.run_id.empty()) {
        JobEntity* j = job_of(e.run_id);
        if (Series* s = j ? job_series(*j, kJobLost) : nullptr) s->value += static_cast<double>(e.code);
      } else if (Series* s = set_.series(kJobFamilies[kJobLost], std::string())) {
        s->value += static_cast<double>(e.code);
      }
    }
  }

  void on_alert(const Alert& a) {
    if (a.revision != 0) return;  // a later publication of an alert already counted
    std::string key = a.kind + '\x1f' + std::string(severity_name(a.severity));
    auto it = alerts_.find(key);
    if (it == alerts_.end()) {
      Series* s = set_.series(kAlerts, {{"kind", a.kind}, {"severity", std::string(severity_name(a.severity))}});
      if (!s) return;
      it = alerts_.emplace(key, s).first;
    }
    it->second->value += 1;
  }

  void publish(std::chrono::steady_clock::time_point now) {
    published_ = now;
    dirty_ = false;
    auto snap = std::make_shared<metrics::Snapshot>(set_.snapshot());
    std::string l = metrics::label_text({{"component", node_id_}});
    snap->entries.push_back({&kSeries, l, Series{static_cast<double>(set_.size()), 0}});
    snap->entries.push_back({&kSeriesLimit, l, Series{static_cast<double>(set_.max_series()), 0}});
    snap->entries.push_back({&kRefused, l, Series{static_cast<double>(set_.refused()), 0}});
    hub_->publish(node_id_, std::move(snap));
  }

  MetricsSinkOptions o_;
  std::string node_id_;
  std::shared_ptr<metrics::MetricsHub> hub_;
  metrics::MetricSet set_;
  std::unordered_map<std::string, JobEntity> jobs_;  // by label text
  std::unordered_map<Symbol, RunEntry> runs_;
  std::unordered_map<uint64_t, Symbol> placement_;  // gpu_key -> run placed there
  std::unordered_map<uint64_t, GpuEntity> gpus_;
  std::unordered_map<Symbol, NodeEntity> nodes_;
  std::unordered_map<std::string, Series*> alerts_;
  bool dirty_ = true;
  std::chrono::steady_clock::time_point published_{};
};

class MetricsSinkDef final : public OperatorDef {
 public:
  explicit MetricsSinkDef(MetricsSinkOptions o) : o_(o) {}
  // Without a hub nothing is routed here: the sink costs the pipeline nothing.
  uint32_t accepts(uint32_t declared) const override { return hub_ ? declared & kMetricsKinds & o_.kinds : 0; }
  std::unique_ptr<Operator> open(const runtime::OperatorContext& ctx) const override {
    if (!hub_) return std::make_unique<InertSink>();
    return std::make_unique<MetricsSink>(o_, ctx.node_id, hub_);
  }
  std::string describe() const override {
    return "max_series=" + std::to_string(o_.max_series) + (hub_ ? "" : " (inert: no exposition server)");
  }
  void attach(std::shared_ptr<metrics::MetricsHub> hub) { hub_ = std::move(hub); }

 private:
  class InertSink final : public Operator {
   public:
    void process(const Record&, Emitter&) override {}
  };
  MetricsSinkOptions o_;
  std::shared_ptr<metrics::MetricsHub> hub_;
};

}  // namespace

bool attach_metrics_hub(OperatorDef& def, std::shared_ptr<metrics::MetricsHub> hub) {
  auto* m = dynamic_cast<MetricsSinkDef*>(&def);
  if (m == nullptr) return false;
  m->attach(std::move(hub));
  return true;
}

void RegisterMetricsSink(Registry& registry) {
  MetricsSinkOptions defaults;
  runtime::ComponentInfo info;
  info.type = "metrics";
  info.role = runtime::Role::kSink;
  info.doc =
      "The hot operational metrics as Prometheus series for `runlens run --metrics-port` (docs/integrations.md, "
      "\"Prometheus\"): per job (step time, tokens/s, loss, MFU, straggler, data-wait and communication ratios, "
      "collective latency), per GPU (utilization, memory, temperature, power, clocks, throttle reasons, XID, ECC, "
      "NVLink and PCIe counters), per node (CPU, memory), alerts by kind and severity. Labels are bounded: job_id, "
      "model_id, cluster_id, node_id, gpu_id. Inert (routed no rows) when no exposition server is attached.";
  info.params = {
      {.name = "max_series",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(defaults.max_series),
       .doc = "Most series the sink holds; new series beyond it are refused and counted in "
              "runlens_metrics_series_refused_total.",
       .min = 1},
      {.name = "retain_ended",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.retain_ended_ns),
       .doc = "How long (event time) after its run_end a run's job series stay; then they are dropped."},
      {.name = "kinds",
       .type = runtime::ParamType::kStringList,
       .default_value = "[run_start, run_end, step_stats, collective, gpu, node, event, alert]",
       .doc = "Row kinds to read. Two sinks can share the work: one reading the source's bulk (gpu, node, "
              "collective, event) with the source as its only input, so those rows are released as soon as the "
              "source's watermark passes them, and one reading step_stats and alerts (both with run_start and "
              "run_end, for the labels)."},
      {.name = "publish_interval",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.publish_interval_ns),
       .doc = "Most wall-clock time between two copies of the series handed to the exposition server."},
  };
  info.accepts = kMetricsKinds;
  registry.add_operator(std::move(info), [](const runtime::BuildContext& ctx) {
    MetricsSinkOptions o;
    o.max_series = ctx.params->get_int("max_series");
    o.retain_ended_ns = ctx.params->get_duration_ns("retain_ended");
    o.publish_interval_ns = ctx.params->get_duration_ns("publish_interval");
    o.kinds = kinds_mask(ctx, "kinds");
    if ((o.kinds & ~kMetricsKinds) != 0) {
      ctx.fail("kinds",
               "the metrics sink reads only run_start, run_end, step_stats, collective, gpu, node, event and "
               "alert rows");
    }
    return std::make_unique<MetricsSinkDef>(o);
  });
}

}  // namespace runlens::connectors
