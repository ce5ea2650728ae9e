#include "operators/checkpoint_health.h"

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct Ckpt {
  double duration_ms;
  bool ok;
};

struct CheckpointCase {
  const char* name;
  std::vector<Ckpt> checkpoints;                        // one every 100 s (steps 50, 100, ...)
  std::vector<std::pair<const char*, int64_t>> expect;  // alert kind and step
};

constexpr Ckpt ok{3000, true}, slow{30000, true}, failed{1000, false};

}  // namespace

TEST_CASE("checkpoint_health: failures and overhead, once per incident") {
  const CheckpointCase cases[] = {
      {"healthy", {ok, ok, ok, ok}, {}},
      {"one failure", {ok, ok, failed, ok}, {{"checkpoint_failure", 150}}},
      {"failures in a row are one incident", {ok, failed, failed, failed, ok}, {{"checkpoint_failure", 100}}},
      {"failed, recovered, failed again",
       {ok, failed, ok, failed},
       {{"checkpoint_failure", 100}, {"checkpoint_failure", 200}}},
      {"no successful checkpoint yet", {failed}, {{"checkpoint_failure", 50}}},
      {"one slow checkpoint", {ok, slow, ok, ok}, {}},
      {"slow checkpoints in a row", {ok, slow, slow, slow, slow}, {{"checkpoint_overhead", 150}}},
      {"slow again after a fast one",
       {slow, slow, ok, slow, slow},
       {{"checkpoint_overhead", 100}, {"checkpoint_overhead", 250}}},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    std::vector<Record> rows{run_start("r1", 8)};
    for (size_t i = 0; i < c.checkpoints.size(); ++i) {
      int64_t step = 50 * static_cast<int64_t>(i + 1);
      rows.push_back(checkpoint_row("r1", step, kT0 + static_cast<int64_t>(i + 1) * 100 * kSec,
                                    c.checkpoints[i].duration_ms, c.checkpoints[i].ok));
    }
    OperatorRun run;
    run_operator(*make_operator("checkpoint_health"), rows, &run);
    auto alerts = run.alerts();
    REQUIRE(alerts.size() == c.expect.size());
    for (size_t i = 0; i < alerts.size(); ++i) {
      CAPTURE(alerts[i].summary);
      CHECK(alerts[i].kind == c.expect[i].first);
      CHECK(*alerts[i].step == c.expect[i].second);
      CHECK(alerts[i].run_id.str() == "r1");
      if (alerts[i].kind == "checkpoint_overhead") {
        CHECK(*alerts[i].value == doctest::Approx(0.3));
        CHECK(attr(alerts[i], "onset_step") == c.expect[i].second - 50);
      } else if (c.expect[i].second > 50) {
        CHECK(attr(alerts[i], "last_ok_step") == c.expect[i].second - 50);
        CHECK(attr(alerts[i], "last_ok_age_s") == doctest::Approx(100));
        CHECK(alerts[i].summary.find("the last successful checkpoint is 100 s old (step") != std::string::npos);
      } else {
        CHECK(alerts[i].summary.find("no successful checkpoint yet") != std::string::npos);
      }
    }
  }
}

TEST_CASE("checkpoint_health: the training window restarts at a restart") {
  std::vector<Record> rows{run_start("r1", 8)};
  rows.push_back(checkpoint_row("r1", 50, kT0 + 100 * kSec, 3000));
  rows.push_back(event_row("restart", kT0 + 190 * kSec, EventFields().run("r1")));
  rows.push_back(checkpoint_row("r1", 60, kT0 + 200 * kSec, 3000));  // 3 s of a 10 s window
  rows.push_back(checkpoint_row("r1", 110, kT0 + 210 * kSec, 3000));
  OperatorRun run;
  run_operator(*make_operator("checkpoint_health"), rows, &run);
  auto alerts = run.alerts();
  REQUIRE(alerts.size() == 1);
  CHECK(*alerts[0].value == doctest::Approx(0.3));
}
