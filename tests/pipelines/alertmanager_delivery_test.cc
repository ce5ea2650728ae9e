// The alertmanager sink's delivery without a server: labels and annotations,
// owners, revisions, and the bounded queue's drops by severity.
#include <doctest/doctest.h>

#include "connectors/sinks/alertmanager_sink.h"
#include "formats/json_reader.h"

namespace runlens {
namespace {

using connectors::AlertmanagerDelivery;
using connectors::AlertmanagerOptions;

Alert make(std::string id, std::string_view kind, Severity sev, int32_t rank = 3) {
  Alert a;
  a.alert_id = std::move(id);
  a.kind = kind;
  a.severity = sev;
  a.time_ns = 1'764'000'000'000'000'000;  // 2025-11-24T16:00:00Z
  a.run_id = Symbol::intern("run-a");
  a.rank = rank;
  a.node = Symbol::intern("node-1");
  a.gpu = 2;
  a.value = 2.5;
  a.threshold = 1.5;
  a.summary = std::string(kind) + " " + a.alert_id;
  return a;
}

AlertmanagerOptions no_server(int64_t queue) {
  AlertmanagerOptions o;
  o.url = "http://127.0.0.1:1";  // never started: nothing is delivered
  o.queue = queue;
  return o;
}

json::Value parse(const std::string& text) {
  json::Value v;
  json::ParseError pe;
  REQUIRE_MESSAGE(json::parse(text, &v, &pe), text);
  REQUIRE(v.type == json::Value::Type::kArray);
  return v;
}

std::string str(const json::Value& obj, std::string_view a, std::string_view b) {
  const json::Value* x = obj.find(a);
  REQUIRE(x);
  const json::Value* y = x->find(b);
  return y && y->type == json::Value::Type::kString ? y->text : "<none>";
}

}  // namespace

TEST_CASE("an alert's labels are what names its incident, its annotations what a revision may change") {
  runtime::DeliveryCounters c;
  AlertmanagerDelivery d(no_server(100), &c);
  d.run_start(Symbol::intern("run-a"), Symbol::intern("job-7"));
  d.offer(make("a1", alert_kind::kStraggler, Severity::kWarning));
  json::Value v = parse(d.pending_json());
  REQUIRE(v.items.size() == 1);
  const json::Value& a = v.items[0];
  CHECK(str(a, "labels", "alertname") == "straggler");
  CHECK(str(a, "labels", "severity") == "warning");
  CHECK(str(a, "labels", "alert_id") == "a1");
  CHECK(str(a, "labels", "run_id") == "run-a");
  CHECK(str(a, "labels", "job_id") == "job-7");
  CHECK(str(a, "labels", "node") == "node-1");
  CHECK(str(a, "labels", "gpu") == "2");
  CHECK(str(a, "labels", "rank") == "3");
  CHECK(str(a, "labels", "owner") == "infrastructure");
  CHECK(str(a, "annotations", "summary") == "straggler a1");
  CHECK(str(a, "annotations", "value") == "2.5");
  CHECK(str(a, "annotations", "threshold") == "1.5");
  CHECK(str(a, "annotations", "revision") == "0");
  CHECK(str(a, "annotations", "link") == "http://127.0.0.1:8080/runs/run-a");
  REQUIRE(a.find("startsAt"));
  CHECK(a.find("startsAt")->text == "2025-11-24T16:00:00.000Z");
  CHECK(a.find("endsAt") == nullptr);
  CHECK(a.find("generatorURL")->text == "http://127.0.0.1:8080/runs/run-a");
  CHECK(c.accepted.load() == 1);

  // Its closing revision: the same labels, endsAt at ends_ns.
  Alert closed = make("a1", alert_kind::kStraggler, Severity::kWarning);
  closed.revision = 1;
  closed.ends_ns = closed.time_ns + 12'345'000'000;
  d.offer(closed);
  // A late, lower revision changes nothing.
  d.offer(make("a1", alert_kind::kStraggler, Severity::kWarning));
  v = parse(d.pending_json());
  REQUIRE(v.items.size() == 1);
  CHECK(v.items[0].find("endsAt")->text == "2025-11-24T16:00:12.345Z");
  CHECK(str(v.items[0], "annotations", "revision") == "1");
  CHECK(d.held() == 1);
}

TEST_CASE("a diagnosis naming another owner resolves the symptom's old label set and re-sends it with the new owner") {
  AlertmanagerDelivery d(no_server(100), nullptr);
  d.offer(make("s1", alert_kind::kStraggler, Severity::kWarning));
  Alert diag = make("d1", alert_kind::kDiagnosis, Severity::kInfo);
  diag.owner = "data";
  diag.cause = "data_pipeline";
  diag.evidence = {{"straggler", 12, "STRAGGLER ...", "s1"}, {"signal", 12, "data_wait_ratio 0.4", ""}};
  d.offer(diag);
  json::Value v = parse(d.pending_json());
  REQUIRE(v.items.size() == 3);  // d1, s1 (owner data), s1's old label set (infrastructure, resolved)
  int firing_data = 0, resolved_infra = 0, diagnosis = 0;
  for (const auto& a : v.items) {
    std::string name = str(a, "labels", "alertname"), owner = str(a, "labels", "owner");
    if (name == "diagnosis") {
      ++diagnosis;
      CHECK(owner == "data");
      CHECK(str(a, "annotations", "cause") == "data_pipeline");
      CHECK(str(a, "annotations", "evidence") ==
            "straggler (step 12): STRAGGLER ...\nsignal (step 12): data_wait_ratio 0.4");
    } else if (owner == "data") {
      ++firing_data;
      CHECK(a.find("endsAt") == nullptr);
    } else if (owner == "infrastructure") {
      ++resolved_infra;
      CHECK(a.find("endsAt") != nullptr);
    }
  }
  CHECK(diagnosis == 1);
  CHECK(firing_data == 1);
  CHECK(resolved_infra == 1);
  // A symptom that arrives after its diagnosis takes the diagnosis's owner at once.
  Alert later = make("s2", alert_kind::kStraggler, Severity::kWarning, 5);
  diag.revision = 1;
  diag.evidence.push_back({"straggler", 14, "STRAGGLER rank 5", "s2"});
  d.offer(diag);
  d.offer(later);
  v = parse(d.pending_json());
  for (const auto& a : v.items) {
    if (str(a, "labels", "alert_id") == "s2") CHECK(str(a, "labels", "owner") == "data");
  }
}

TEST_CASE("a full queue drops info first, then warning, critical last, counted by severity") {
  runtime::DeliveryCounters c;
  AlertmanagerDelivery d(no_server(3), &c);
  d.offer(make("w1", alert_kind::kStraggler, Severity::kWarning));
  d.offer(make("i1", alert_kind::kDiagnosis, Severity::kInfo));
  d.offer(make("c1", alert_kind::kXidError, Severity::kCritical));
  CHECK(d.held() == 3);
  d.offer(make("c2", alert_kind::kEccUncorrected, Severity::kCritical));  // evicts i1
  CHECK(c.dropped[0].load() == 1);
  d.offer(make("i2", alert_kind::kDiagnosis, Severity::kInfo));  // less severe than all held: itself dropped
  CHECK(c.dropped[0].load() == 2);
  d.offer(make("c3", alert_kind::kXidError, Severity::kCritical));  // evicts w1
  CHECK(c.dropped[1].load() == 1);
  d.offer(make("c4", alert_kind::kXidError, Severity::kCritical));  // evicts the oldest critical, c1
  CHECK(c.dropped[2].load() == 1);
  json::Value v = parse(d.pending_json());
  std::vector<std::string> ids;
  for (const auto& a : v.items) ids.push_back(str(a, "labels", "alert_id"));
  CHECK(ids == std::vector<std::string>{"c2", "c3", "c4"});
  CHECK(c.accepted.load() == 6);
  // Nothing listens: the flush gives up within its bound and says what is left.
  d.start();
  auto t0 = std::chrono::steady_clock::now();
  CHECK(d.flush(300'000'000) == 3);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
  CHECK(c.undelivered.load() == 3);
  CHECK(c.post_errors.load() >= 1);
  CHECK(c.posts.load() == 0);
}

TEST_CASE("event-like kinds resolve after the hold; a run's end resolves what it left active") {
  AlertmanagerOptions o = no_server(100);
  AlertmanagerDelivery d(o, nullptr);
  d.offer(make("x1", alert_kind::kXidError, Severity::kCritical));
  d.offer(make("s1", alert_kind::kStraggler, Severity::kWarning));
  d.run_end(Symbol::intern("run-a"), make("", "", Severity::kInfo).time_ns + 60'000'000'000);
  json::Value v = parse(d.pending_json());
  REQUIRE(v.items.size() == 2);
  for (const auto& a : v.items) CHECK(a.find("endsAt")->text == "2025-11-24T16:01:00.000Z");
}

TEST_CASE("the link names the run as a URL path segment, whatever its run_id") {
  AlertmanagerOptions o = no_server(10);
  o.link = "http://portal/runs/{run_id}#{alert_id}";
  AlertmanagerDelivery d(o, nullptr);
  Alert a = make("a1", alert_kind::kStraggler, Severity::kWarning);
  a.run_id = Symbol::intern("exp 7/run#3");
  d.offer(a);
  json::Value v = parse(d.pending_json());
  REQUIRE(v.items.size() == 1);
  CHECK(str(v.items[0], "annotations", "link") == "http://portal/runs/exp%207%2Frun%233#a1");
  CHECK(str(v.items[0], "labels", "run_id") == "exp 7/run#3");
}

TEST_CASE("the sink's url must be an http URL") {
  std::string origin, prefix, why;
  CHECK(connectors::split_http_url("http://127.0.0.1:9093/am/", &origin, &prefix, &why));
  CHECK(origin == "http://127.0.0.1:9093");
  CHECK(prefix == "/am");
  CHECK_FALSE(connectors::split_http_url("127.0.0.1:9093", &origin, &prefix, &why));
  CHECK(why == "expected an http:// URL, got '127.0.0.1:9093'");
}

}  // namespace runlens
