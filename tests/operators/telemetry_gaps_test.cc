#include "operators/telemetry_gaps.h"

#include "tests/operators/operator_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

// The event a source writes for a gap (connectors/sources/producer_ledger.cc).
Record gap(const std::string& run, const std::string& producer, int64_t lost, int64_t t) {
  Occurrence o;
  o.kind = Symbol::intern(event_kind::kTelemetryGap);
  o.set_present(Occurrence::F::kind);
  if (!run.empty()) {
    o.run_id = Symbol::intern(run);
    o.set_present(Occurrence::F::run_id);
  }
  o.key = Symbol::intern(producer);
  o.set_present(Occurrence::F::key);
  o.code = lost;
  o.set_present(Occurrence::F::code);
  Record r;
  r.time_ns = t;
  r.body = o;
  return r;
}

double attr(const Alert& a, const std::string& name) {
  for (const auto& [k, v] : a.attrs) {
    if (k == name) return v;
  }
  FAIL("no attr " << name);
  return -1;
}

}  // namespace

TEST_CASE("telemetry_gaps: one alert per run, revised when the loss doubles or another producer loses batches") {
  auto def = make_operator("telemetry_gaps");
  Occurrence other;
  other.kind = Symbol::intern("xid");
  other.set_present(Occurrence::F::kind);
  Record xid;
  xid.time_ns = kT0;
  xid.body = other;
  std::vector<Record> rows{xid,
                           gap("r1", "r1/0/a", 1, kT0 + 1 * kSec),
                           gap("r1", "r1/0/a", 1, kT0 + 2 * kSec),   // 2 = 2 x 1: revised
                           gap("r1", "r1/0/a", 1, kT0 + 3 * kSec),   // 3 < 4: counted only
                           gap("r1", "r1/1/b", 1, kT0 + 4 * kSec),   // another producer: revised
                           gap("r2", "r2/0/c", 5, kT0 + 5 * kSec),   // another run: its own alert
                           gap("r1", "r1/0/a", 0, kT0 + 6 * kSec)};  // nothing lost: nothing
  OperatorRun run;
  run_operator(*def, rows, &run);
  auto alerts = run.alerts("telemetry_gap");
  REQUIRE(alerts.size() == 4);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(alerts[i].run_id.str() == "r1");
    CHECK(alerts[i].revision == static_cast<int32_t>(i));
    CHECK(alerts[i].alert_id == alerts[0].alert_id);
    CHECK(alerts[i].severity == Severity::kInfo);
  }
  CHECK(attr(alerts[0], "lost_batches") == 1);
  CHECK(attr(alerts[0], "producers") == 1);
  CHECK(alerts[0].time_ns == kT0 + kSec);
  CHECK(alerts[0].summary ==
        "1 batch of telemetry lost between 1 producer and the collector; what they held is missing from this run's "
        "analysis");
  CHECK(attr(alerts[1], "lost_batches") == 2);
  CHECK(attr(alerts[2], "lost_batches") == 4);
  CHECK(attr(alerts[2], "producers") == 2);
  CHECK(alerts[2].time_ns == kT0 + 4 * kSec);
  CHECK(alerts[3].run_id.str() == "r2");
  CHECK(alerts[3].revision == 0);
  CHECK(alerts[3].alert_id != alerts[0].alert_id);
  CHECK(attr(alerts[3], "lost_batches") == 5);
  CHECK(run.out.size() == 4);
}

TEST_CASE("telemetry_gaps: a restart of the run starts no second alert") {
  auto def = make_operator("telemetry_gaps");
  Occurrence restart;
  restart.kind = Symbol::intern(event_kind::kRestart);
  restart.set_present(Occurrence::F::kind);
  restart.run_id = Symbol::intern("r1");
  restart.set_present(Occurrence::F::run_id);
  Record rs;
  rs.time_ns = kT0 + 2 * kSec;
  rs.body = restart;
  OperatorRun run;
  run_operator(*def, {gap("r1", "p", 4, kT0 + kSec), rs, gap("r1", "p", 1, kT0 + 3 * kSec)}, &run);
  auto alerts = run.alerts("telemetry_gap");
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].revision == 0);
}
