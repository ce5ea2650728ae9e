// root_cause: each shipped tree on hand-built windows of step aggregates,
// symptoms and events; one diagnosis per incident; updates with the same
// alert_id; holds, deadlines and run ends; the same output whatever the
// watermark cadence and partitioning.
#include "operators/root_cause.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "tests/operators/operator_run.h"
#include "tests/operators/split_run.h"
#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

constexpr const char* kRun = "r1";
constexpr int64_t kStepNs = 2 * kSec;

int64_t at_step(int64_t step) { return kT0 + 10 * kSec + step * kStepNs; }

// What step_stats says of one step of a healthy 32-rank job; a case changes it
// from the fault's step on.
struct Shape {
  double data_wait = 0.01, comm = 0.06, compute = 0.92, straggler = 1.05, tokens_per_s = 120000, mfu = 0.35;
  double loss = 2.0, lr = 3e-4, grad_norm = 0.8;
};

Record stats(int64_t step, const Shape& s) {
  auto st = std::make_shared<StepStats>();
  st->run_id = Symbol::intern(kRun);
  st->step = step;
  st->world_size = st->reported = 32;
  st->step_ms = 2000;
  st->work_p50 = s.compute * 2000;
  st->work_max = st->work_p50 * s.straggler;
  st->work_p99 = st->work_max;
  st->straggler_ratio = s.straggler;
  st->tokens_per_s = s.tokens_per_s;
  st->mfu = s.mfu;
  st->data_wait_ratio = s.data_wait;
  st->communication_ratio = s.comm;
  st->loss = s.loss;
  st->lr = s.lr;
  st->grad_norm = s.grad_norm;
  Record r;
  r.time_ns = at_step(step) + 50'000'000;
  r.body = std::shared_ptr<const StepStats>(std::move(st));
  return r;
}

// A symptom (or context) alert. rank >= 0: rank r on node-(r/8), GPU r%8; -1: run-wide.
struct Sym {
  std::string kind;
  int64_t step;
  int32_t rank = -1;
  std::vector<std::pair<std::string, double>> attrs = {};
  std::string run = kRun;
};

Record alert_row(const Sym& s) {
  Alert a;
  a.kind = s.kind;
  a.severity = Severity::kWarning;
  a.time_ns = at_step(s.step) + 60'000'000;
  a.run_id = Symbol::intern(s.run);
  a.step = s.step;
  if (s.rank >= 0) {
    a.rank = s.rank;
    a.node = Symbol::intern("node-" + std::to_string(s.rank / 8));
    a.gpu = s.rank % 8;
  }
  a.summary = s.kind + " summary";
  a.attrs = s.attrs;
  a.alert_id = make_alert_id(a.kind, a.run_id, a.rank, a.node, a.gpu, s.step);
  return alert_record(std::move(a));
}

struct Ev {
  std::string kind;
  int64_t step;
  std::string key = "";
};

Record event_of(const Ev& e) {
  EventFields f;
  f.run(kRun).step(e.step);
  if (!e.key.empty()) f.key(e.key).change(3e-4, 3e-3);
  return event_row(e.kind, at_step(e.step) + 20'000'000, f);
}

std::vector<Record> window(int64_t steps, const std::function<void(int64_t, Shape&)>& shape,
                           const std::vector<Sym>& syms, const std::vector<Ev>& events = {}) {
  std::vector<Record> rows;
  for (int64_t s = 1; s <= steps; ++s) {
    Shape sh;
    if (shape) shape(s, sh);
    rows.push_back(stats(s, sh));
  }
  for (const auto& s : syms) rows.push_back(alert_row(s));
  for (const auto& e : events) rows.push_back(event_of(e));
  return rows;
}

const auto kHealthy = [](int64_t, Shape&) {};

// Every diagnosis published, revisions included, in order.
std::vector<Alert> published(const std::vector<Record>& rows, bool fine = true, const std::string& params = "") {
  auto def = make_operator("root_cause", params);
  OperatorRun run;
  run_operator(*def, rows, &run, fine);
  return run.alerts("diagnosis");
}

// The final revision of each alert_id, in the order of their first publication
// (what a consumer keeps). Revisions of one alert_id count 0, 1, 2, ...
std::vector<Alert> diagnoses(const std::vector<Record>& rows, bool fine = true, const std::string& params = "") {
  std::vector<Alert> out;
  for (const Alert& a : published(rows, fine, params)) {
    auto same = std::find_if(out.begin(), out.end(), [&](const Alert& b) { return b.alert_id == a.alert_id; });
    if (same == out.end()) {
      CHECK(a.revision == 0);
      out.push_back(a);
    } else {
      CHECK(a.revision == same->revision + 1);
      CHECK(a.time_ns >= same->time_ns);
      *same = a;
    }
  }
  return out;
}

bool has_evidence(const Alert& a, const std::string& kind) {
  for (const auto& e : a.evidence) {
    if (e.kind == kind) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("root_cause: each shipped tree on hand-built windows") {
  // clang-format off
  const std::vector<std::pair<std::string, double>> hot = {
      {"gpu_temp_c", 91}, {"gpu_sm_clock_mhz", 990}, {"gpu_throttle_reasons", 0x48}, {"gpu_peer_sm_clock_mhz", 1980}, {"onset_step", 40}};
  const std::vector<std::pair<std::string, double>> normal = {
      {"gpu_temp_c", 70}, {"gpu_sm_clock_mhz", 1980}, {"gpu_throttle_reasons", 0}, {"gpu_peer_sm_clock_mhz", 1980},
      {"node_cpu_pct", 35}, {"node_tcp_retransmits_per_s", 4}, {"onset_step", 40}};
  auto with = [](std::vector<std::pair<std::string, double>> a, const char* k, double v) {
    for (auto& [key, val] : a) {
      if (key == k) {
        val = v;
        return a;
      }
    }
    a.emplace_back(k, v);
    return a;
  };
  // clang-format on
  struct Case {
    const char* name;
    std::function<void(int64_t, Shape&)> shape;
    std::vector<Sym> symptoms;
    std::vector<Ev> events;
    const char* symptom;
    const char* cause;
    const char* owner;
  };
  // clang-format off
  const Case cases[] = {
      // Straggler localization (spec sections 26, 53).
      {"straggler on a hot GPU", kHealthy, {{"straggler", 42, 13, hot}}, {}, "straggler", "hardware_throttle", "infrastructure"},
      {"straggler and the thermal alert of its GPU", kHealthy,
       {{"straggler", 42, 13, normal}, {"thermal_throttle", 45, 13}}, {}, "straggler", "hardware_throttle", "infrastructure"},
      {"straggler with a low clock and no reason", kHealthy,
       {{"straggler", 42, 13, with(normal, "gpu_sm_clock_mhz", 1400)}}, {}, "straggler", "hardware_throttle", "infrastructure"},
      {"straggler on a power-capped GPU", kHealthy,
       {{"straggler", 42, 13, with(with(normal, "gpu_throttle_reasons", 4), "gpu_sm_clock_mhz", 1500)}}, {}, "straggler",
       "hardware_throttle", "infrastructure"},
      {"power throttle alone", kHealthy,
       {{"power_throttle", 45, 6, {{"throttle_reasons", 4}, {"sm_clock_mhz", 1523}, {"clock_baseline_mhz", 1980}}}}, {},
       "power_throttle", "hardware_throttle", "infrastructure"},
      {"straggler on a busy host", kHealthy, {{"straggler", 42, 13, with(normal, "node_cpu_pct", 97)}}, {}, "straggler",
       "host_bottleneck", "infrastructure"},
      {"straggler behind a lossy NIC", kHealthy, {{"straggler", 42, 13, with(normal, "node_tcp_retransmits_per_s", 450)}},
       {}, "straggler", "network", "network"},
      {"straggler with normal telemetry", kHealthy, {{"straggler", 42, 13, normal}}, {}, "straggler", "unknown",
       "infrastructure"},
      {"straggler without telemetry", kHealthy, {{"straggler", 42, 13, {{"onset_step", 40}}}}, {}, "straggler", "unknown",
       "infrastructure"},
      // Job slowdown localized (issue 14): a lower priority than the straggler's.
      {"job slowdown of several ranks", kHealthy,
       {{"job_slowdown", 47, -1, {{"before_ms", 2150}, {"after_ms", 2600}, {"ranks", 4}, {"onset_step", 40},
                                  {"rank_13", 1.3}, {"rank_2", 1.1}}}}, {}, "job_slowdown", "unknown", "infrastructure"},
      {"job slowdown of one power-capped rank", kHealthy,
       {{"job_slowdown", 47, 13, with(with(with(normal, "gpu_throttle_reasons", 4), "gpu_sm_clock_mhz", 1500), "ranks", 1)}},
       {}, "job_slowdown", "hardware_throttle", "infrastructure"},
      {"job slowdown of one rank on a busy host", kHealthy,
       {{"job_slowdown", 47, 13, with(with(normal, "node_cpu_pct", 97), "ranks", 1)}}, {}, "job_slowdown",
       "host_bottleneck", "infrastructure"},
      {"job slowdown of one rank, normal telemetry", kHealthy, {{"job_slowdown", 47, 13, with(normal, "ranks", 1)}}, {},
       "job_slowdown", "unknown", "infrastructure"},
      {"job slowdown and the straggler of the same rank", kHealthy,
       {{"job_slowdown", 47, 13, with(normal, "ranks", 1)}, {"straggler", 44, 13, with(normal, "node_cpu_pct", 97)}},
       {}, "straggler", "host_bottleneck", "infrastructure"},
      // Training failure (spec sections 24, 25).
      {"NaN with no change", kHealthy, {{"nan_loss", 50, 0}}, {}, "nan_loss", "training_instability", "training"},
      {"gradient spike after an LR config change", kHealthy, {{"grad_spike", 50, 0}, {"loss_spike", 50, 0}},
       {{"config_change", 49, "lr"}}, "grad_spike", "config_change", "training"},
      {"NaN after an LR jump seen only in the series",
       [](int64_t s, Shape& sh) { if (s >= 45) sh.lr = 3e-3; }, {{"nan_loss", 50, 0}}, {}, "nan_loss", "config_change",
       "training"},
      {"NaN after another config change", kHealthy, {{"nan_loss", 50, 0}}, {{"config_change", 45, "batch_size"}}, "nan_loss",
       "config_change", "training"},
      {"LR change after the NaN is no cause", kHealthy, {{"nan_loss", 50, 0}}, {{"config_change", 53, "lr"}}, "nan_loss",
       "training_instability", "training"},
      // Data starvation (spec sections 13, 27).
      {"starved ranks on a saturated host", kHealthy,
       {{"data_starvation", 42, 4, {{"storage_read_ms", 16}, {"storage_read_median_ms", 16}, {"onset_step", 40}}},
        {"host_bottleneck", 43, 4}},
       {}, "data_starvation", "host_bottleneck", "infrastructure"},
      {"a slow shard", kHealthy,
       {{"data_starvation", 42, 14, {{"storage_read_ms", 360}, {"storage_read_median_ms", 13}, {"onset_step", 40}}}}, {},
       "data_starvation", "data_pipeline", "data"},
      {"a slow loader", kHealthy,
       {{"data_starvation", 42, 14, {{"storage_read_ms", 14}, {"storage_read_median_ms", 13}, {"onset_step", 40}}}}, {},
       "data_starvation", "data_pipeline", "data"},
      // Network (spec sections 12, 37).
      {"collectives slow down", [](int64_t s, Shape& sh) { if (s >= 40) sh.comm = 0.37, sh.compute = 0.6; },
       {{"comm_bottleneck", 42, -1, {{"onset_step", 40}}}, {"throughput_drop", 47, -1, {{"onset_step", 41}}}}, {},
       "comm_bottleneck", "network", "network"},
      {"communication-bound from the start", [](int64_t, Shape& sh) { sh.comm = 0.4; },
       {{"comm_bottleneck", 42, -1, {{"onset_step", 40}}}}, {}, "comm_bottleneck", "inefficient_compute", "training"},
      // Training slow (spec section 59).
      {"throughput down, GPUs wait for data", [](int64_t s, Shape& sh) { if (s >= 40) sh.data_wait = 0.2, sh.compute = 0.75; },
       {{"throughput_drop", 45, -1, {{"onset_step", 40}}}}, {}, "throughput_drop", "data_pipeline", "data"},
      {"throughput down, GPUs idle with no wait", [](int64_t s, Shape& sh) { if (s >= 40) sh.compute = 0.7; },
       {{"throughput_drop", 45, -1, {{"onset_step", 40}}}}, {}, "throughput_drop", "host_bottleneck", "infrastructure"},
      {"MFU down after a config change", [](int64_t s, Shape& sh) { if (s >= 60) sh.mfu = 0.25, sh.compute = 0.93; },
       {{"mfu_drop", 67, -1, {{"onset_step", 60}}}, {"throughput_drop", 69, -1, {{"onset_step", 61}}}},
       {{"config_change", 60, "activation_checkpointing"}}, "mfu_drop", "config_change", "training"},
      {"MFU down with no change", [](int64_t s, Shape& sh) { if (s >= 60) sh.mfu = 0.25; },
       {{"mfu_drop", 67, -1, {{"onset_step", 60}}}}, {}, "mfu_drop", "inefficient_compute", "training"},
      {"throughput down, a GPU throttled", kHealthy,
       {{"throughput_drop", 45, -1, {{"onset_step", 40}}}, {"clock_low", 46, 3}}, {}, "clock_low", "hardware_throttle",
       "infrastructure"},
      // Hardware faults.
      {"XID, then the rank goes missing", kHealthy, {{"xid_error", 60, 6}, {"rank_missing", 60, 6}}, {{"xid", 60}},
       "xid_error", "hardware_fault", "infrastructure"},
      {"uncorrectable ECC", kHealthy, {{"ecc_uncorrected", 60, 6}}, {}, "ecc_uncorrected", "hardware_fault",
       "infrastructure"},
      {"a rank stops reporting", kHealthy, {{"rank_missing", 50, 9}}, {}, "rank_missing", "hardware_fault",
       "infrastructure"},
      {"NVLink errors", kHealthy, {{"nvlink_error", 50, 9}}, {}, "nvlink_error", "hardware_fault", "infrastructure"},
      // Storms (issue 12): one alert for the job, the node, the counter.
      {"the job stalls in a collective", kHealthy, {{"job_stalled", 60, -1}}, {{"nccl_timeout", 60}}, "job_stalled",
       "network", "network"},
      {"the job stalls with no fault event", kHealthy, {{"job_stalled", 60, -1}}, {}, "job_stalled", "unknown", "platform"},
      {"the job stalls after an exception", kHealthy, {{"job_stalled", 60, -1}}, {{"exception", 59}}, "job_stalled",
       "unknown", "training"},
      {"the job stalls after an XID", kHealthy, {{"xid_error", 59, 6}, {"job_stalled", 60, -1}}, {{"xid", 59}},
       "xid_error", "hardware_fault", "infrastructure"},
      {"a rank's step counter jumps", kHealthy, {{"step_anomaly", 50, 9}}, {}, "step_anomaly", "unknown", "training"},
      {"a rank counts afresh after an exception", kHealthy, {{"step_anomaly", 50, 9}}, {{"exception", 49}},
       "step_anomaly", "unknown", "platform"},
      // Memory and checkpoints.
      {"OOM on a long batch", kHealthy,
       {{"oom", 60, 6, {{"seq_len", 32768}, {"seq_len_median", 4096}, {"mem_peak_bytes", 85e9}, {"mem_peak_median_bytes", 64e9}}}},
       {}, "oom", "memory", "training"},
      {"OOM, steady memory", kHealthy, {{"oom", 60, 6}}, {}, "oom", "memory", "training"},
      {"slow checkpoints", kHealthy, {{"checkpoint_overhead", 60, -1, {{"onset_step", 50}}}}, {}, "checkpoint_overhead",
       "checkpoint", "platform"},
      {"failed checkpoint", kHealthy, {{"checkpoint_failure", 50, -1}}, {}, "checkpoint_failure", "checkpoint", "platform"},
  };
  // clang-format on
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    auto d = diagnoses(window(80, c.shape, c.symptoms, c.events));
    REQUIRE(d.size() == 1);
    CAPTURE(d[0].summary);
    CHECK(d[0].symptom == c.symptom);
    CHECK(d[0].cause == c.cause);
    CHECK(d[0].owner == c.owner);
    CHECK(d[0].severity == Severity::kInfo);
    CHECK(!d[0].recommendation.empty());
    CHECK(d[0].recommendation.find('{') == std::string::npos);
    CHECK(d[0].summary.find("LIKELY CAUSE: " + std::string(c.cause)) == 0);
    CHECK(has_evidence(d[0], c.symptom));
    CHECK(has_evidence(d[0], "rule"));
    // The locators are the symptom's.
    const Sym* primary = nullptr;
    for (const auto& s : c.symptoms) {
      if (s.kind == c.symptom) primary = &s;
    }
    REQUIRE(primary != nullptr);
    CHECK(*d[0].step == primary->step);
    CHECK(d[0].rank.has_value() == (primary->rank >= 0));
    if (primary->rank >= 0) {
      CHECK(*d[0].rank == primary->rank);
      CHECK(d[0].node.str() == "node-" + std::to_string(primary->rank / 8));
      CHECK(*d[0].gpu == primary->rank % 8);
    }
  }
}

TEST_CASE("root_cause: the diagnosis carries the onset, the events of the window and the signals") {
  auto d = diagnoses(window(80,
                            [](int64_t s, Shape& sh) {
                              if (s >= 50) sh.lr = 3e-3, sh.grad_norm = 30;
                            },
                            {{"grad_spike", 50, 0}, {"loss_spike", 50, 0}, {"nan_loss", 53, 0}},
                            {{"config_change", 50, "lr"}}));
  REQUIRE(d.size() == 1);
  CHECK(d[0].symptom == "nan_loss");  // the highest-ranked symptom of the tree
  CHECK(d[0].cause == "config_change");
  CHECK(attr(d[0], "onset_step") == 50);
  CHECK(attr(d[0], "symptoms") == 3);
  CHECK(std::isnan(attr(d[0], "revision")));  // a field since contract v2, no attr
  CHECK(attr(d[0], "lr") == doctest::Approx(3e-3));
  bool event = false, signal = false;
  for (const auto& e : d[0].evidence) {
    event |= e.kind == "config_change" && e.step == 50 && e.detail == "lr 0.0003 -> 0.003";
    signal |= e.kind == "signal" && e.detail.find("lr 0.003 against a baseline of 0.0003 before step 50") == 0;
  }
  CHECK(event);
  CHECK(signal);
  CHECK(d[0].alert_id == make_alert_id("diagnosis", Symbol::intern(kRun), 0, Symbol::intern("node-0"), 0, 50));
}

TEST_CASE("root_cause: a job_slowdown's diagnosis reports the alert's numbers and names its ranks") {
  auto rows = window(60, kHealthy,
                     {{"job_slowdown",
                       47,
                       -1,
                       {{"before_ms", 2150.4},
                        {"after_ms", 2601},
                        {"ranks", 3},
                        {"onset_step", 40},
                        {"rank_13", 1.3},
                        {"rank_20", 1.23},
                        {"rank_2", 1.1}}}});
  auto d = diagnoses(rows);
  REQUIRE(d.size() == 1);
  CHECK(d[0].summary ==
        "LIKELY CAUSE: unknown (owner infrastructure): the job's step time rose from 2150 to 2601 ms since step 40; "
        "the "
        "ranks that work slower than their own baselines (3): 13 (+30 %), 20 (+23 %), 2 (+10 %)");
  std::map<std::string, double> attrs(d[0].attrs.begin(), d[0].attrs.end());
  CHECK(attrs["before_ms"] == 2150.4);
  CHECK(attrs["after_ms"] == 2601);
  CHECK(attrs["ranks"] == 3);
}

TEST_CASE("root_cause: one diagnosis per incident") {
  struct Case {
    const char* name;
    std::vector<Sym> symptoms;
    size_t expect;
  };
  // clang-format off
  const Case cases[] = {
      {"straggler and the throughput drop it causes", {{"straggler", 42, 5}, {"throughput_drop", 45}}, 1},
      {"throughput drop first, then the straggler", {{"throughput_drop", 42}, {"straggler", 44, 5}}, 1},
      {"two ranks of one node", {{"data_starvation", 42, 4}, {"host_bottleneck", 43, 5}}, 1},
      {"stragglers on two nodes", {{"straggler", 42, 5}, {"straggler", 43, 21}}, 2},
      {"a straggler and a throttled GPU beside it", {{"straggler", 42, 13}, {"thermal_throttle", 45, 12}}, 2},
      {"the same rank, far apart", {{"straggler", 42, 5}, {"straggler", 130, 5}}, 2},
      {"two runs", {{"straggler", 42, 5}, {"straggler", 42, 5, {}, "r2"}}, 2},
      {"context alerts are no symptoms", {{"diagnosis", 42, 5}}, 0},
  };
  // clang-format on
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto d = diagnoses(window(150, kHealthy, c.symptoms));
    std::set<std::string> ids;
    for (const auto& a : d) ids.insert(a.alert_id);
    CHECK(d.size() == c.expect);
    CHECK(ids.size() == c.expect);
  }
}

TEST_CASE("root_cause: later evidence that changes the cause re-emits the diagnosis with the same alert_id") {
  // A straggler with nothing to explain it; then its GPU throws an XID.
  auto rows = window(80, kHealthy, {{"straggler", 42, 5, {{"onset_step", 40}}}, {"xid_error", 55, 5}});
  auto d = published(rows);
  // Diagnosed at once (revision 0, the straggler's own time), judged again
  // when its window closes (5 steps later: nothing a consumer sees changed,
  // so nothing is published), then again after the XID's window.
  REQUIRE(d.size() == 2);
  CHECK(d[0].cause == "unknown");
  CHECK(d[0].symptom == "straggler");
  CHECK(d[0].revision == 0);
  CHECK(d[0].time_ns == at_step(42) + 60'000'000);
  CHECK(d[1].cause == "hardware_fault");
  CHECK(d[1].symptom == "xid_error");
  CHECK(d[1].alert_id == d[0].alert_id);
  CHECK(d[1].revision == 1);
  CHECK(d[1].time_ns == at_step(60) + 50'000'000);  // the xid's after_steps: the step_stats row of step 60
  CHECK(attr(d[1], "onset_step") == 40);
  // A later symptom that does not change the cause changes the evidence: a revision.
  auto e = published(window(80, kHealthy, {{"straggler", 42, 5}, {"throughput_drop", 52}}));
  REQUIRE(e.size() == 2);
  CHECK(e[0].cause == e[1].cause);
  CHECK(e[1].revision == 1);
  CHECK(e[1].evidence.size() == e[0].evidence.size() + 1);
  CHECK(has_evidence(e[1], "throughput_drop"));
  CHECK_FALSE(has_evidence(e[0], "throughput_drop"));
}

TEST_CASE("root_cause: a revised symptom (asof_join's nearer sample) replaces the one held, and is no new symptom") {
  // The straggler is published at once without GPU context, then again
  // (revision 1) with its GPU's samples, which show it hot.
  auto rows = window(80, kHealthy, {{"straggler", 42, 13, {{"onset_step", 40}}}});
  Record revised = alert_row({"straggler",
                              42,
                              13,
                              {{"onset_step", 40},
                               {"gpu_temp_c", 91},
                               {"gpu_sm_clock_mhz", 990},
                               {"gpu_throttle_reasons", 0x48},
                               {"gpu_peer_sm_clock_mhz", 1980}}});
  auto a = std::make_shared<Alert>(revised.alert());
  a->revision = 1;
  revised.body = std::shared_ptr<const Alert>(a);
  revised.time_ns = at_step(44);  // asof_join releases it when event time passes the later sample
  SUBCASE("within the window") {
    rows.push_back(revised);
    auto d = published(rows);
    REQUIRE(d.size() == 2);
    CHECK(d[0].cause == "unknown");
    CHECK(d[1].cause == "hardware_throttle");
    CHECK(d[1].revision == 1);
    CHECK(d[1].time_ns == at_step(47) + 50'000'000);  // when the window closed
    CHECK(attr(d[1], "symptoms") == 1);
  }
  SUBCASE("after the window: judged again at once") {
    revised.time_ns = at_step(60);
    rows.push_back(revised);
    auto d = published(rows);
    REQUIRE(d.size() == 2);
    CHECK(d[1].cause == "hardware_throttle");
    CHECK(d[1].time_ns == at_step(60));
    CHECK(attr(d[1], "symptoms") == 1);
  }
}

TEST_CASE("root_cause: diagnosed at once, judged again after after_steps, its deadline, its run's end or failure") {
  // The NaN is diagnosed at once; the LR change two steps later is in its
  // window (evidence, not a cause: it came after), so the window's
  // judgement differs for a consumer and is published as revision 1.
  const std::vector<Sym> nan = {{"nan_loss", 50, 0}};
  const std::vector<Ev> later = {{"config_change", 52, "lr"}};
  auto check_now = [](const std::vector<Alert>& d) {
    REQUIRE(!d.empty());
    CHECK(d[0].revision == 0);
    CHECK(d[0].time_ns == at_step(50) + 60'000'000);  // the symptom's own time
    CHECK(d[0].cause == "training_instability");
  };
  auto stopped = [&](Record last) {
    auto rows = window(52, kHealthy, nan, later);
    rows.push_back(std::move(last));
    auto d = published(rows);
    check_now(d);
    REQUIRE(d.size() == 2);
    CHECK(d[1].revision == 1);
    return d[1];
  };
  SUBCASE("after_steps of step_stats") {
    auto d = published(window(80, kHealthy, nan, later), true, "after_steps: 7");
    check_now(d);
    REQUIRE(d.size() == 2);
    CHECK(d[1].revision == 1);
    CHECK(d[1].cause == "training_instability");
    CHECK(d[1].time_ns == at_step(57) + 50'000'000);  // the step_stats row of step 57
    CHECK(d[1].evidence.size() == d[0].evidence.size() + 1);
  }
  SUBCASE("nothing new in the window: revision 0 stays the only one") {
    auto d = published(window(80, kHealthy, nan), true, "after_steps: 7");
    check_now(d);
    CHECK(d.size() == 1);
  }
  SUBCASE("max_wait when the steps stop") {
    auto d = published(window(52, kHealthy, nan, later), true, "max_wait: 30s");
    check_now(d);
    REQUIRE(d.size() == 2);
    CHECK(d[1].time_ns == at_step(50) + 60'000'000 + 30 * kSec);
  }
  SUBCASE("the run ends") {
    RunEnd end;
    end.run_id = Symbol::intern(kRun);
    end.set_present(RunEnd::F::run_id);
    Record r;
    r.time_ns = at_step(52) + kSec;
    r.body = end;
    CHECK(stopped(r).time_ns == r.time_ns);
  }
  SUBCASE("the run fails") {
    EventFields f;
    f.run(kRun).step(52);
    Record r = event_row("abort", at_step(52) + kSec, f);
    CHECK(stopped(r).time_ns == at_step(52) + kSec);
  }
  SUBCASE("an event that does not stop the run closes nothing") {
    EventFields f;
    f.run(kRun).step(52);
    auto rows = window(52, kHealthy, nan, later);
    rows.push_back(event_row("config_change", at_step(52) + kSec, f));
    auto d = published(rows, true, "max_wait: 30s");
    REQUIRE(d.size() == 2);
    CHECK(d[1].time_ns == at_step(50) + 60'000'000 + 30 * kSec);
  }
}

TEST_CASE("root_cause: the same diagnoses whatever the watermark cadence and partitioning") {
  auto rows = window(150,
                     [](int64_t s, Shape& sh) {
                       if (s >= 40 && s < 90) sh.data_wait = 0.2, sh.compute = 0.7;
                     },
                     {{"straggler", 42, 5, {{"gpu_temp_c", 92}}},
                      {"throughput_drop", 45},
                      {"data_starvation", 44, 17},
                      {"straggler", 43, 5, {}, "r2"},
                      {"nan_loss", 120, 0},
                      {"xid_error", 60, 5}},
                     {{"config_change", 100, "lr"}});
  auto fine = published(rows, true);
  auto coarse = published(rows, false);
  REQUIRE(!fine.empty());
  CHECK(fine == coarse);
  auto def = make_operator("root_cause");
  std::vector<Alert> one = alerts_of(run_split(*def, rows, 1), "diagnosis");
  std::vector<Alert> three = alerts_of(run_split(*def, rows, 3), "diagnosis");
  CHECK(one == fine);
  CHECK(three == fine);
}

TEST_CASE("root_cause: parameters are checked when the pipeline is built") {
  CHECK(config_error("root_cause", "history_steps: 10") ==
        "test.yaml:7:20: error: history_steps (10) must hold the window: at least before_steps + after_steps (25) (in "
        "operators.op)");  // < before + after
  CHECK(config_error("root_cause", "after_step: 3") ==
        "test.yaml:7:5: error: unknown parameter 'after_step' for root_cause (did you mean 'after_steps'?) (in "
        "operators.op)");
  CHECK(config_error("root_cause", "rules: /nonexistent/rules") ==
        "test.yaml:7:12: error: rules directory not found: /nonexistent/rules");
  CHECK_NOTHROW(make_operator("root_cause", std::string("rules: ") + RUNLENS_SOURCE_DIR + "/configs/rules"));
}

TEST_CASE("root_cause: a lost node is a hardware fault for infrastructure, and takes its ranks' rank_missing in") {
  Alert a;
  a.kind = "node_unreachable";
  a.severity = Severity::kCritical;
  a.time_ns = at_step(60) + 60'000'000;
  a.run_id = Symbol::intern(kRun);
  a.step = 60;
  a.node = Symbol::intern("node-1");
  a.summary = "node_unreachable summary";
  a.alert_id = make_alert_id(a, 60);
  auto rows = window(80, kHealthy, {{"rank_missing", 61, 9}});
  rows.push_back(alert_record(std::move(a)));
  auto d = diagnoses(rows);
  REQUIRE(d.size() == 1);
  CAPTURE(d[0].summary);
  CHECK(d[0].symptom == "node_unreachable");
  CHECK(d[0].cause == "hardware_fault");
  CHECK(d[0].owner == "infrastructure");
  CHECK(d[0].node.str() == "node-1");
  CHECK_FALSE(d[0].rank.has_value());
  CHECK(d[0].summary ==
        "LIKELY CAUSE: hardware_fault (owner infrastructure): none of the ranks of node node-1 reported step 60: the "
        "host is down or cut off");
  CHECK(has_evidence(d[0], "rank_missing"));
}

TEST_CASE("root_cause: a NaN in the last step, then run_end: nan_loss and its diagnosis need no window") {
  // nan_detect, then root_cause, as the executor runs them: rows in canonical
  // order, each followed by a watermark just past it; no finish(), no end of
  // input: what is out is out because the watermark passed the NaN's row.
  auto nan_def = make_operator("nan_detect");
  auto rc_def = make_operator("root_cause");
  OperatorRun run;
  runtime::OperatorContext ctx{"op", 0, 1, &run.dead, &run.counters};
  auto nan_op = nan_def->open(ctx);
  auto rc_op = rc_def->open(ctx);
  std::vector<Record> rows = window(50, kHealthy, {});
  for (int64_t s = 1; s <= 50; ++s) rows.push_back(train(kRun, s, s == 50 ? NAN : 2.0, at_step(s) + 70'000'000));
  std::sort(rows.begin(), rows.end(), [](const Record& a, const Record& b) { return compare_canonical(a, b) < 0; });
  const int64_t nan_at = at_step(50) + 70'000'000;
  std::vector<Record> detected, diagnosed;
  auto feed = [&](const Record& r) {
    std::vector<Record> mid;
    runtime::Emitter<Record> to_rc(&mid, r.time_ns);
    if (r.kind() == Kind::kTrain) nan_op->process(r, to_rc);
    nan_op->on_watermark(r.time_ns + 1, to_rc);
    runtime::Emitter<Record> out(&diagnosed, r.time_ns);
    if (r.kind() != Kind::kTrain) rc_op->process(r, out);
    for (const Record& a : mid) {
      detected.push_back(a);
      rc_op->process(a, out);
    }
    rc_op->on_watermark(r.time_ns + 1, out);
  };
  for (const Record& r : rows) feed(r);
  // The watermark has passed the NaN's row: the alert and its diagnosis are out.
  REQUIRE(detected.size() == 1);
  CHECK(detected[0].alert().kind == "nan_loss");
  CHECK(detected[0].time_ns == nan_at);
  auto d = alerts_of(diagnosed, "diagnosis");
  REQUIRE(d.size() == 1);
  CHECK(d[0].symptom == "nan_loss");
  CHECK(d[0].cause == "training_instability");
  CHECK(d[0].revision == 0);
  CHECK(diagnosed.back().time_ns == nan_at);
  // The job stops a minute later: its run_end judges the incident again (no
  // new evidence: nothing more is published).
  RunEnd end;
  end.run_id = Symbol::intern(kRun);
  end.set_present(RunEnd::F::run_id);
  Record r;
  r.time_ns = nan_at + 60 * kSec;
  r.body = end;
  feed(r);
  CHECK(alerts_of(diagnosed, "diagnosis").size() == 1);
}
