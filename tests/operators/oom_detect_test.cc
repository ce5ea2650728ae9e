#include "operators/oom_detect.h"

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct OomCase {
  const char* name;
  EventFields event;
  bool with_data;  // the rank's data event for the OOM step
  int64_t expect_step;
  std::vector<const char*> expect_words;
};

// 16 ranks; rank 11 reads shard-31 and its last two steps (48209, 48210) are
// long-sequence batches with memory near full.
std::vector<Record> oom_rows(const OomCase& c) {
  auto start = run_start("r1", 16);
  std::vector<Record> rows{start};
  int64_t t = kT0;
  auto per_rank = [](int32_t r, int64_t s) {
    RankStep p;
    p.seq_len = 4096;
    p.shard = "shard-" + std::to_string(r == 11 ? 31 : r);
    p.mem_peak_bytes = 64'000'000'000;
    if (r == 11 && s >= 48208) p.seq_len = 32768, p.mem_peak_bytes = 79'900'000'000;
    return p;
  };
  for (auto& r : joined_steps(start, 48190, 48209, per_rank, &t)) rows.push_back(r);
  if (c.with_data) rows.push_back(data_row("r1", 11, 48210, t + kSec, "shard-31", 14));
  rows.push_back(event_row("oom", t + 2 * kSec, c.event));
  rows.push_back(event_row("oom", t + 3 * kSec, c.event));  // reported twice: one alert
  return rows;
}

}  // namespace

TEST_CASE("oom_detect says what ran out of memory, not just CUDA OOM") {
  const OomCase cases[] = {
      {"event with rank and step",
       EventFields().run("r1").rank(11).step(48210).message("CUDA out of memory"),
       true,
       48210,
       {"rank 11 (node node-1, GPU 3) ran out of memory at step 48210", "memory peak 79.9 GB (a spike",
        "sequence length 32768 (8.0x its median 4096) at step 48209", "dataset shard shard-31",
        "(CUDA out of memory)"}},
      {"no step: the one after the rank's last report",
       EventFields().run("r1").rank(11),
       true,
       48210,
       {"at step 48210", "dataset shard shard-31"}},
      {"no data event: the shard of the last step",
       EventFields().run("r1").rank(11).step(48210),
       false,
       48210,
       {"dataset shard shard-31"}},
      {"named by node and GPU",
       EventFields().run("r1").node("node-1").gpu(3).step(48210),
       true,
       48210,
       {"rank 11 (node node-1, GPU 3)"}},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    OperatorRun run;
    run_operator(*make_operator("oom_detect"), oom_rows(c), &run);
    auto alerts = run.alerts("oom");
    REQUIRE(alerts.size() == 1);
    const Alert& a = alerts[0];
    CAPTURE(a.summary);
    CHECK(a.severity == Severity::kCritical);
    CHECK(*a.step == c.expect_step);
    CHECK(*a.rank == 11);
    CHECK(a.node.str() == "node-1");
    CHECK(*a.gpu == 3);
    CHECK(attr(a, "seq_len") == 32768);
    CHECK(attr(a, "last_step") == 48209);
    for (const char* w : c.expect_words) CHECK(a.summary.find(w) != std::string::npos);
  }
}

TEST_CASE("oom_detect without any history still raises, with what it knows") {
  std::vector<Record> rows{run_start("r1", 8), event_row("oom", kT0 + kSec, EventFields().run("r1").rank(2))};
  OperatorRun run;
  run_operator(*make_operator("oom_detect"), rows, &run);
  auto alerts = run.alerts();
  REQUIRE(alerts.size() == 1);
  CHECK(!alerts[0].step.has_value());
  CHECK(alerts[0].summary == "CUDA OOM: rank 2 (node node-0, GPU 2) ran out of memory");
}
