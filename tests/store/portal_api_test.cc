// The portal's API routes (docs/api.md) over real HTTP on loopback, against a
// store filled by replaying synthetic runs with known faults: a GPU of rank
// 13 that throttles thermally from step 100 (64 ranks), a run of 1024 ranks,
// and a run whose loss turns NaN at step 160.
#include <httplib.h>

#include <algorithm>
#include <cmath>

#include "server/serve.h"
#include "tests/store/api_client.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct PortalStore {
  std::string dir, db;
};

const PortalStore& portal_store() {
  static const PortalStore s = [] {
    PortalStore p;
    p.dir = fresh_dir("portal-api");
    p.db = p.dir + "/runlens.db";
    std::string why;
    synth::Fault f;
    synth::Options thermal;
    thermal.run_id = "thermal-13";
    thermal.ranks = 64;
    thermal.steps = 300;
    thermal.seed = 7;
    REQUIRE(synth::parse_fault("thermal:rank=13,from=100", &f, &why));
    thermal.faults.push_back(f);
    synth::Identity tid;
    tid.job_id = "job-portal-1";
    tid.experiment_id = "exp-heat";

    synth::Options wide;
    wide.run_id = "wide-1024";
    wide.ranks = 1024;
    wide.steps = 12;
    wide.seed = 8;
    synth::Identity wid;
    wid.experiment_id = "exp-wide";

    synth::Options nan;
    nan.run_id = "nan-run";
    nan.ranks = 8;
    nan.gpus_per_node = 4;
    nan.steps = 200;
    nan.seed = 9;
    REQUIRE(synth::parse_fault("nan:step=160", &f, &why));
    nan.faults.push_back(f);
    synth::Identity nid;
    nid.end_status = "failed";
    nid.end_reason = "loss diverged";

    std::vector<std::string> files = {
        write_jsonl(p.dir + "/thermal.jsonl", synth_run(thermal, tid, 50)),
        write_jsonl(p.dir + "/wide.jsonl", synth_run(wide, wid)),
        write_jsonl(p.dir + "/nan.jsonl", synth_run(nan, nid)),
    };
    for (const auto& file : files) replay_into({file}, p.dir + "/out", p.db);
    return p;
  }();
  static const struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{s.dir};
  return s;
}

const json::Value& run_entry(const json::Value& runs, const std::string& id) {
  for (const auto& r : at(runs, "runs").items)
    if (str(r, "runId") == id) return r;
  FAIL("no run " << id);
  return runs;
}

}  // namespace

TEST_CASE("GET /v1/runs carries loss, MFU, throughput, incidents and GPUs, filtered by q, since and until") {
  Api api(portal_store().db);
  auto all = api.ok("/v1/runs");
  CHECK(number(all, "count") == 3);
  const auto& t = run_entry(all, "thermal-13");
  CHECK(number(t, "loss") > 1);
  CHECK(number(t, "mfu") > 0);
  CHECK(number(t, "mfu") < 1);
  CHECK(number(t, "tokensPerSecond") > 0);
  CHECK(number(t, "gpus") == 64);
  CHECK(number(t, "incidents") >= 1);
  CHECK(number(t, "openIncidents") >= 0);
  CHECK(number(t, "openIncidents") <= number(t, "incidents"));
  CHECK(number(run_entry(all, "wide-1024"), "gpus") == 1024);
  CHECK(str(run_entry(all, "nan-run"), "loss") == "NaN");

  auto q = api.ok("/v1/runs?q=HEAT");  // the experiment id, any case
  REQUIRE(at(q, "runs").items.size() == 1);
  CHECK(str(at(q, "runs").items[0], "runId") == "thermal-13");
  CHECK(number(api.ok("/v1/runs?q=job-portal"), "count") == 1);
  CHECK(number(api.ok("/v1/runs?q=nothing-like-it"), "count") == 0);
  int64_t start = at(t, "startTimeNs").integer;
  CHECK(number(api.ok("/v1/runs?since=" + std::to_string(start)), "count") == 3);
  CHECK(number(api.ok("/v1/runs?since=" + std::to_string(start + 1)), "count") == 0);
  CHECK(number(api.ok("/v1/runs?until=" + std::to_string(start)), "count") == 3);
  CHECK(number(api.ok("/v1/runs?until=" + std::to_string(start - 1)), "count") == 0);

  CHECK(api.error("/v1/runs?since=yesterday") ==
        std::pair<int, std::string>{400,
                                    "parameter 'since' must be an integer from 0 to 9223372036854775807, got "
                                    "'yesterday'"});
  CHECK(api.error("/v1/runs?since=5&until=4") == std::pair<int, std::string>{400, "since is after until"});
}

TEST_CASE("GET /v1/runs/{runId}/report is the failure page of runlens report --format json") {
  Api api(portal_store().db);
  auto page = api.ok("/v1/runs/nan-run/report");
  CHECK(str(page, "runId") == "nan-run");
  CHECK(str(page, "status") == "FAILED");
  CHECK(at(page, "failure").type == json::Value::Type::kObject);
  auto thermal = api.ok("/v1/runs/thermal-13/report");
  CHECK(str(at(thermal, "failure"), "kind") == "straggler");
  CHECK(api.error("/v1/runs/no-such-run/report") == std::pair<int, std::string>{404, "unknown run 'no-such-run'"});
  CHECK(api.error("/v1/runs/nan-run/report?window=0").first == 400);
}

TEST_CASE("GET /v1/runs/{runId}/heatmap: the throttled rank's bucket is hottest after step 100, at step resolution") {
  Api api(portal_store().db);
  auto h = api.ok("/v1/runs/thermal-13/heatmap?maxRanks=16&maxSteps=400");
  CHECK(number(h, "rankBucket") == 4);
  const auto& rows = at(h, "rows").items;
  const auto& columns = at(h, "columns").items;
  const auto& cells = at(h, "cells").items;
  REQUIRE(rows.size() == 16);
  REQUIRE(cells.size() == 16);
  CHECK(number(rows[3], "firstRank") == 12);
  CHECK(number(rows[3], "lastRank") == 15);
  REQUIRE(!columns.empty());
  CHECK(number(columns.front(), "firstStep") == 1);
  CHECK(number(columns.back(), "lastStep") == 300);
  size_t best_row = 0, best_column = 0;
  double best = -1;
  for (size_t r = 0; r < cells.size(); ++r) {
    REQUIRE(cells[r].items.size() == columns.size());
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto& v = cells[r].items[c];
      if (v.type == json::Value::Type::kNumber && v.number > best) {
        best = v.number;
        best_row = r;
        best_column = c;
      }
    }
  }
  CHECK(best_row == 3);  // ranks 12-15
  CHECK(best > 1.5);
  CHECK(number(h, "max") == doctest::Approx(best));
  CHECK(number(columns[best_column], "firstStep") >= 100);
  CHECK(str(columns[best_column], "resolution") == "step");
  // Before the fault the bucket is like the others.
  CHECK(cells[3].items[0].number < 1.2);
  CHECK(str(columns[0], "resolution") == "window");
  // The failure window is around the incident (50 steps either side of its alerts).
  const auto& windows = at(h, "failureWindows").items;
  REQUIRE(!windows.empty());
  CHECK(windows[0].items[0].number <= 100);
  CHECK(windows[0].items[1].number > 100);
  bool highlighted = false;
  for (const auto& x : at(h, "highlight").items)
    highlighted = highlighted || (number(x, "rank") == 13 && number(x, "row") == 3);
  CHECK(highlighted);

  // At most maxSteps columns, a step range asked.
  auto few = api.ok("/v1/runs/thermal-13/heatmap?maxRanks=64&maxSteps=10&fromStep=50&toStep=250");
  CHECK(at(few, "columns").items.size() <= 10);
  CHECK(number(few, "rankBucket") == 1);
  CHECK(at(few, "rows").items.size() == 64);
  CHECK(number(at(few, "columns").items.front(), "firstStep") == 50);
  CHECK(number(at(few, "columns").items.back(), "lastStep") == 250);
}

TEST_CASE("GET /v1/runs/{runId}/heatmap of 1024 ranks with maxRanks=256 has 256 rows of 4 ranks") {
  Api api(portal_store().db);
  auto h = api.ok("/v1/runs/wide-1024/heatmap?maxRanks=256");
  CHECK(number(h, "ranks") == 1024);
  CHECK(number(h, "rankBucket") == 4);
  const auto& rows = at(h, "rows").items;
  REQUIRE(rows.size() == 256);
  for (size_t r = 0; r < rows.size(); ++r) {
    CHECK(number(rows[r], "firstRank") == static_cast<double>(4 * r));
    CHECK(number(rows[r], "lastRank") == static_cast<double>(4 * r + 3));
  }
  REQUIRE(at(h, "cells").items.size() == 256);
  CHECK(at(h, "cells").items[255].items.size() == at(h, "columns").items.size());
  CHECK(at(api.ok("/v1/runs/wide-1024/heatmap?maxRanks=1000"), "rows").items.size() == 512);
}

TEST_CASE("GET /v1/runs/{runId}/ranks/{rank}: the throttled GPU's temperature rises and its clock falls at step 100") {
  Api api(portal_store().db);
  auto d = api.ok("/v1/runs/thermal-13/ranks/13");
  CHECK(number(d, "rank") == 13);
  CHECK(str(d, "node") == "gpu-node-1");
  CHECK(number(d, "gpu") == 5);
  CHECK(number(at(d, "summary"), "ratioToMedian") > 1.3);
  REQUIRE(!at(d, "incidents").items.empty());
  CHECK(number(at(d, "incidents").items[0], "openedStep") >= 100);
  CHECK(str(d, "gpuResolution") == "sample");
  const auto& samples = at(d, "gpuSamples").items;
  REQUIRE(samples.size() >= 4);
  double temp_before = 0, temp_after = 0, clock_before = 0, clock_after = 1e9;
  int before = 0, after = 0;
  for (const auto& g : samples) {
    if (is_null(g, "step")) continue;
    if (number(g, "step") < 100) {
      temp_before = std::max(temp_before, number(g, "tempC"));
      clock_before = std::max(clock_before, number(g, "smClockMhz"));
      ++before;
    } else {
      temp_after = std::max(temp_after, number(g, "tempC"));
      clock_after = std::min(clock_after, number(g, "smClockMhz"));
      CHECK(number(g, "throttleReasons") != 0);
      ++after;
    }
  }
  CHECK(before > 0);
  CHECK(after > 0);
  CHECK(temp_after > temp_before + 10);
  CHECK(clock_after < clock_before * 0.75);
  // Steps at full resolution around the incident; before it, the window means.
  bool step_res = false, window_res = false, slow_after = false;
  for (const auto& s : at(d, "steps").items) {
    step_res = step_res || str(s, "resolution") == "step";
    window_res = window_res || str(s, "resolution") == "window";
    if (str(s, "resolution") == "step" && number(s, "step") >= 110)
      slow_after = slow_after || number(s, "ratioToMedian") > 1.5;
  }
  CHECK(step_res);
  CHECK(window_res);
  CHECK(slow_after);
  CHECK(!at(d, "nodeSamples").items.empty());
  CHECK(at(d, "window").find("fromNs")->integer < at(d, "window").find("toNs")->integer);

  // A healthy rank: no incident, the same shape.
  auto healthy = api.ok("/v1/runs/thermal-13/ranks/2?fromStep=120&toStep=140");
  CHECK(at(healthy, "incidents").items.empty());
  CHECK(number(at(healthy, "window"), "fromStep") == 120);
  CHECK(number(at(healthy, "window"), "toStep") == 140);

  CHECK(api.error("/v1/runs/thermal-13/ranks/x") ==
        std::pair<int, std::string>{400, "rank must be a non-negative integer, got 'x'"});
  CHECK(api.error("/v1/runs/thermal-13/ranks/64") ==
        std::pair<int, std::string>{404, "run 'thermal-13' has no rank 64"});
  CHECK(api.error("/v1/runs/nope/ranks/1") == std::pair<int, std::string>{404, "unknown run 'nope'"});
}

TEST_CASE("GET /v1/runs/{runId}/gpus: every GPU of the run from the rollups, the throttled one hottest") {
  Api api(portal_store().db);
  auto g = api.ok("/v1/runs/thermal-13/gpus");
  REQUIRE(g.items.size() == 64);
  const json::Value* hot = nullptr;
  double other_max = 0;
  for (const auto& x : g.items) {
    if (number(x, "rank") == 13) {
      hot = &x;
    } else {
      other_max = std::max(other_max, number(x, "tempMaxC"));
    }
  }
  REQUIRE(hot);
  CHECK(str(*hot, "node") == "gpu-node-1");
  CHECK(number(*hot, "gpu") == 5);
  CHECK(number(*hot, "tempMaxC") > other_max + 5);
  CHECK(number(*hot, "smClockMinMhz") < 1200);
  CHECK(number(*hot, "throttleReasons") != 0);
  CHECK(number(*hot, "samples") > 0);
  // Before the fault it was like the others (the range is rounded out to whole 1-minute buckets).
  auto early = api.ok("/v1/runs/thermal-13/gpus?fromStep=1&toStep=60");
  for (const auto& x : early.items) {
    if (number(x, "rank") == 13) CHECK(number(x, "tempMaxC") < 85);
  }
  CHECK(api.error("/v1/runs/thermal-13/gpus?fromStep=9&toStep=3") ==
        std::pair<int, std::string>{400, "fromStep is after toStep"});
}

TEST_CASE("GET /v1/search finds a run by job id, node, GPU, checkpoint and run id prefix") {
  Api api(portal_store().db);
  auto find = [&](const std::string& q, const std::string& type) -> json::Value {
    auto res = api.ok("/v1/search?q=" + q);
    std::string decoded = q;
    if (auto at_slash = decoded.find("%2F"); at_slash != std::string::npos) decoded.replace(at_slash, 3, "/");
    CHECK(str(res, "q") == decoded);
    for (const auto& m : at(res, "matches").items) {
      if (str(m, "type") == type) return m;
    }
    FAIL("no " << type << " for " << q);
    return res;
  };
  auto job = find("job-portal-1", "job");
  REQUIRE(at(job, "runIds").items.size() == 1);
  CHECK(at(job, "runIds").items[0].text == "thermal-13");
  auto node = find("gpu-node-1", "node");
  CHECK(!at(node, "runIds").items.empty());
  auto gpu = find("gpu-node-1%2F5", "gpu");
  CHECK(str(gpu, "id") == "gpu-node-1/5");
  auto ckpt = find("thermal-13%2Fckpt-100", "checkpoint");
  REQUIRE(at(ckpt, "runIds").items.size() == 1);
  CHECK(at(ckpt, "runIds").items[0].text == "thermal-13");
  auto prefix = find("therm", "run");
  CHECK(str(prefix, "id") == "thermal-13");
  CHECK(at(api.ok("/v1/search?q=zzz-nothing"), "matches").items.empty());
  CHECK(api.error("/v1/search") == std::pair<int, std::string>{400, "missing parameter 'q'"});
  CHECK(api.error("/v1/search?q=a&x=1").first == 400);
}

TEST_CASE("GET /v1/runs/{runId}/steps: breakdownMs per step, and maxPoints buckets that keep the NaN step") {
  Api api(portal_store().db);
  auto full = api.ok("/v1/runs/nan-run/steps?fromStep=1&toStep=200");
  const auto& rows = at(full, "steps").items;
  REQUIRE(rows.size() == 200);
  for (const auto& r : {rows[0], rows[120]}) {
    const auto& b = at(r, "breakdownMs");
    double sum = 0;
    for (const char* k : {"forward", "backward", "optimizer", "comm", "dataWait"}) {
      REQUIRE_MESSAGE(at(b, k).type == json::Value::Type::kNumber, k);
      CHECK(number(b, k) >= 0);
      sum += number(b, k);
    }
    // The means of each rank's parts add up to its mean step, at most the slowest rank's.
    CHECK(sum <= number(r, "stepMs") + 1e-6);
    CHECK(sum > 0.8 * number(r, "stepMs"));
    CHECK(number(b, "backward") > number(b, "forward"));
  }
  auto b = api.ok("/v1/runs/nan-run/steps?maxPoints=20");
  CHECK(number(b, "bucketSteps") == 10);
  const auto& buckets = at(b, "steps").items;
  REQUIRE(buckets.size() == 20);
  CHECK(number(buckets[0], "step") == 1);
  CHECK(number(buckets[0], "lastStep") == 10);
  double max_ms = 0, loss_sum = 0;
  for (size_t i = 0; i < 10; ++i) {
    max_ms = std::max(max_ms, number(rows[i], "stepMs"));
    loss_sum += number(rows[i], "loss");
  }
  CHECK(number(buckets[0], "stepMs") == doctest::Approx(max_ms));
  CHECK(number(buckets[0], "loss") == doctest::Approx(loss_sum / 10));
  CHECK(at(buckets[0], "breakdownMs").find("forward")->type == json::Value::Type::kNumber);
  // Steps 151-160 hold the NaN of step 160: the bucket's loss is NaN, the one before finite.
  CHECK(number(buckets[15], "step") == 151);
  CHECK(str(buckets[15], "loss") == "NaN");
  CHECK(at(buckets[14], "loss").type == json::Value::Type::kNumber);
  // Fewer steps than maxPoints: every step, with lastStep = step.
  auto few = api.ok("/v1/runs/nan-run/steps?fromStep=1&toStep=15&maxPoints=100");
  REQUIRE(at(few, "steps").items.size() == 15);
  CHECK(number(at(few, "steps").items[3], "lastStep") == 4);
  CHECK(api.error("/v1/runs/nan-run/steps?maxPoints=5") ==
        std::pair<int, std::string>{400, "parameter 'maxPoints' must be an integer from 10 to 10000, got '5'"});
}

TEST_CASE("the portal routes answer 404 for an unknown run and 400 for bad parameters, with the message") {
  Api api(portal_store().db);
  for (const char* path :
       {"/v1/runs/nope/heatmap", "/v1/runs/nope/gpus", "/v1/runs/nope/report", "/v1/runs/nope/steps"}) {
    CHECK(api.error(path) == std::pair<int, std::string>{404, "unknown run 'nope'"});
  }
  CHECK(api.error("/v1/runs/thermal-13/heatmap?maxRanks=0") ==
        std::pair<int, std::string>{400, "parameter 'maxRanks' must be an integer from 1 to 4096, got '0'"});
  CHECK(api.error("/v1/runs/thermal-13/heatmap?maxSteps=x") ==
        std::pair<int, std::string>{400, "parameter 'maxSteps' must be an integer from 1 to 4000, got 'x'"});
  CHECK(api.error("/v1/runs/thermal-13/heatmap?rows=3").first == 400);
}
