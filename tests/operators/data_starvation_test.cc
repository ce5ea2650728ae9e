#include "operators/data_starvation.h"

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct StarvationCase {
  const char* name;
  std::vector<int32_t> ranks;  // ranks that wait for data
  std::vector<int64_t> steps;  // in these steps
  double storage_factor;       // their shard's storage reads, x the normal 15 ms
  std::vector<int64_t> expect_steps;
  std::vector<int64_t> expect_onsets;
  const char* expect_words;  // in the summary
};

std::vector<int64_t> range(int64_t a, int64_t b) {
  std::vector<int64_t> v;
  for (int64_t i = a; i <= b; ++i) v.push_back(i);
  return v;
}

bool has(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// 16 ranks, rank r reads shard-(r % 8); 60 steps with data events.
std::vector<Record> starvation_rows(const StarvationCase& c) {
  auto start = run_start("r1", 16);
  std::vector<Record> rows{start};
  int64_t t = kT0;
  for (int64_t s = 1; s <= 60; ++s) {
    auto slow = [&](int32_t r) {
      return has(c.steps, s) && std::find(c.ranks.begin(), c.ranks.end(), r) != c.ranks.end();
    };
    for (int32_t r = 0; r < 16; ++r) {
      rows.push_back(data_row("r1", r, s, t + kSec / 2 + r, "shard-" + std::to_string(r % 8),
                              slow(r) ? 15 * c.storage_factor : 15 + r % 3));
    }
    for (auto& rec : joined_steps(
             start, s, s,
             [&](int32_t r, int64_t) {
               RankStep p;
               if (slow(r)) p.data_wait_ms = 500;
               return p;
             },
             &t)) {
      rows.push_back(rec);
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("data_starvation names the starved ranks and the shard they read") {
  const StarvationCase cases[] = {
      {"slow shard read by two ranks",
       {3, 11},
       range(20, 60),
       30,
       {22},
       {20},
       "reading dataset shard shard-3, whose storage reads take 450 ms"},
      {"one node's ranks starved, storage normal",
       {8, 9, 10, 11, 12, 13, 14, 15},
       range(20, 60),
       1,
       {22},
       {20},
       "storage reads normal"},
      {"one slow step", {3}, {30}, 30, {}, {}, ""},
      {"two slow steps in five", {3}, {30, 33}, 30, {}, {}, ""},
      {"three slow steps in five", {3}, {30, 32, 34}, 30, {34}, {30}, "shard-3"},
      {"recovered, then starved again",
       {5},
       [] {
         auto v = range(10, 14);
         for (int64_t s = 40; s <= 50; ++s) v.push_back(s);
         return v;
       }(),
       30,
       {12, 42},
       {10, 40},
       "shard-5"},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    OperatorRun run;
    run_operator(*make_operator("data_starvation"), starvation_rows(c), &run);
    auto alerts = run.alerts("data_starvation");
    REQUIRE(alerts.size() == c.expect_steps.size());
    for (size_t i = 0; i < alerts.size(); ++i) {
      CAPTURE(alerts[i].summary);
      CHECK(*alerts[i].step == c.expect_steps[i]);
      CHECK(std::find(c.ranks.begin(), c.ranks.end(), *alerts[i].rank) != c.ranks.end());
      CHECK(alerts[i].node.str() == "node-" + std::to_string(*alerts[i].rank / 8));
      CHECK(*alerts[i].value > 0.1);
      CHECK(attr(alerts[i], "starved_ranks") == static_cast<double>(c.ranks.size()));
      CHECK(attr(alerts[i], "onset_step") == c.expect_onsets[i]);
      CHECK(alerts[i].summary.find(c.expect_words) != std::string::npos);
    }
  }
}

TEST_CASE("data_starvation judges ranks, not the run's mean ratio") {
  // One rank of 64 waits 25 % of every step: the mean ratio barely moves.
  auto start = run_start("r1", 64);
  std::vector<Record> rows{start};
  int64_t t = kT0;
  for (auto& r : joined_steps(
           start, 1, 20,
           [](int32_t r, int64_t) {
             RankStep p;
             if (r == 40) p.data_wait_ms = 700;
             return p;
           },
           &t)) {
    rows.push_back(r);
  }
  OperatorRun run;
  run_operator(*make_operator("data_starvation"), rows, &run);
  auto alerts = run.alerts();
  REQUIRE(alerts.size() == 1);
  CHECK(*alerts[0].rank == 40);
  CHECK(attr(alerts[0], "job_data_wait_ratio") < 0.02);
}

TEST_CASE("data_starvation skips steps incomplete by shedding") {
  StarvationCase c{"slow shard read by two ranks", {3, 11}, range(20, 60), 30, {22}, {20}, ""};
  auto rows = starvation_rows(c);
  OperatorRun whole, shed;
  run_operator(*make_operator("data_starvation"), rows, &whole);
  run_operator(*make_operator("data_starvation"), mark_shed(rows, 20, 58), &shed);
  CHECK(whole.alerts("data_starvation").size() == 1);
  CHECK(shed.alerts("data_starvation").empty());  // two judged starved steps are not persist_k of them
}
