// The SDK's host samples (sdk/src/host_sampler.h, docs/sdk.md "Host
// samples"): /proc/stat deltas as percentages of the interval, used memory
// from /proc/meminfo, load1 from /proc/loadavg, on fixed text; unreadable
// files counted and skipped; and, live, an emitter's node samples reach a
// PULL socket with plausible values, from one emitter per host only.
#include "sdk/src/host_sampler.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runlens/sdk.h"
#include "schema/telemetry.capnp.h"
#include "tests/sdk/pull.h"

namespace {

using namespace runlens::sdk;
using runlens::testing::Pull;

constexpr const char* kStat1 =
    "cpu  1000 50 400 8000 200 10 40 100 0 0\n"
    "cpu0 500 25 200 4000 100 5 20 50 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 99\n";
// 400 ticks later: user +100, nice +20, system +60, idle +160, iowait +20, irq +4, softirq +16, steal +20.
constexpr const char* kStat2 =
    "cpu  1100 70 460 8160 220 14 56 120 0 0\n"
    "cpu0 550 35 230 4080 110 7 28 60 0 0\n";

TEST_CASE("host samples: /proc/stat deltas are percentages of the interval") {
  CpuTimes a, b;
  REQUIRE(ParseProcStat(kStat1, &a));
  REQUIRE(ParseProcStat(kStat2, &b));
  CHECK(a.user == 1000);
  CHECK(a.steal == 100);
  CHECK(b.Total() - a.Total() == 400);
  CpuShares s;
  REQUIRE(CpuDelta(a, b, &s));
  CHECK(s.user == doctest::Approx(30.0));    // (100 + 20) / 400
  CHECK(s.system == doctest::Approx(20.0));  // (60 + 4 + 16) / 400
  CHECK(s.iowait == doctest::Approx(5.0));   // 20 / 400
  CHECK(s.steal == doctest::Approx(5.0));    // 20 / 400
  CHECK(s.busy == doctest::Approx(55.0));    // everything but idle and iowait: 220 / 400

  // No time passed, or a counter went backwards (a counter reset): no sample.
  CHECK_FALSE(CpuDelta(a, a, &s));
  CHECK_FALSE(CpuDelta(b, a, &s));

  // An old kernel's four fields; lines that are not the aggregate line.
  CpuTimes old;
  REQUIRE(ParseProcStat("cpu 10 0 5 85\n", &old));
  CHECK(old.idle == 85);
  CHECK(old.steal == 0);
  CHECK_FALSE(ParseProcStat("cpu0 1 2 3 4\nintr 5\n", &old));
  CHECK_FALSE(ParseProcStat("cpu 1 2 x\n", &old));
  CHECK_FALSE(ParseProcStat("", &old));
}

TEST_CASE("host samples: /proc/meminfo gives used = total - available, in bytes") {
  MemUse m;
  REQUIRE(
      ParseMeminfo("MemTotal:       16000000 kB\nMemFree:         2000000 kB\nMemAvailable:    6000000 kB\n"
                   "Buffers:          100000 kB\nCached:          3000000 kB\n",
                   &m));
  CHECK(m.total_bytes == 16000000LL * 1024);
  CHECK(m.used_bytes == 10000000LL * 1024);
  // Before MemAvailable (Linux < 3.14): free + buffers + cached.
  REQUIRE(ParseMeminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n", &m));
  CHECK(m.used_bytes == 600 * 1024);
  CHECK_FALSE(ParseMeminfo("MemFree: 100 kB\n", &m));
  CHECK_FALSE(ParseMeminfo("MemTotal: 1000 kB\n", &m));
  CHECK_FALSE(ParseMeminfo("MemTotal: lots\nMemAvailable: 1 kB\n", &m));

  double load = 0;
  REQUIRE(ParseLoadavg("3.25 2.50 1.00 2/345 6789\n", &load));
  CHECK(load == 3.25);
  CHECK_FALSE(ParseLoadavg("", &load));
  CHECK_FALSE(ParseLoadavg("-1 0 0\n", &load));
}

TEST_CASE("host samples: the sampler reads a /proc tree; a missing file is counted and its fields left out") {
  const auto dir = std::filesystem::temp_directory_path() / ("runlens-proc-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const char* text) { std::ofstream(dir / name) << text; };
  write("stat", kStat1);
  write("meminfo", "MemTotal: 1000 kB\nMemAvailable: 400 kB\n");
  HostSampler sampler(dir.string());
  HostSample first = sampler.Sample();
  CHECK_FALSE(first.cpu);  // one reading has no interval yet
  REQUIRE(first.mem);
  CHECK(first.mem->used_bytes == 600 * 1024);
  CHECK_FALSE(first.load1);  // no loadavg here
  CHECK(sampler.failed_reads() == 1);
  write("stat", kStat2);
  write("loadavg", "0.50 0.40 0.30 1/2 3\n");
  HostSample second = sampler.Sample();
  REQUIRE(second.cpu);
  CHECK(second.cpu->busy == doctest::Approx(55.0));
  REQUIRE(second.load1);
  CHECK(*second.load1 == 0.5);
  CHECK(sampler.failed_reads() == 1);
  std::filesystem::remove_all(dir);
  HostSample none = sampler.Sample();
  CHECK(none.Empty());
  CHECK(sampler.failed_reads() == 4);
}

struct NodeSeen {
  std::string node;
  bool cpu = false;
  double cpu_pct = -1, user = -1, system = -1, iowait = -1, steal = -1, load1 = -1;
  int64_t mem_used = -1, mem_total = -1;
};

// The node records among the batches received until `want` with cpu came (or 5 s passed).
std::vector<NodeSeen> receive_nodes(Pull& pull, size_t want) {
  std::vector<NodeSeen> out;
  size_t with_cpu = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (with_cpu < want && std::chrono::steady_clock::now() < deadline) {
    std::vector<capnp::word> words;
    if (!pull.next(words)) continue;
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()));
    for (auto e : reader.getRoot<runlens::wire::Batch>().getEvents()) {
      if (e.which() != runlens::wire::Event::NODE) continue;
      auto n = e.getNode();
      NodeSeen s;
      s.node = n.getNode();
      const uint32_t present = n.getPresent();
      s.cpu = (present & (1u << 1)) != 0;
      if (s.cpu) {
        s.cpu_pct = n.getCpuPct(), s.user = n.getCpuUserPct(), s.system = n.getCpuSystemPct();
        s.iowait = n.getCpuIowaitPct(), s.steal = n.getCpuStealPct();
        ++with_cpu;
      }
      if (present & (1u << 2)) s.mem_used = n.getMemUsedBytes(), s.mem_total = n.getMemTotalBytes();
      if (present & (1u << 14)) s.load1 = n.getLoad1();
      out.push_back(s);
    }
  }
  return out;
}

std::string lock_path() {
  return (std::filesystem::temp_directory_path() / ("runlens-host-test-" + std::to_string(getpid()) + ".lock"))
      .string();
}

TEST_CASE("host samples: an emitter's node samples reach the collector with plausible values, one sampler a host") {
  unsetenv("LOCAL_RANK");
  setenv("RUNLENS_HOST_SAMPLES", "0", 1);  // an explicit option wins over the environment
  Pull pull;
  EmitterOptions o;
  o.endpoint = pull.endpoint;
  o.run_id = "host-run";
  o.world_size = 2;
  o.node = "node-h";
  o.host_sample_interval = std::chrono::milliseconds(250);
  o.host_sample_lock = lock_path();
  o.host_samples = true;
  Emitter sampler(o);
  // A second emitter of the host (here: of the same process) does not sample.
  EmitterOptions o2 = o;
  o2.rank = 1;
  Emitter other(o2);
  // Nor does one that was turned off.
  EmitterOptions off = o;
  off.host_samples = false;
  off.host_sample_lock = lock_path() + ".off";
  Emitter quiet(off);

  std::vector<NodeSeen> nodes = receive_nodes(pull, 2);
  CHECK(sampler.stats().host_sampler);
  CHECK_FALSE(other.stats().host_sampler);
  CHECK_FALSE(quiet.stats().host_sampler);
  size_t with_cpu = 0;
  for (const NodeSeen& n : nodes) {
    CHECK(n.node == "node-h");
    CHECK(n.mem_total > 0);
    CHECK(n.mem_used > 0);
    CHECK(n.mem_used <= n.mem_total);
    CHECK(n.load1 >= 0);
    if (!n.cpu) continue;
    ++with_cpu;
    for (double pct : {n.cpu_pct, n.user, n.system, n.iowait, n.steal}) {
      CHECK(pct >= 0);
      CHECK(pct <= 100.0001);
    }
    CHECK(n.user + n.system <= n.cpu_pct + 1e-6);
  }
  CHECK(with_cpu >= 2);
  // At most one sample per interval: about 4 a second, never a flood.
  CHECK(nodes.size() <= with_cpu + 1);
  CHECK(sampler.stats().host_read_errors == 0);
  CHECK(sampler.stats().host_samples >= nodes.size());

  // Closed, it gives the host's seat back: a new emitter samples.
  sampler.close();
  other.close();
  Emitter next(o);
  CHECK(next.stats().host_sampler);
  next.close();
  quiet.close();
  // Unset, the environment decides: RUNLENS_HOST_SAMPLES=0 is off.
  EmitterOptions by_env = o;
  by_env.host_samples.reset();
  Emitter env_off(by_env);
  CHECK_FALSE(env_off.stats().host_sampler);
  env_off.close();
  unsetenv("RUNLENS_HOST_SAMPLES");
  Emitter env_on(by_env);
  CHECK(env_on.stats().host_sampler);
  env_on.close();
  std::filesystem::remove(o.host_sample_lock);
}

TEST_CASE("host samples: LOCAL_RANK other than 0 does not sample") {
  setenv("LOCAL_RANK", "3", 1);
  Pull pull;
  EmitterOptions o;
  o.endpoint = pull.endpoint;
  o.run_id = "host-run-2";
  o.host_sample_lock = lock_path();
  o.host_samples = true;
  Emitter e(o);
  CHECK_FALSE(e.stats().host_sampler);
  e.close();
  unsetenv("LOCAL_RANK");
  std::filesystem::remove(o.host_sample_lock);
}

}  // namespace
