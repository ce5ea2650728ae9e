// The `metrics` sink in a replayed pipeline: what it exports is what the
// pipeline computed (step_stats, samples, events), its labels are the job's
// and the GPU placement's, counters survive resets, series of an ended run
// are dropped after retain_ended, and without a hub it is routed no rows.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "connectors/metrics/metrics_hub.h"
#include "engine/engine.h"
#include "tests/pipelines/replay_run.h"

namespace {

using namespace runlens;

constexpr int64_t kT = 1767225600000000000;
std::string at(double seconds) { return std::to_string(kT + static_cast<int64_t>(seconds * 1e9)); }

std::string input_jsonl() {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  line(R"({"type":"run_start","time_ns":)" + at(0) +
       R"(,"run_id":"r1","job_id":"j1","model_id":"m1","cluster_id":"c1","world_size":2,)"
       R"("ranks":[{"rank":0,"node":"n1","gpu":0},{"rank":1,"node":"n1","gpu":1}]})");
  for (int step = 1; step <= 2; ++step) {
    double ms0 = step == 1 ? 100 : 200, ms1 = step == 1 ? 150 : 120;
    line(R"({"type":"step","time_ns":)" + at(step) + R"(,"run_id":"r1","rank":0,"step":)" + std::to_string(step) +
         R"(,"step_ms":)" + std::to_string(ms0) + R"(,"tokens":1000})");
    line(R"({"type":"step","time_ns":)" + at(step) + R"(,"run_id":"r1","rank":1,"step":)" + std::to_string(step) +
         R"(,"step_ms":)" + std::to_string(ms1) + R"(,"tokens":1000})");
    line(R"({"type":"train","time_ns":)" + at(step) + R"(,"run_id":"r1","step":)" + std::to_string(step) +
         R"(,"loss":)" + (step == 1 ? "2.5" : "2.25") + "}");
  }
  line(R"({"type":"collective","time_ns":)" + at(1) +
       R"(,"run_id":"r1","rank":0,"step":1,"op":"all_reduce","latency_ms":10})");
  line(R"({"type":"collective","time_ns":)" + at(1) +
       R"(,"run_id":"r1","rank":1,"step":1,"op":"all_reduce","latency_ms":20})");
  line(R"({"type":"collective","time_ns":)" + at(2) +
       R"(,"run_id":"r1","rank":0,"step":2,"op":"all_gather","latency_ms":5})");
  // ECC totals 3, 5, then a reset to 1, then 2: 3 + 2 + 1 + 1 = 7 counted.
  // XID 79 in a sample and as an event at once (one XID), again in the next
  // sample (the same XID), then 48: two XIDs.
  line(R"({"type":"gpu","time_ns":)" + at(1) +
       R"(,"node":"n1","gpu":0,"temp_c":71.5,"util_pct":87,"ecc_sbe_total":3,"xid":0,"sm_clock_mhz":1410})");
  line(R"({"type":"gpu","time_ns":)" + at(2) + R"(,"node":"n1","gpu":0,"temp_c":72,"ecc_sbe_total":5,"xid":79})");
  line(R"({"type":"event","time_ns":)" + at(2) + R"(,"kind":"xid","node":"n1","gpu":0,"code":79})");
  line(R"({"type":"gpu","time_ns":)" + at(3) + R"(,"node":"n1","gpu":0,"ecc_sbe_total":1,"xid":79})");
  line(R"({"type":"gpu","time_ns":)" + at(4) + R"(,"node":"n1","gpu":0,"ecc_sbe_total":2,"xid":0})");
  line(R"({"type":"gpu","time_ns":)" + at(5) + R"(,"node":"n1","gpu":0,"xid":48})");
  line(R"({"type":"gpu","time_ns":)" + at(5) + R"(,"node":"n9","gpu":3,"temp_c":50})");
  line(R"({"type":"node","time_ns":)" + at(5) + R"(,"node":"n1","cpu_pct":42,"mem_used_bytes":1024})");
  line(R"({"type":"run_end","time_ns":)" + at(6) + R"(,"run_id":"r1","status":"completed"})");
  // Past run_end + retain_ended ("2s") even with the lateness rule's 5 s.
  line(R"({"type":"gpu","time_ns":)" + at(30) + R"(,"node":"n1","gpu":0,"temp_c":60})");
  return s;
}

std::string pipeline_yaml(const std::string& retain, int max_series) {
  return "version: 1\nname: metrics-test\nsettings:\n  lateness: 5s\n"
         "sources:\n  telemetry:\n    type: zmq\n    bind: tcp://127.0.0.1:0\n"
         "operators:\n  join:\n    type: rank_join\n    inputs: [telemetry]\n"
         "  stats:\n    type: step_stats\n    inputs: [join, telemetry]\n"
         "sinks:\n  prom:\n    type: metrics\n    inputs: [telemetry, stats, join]\n    retain_ended: " +
         retain + "\n    max_series: " + std::to_string(max_series) + "\n";
}

// name{labels} -> value, from the exposition text.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  for (const auto& line : testing::lines_of(text)) {
    if (line[0] == '#') continue;
    auto sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return out;
}

struct Exported {
  std::string text;
  std::map<std::string, double> values;
  RunSummary summary;
};

Exported replay_with_hub(const std::string& retain, int max_series, bool attach = true) {
  std::string dir = testing::fresh_dir("metrics");
  std::ofstream(dir + "/input.jsonl") << input_jsonl();
  std::ofstream(dir + "/p.yaml") << pipeline_yaml(retain, max_series);
  auto spec = load_pipeline(dir + "/p.yaml", {{"RUNLENS_OUT", dir}});
  spec.settings.overflow = runtime::OverflowPolicy::kBlock;
  EngineOptions eo;
  eo.threads = 2;
  eo.replay_inputs = {dir + "/input.jsonl"};
  eo.batch_size = 1;  // a watermark after every row, so retain_ended is reached before the end
  eo.out_dir = dir;
  auto hub = std::make_shared<connectors::metrics::MetricsHub>();
  if (attach) eo.metrics = hub;
  Engine engine(std::move(spec), eo);
  Exported e;
  e.summary = engine.run();
  e.text = hub->render();
  e.values = samples(e.text);
  std::filesystem::remove_all(dir);
  return e;
}

const std::string kJob = R"(job_id="j1",model_id="m1",cluster_id="c1")";

TEST_CASE("job, GPU and node series are the values the pipeline computed, with the job's labels") {
  Exported e = replay_with_hub("5m", 10000);
  auto& v = e.values;
  INFO(e.text);
  CHECK(v.at("runlens_job_step_seconds{" + kJob + "}") == doctest::Approx(0.2));
  CHECK(v.at("runlens_job_step_work_max_seconds{" + kJob + "}") == doctest::Approx(0.2));
  double p50 = v.at("runlens_job_step_work_p50_seconds{" + kJob + "}");
  CHECK(v.at("runlens_job_straggler_ratio{" + kJob + "}") == doctest::Approx(0.2 / p50));
  CHECK(v.at("runlens_job_tokens_per_second{" + kJob + "}") == doctest::Approx(10000));
  CHECK(v.at("runlens_job_loss{" + kJob + "}") == 2.25);
  CHECK(v.at("runlens_job_last_step{" + kJob + "}") == 2);
  CHECK(v.at("runlens_job_steps_total{" + kJob + "}") == 2);
  CHECK(v.at("runlens_job_run_info{" + kJob + ",run_id=\"r1\"}") == 1);
  CHECK(v.at("runlens_job_collective_latency_seconds_sum{" + kJob + ",op=\"all_reduce\"}") == doctest::Approx(0.03));
  CHECK(v.at("runlens_job_collective_latency_seconds_count{" + kJob + ",op=\"all_reduce\"}") == 2);
  CHECK(v.at("runlens_job_collective_latency_seconds_count{" + kJob + ",op=\"all_gather\"}") == 1);
  // GPU 0 of n1 was the job's until run_end; its last sample (after it) is unlabelled.
  std::string placed = R"(node_id="n1",gpu_id="0",)" + kJob;
  CHECK(v.count("runlens_gpu_temperature_celsius{" + placed + "}") == 0);
  CHECK(v.at(R"(runlens_gpu_temperature_celsius{node_id="n1",gpu_id="0"})") == 60);
  CHECK(v.at(R"(runlens_gpu_ecc_sbe_errors_total{node_id="n1",gpu_id="0"})") == 7);
  CHECK(v.at(R"(runlens_gpu_xid_errors_total{node_id="n1",gpu_id="0"})") == 2);
  CHECK(v.at(R"(runlens_gpu_temperature_celsius{node_id="n9",gpu_id="3"})") == 50);
  CHECK(v.at(R"(runlens_node_cpu_ratio{node_id="n1"})") == doctest::Approx(0.42));
  CHECK(v.at(R"(runlens_node_memory_used_bytes{node_id="n1"})") == 1024);
  // The runtime's counters: every row of the file was read; the sink's own health.
  CHECK(v.at(R"(runlens_pipeline_rows_in_total{component="telemetry",type="replay"})") == 20);
  CHECK(v.at(R"(runlens_pipeline_rows_dropped_total{component="telemetry",type="replay",priority="P0"})") == 0);
  CHECK(v.at(R"(runlens_metrics_series_refused_total{component="prom"})") == 0);
  CHECK(v.at(R"(runlens_metrics_series_limit{component="prom"})") == 10000);
  // Bounded labels only: never rank, step or shard.
  CHECK(e.text.find("rank=") == std::string::npos);
  CHECK(e.text.find("step=") == std::string::npos);
}

TEST_CASE("a GPU's series carry the job's labels while the run is placed on it") {
  // Without the last sample (after run_end) the placed series is what remains.
  std::string dir = testing::fresh_dir("metrics-placed");
  std::string text = input_jsonl();
  text = text.substr(0, text.rfind(R"({"type":"gpu")"));
  std::ofstream(dir + "/input.jsonl") << text;
  std::ofstream(dir + "/p.yaml") << pipeline_yaml("5m", 10000);
  auto spec = load_pipeline(dir + "/p.yaml", {{"RUNLENS_OUT", dir}});
  EngineOptions eo;
  eo.threads = 1;
  eo.replay_inputs = {dir + "/input.jsonl"};
  eo.out_dir = dir;
  eo.metrics = std::make_shared<connectors::metrics::MetricsHub>();
  Engine(std::move(spec), eo).run();
  auto v = samples(eo.metrics->render());
  std::filesystem::remove_all(dir);
  CHECK(v.at(R"(runlens_gpu_temperature_celsius{node_id="n1",gpu_id="0",)" + kJob + "}") == 72);
  CHECK(v.at(R"(runlens_gpu_utilization_ratio{node_id="n1",gpu_id="0",)" + kJob + "}") == doctest::Approx(0.87));
  CHECK(v.at(R"(runlens_gpu_sm_clock_hertz{node_id="n1",gpu_id="0",)" + kJob + "}") == 1410e6);
}

TEST_CASE("an ended run's job series are dropped retain_ended after its run_end (event time)") {
  Exported e = replay_with_hub("2s", 10000);
  INFO(e.text);
  CHECK(e.text.find("job_id=") == std::string::npos);
  CHECK(e.values.at(R"(runlens_gpu_temperature_celsius{node_id="n1",gpu_id="0"})") == 60);
}

TEST_CASE("beyond max_series new series are refused and counted") {
  Exported e = replay_with_hub("5m", 5);
  INFO(e.text);
  CHECK(e.values.at(R"(runlens_metrics_series{component="prom"})") <= 5);
  CHECK(e.values.at(R"(runlens_metrics_series_refused_total{component="prom"})") > 0);
}

TEST_CASE("without an exposition server the metrics sink is routed no rows") {
  Exported e = replay_with_hub("5m", 10000, /*attach=*/false);
  bool found = false;
  for (const auto& c : e.summary.counters) {
    if (c.node != "prom") continue;
    found = true;
    CHECK(c.in == 0);
  }
  CHECK(found);
  CHECK(e.text.find("runlens_job_") == std::string::npos);
}

TEST_CASE("the default pipeline's metrics sink counts alerts by kind and severity") {
  auto hub = std::make_shared<connectors::metrics::MetricsHub>();
  std::string out = testing::fresh_dir("metrics-default");
  auto spec = load_pipeline("", {{"RUNLENS_OUT", out}, {"RUNLENS_PUBLISH", "ipc://" + out + "/alerts.sock"}});
  spec.settings.overflow = runtime::OverflowPolicy::kBlock;
  EngineOptions eo;
  eo.threads = 2;
  eo.replay_inputs = {std::string(RUNLENS_SOURCE_DIR) + "/tests/golden/straggler/input.jsonl"};
  eo.out_dir = out;
  eo.metrics = hub;
  Engine(std::move(spec), eo).run();
  std::string alerts = testing::read_file(out + "/alerts.jsonl");
  std::filesystem::remove_all(out);
  auto v = samples(hub->render());
  // As many first publications of straggler alerts as alerts.jsonl has.
  double stragglers = 0;
  for (const auto& line : testing::lines_of(alerts)) {
    if (line.find(R"("kind":"straggler")") != std::string::npos && line.find(R"("revision":0,)") != std::string::npos &&
        line.find(R"("severity":"warning")") != std::string::npos)
      stragglers += 1;
  }
  REQUIRE(stragglers > 0);
  CHECK(v.at(R"(runlens_alerts_total{kind="straggler",severity="warning"})") == stragglers);
}

}  // namespace
