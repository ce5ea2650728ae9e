// A contended host in a DDP job: another job takes the CPUs of gpu-node-1
// (ranks 8..15) from step 80, ~97 % busy, and each of its ranks computes ~1.5x
// slower in a random 40 % of steps (kernels launch late). The host shows as
// compute time, not data wait: host_bottleneck's compute reading.
#include <map>

#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

std::vector<Alert> final_of(const ScenarioResult& r, const std::string& kind) {
  std::vector<std::string> order;
  std::map<std::string, Alert> last;
  for (const auto& a : r.alerts) {
    if (a.kind != kind) continue;
    if (!last.count(a.alert_id)) order.push_back(a.alert_id);
    last[a.alert_id] = a;
  }
  std::vector<Alert> out;
  for (const auto& id : order) out.push_back(last[id]);
  return out;
}

bool has_attr(const Alert& a, const std::string& key) {
  for (const auto& [k, v] : a.attrs) {
    if (k == key) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("scenario: a contended host's ranks compute slower: host_bottleneck, owner infrastructure") {
  auto r = run_scenario(scenario_options(), {"host_contention:rank=13,from=80"});
  auto host = r.of("host_bottleneck");
  REQUIRE(host.size() == 1);
  const Alert& h = host[0];
  CAPTURE(h.summary);
  CHECK(h.node.str() == "gpu-node-1");
  REQUIRE(h.rank.has_value());
  CHECK(*h.rank >= 8);
  CHECK(*h.rank <= 15);
  check_onset(h, 80);
  // The compute reading fired, not the data one, with the node's CPU split.
  CHECK(attr_of(h, "work_ratio") >= 1.1);
  CHECK(attr_of(h, "slow_ranks") >= 2);
  CHECK(!has_attr(h, "data_wait_ratio"));
  CHECK(attr_of(h, "cpu_pct") >= 90);
  CHECK(attr_of(h, "cpu_user_pct") >= 80);
  CHECK(attr_of(h, "cpu_system_pct") > 0);
  CHECK(attr_of(h, "cpu_steal_pct") > 0);
  CHECK(has_attr(h, "cpu_iowait_pct"));
  CHECK(h.summary.find("kernels launch late") != std::string::npos);

  // Every diagnosis says host_bottleneck at gpu-node-1 (the stragglers of its
  // ranks and the throughput drop join the host's incident), the first within
  // a few steps of the fault; none says another cause.
  auto d = final_of(r, "diagnosis");
  REQUIRE(!d.empty());
  for (const auto& a : d) {
    CAPTURE(a.summary);
    CHECK(a.cause == "host_bottleneck");
    CHECK(a.owner == "infrastructure");
    CHECK(a.node.str() == "gpu-node-1");
    CHECK(attr_of(a, "onset_step") >= 79);
    CHECK(attr_of(a, "onset_step") <= 82);
  }
  int64_t first = INT64_MAX;
  for (const auto& a : r.published) {
    if (a.kind == "diagnosis" && a.cause == "host_bottleneck") first = std::min(first, a.step.value_or(INT64_MAX));
  }
  CHECK(first <= 85);
  // The CPU split is the diagnosis's evidence.
  std::map<std::string, bool> signals;
  for (const auto& e : d.front().evidence) {
    if (e.kind == "signal") signals[e.detail.substr(0, e.detail.find(' '))] = true;
  }
  for (const char* s : {"cpu_pct", "cpu_user_pct", "cpu_system_pct", "cpu_iowait_pct", "cpu_steal_pct"})
    CHECK_MESSAGE(signals[s], s << " is not in the evidence");
  // Stragglers of the node's ranks, if the bursts raise any, stay on that node (most of the node slow at once is
  // the host's: straggler's node_wide_fraction).
  for (const auto& s : r.of("straggler")) CHECK(s.node.str() == "gpu-node-1");
  for (const auto& s : r.serious()) {
    CAPTURE(s);
    CHECK((s.rfind("host_bottleneck@", 0) == 0 || s.rfind("straggler@", 0) == 0 ||
           s.rfind("throughput_drop@", 0) == 0 || s.rfind("job_slowdown@", 0) == 0));
  }
  // The job's slowdown, if raised, names the contended node, not a GPU.
  for (const auto& s : r.of("job_slowdown")) {
    CHECK(s.node.str() == "gpu-node-1");
    CHECK(!s.gpu);
  }
}

TEST_CASE("scenario: the same contention without node samples raises no host_bottleneck") {
  // No node exporter and the SDK's host samples off: nothing says the host's
  // CPU is busy, so nothing may blame it (docs/alerts.md says what comes instead).
  synth::Options o = scenario_options();
  o.gpu_every = 0;  // no GPU or node samples at all
  auto r = run_scenario(o, {"host_contention:rank=13,from=80"});
  CHECK(r.of("host_bottleneck").empty());
  for (const auto& a : final_of(r, "diagnosis")) {
    CAPTURE(a.summary);
    CHECK(a.cause != "host_bottleneck");
  }
  // What it raises instead: the node's ranks as stragglers (cause unknown) and the throughput drop.
  CHECK(!r.of("throughput_drop").empty());
  CHECK(!r.of("straggler").empty());
  for (const auto& s : r.of("straggler")) CHECK(s.node.str() == "gpu-node-1");
}
