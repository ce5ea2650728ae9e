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

TEST_CASE("training alert ids are those of contract v1, byte for byte") {
  // Pinned: contract v2 adds locators but must not change a training alert's id.
  CHECK(make_alert_id("straggler", Symbol::intern("pretrain-4821"), 13, Symbol::intern("gpu-node-1"), 5, 100) ==
        "ff6905e0a095d878");
  Alert a;
  a.kind = alert_kind::kStraggler;
  a.run_id = Symbol::intern("pretrain-4821");
  a.rank = 13;
  a.node = Symbol::intern("gpu-node-1");
  a.gpu = 5;
  a.model_id = "m";  // an evaluation locator on a training kind does not enter its id
  CHECK(make_alert_id(a, 100) == "ff6905e0a095d878");
}

TEST_CASE("evaluation alert ids hash kind, model, version, evaluation and metric") {
  const std::string id = make_evaluation_alert_id("benchmark_regression", "digits-mlp", "v2", "ev-1", "accuracy");
  CHECK(id.size() == 16);
  CHECK(id == make_evaluation_alert_id("benchmark_regression", "digits-mlp", "v2", "ev-1", "accuracy"));
  CHECK(id == "e08ec6e4c2cc2198");  // pinned: a stored id must stay valid across builds
  CHECK(id != make_evaluation_alert_id("safety_regression", "digits-mlp", "v2", "ev-1", "accuracy"));
  CHECK(id != make_evaluation_alert_id("benchmark_regression", "digits-mlp2", "v2", "ev-1", "accuracy"));
  CHECK(id != make_evaluation_alert_id("benchmark_regression", "digits-mlp", "v3", "ev-1", "accuracy"));
  CHECK(id != make_evaluation_alert_id("benchmark_regression", "digits-mlp", "v2", "ev-2", "accuracy"));
  CHECK(id != make_evaluation_alert_id("benchmark_regression", "digits-mlp", "v2", "ev-1", "f1"));
  // The separators keep the parts apart.
  CHECK(make_evaluation_alert_id("k", "ab", "c", "e", "m") != make_evaluation_alert_id("k", "a", "bc", "e", "m"));
}

}  // namespace
}  // namespace runlens
