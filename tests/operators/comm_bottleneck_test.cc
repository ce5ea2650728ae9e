#include "operators/comm_bottleneck.h"

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct CommCase {
  const char* name;
  double collective_ms;  // the collective itself, every rank, from step 20
  int32_t straggler;     // a rank that works 2x from step 20 (-1: none)
  int64_t last_step;
  std::vector<int64_t> expect_steps;
};

}  // namespace

TEST_CASE("comm_bottleneck measures the collective, not the wait for slow ranks") {
  const CommCase cases[] = {
      {"slow network on every rank", 1000, -1, 60, {22}},    {"normal collectives", 120, -1, 60, {}},
      {"a straggler makes the others wait", 120, 5, 60, {}}, {"two slow steps", 1000, -1, 21, {}},
      {"just under the threshold", 600, -1, 60, {}},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    auto start = run_start("r1", 16);
    std::vector<Record> rows{start};
    int64_t t = kT0;
    auto per_rank = [&](int32_t r, int64_t s) {
      RankStep p;
      bool fault = s >= 20 && s <= c.last_step;
      if (fault) p.comm_ms = c.collective_ms;
      if (fault && r == c.straggler) p.work_ms *= 2;
      return p;
    };
    for (auto& r : joined_steps(start, 1, 60, per_rank, &t)) rows.push_back(r);
    for (int32_t r = 0; r < 16; ++r) rows.push_back(collective_row("r1", r, 22, t - 10 * kSec, 1100));
    OperatorRun run;
    run_operator(*make_operator("comm_bottleneck"), rows, &run);
    auto alerts = run.alerts("comm_bottleneck");
    REQUIRE(alerts.size() == c.expect_steps.size());
    for (size_t i = 0; i < alerts.size(); ++i) {
      CHECK(*alerts[i].step == c.expect_steps[i]);
      CHECK(attr(alerts[i], "onset_step") == 20);
      CHECK(*alerts[i].value == doctest::Approx(1000.0 / (1900 + 10 + 1000)));
      CHECK(*alerts[i].threshold == 0.25);
      CHECK(!alerts[i].rank.has_value());
    }
  }
}

TEST_CASE("comm_bottleneck skips steps incomplete by shedding") {
  // The slow network of the first case, every step of it shed but the last two.
  auto start = run_start("r1", 16);
  std::vector<Record> rows{start};
  int64_t t = kT0;
  auto per_rank = [&](int32_t, int64_t s) {
    RankStep p;
    if (s >= 20) p.comm_ms = 1000;
    return p;
  };
  for (auto& r : joined_steps(start, 1, 60, per_rank, &t)) rows.push_back(r);
  OperatorRun whole, shed;
  run_operator(*make_operator("comm_bottleneck"), rows, &whole);
  run_operator(*make_operator("comm_bottleneck"), mark_shed(rows, 20, 58), &shed);
  CHECK(whole.alerts("comm_bottleneck").size() == 1);
  CHECK(shed.alerts("comm_bottleneck").empty());  // two judged slow steps are not persist_k of them
}
