// An alert's id follows from its kind, its locators and the incident's
// discriminator (schema/alert.h): replay = live, and restarts de-duplicate.
#include "schema/alert.h"

#include <doctest/doctest.h>

namespace runlens {
namespace {

TEST_CASE("make_alert_id(alert, discriminator) hashes the alert's own kind and locators") {
  Alert a;
  a.kind = alert_kind::kStraggler;
  a.run_id = Symbol::intern("run-1");
  a.rank = 5;
  a.node = Symbol::intern("gpu-node-1");
  a.gpu = 1;
  CHECK(make_alert_id(a, 40) == make_alert_id("straggler", a.run_id, 5, a.node, 1, 40));
  CHECK(make_alert_id(a, 40).size() == 16);
  CHECK(make_alert_id(a, 40) != make_alert_id(a, 41));
  Alert b = a;
  b.gpu.reset();
  CHECK(make_alert_id(b, 40) == make_alert_id("straggler", a.run_id, 5, a.node, std::nullopt, 40));
  CHECK(make_alert_id(b, 40) != make_alert_id(a, 40));
  b = a;
  b.kind = alert_kind::kRankMissing;
  CHECK(make_alert_id(b, 40) != make_alert_id(a, 40));
}

}  // namespace
}  // namespace runlens
