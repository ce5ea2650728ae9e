#include "operators/nan_detect.h"

#include <limits>

#include "formats/jsonl_codec.h"
#include "tests/operators/operator_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct NanCase {
  const char* name;
  double loss;
  double grad_norm;
  int64_t nan_count;  // -1 = absent
  bool alerts;
  const char* reason;
};
}  // namespace

TEST_CASE("nan_detect raises nan_loss for each kind of non-finite value") {
  const NanCase cases[] = {
      {"finite", 2.5, 0.8, -1, false, ""},
      {"NaN loss", kNaN, 0.8, -1, true, "loss=NaN"},
      {"Inf loss", kInf, 0.8, -1, true, "loss=Infinity"},
      {"-Inf loss", -kInf, 0.8, -1, true, "loss=-Infinity"},
      {"Inf grad norm", 2.5, kInf, -1, true, "grad_norm=Infinity"},
      {"NaN grad norm", 2.5, kNaN, -1, true, "grad_norm=NaN"},
      {"nan_count", 2.5, 0.8, 3, true, "nan_count=3"},
      {"nan_count zero", 2.5, 0.8, 0, false, ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto def = make_operator("nan_detect");
    std::vector<Record> rows{run_start("r1", 8), train("r1", 4110, c.loss, kT0 + kSec, c.grad_norm, c.nan_count)};
    OperatorRun run;
    run_operator(*def, rows, &run);
    auto alerts = run.alerts("nan_loss");
    REQUIRE(alerts.size() == (c.alerts ? 1u : 0u));
    if (!c.alerts) continue;
    CHECK(*alerts[0].step == 4110);
    CHECK(alerts[0].severity == Severity::kCritical);
    CHECK(alerts[0].node.str() == "node-0");
    CHECK(alerts[0].summary.find(c.reason) != std::string::npos);
  }
}

TEST_CASE("nan_detect raises once per incident and re-arms after finite steps") {
  auto def = make_operator("nan_detect", "rearm_steps: 10");
  std::vector<Record> rows{run_start("r1", 1)};
  int64_t t = kT0;
  for (int64_t s = 1; s <= 100; ++s) {
    bool bad = (s >= 20 && s < 30) || s == 50;  // 20 finite steps between the incidents
    rows.push_back(train("r1", s, bad ? kNaN : 2.0, t += kSec));
  }
  OperatorRun run;
  run_operator(*def, rows, &run);
  auto alerts = run.alerts();
  REQUIRE(alerts.size() == 2);
  CHECK(*alerts[0].step == 20);
  CHECK(*alerts[1].step == 50);
}

TEST_CASE("nan_detect reads NaN as Python's json module writes it") {
  Record r;
  std::string why;
  REQUIRE(jsonl::decode_record(R"({"type":"train","time_ns":1767225601000000000,"run_id":"r1","step":7,"loss":NaN})",
                               &r, &why));
  auto def = make_operator("nan_detect");
  OperatorRun run;
  run_operator(*def, {r}, &run);
  CHECK(run.alerts("nan_loss").size() == 1);
}

TEST_CASE("nan_detect: one incident across ranks, also after rank 0's run_end") {
  // Every rank reports train metrics; rank 0 ends the run before the others' last reports.
  auto def = make_operator("nan_detect");
  std::vector<Record> rows{run_start("r1", 4)};
  int64_t t = kT0;
  for (int64_t s = 1; s <= 30; ++s) {
    t += kSec;
    for (int32_t r = 0; r < 4; ++r) {
      Record tr = train("r1", s, s >= 10 ? kNaN : 2.0, t + r);
      Train body = tr.as<Train>();
      body.rank = r;
      body.set_present(Train::F::rank);
      tr.body = body;
      rows.push_back(tr);
    }
  }
  RunEnd end;
  end.run_id = Symbol::intern("r1");
  end.set_present(RunEnd::F::run_id);
  Record re;
  re.time_ns = t + 1;  // before ranks 1..3 report step 30
  re.body = end;
  rows.push_back(re);
  OperatorRun run;
  run_operator(*def, rows, &run);
  auto alerts = run.alerts("nan_loss");
  REQUIRE(alerts.size() == 1);
  CHECK(*alerts[0].step == 10);
}
