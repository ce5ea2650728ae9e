// The prometheus_scrape source (connectors/sources/prometheus_scrape.h):
// node_exporter's and dcgm-exporter's text mapped to node and gpu samples
// (ScrapeMapper: rates, counter resets, the XID gauge), and `runlens run`
// scraping a dcgm-exporter served by this test from text in dcgm-exporter's
// format, next to a target that is down and one that serves garbage.
#include <doctest/doctest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "connectors/sources/prometheus_scrape.h"
#include "connectors/sources/scrape_mapping.h"
#include "formats/json_reader.h"
#include "tests/cli/child_process.h"

using namespace runlens;
using namespace runlens::connectors;
using namespace runlens::testing;

namespace {

std::vector<Record> map_text(ScrapeMapper& m, const std::string& text, int64_t t_ns) {
  prom::Exposition e;
  prom::ParseError err;
  REQUIRE_MESSAGE(prom::parse_text(text, &e, &err), err.text());
  std::vector<Record> rows;
  std::string why;
  REQUIRE_MESSAGE(m.map(e, t_ns, &rows, &why), why);
  return rows;
}

// node_exporter's text for one host: two CPUs, one disk, eth0 and lo.
std::string node_text(double idle, double user, double iowait, double steal, double disk_read, double eth_rx,
                      double retrans) {
  std::ostringstream s;
  s << "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n"
       "# TYPE node_cpu_seconds_total counter\n";
  for (int cpu = 0; cpu < 2; ++cpu) {
    s << "node_cpu_seconds_total{cpu=\"" << cpu << "\",mode=\"idle\"} " << idle << "\n"
      << "node_cpu_seconds_total{cpu=\"" << cpu << "\",mode=\"iowait\"} " << iowait << "\n"
      << "node_cpu_seconds_total{cpu=\"" << cpu << "\",mode=\"steal\"} " << steal << "\n"
      << "node_cpu_seconds_total{cpu=\"" << cpu << "\",mode=\"system\"} 10\n"
      << "node_cpu_seconds_total{cpu=\"" << cpu << "\",mode=\"user\"} " << user << "\n";
  }
  s << "# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.\n"
       "# TYPE node_memory_MemAvailable_bytes gauge\n"
       "node_memory_MemAvailable_bytes 6e+09\n"
       "# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.\n"
       "# TYPE node_memory_MemTotal_bytes gauge\n"
       "node_memory_MemTotal_bytes 1.6e+10\n"
       "# HELP node_load1 1m load average.\n"
       "# TYPE node_load1 gauge\n"
       "node_load1 2.5\n"
       "# HELP node_disk_read_bytes_total The total number of bytes read successfully.\n"
       "# TYPE node_disk_read_bytes_total counter\n"
    << "node_disk_read_bytes_total{device=\"vda\"} " << disk_read << "\n"
    << "# HELP node_network_receive_bytes_total Network device statistic receive_bytes.\n"
       "# TYPE node_network_receive_bytes_total counter\n"
    << "node_network_receive_bytes_total{device=\"eth0\"} " << eth_rx << "\n"
    << "node_network_receive_bytes_total{device=\"lo\"} " << eth_rx * 100 << "\n"
    << "# HELP node_netstat_Tcp_RetransSegs Statistic TcpRetransSegs.\n"
       "# TYPE node_netstat_Tcp_RetransSegs untyped\n"
    << "node_netstat_Tcp_RetransSegs " << retrans << "\n"
    << "# HELP node_uname_info Labeled system information as provided by the uname system call.\n"
       "# TYPE node_uname_info gauge\n"
       "node_uname_info{domainname=\"(none)\",machine=\"x86_64\",nodename=\"host-from-uname\",release=\"6.1.0\","
       "sysname=\"Linux\",version=\"#1 SMP\"} 1\n"
       "# HELP node_textfile_scrape_error 1 if there was an error opening or reading a file, 0 otherwise\n"
       "# TYPE node_textfile_scrape_error gauge\n"
       "node_textfile_scrape_error 0\n";
  return s.str();
}

constexpr int64_t kT0 = 1'800'000'000'000'000'000;
constexpr int64_t kSecond = 1'000'000'000;

// One GPU's values in a dcgm-exporter scrape.
struct GpuValues {
  int gpu = 0;
  double util = 90, sm_clock = 1410, mem_clock = 1593, temp = 60, power = 300, fb_used = 40000, fb_free = 41000;
  int xid = 0;
  int throttle = 0;
  int ecc_sbe = 0, ecc_dbe = 0, pcie_replay = 100, nvlink_crc_flit = 0, nvlink_crc_data = 0;
  double sm_active = 0.8, tensor_active = 0.35;
};

// dcgm-exporter's output for `gpus` of host `hostname`, as it prints it:
// the families of its default counters (default-counters.csv and
// dcp-metrics-included.csv) with their HELP and TYPE lines, one sample per
// GPU, labelled gpu, UUID, device, modelName, Hostname and the driver version.
std::string dcgm_text(const std::string& hostname, const std::vector<GpuValues>& gpus) {
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    std::function<std::string(const GpuValues&)> value;
  };
  auto num = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  const std::vector<Family> families = {
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", [&](auto& g) { return num(g.sm_clock); }},
      {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", [&](auto& g) { return num(g.mem_clock); }},
      {"DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", [&](auto&) { return std::string("0"); }},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", [&](auto& g) { return num(g.temp); }},
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", [&](auto& g) { return num(g.power); }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
       [&](auto&) { return std::string("152383475919"); }},
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.",
       [&](auto& g) { return num(g.pcie_replay); }},
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", [&](auto& g) { return num(g.util); }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", [&](auto&) { return std::string("41"); }},
      {"DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", [&](auto&) { return std::string("0"); }},
      {"DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", [&](auto&) { return std::string("0"); }},
      {"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.",
       [&](auto& g) { return num(g.xid); }},
      {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", [&](auto& g) { return num(g.fb_free); }},
      {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", [&](auto& g) { return num(g.fb_used); }},
      {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes.",
       [&](auto&) { return std::string("0"); }},
      {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons.",
       [&](auto& g) { return num(g.throttle); }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.",
       [&](auto& g) { return num(g.ecc_sbe); }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
       [&](auto& g) { return num(g.ecc_dbe); }},
      {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink flow-control CRC errors.",
       [&](auto& g) { return num(g.nvlink_crc_flit); }},
      {"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink data CRC errors.",
       [&](auto& g) { return num(g.nvlink_crc_data); }},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active (in %).",
       [&](auto& g) { return num(g.sm_active); }},
      {"DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned (in %).",
       [&](auto& g) { return num(g.sm_active); }},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active (in %).",
       [&](auto& g) { return num(g.tensor_active); }},
      {"DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
       "Ratio of cycles the device memory interface is active sending or receiving data (in %).",
       [&](auto&) { return std::string("0.25"); }},
  };
  std::ostringstream s;
  for (const auto& f : families) {
    s << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " " << f.type << "\n";
    for (const auto& g : gpus) {
      s << f.name << "{gpu=\"" << g.gpu << "\",UUID=\"GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e5" << g.gpu
        << "\",device=\"nvidia" << g.gpu << "\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"" << hostname
        << "\",DCGM_FI_DRIVER_VERSION=\"535.104.05\"} " << f.value(g) << "\n";
    }
  }
  return s.str();
}

const Gpu& gpu_of(const std::vector<Record>& rows, int index) {
  for (const auto& r : rows) {
    if (r.kind() == Kind::kGpu && r.as<Gpu>().gpu == index) return r.as<Gpu>();
  }
  FAIL("no row of GPU " << index);
  throw 0;
}

std::vector<std::map<std::string, std::string>> jsonl_objects(const std::string& path);

}  // namespace

TEST_CASE("node_exporter: CPU shares and byte rates between consecutive scrapes, counters across a reset") {
  ScrapeMapper m(Symbol::intern("node-a"), ScrapeFormat::kDetect, /*node_given=*/true);
  // First scrape: gauges and totals only; no rate without a previous scrape.
  auto r0 = map_text(m, node_text(1000, 500, 20, 5, 1e9, 5e8, 100), kT0);
  REQUIRE(r0.size() == 1);
  CHECK(m.format() == ScrapeFormat::kNodeExporter);
  const NodeSample& n0 = r0[0].as<NodeSample>();
  CHECK(r0[0].time_ns == kT0);
  CHECK(n0.node.string() == "node-a");
  CHECK_FALSE(n0.has(NodeSample::F::cpu_pct));
  CHECK_FALSE(n0.has(NodeSample::F::disk_read_bps));
  CHECK(n0.mem_total_bytes == 16'000'000'000);
  CHECK(n0.mem_used_bytes == 10'000'000'000);
  CHECK(n0.load1 == 2.5);
  CHECK(n0.tcp_retransmits_total == 100);

  // 2 s later, per CPU: idle +0.2 s, iowait +0.1, steal +0.1, user +1.6: 2 s of 2 s busy but 15 %.
  auto r1 = map_text(m, node_text(1000.2, 501.6, 20.1, 5.1, 1e9 + 4e6, 5e8 + 2e6, 130), kT0 + 2 * kSecond);
  const NodeSample& n1 = r1[0].as<NodeSample>();
  CHECK(n1.cpu_pct == doctest::Approx(85));
  CHECK(n1.cpu_user_pct == doctest::Approx(80));
  CHECK(n1.cpu_system_pct == doctest::Approx(0));
  CHECK(n1.cpu_iowait_pct == doctest::Approx(5));
  CHECK(n1.cpu_steal_pct == doctest::Approx(5));
  CHECK(n1.disk_read_bps == doctest::Approx(2e6));
  CHECK(n1.net_rx_bps == doctest::Approx(1e6));  // lo is not counted
  CHECK(n1.tcp_retransmits_total == 130);

  // The host rebooted: every counter starts again from near zero. The
  // interval's rates are skipped, the running total stays where it was.
  auto r2 = map_text(m, node_text(10, 5, 1, 0.1, 1e6, 1e5, 3), kT0 + 4 * kSecond);
  const NodeSample& n2 = r2[0].as<NodeSample>();
  CHECK_FALSE(n2.has(NodeSample::F::cpu_pct));
  CHECK_FALSE(n2.has(NodeSample::F::disk_read_bps));
  CHECK_FALSE(n2.has(NodeSample::F::net_rx_bps));
  CHECK(n2.tcp_retransmits_total == 130);
  CHECK(n2.mem_used_bytes == 10'000'000'000);

  // And from the new base on, rates and the total continue.
  auto r3 = map_text(m, node_text(10.5, 6.5, 1, 0.1, 1e6 + 1e6, 1e5, 10), kT0 + 5 * kSecond);
  const NodeSample& n3 = r3[0].as<NodeSample>();
  CHECK(n3.cpu_pct == doctest::Approx(75));
  CHECK(n3.disk_read_bps == doctest::Approx(1e6));
  CHECK(n3.tcp_retransmits_total == 137);
}

TEST_CASE("node_exporter: without a configured node the uname collector names it") {
  ScrapeMapper m(Symbol::intern("127.0.0.1"), ScrapeFormat::kNodeExporter, /*node_given=*/false);
  auto rows = map_text(m, node_text(1, 1, 1, 1, 1, 1, 1), kT0);
  CHECK(rows[0].as<NodeSample>().node.string() == "host-from-uname");
}

TEST_CASE("node_exporter: sample timestamps are the event time") {
  ScrapeMapper m(Symbol::intern("n"), ScrapeFormat::kDetect);
  auto rows = map_text(m, "node_load1 1.5 1800000000250\nnode_memory_MemTotal_bytes 100 1800000000500\n", kT0);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].time_ns == 1'800'000'000'500'000'000);
  CHECK(m.stamped());
}

TEST_CASE("dcgm-exporter: fields, units, the XID gauge and counter resets") {
  ScrapeMapper m(Symbol::intern("unused"), ScrapeFormat::kDetect);
  GpuValues g0, g1;
  g1.gpu = 1;
  auto rows = map_text(m, dcgm_text("node-g", {g0, g1}), kT0);
  CHECK(m.format() == ScrapeFormat::kDcgm);
  REQUIRE(rows.size() == 2);
  const Gpu& a = gpu_of(rows, 0);
  CHECK(a.node.string() == "node-g");
  CHECK(a.util_pct == 90);
  CHECK(a.sm_clock_mhz == 1410);
  CHECK(a.mem_clock_mhz == 1593);
  CHECK(a.temp_c == 60);
  CHECK(a.power_w == 300);
  CHECK(a.mem_used_bytes == 40000LL << 20);
  CHECK(a.mem_total_bytes == 81000LL << 20);
  CHECK(a.sm_active_pct == doctest::Approx(80));
  CHECK(a.tensor_active_pct == doctest::Approx(35));
  CHECK(a.throttle_reasons == 0);
  CHECK(a.pcie_replay_total == 100);
  CHECK(a.ecc_dbe_total == 0);
  CHECK(a.nvlink_errors_total == 0);
  CHECK_FALSE(a.has(Gpu::F::xid));  // the first value is the baseline

  g0.xid = 79;
  g0.nvlink_crc_flit = 3, g0.nvlink_crc_data = 2;
  rows = map_text(m, dcgm_text("node-g", {g0, g1}), kT0 + kSecond);
  CHECK(gpu_of(rows, 0).xid == 79);
  CHECK(gpu_of(rows, 0).nvlink_errors_total == 5);
  CHECK_FALSE(gpu_of(rows, 1).has(Gpu::F::xid));
  rows = map_text(m, dcgm_text("node-g", {g0, g1}), kT0 + 2 * kSecond);
  CHECK_FALSE(gpu_of(rows, 0).has(Gpu::F::xid));  // the same code again is not a new XID

  // dcgm-exporter restarted: its counters start again.
  g0.pcie_replay = 50, g0.nvlink_crc_flit = 0, g0.nvlink_crc_data = 1, g0.xid = 0;
  rows = map_text(m, dcgm_text("node-g", {g0, g1}), kT0 + 3 * kSecond);
  CHECK(gpu_of(rows, 0).pcie_replay_total == 100);
  CHECK(gpu_of(rows, 0).nvlink_errors_total == 5);
  CHECK_FALSE(gpu_of(rows, 0).has(Gpu::F::xid));
  g0.pcie_replay = 52, g0.xid = 48;
  rows = map_text(m, dcgm_text("node-g", {g0, g1}), kT0 + 4 * kSecond);
  CHECK(gpu_of(rows, 0).pcie_replay_total == 102);
  CHECK(gpu_of(rows, 0).xid == 48);
}

TEST_CASE("targets and the nodes and formats maps are checked at load, at file:line:col") {
  std::string d = scratch_dir("scrape-config");
  auto validate = [&](const std::string& source) {
    write_text(d, "p.yaml",
               "version: 1\nsources:\n  scrape:\n    type: prometheus_scrape\n" + source +
                   "sinks:\n  out:\n    type: jsonl\n    inputs: [scrape]\n    path: " + d + "/x.jsonl\n");
    return shell(std::string(RUNLENS_BINARY) + " validate " + d + "/p.yaml");
  };
  auto r = validate("    targets: [https://a:1/metrics]\n");
  CHECK(r.code != 0);
  CHECK_MESSAGE(r.output.find("p.yaml:5:14") != std::string::npos, r.output);
  CHECK_MESSAGE(r.output.find("https targets are not supported") != std::string::npos, r.output);
  r = validate("    targets: [a:1]\n    nodes: [b:2=node-b]\n");
  CHECK_MESSAGE(r.output.find("'b:2' is not one of the targets") != std::string::npos, r.output);
  r = validate("    targets: [a:1]\n    formats: [a:1=statsd]\n");
  CHECK_MESSAGE(r.output.find("unknown format 'statsd' for a:1 (node_exporter or dcgm)") != std::string::npos,
                r.output);
  r = validate("    targets: [a:1]\n    interval: 1s\n    timeout: 2s\n");
  CHECK_MESSAGE(r.output.find("timeout (2s) is longer than interval (1s)") != std::string::npos, r.output);
  r = validate("    targets: [a:1, http://a:1/metrics]\n");
  CHECK_MESSAGE(r.output.find("target http://a:1/metrics is listed twice") != std::string::npos, r.output);
  r = validate("    targets: [\"a:1 b:2\"]\n    nodes: [\"a:1=node-a,http://b:2/metrics=node-b\"]\n");
  CHECK_MESSAGE(r.code == 0, r.output);
}

TEST_CASE("runlens run scrapes dcgm-exporter: the GPU detectors raise what the samples say, once each") {
  std::string d = scratch_dir("scrape-dcgm");
  auto started = std::chrono::steady_clock::now();
  // The exporter's story, one text per scrape (the last repeats):
  //  0 healthy; 1 GPU 0 reports XID 79; 2 the same XID again, GPU 1 hot and
  //  thermally throttled (hw_thermal, 0x40); 3 GPU 1 still throttled (2 of 3
  //  samples: thermal_throttle), GPU 0 a double-bit ECC error; 4 dcgm-exporter
  //  restarted: its counters start again (PCIe replays 100 -> 50, ECC 2 -> 0,
  //  the XID gauge 0), which is no increase; 5 on from the new base (+2
  //  replays, under pcie_replay's 8), GPU 0 XID 48: a new XID.
  std::vector<std::string> texts;
  GpuValues g0, g1;
  g1.gpu = 1;
  texts.push_back(dcgm_text("node-g", {g0, g1}));
  g0.xid = 79;
  texts.push_back(dcgm_text("node-g", {g0, g1}));
  g1.throttle = 0x40, g1.temp = 92, g1.sm_clock = 1100;
  texts.push_back(dcgm_text("node-g", {g0, g1}));
  g0.ecc_dbe = 2;
  texts.push_back(dcgm_text("node-g", {g0, g1}));
  g1.throttle = 0, g1.temp = 61, g1.sm_clock = 1410;
  g0.pcie_replay = 50, g0.ecc_dbe = 0, g0.xid = 0;
  texts.push_back(dcgm_text("node-g", {g0, g1}));
  g0.pcie_replay = 52, g0.xid = 48;
  texts.push_back(dcgm_text("node-g", {g0, g1}));

  std::atomic<size_t> served{0};
  httplib::Server server;
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    size_t k = served.fetch_add(1);
    res.set_content(texts[std::min(k, texts.size() - 1)], "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/garbage", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"x\"} 5\n<html><body>oops</body></html>\n", "text/html");
  });
  server.Get("/missing", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content("404 page not found\n", "text/plain");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { server.listen_after_bind(); });
  // A target that accepts connections and never answers (slow: a timeout),
  // and a port nothing listens on (down): bound, read back, closed.
  httplib::Server mute;
  int slow_port = mute.bind_to_any_port("127.0.0.1");
  REQUIRE(slow_port > 0);
  const int down_port = testing::free_port();  // nothing listens there

  std::string self = "127.0.0.1:" + std::to_string(port);
  write_text(d, "p.yaml",
             "version: 1\n"
             "settings:\n  overflow: shed\n"
             "sources:\n"
             "  scrape:\n"
             "    type: prometheus_scrape\n"
             "    targets: [http://" +
                 self + "/metrics, http://" + self + "/garbage, http://" + self +
                 "/missing, 127.0.0.1:" + std::to_string(down_port) + ", 127.0.0.1:" + std::to_string(slow_port) +
                 "]\n"
                 "    interval: 150ms\n"
                 "    timeout: 100ms\n"
                 "operators:\n"
                 "  gpus:\n    type: gpu_health\n    inputs: [scrape]\n"
                 "sinks:\n"
                 "  alerts:\n    type: jsonl\n    inputs: [gpus]\n    path: " +
                 d +
                 "/alerts.jsonl\n"
                 "  samples:\n    type: jsonl\n    inputs: [scrape]\n    kinds: [gpu]\n    path: " +
                 d + "/samples.jsonl\n");
  pid_t run = spawn({"run", "--pipeline", d + "/p.yaml", "--out", d, "--threads", "2"}, d + "/run.log");
  bool all_served = wait_for([&] { return served.load() >= texts.size() + 1; }, 20);
  kill(run, SIGINT);
  int code = wait_exit(run, 30);
  server.stop();
  serving.join();
  REQUIRE_MESSAGE(all_served, read_file(d + "/run.log"));
  REQUIRE_MESSAGE(code == 0, read_file(d + "/run.log"));

  // Exactly: XID 79 and XID 48 on GPU 0, its ECC error, GPU 1's thermal throttling
  // (first publications; a closing revision, when the throttling ends, is not a new alert).
  std::multiset<std::string> raised;
  for (auto& a : jsonl_objects(d + "/alerts.jsonl")) {
    CHECK(a["node"] == "node-g");
    if (a["revision"] != "0") continue;
    raised.insert(a["kind"] + " gpu " + a["gpu"] + (a["kind"] == "xid_error" ? " " + a["value"] : ""));
  }
  CHECK(raised == std::multiset<std::string>{"ecc_uncorrected gpu 0", "thermal_throttle gpu 1", "xid_error gpu 0 48",
                                             "xid_error gpu 0 79"});

  // The samples: the counters never go down across the restart; xid only on a change.
  std::vector<std::string> pcie, xids;
  for (auto& s : jsonl_objects(d + "/samples.jsonl")) {
    if (s["gpu"] != "0") continue;
    pcie.push_back(s["pcie_replay_total"]);
    if (s.count("xid")) xids.push_back(s["xid"]);
  }
  REQUIRE(pcie.size() >= texts.size());
  CHECK(std::vector<std::string>(pcie.begin(), pcie.begin() + 6) ==
        std::vector<std::string>{"100", "100", "100", "100", "100", "102"});
  CHECK(xids == std::vector<std::string>{"79", "48"});

  // The other targets: dead letters with their reasons, one per scrape; the good one went on.
  std::map<std::string, std::set<std::string>> reasons;  // position -> reasons
  for (auto& l : jsonl_objects(d + "/dead_letter.jsonl")) {
    CHECK(l["component"] == "scrape");
    reasons[l["position"]].insert(l["reason"]);
  }
  CHECK(reasons["http://" + self + "/garbage line 2:1"] ==
        std::set<std::string>{"malformed exposition: expected a metric name, found '<'"});
  CHECK(reasons["http://" + self + "/missing"] == std::set<std::string>{"HTTP 404 from the target (expected 200)"});
  std::string down = "http://127.0.0.1:" + std::to_string(down_port) + "/metrics";
  REQUIRE(reasons[down].size() == 1);
  CHECK(reasons[down].begin()->rfind("target down: cannot connect to 127.0.0.1:" + std::to_string(down_port), 0) == 0);
  std::string slow = "http://127.0.0.1:" + std::to_string(slow_port) + "/metrics";
  CHECK(reasons[slow] == std::set<std::string>{"timeout: no complete answer within 100 ms (timeout)"});
  MESSAGE("dcgm scrape test: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
                               << " s");
}

namespace {

// Each line of a JSONL file as a flat map of its top-level fields (numbers and
// strings as text; nested values as their JSON).
std::vector<std::map<std::string, std::string>> jsonl_objects(const std::string& path) {
  std::vector<std::map<std::string, std::string>> out;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json::Value v;
    json::ParseError error;
    REQUIRE_MESSAGE(json::parse(line, &v, &error), error.message);
    std::map<std::string, std::string> m;
    for (const auto& [k, field] : v.members) {
      if (field.type == json::Value::Type::kString)
        m[k] = field.text;
      else if (field.type == json::Value::Type::kNumber)
        m[k] = field.integral ? std::to_string(field.integer) : std::to_string(field.number);
      else
        m[k] = std::string(field.type_name());
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace
