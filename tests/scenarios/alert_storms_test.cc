// No alert storms (issue 12), through the default pipeline: a job that hangs,
// a node that dies and a rank whose step counter breaks are one alert each
// (and one diagnosis), not one per rank, whatever the threads or batch size.
#include <functional>

#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

// The serious alerts but throughput_drop: ranks that stop reporting take their tokens with them.
std::vector<std::string> storm(const ScenarioResult& r) {
  std::vector<std::string> s;
  for (const auto& line : r.serious()) {
    if (line.rfind("throughput_drop@", 0) != 0) s.push_back(line);
  }
  return s;
}

std::vector<std::string> missing_ranks(int32_t from_rank, int32_t to_rank, int64_t from_step) {
  std::vector<std::string> f;
  for (int32_t r = from_rank; r < to_rank; ++r)
    f.push_back("missing_rank:rank=" + std::to_string(r) + ",from=" + std::to_string(from_step));
  return f;
}

// The scenario run with `edit` applied to each synthesized row, replayed with
// `threads` and `batch`; its alerts and dead letters.
struct Edited {
  std::vector<Alert> alerts;
  std::string text;
  std::vector<std::string> dead_letters;
  std::vector<Alert> of(const std::string& kind) const {
    std::vector<Alert> a;
    for (const auto& x : alerts) {
      if (x.kind == kind) a.push_back(x);
    }
    return a;
  }
};

Edited run_edited(const std::function<void(Record&)>& edit, int threads = 2, int64_t batch = 0) {
  std::string dir = fresh_dir("storms");
  std::string path = dir + "/run.jsonl";
  {
    std::ofstream out(path, std::ios::binary);
    synth::generate(scenario_options(), [&](std::vector<Record>& rows) {
      for (auto& r : rows) {
        edit(r);
        out << jsonl::encode_record(r) << "\n";
      }
    });
  }
  Edited e;
  auto replayed = replay({path}, threads, batch);
  std::filesystem::remove_all(dir);
  e.text = replayed.alerts;
  e.dead_letters = replayed.dead_letters;
  for (const auto& line : lines_of(replayed.alerts)) {
    Alert a;
    std::string why;
    REQUIRE_MESSAGE(jsonl::decode_alert(line, &a, &why), why);
    CHECK(contract_kinds().count(a.kind) == 1);
    e.alerts.push_back(a);
  }
  return e;
}

}  // namespace

TEST_CASE("scenario: the 8 ranks of a lost node are one node_unreachable and one diagnosis") {
  auto r = run_scenario(scenario_options(), missing_ranks(8, 16, 60));
  CHECK(storm(r).size() == 1);  // the node_unreachable, nothing else
  auto lost = r.of("node_unreachable");
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].node.str() == "gpu-node-1");
  CHECK(*lost[0].step == 60);
  CHECK(lost[0].summary.find("(ranks 8, 9, 10, 11, 12, 13, 14, 15)") != std::string::npos);
  CHECK(r.of("rank_missing").empty());
  auto d = r.of("diagnosis");
  REQUIRE(d.size() == 1);
  CHECK(d[0].symptom == "node_unreachable");
  CHECK(d[0].cause == "hardware_fault");
  CHECK(d[0].owner == "infrastructure");
  CHECK(d[0].node.str() == "gpu-node-1");
}

TEST_CASE("scenario: 20 of 32 ranks hanging is one job_stalled and one diagnosis") {
  auto r = run_scenario(scenario_options(), missing_ranks(12, 32, 60));
  auto serious = storm(r);
  REQUIRE(serious.size() == 1);
  CHECK(serious[0].rfind("job_stalled@60: JOB STALLED: 20 of 32 ranks did not report step 60", 0) == 0);
  CHECK(r.of("rank_missing").empty());
  CHECK(r.of("node_unreachable").empty());
  auto d = r.of("diagnosis");
  REQUIRE(d.size() == 1);
  CHECK(d[0].symptom == "job_stalled");
  CHECK(d[0].cause == "unknown");
  CHECK(d[0].owner == "platform");
}

TEST_CASE(
    "scenario: one rank reporting step 10^6 at step 100 is one step_anomaly, the same for any threads and batch") {
  auto corrupt = [](Record& r) {
    if (r.kind() != Kind::kStep) return;
    Step s = r.as<Step>();
    if (s.rank != 5 || s.step != 100) return;
    s.step = 1'000'000;
    r.body = s;
  };
  auto base = run_edited(corrupt);
  auto anomalies = base.of("step_anomaly");
  REQUIRE(anomalies.size() == 1);
  CHECK(*anomalies[0].rank == 5);
  CHECK(*anomalies[0].value == 1e6);
  CHECK(base.of("rank_missing").empty());
  for (const auto& a : base.alerts) {
    CAPTURE(a.summary);
    CHECK((a.kind == "step_anomaly" || a.kind == "diagnosis"));
  }
  REQUIRE(base.dead_letters.size() == 1);
  CHECK(base.dead_letters[0].find("is more than 1000 steps past the run's current step") != std::string::npos);
  for (auto [threads, batch] : {std::pair{1, int64_t{0}}, std::pair{4, int64_t{7}}, std::pair{3, int64_t{1000}}}) {
    CAPTURE(threads);
    CAPTURE(batch);
    CHECK(run_edited(corrupt, threads, batch).text == base.text);
  }
}
