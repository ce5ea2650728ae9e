// asof_join: which sample is attached (as-of within the tolerance, or a
// nearer later one within the lookahead), what is attached, where a rank's
// place comes from, and that the result does not depend on the watermark
// cadence or the partitioning.
#include "operators/asof_join.h"

#include <algorithm>
#include <cmath>

#include "tests/operators/operator_run.h"
#include "tests/operators/split_run.h"
#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

// A straggler alert for rank 13 (node-1, GPU 5 with 8 GPUs per node) at time t.
Record straggler_at(int64_t t, bool with_place = true, const std::string& kind = "straggler") {
  Alert a;
  a.kind = kind;
  a.time_ns = t;
  a.run_id = Symbol::intern("r1");
  a.step = 42;
  a.rank = 13;
  if (with_place) {
    a.node = Symbol::intern("node-1");
    a.gpu = 5;
  }
  a.attrs = {{"work_ms", 3800}};
  a.alert_id = make_alert_id(a.kind, a.run_id, a.rank, a.node, a.gpu, 40);
  return alert_record(std::move(a));
}

Record node_sample(const std::string& node, int64_t t, double cpu, int64_t retransmits) {
  Record r = node_row(node, t, cpu);
  NodeSample n = r.as<NodeSample>();
  n.tcp_retransmits_total = retransmits;
  n.set_present(NodeSample::F::tcp_retransmits_total);
  r.body = n;
  return r;
}

// Samples of node-1 at kT0 + `at` seconds: GPU 5 at temperature `temp`, its
// peers at 70 C and 1980 MHz, the node at `cpu` %.
std::vector<Record> samples(int64_t at, double temp, double cpu, int64_t retransmits) {
  std::vector<Record> rows;
  for (int32_t g = 0; g < 8; ++g) {
    GpuReading r;
    r.temp_c = g == 5 ? temp : 70 + g;
    r.sm_clock_mhz = g == 5 && temp > 85 ? 990 : 1980;
    r.throttle_reasons = g == 5 && temp > 85 ? 0x48 : 0;
    rows.push_back(gpu_row("node-1", g, kT0 + at * kSec + g, r));
  }
  rows.push_back(node_sample("node-1", kT0 + at * kSec + 100, cpu, retransmits));
  return rows;
}

std::vector<Record> run_def(const ops::OperatorDef& def, std::vector<Record> rows, bool fine = true) {
  OperatorRun run;
  run_operator(def, std::move(rows), &run, fine);
  return run.out;
}

}  // namespace

TEST_CASE("asof_join: alert now with the as-of sample, refine later with a nearer one") {
  struct Case {
    const char* name;
    const char* params;
    std::vector<int64_t> sample_times;  // seconds after kT0; GPU 5's temperature is 60 + the second
    int64_t alert_at;                   // seconds after kT0
    double expect_now;                  // revision 0, published at alert_at (NaN: nothing attached)
    double expect_final;                // the nearest sample
    int64_t revised_at;                 // seconds after kT0 when revision 1 goes out; 0: no revision
  };
  // clang-format off
  const Case cases[] = {
      {"latest at or before", "", {10, 20, 40}, 30, 80, 80, 0},
      {"at the same time", "", {10, 30}, 30, 90, 90, 0},
      {"older than the tolerance", "tolerance: 5s", {10, 20}, 30, NAN, NAN, 0},
      {"later samples are not waited for without lookahead", "", {20, 31}, 30, 80, 80, 0},
      {"a nearer later sample within the lookahead", "lookahead: 15s", {20, 31}, 30, 80, 91, 40},
      {"an earlier sample that is nearer", "lookahead: 15s", {28, 40}, 30, 88, 88, 0},
      {"a tie goes to the earlier sample", "lookahead: 15s", {25, 35}, 30, 85, 85, 0},
      {"no sample before: the whole lookahead", "lookahead: 15s", {42}, 30, NAN, 102, 45},
      {"later sample beyond the lookahead", "lookahead: 5s", {10, 40}, 30, 70, 70, 0},
  };
  // clang-format on
  auto same = [](double got, double want) {
    if (std::isnan(want)) return std::isnan(got);
    return got == want;
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto def = make_operator("asof_join", c.params);
    std::vector<Record> rows;
    for (int64_t s : c.sample_times) {
      GpuReading r;
      r.temp_c = 60 + static_cast<double>(s);
      rows.push_back(gpu_row("node-1", 5, kT0 + s * kSec, r));
    }
    rows.push_back(straggler_at(kT0 + c.alert_at * kSec));
    std::vector<Record> out;
    for (const auto& r : run_def(*def, rows)) {
      if (r.kind() == Kind::kAlert) out.push_back(r);
    }
    REQUIRE(out.size() == (c.revised_at ? 2u : 1u));
    // Published at once, at the alert's own time.
    CHECK(out[0].time_ns == kT0 + c.alert_at * kSec);
    CHECK(out[0].alert().revision == 0);
    CHECK(out[0].alert().time_ns == kT0 + c.alert_at * kSec);
    CHECK(same(attr(out[0].alert(), "gpu_temp_c"), c.expect_now));
    CHECK(attr(out[0].alert(), "work_ms") == 3800);  // its own attrs stay, first
    const Alert& last = out.back().alert();
    CHECK(same(attr(last, "gpu_temp_c"), c.expect_final));
    if (c.revised_at) {
      // Again when event time passed the alert plus min(lookahead, age of the as-of sample).
      CHECK(out[1].time_ns == kT0 + c.revised_at * kSec);
      CHECK(last.revision == 1);
      CHECK(last.alert_id == out[0].alert().alert_id);
      CHECK(last.time_ns == kT0 + c.alert_at * kSec);  // the alert keeps its own time
      CHECK(attr(last, "work_ms") == 3800);
    }
  }
}

TEST_CASE("asof_join: a run that ends or fails refines its held alerts at once") {
  for (const char* stop : {"run_end", "abort", "nccl_timeout", "config_change"}) {
    CAPTURE(stop);
    auto def = make_operator("asof_join", "lookahead: 30s");
    std::vector<Record> rows;
    for (int64_t s : {20, 31}) {
      GpuReading g;
      g.temp_c = 60 + static_cast<double>(s);
      rows.push_back(gpu_row("node-1", 5, kT0 + s * kSec, g));
    }
    rows.push_back(straggler_at(kT0 + 30 * kSec));  // held until 40 s: the as-of sample is 10 s old
    if (std::string(stop) == "run_end") {
      RunEnd end;
      end.run_id = Symbol::intern("r1");
      end.set_present(RunEnd::F::run_id);
      Record r;
      r.time_ns = kT0 + 33 * kSec;
      r.body = end;
      rows.push_back(r);
    } else {
      EventFields f;
      f.run("r1").step(42);
      rows.push_back(event_row(stop, kT0 + 33 * kSec, f));
    }
    std::vector<Record> out;
    for (const auto& r : run_def(*def, rows)) {
      if (r.kind() == Kind::kAlert) out.push_back(r);
    }
    REQUIRE(out.size() == 2);
    CHECK(attr(out[0].alert(), "gpu_temp_c") == 80);
    CHECK(attr(out[1].alert(), "gpu_temp_c") == 91);
    CHECK(out[1].alert().revision == 1);
    // A config_change stops nothing: the alert waits for its deadline.
    CHECK(out[1].time_ns == kT0 + (std::string(stop) == "config_change" ? 40 : 33) * kSec);
  }
}

TEST_CASE("asof_join: GPU, peer and node context") {
  auto def = make_operator("asof_join");
  std::vector<Record> rows = samples(10, 70, 35, 1000);
  for (auto& r : samples(20, 92, 97, 6000)) rows.push_back(r);
  rows.push_back(straggler_at(kT0 + 25 * kSec));
  auto out = alerts_of(run_def(*def, rows));
  REQUIRE(out.size() == 1);
  const Alert& a = out[0];
  CHECK(attr(a, "gpu_temp_c") == 92);
  CHECK(attr(a, "gpu_sm_clock_mhz") == 990);
  CHECK(attr(a, "gpu_throttle_reasons") == 0x48);
  CHECK(attr(a, "gpu_util_pct") == 95);
  CHECK(attr(a, "gpu_power_limit_w") == 700);
  CHECK(attr(a, "gpu_sample_offset_s") == doctest::Approx(-5).epsilon(1e-6));
  CHECK(attr(a, "gpu_peer_sm_clock_mhz") == 1980);
  CHECK(attr(a, "gpu_peer_temp_c") == 73);  // median of 70..77 without GPU 5's
  CHECK(attr(a, "node_cpu_pct") == 97);
  CHECK(attr(a, "node_tcp_retransmits_per_s") == doctest::Approx(500));  // 5000 over 10 s
  // A counter reset: the increase is the new total.
  rows = samples(10, 70, 35, 9000);
  for (auto& r : samples(20, 70, 35, 300)) rows.push_back(r);
  rows.push_back(straggler_at(kT0 + 25 * kSec));
  out = alerts_of(run_def(*def, rows));
  REQUIRE(out.size() == 1);
  CHECK(attr(out[0], "node_tcp_retransmits_per_s") == doctest::Approx(30));
}

TEST_CASE("asof_join: a rank's place comes from its locators or the run's rank map, and one partition answers") {
  std::vector<Record> rows{run_start("r1", 32)};
  for (auto& r : samples(10, 92, 35, 0)) rows.push_back(r);
  rows.push_back(straggler_at(kT0 + 15 * kSec, /*with_place=*/false));
  auto def = make_operator("asof_join");
  for (int parts : {1, 2, 3, 5}) {
    CAPTURE(parts);
    auto out = alerts_of(run_split(*def, rows, parts));
    REQUIRE(out.size() == 1);
    CHECK(attr(out[0], "gpu_temp_c") == 92);
    CHECK(out[0].node.empty());  // the alert is enriched, not relocated
  }
  // A rank the run does not know: passed through once, unchanged.
  std::vector<Record> unknown = {rows[1], straggler_at(kT0 + 15 * kSec, false)};
  for (int parts : {1, 3}) {
    auto out = alerts_of(run_split(*def, unknown, parts));
    REQUIRE(out.size() == 1);
    CHECK(out[0].attrs.size() == 1);
  }
}

TEST_CASE("asof_join: kinds not listed, and attrs already present, are left alone") {
  auto def = make_operator("asof_join", "kinds: [straggler]");
  std::vector<Record> rows = samples(10, 92, 35, 0);
  rows.push_back(straggler_at(kT0 + 15 * kSec, true, "data_starvation"));
  Record own = straggler_at(kT0 + 16 * kSec);
  Alert a = own.alert();
  a.attrs.push_back({"gpu_temp_c", 50});
  own = alert_record(a);
  rows.push_back(own);
  auto out = alerts_of(run_def(*def, rows));
  REQUIRE(out.size() == 2);
  CHECK(out[0].kind == "data_starvation");
  CHECK(out[0].attrs.size() == 1);
  CHECK(attr(out[1], "gpu_temp_c") == 50);
  CHECK(attr(out[1], "gpu_sm_clock_mhz") == 990);
  CHECK(config_error("asof_join", "kinds: [stragler]") ==
        "test.yaml:7:12: error: unknown alert kind 'stragler' in kinds (did you mean 'straggler'?) (in operators.op)");
  CHECK(config_error("asof_join", "tolerance: 10m") ==
        "test.yaml:4:3: error: history (5m) must cover tolerance + lookahead (10m) (in operators.op)");  // history 5m
                                                                                                         // is shorter
}

TEST_CASE("asof_join: the same output whatever the watermark cadence and partitioning") {
  std::vector<Record> rows{run_start("r1", 32)};
  for (int64_t s = 0; s < 200; s += 7) {
    for (auto& r : samples(s, s > 100 ? 92 : 70, 35, s * 10)) rows.push_back(r);
  }
  for (int64_t t = 3; t < 200; t += 11) rows.push_back(straggler_at(kT0 + t * kSec, t % 2 == 0));
  for (const char* params : {"", "lookahead: 6s", "lookahead: 30s"}) {
    CAPTURE(params);
    auto def = make_operator("asof_join", params);
    auto fine = run_def(*def, rows, true);
    auto coarse = run_def(*def, rows, false);
    auto fine_alerts = alerts_of(fine);
    CHECK(std::count_if(fine_alerts.begin(), fine_alerts.end(), [](const Alert& a) { return a.revision == 0; }) == 18);
    // The sequence of revisions, not only the final alerts, is the same.
    CHECK(alerts_of(fine) == alerts_of(coarse));
    for (int parts : {2, 4}) CHECK(alerts_of(run_split(*def, rows, parts)) == alerts_of(fine));
  }
}
