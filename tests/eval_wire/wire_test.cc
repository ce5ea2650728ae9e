// eval/wire: every message of docs/eval-protocol.md round trips through its
// JSON; every class of malformed message is a DecodeError naming what is
// wrong (never a throw, never a crash, whatever the bytes).
#include "eval/wire/wire.h"

#include <doctest/doctest.h>

#include <random>

#include "eval/suite.h"

namespace runlens::eval::wire {
namespace {

WorkerMessage round_trip(const WorkerMessage& m) {
  DecodeError err;
  auto back = decode_worker_message(encode(m), &err);
  REQUIRE_MESSAGE(back.has_value(), err.error);
  CHECK(type_name(*back) == type_name(m));
  return *back;
}

ServiceMessage round_trip(const ServiceMessage& m) {
  DecodeError err;
  auto back = decode_service_message(encode(m), &err);
  REQUIRE_MESSAGE(back.has_value(), err.error);
  CHECK(type_name(*back) == type_name(m));
  return *back;
}

std::string worker_error(std::string_view bytes, std::string* about = nullptr) {
  DecodeError err;
  auto m = decode_worker_message(bytes, &err);
  CHECK_FALSE(m.has_value());
  if (about) *about = err.about;
  return err.error;
}

const char* kResult =
    R"({"type":"result","worker":"w1","evaluationId":"ev-1","shard":3,"attempt":1,)"
    R"("items":[{"item":30,"itemHash":"h","stats":[1,2,2],"responseHash":"r","latencyMs":2.5,"error":""},)"
    R"({"item":31,"stats":[0,1,2]}],"provenance":{"workerVersion":"wv","codeCommit":"c","libraries":{"torch":"1"}}})";

TEST_CASE("wire: worker messages round trip") {
  Hello h;
  h.worker = "w1";
  h.pool = "gpu";
  h.memory_mib = 4096;
  h.slots = 2;
  h.worker_version = "runlens-eval-worker-py/1";
  h.code_commit = "abc";
  h.libraries = {{"python", "3.11.2"}, {"torch", "1.13.1"}};
  h.evaluators = {"runlens-eval-classify-v1"};
  auto hb = std::get<Hello>(round_trip(h));
  CHECK(hb.worker == "w1");
  CHECK(hb.pool == "gpu");
  CHECK(hb.memory_mib == 4096);
  CHECK(hb.slots == 2);
  CHECK(hb.libraries == h.libraries);
  CHECK(hb.evaluators == h.evaluators);
  CHECK(hb.protocol == 1);

  Heartbeat beat{"w1", true, {"ck-a", "ck-b"}};
  auto bb = std::get<Heartbeat>(round_trip(beat));
  CHECK(bb.has_loaded);
  CHECK(bb.loaded == beat.loaded);
  CHECK_FALSE(std::get<Heartbeat>(round_trip(Heartbeat{"w1", false, {}})).has_loaded);

  Result r;
  r.worker = "w1";
  r.evaluation_id = "ev-1";
  r.shard = 3;
  r.attempt = 2;
  r.items = {{30, "ih", "rh", 1.5, ""}, {31, "ih2", "rh2", 0.25, "timeout"}};
  r.stats = {1, 2, 2, 0, 1, -0.5};
  r.stats_per_item = 3;
  r.provenance = {"wv/1", "c0ffee", {{"torch", "1.13.1"}}};
  auto rb = std::get<Result>(round_trip(r));
  CHECK(rb.shard == 3);
  CHECK(rb.attempt == 2);
  REQUIRE(rb.items.size() == 2);
  CHECK(rb.items[1].item == 31);
  CHECK(rb.items[1].error == "timeout");
  CHECK(rb.items[0].latency_ms == 1.5);
  CHECK(rb.stats == r.stats);
  CHECK(rb.stats_per_item == 3);
  CHECK(rb.provenance.worker_version == "wv/1");
  CHECK(rb.provenance.libraries == r.provenance.libraries);

  auto fb = std::get<Fail>(round_trip(Fail{"w1", "ev-1", 2, 1, "dataset hash differs", false}));
  CHECK(fb.reason == "dataset hash differs");
  CHECK_FALSE(fb.retryable);
  CHECK(std::get<Bye>(round_trip(Bye{"w9"})).worker == "w9");
}

TEST_CASE("wire: service messages round trip, the assignment from a parsed suite") {
  Suite s = parse_suite(R"(suite: s1
benchmark: b
version: "2026-12"
evaluator: ev-1
dataset: {id: d, version: "1", sha256: 46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a, path: /data/d.csv, items: 100, first_item: 7}
prompt: {template: "{x}", version: p1}
metrics:
  - accuracy
  - f1: {average: macro}
  - pass@k: {k: [1, 5]}
decoding: {temperature: 0.5, samples: 10}
partition_size: 10
priority: P1
workers: {pool: cpu, memory: 1GiB}
)",
                        "s1.yaml");
  Assign a;
  a.evaluation_id = "ev-1";
  a.shard = 4;
  a.attempt = 2;
  a.begin = 47;
  a.end = 57;
  a.model_version = "m:v1";
  a.checkpoint = {"ck", "file:///c.pt", std::string(64, 'a')};
  a.suite = suite_info(s);
  a.metrics = metric_infos(s);
  a.stride = 5;
  auto b = std::get<Assign>(round_trip(a));
  CHECK(b.begin == 47);
  CHECK(b.end == 57);
  CHECK(b.checkpoint.uri == "file:///c.pt");
  CHECK(b.suite.name == "s1");
  CHECK(b.suite.evaluator == "ev-1");
  CHECK(b.suite.dataset.path == "/data/d.csv");
  CHECK(b.suite.dataset.first_item == 7);
  CHECK(b.suite.dataset.items == 100);
  CHECK(b.suite.prompt.sha256 == s.prompt.sha256);
  CHECK(b.suite.decoding_json == R"({"samples":10,"temperature":0.5})");
  CHECK_FALSE(b.suite.judge.has_value());
  REQUIRE(b.metrics.size() == 3);
  CHECK(b.metrics[0].stats == 1);
  CHECK(b.metrics[1].args == std::vector<std::pair<std::string, std::string>>{{"average", "macro"}});
  CHECK(b.metrics[1].stats == 2);
  CHECK(b.metrics[2].k == std::vector<int64_t>{1, 5});
  CHECK(b.stride == 5);
  // The encoding is the document's: camelCase, items as [begin, end).
  const std::string text = encode(a);
  CHECK(text.find(R"("items":[47,57])") != std::string::npos);
  CHECK(text.find(R"("firstItem":7)") != std::string::npos);
  CHECK(text.find(R"("judge":null)") != std::string::npos);
  CHECK(text.find(R"("decoding":{"samples":10,"temperature":0.5})") != std::string::npos);

  auto w = std::get<Welcome>(round_trip(Welcome{1, 250, 2000}));
  CHECK(w.heartbeat_ms == 250);
  CHECK(w.timeout_ms == 2000);
  CHECK(std::get<Reregister>(round_trip(Reregister{"lost"})).reason == "lost");
  auto k = std::get<Ack>(round_trip(Ack{"ev-1", 3, 2, AckOutcome::kDuplicate, "done already"}));
  CHECK(k.outcome == AckOutcome::kDuplicate);
  CHECK(k.reason == "done already");
  auto e = std::get<Error>(round_trip(Error{"bad", "result"}));
  CHECK(e.about == "result");
}

TEST_CASE("wire: unknown members are ignored") {
  DecodeError err;
  auto m = decode_worker_message(R"({"type":"bye","worker":"w1","future":{"x":[1,2]}})", &err);
  REQUIRE(m.has_value());
  CHECK(std::get<Bye>(*m).worker == "w1");
}

TEST_CASE("wire: every class of malformed message is an error that says what is wrong") {
  std::string about;
  CHECK(worker_error("", &about).find("not JSON") == 0);
  CHECK(about == "");
  CHECK(worker_error("{\"type\":\"hello\"").find("not JSON") == 0);
  CHECK(worker_error("[1,2]") == "a message is a JSON object with a \"type\" member, got a list");
  CHECK(worker_error(R"({"worker":"w1"})") == "missing member 'type'");
  CHECK(worker_error(R"({"type":7})") == "member 'type' must be a string, got the number 7");
  CHECK(worker_error(R"({"type":"assign"})", &about) ==
        "unknown message type 'assign' (a worker sends hello, heartbeat, result, fail or bye)");
  CHECK(about == "assign");
  CHECK(worker_error(R"({"type":"hello","worker":"w1","workerVersion":"v"})", &about) ==
        "hello: missing member 'protocol'");
  CHECK(about == "hello");
  CHECK(worker_error(R"({"type":"hello","protocol":1,"worker":"w1","workerVersion":"v","slots":0})") ==
        "hello: member 'slots' must be between 1 and 1024, got 0");
  CHECK(worker_error(R"({"type":"hello","protocol":1,"worker":"w1","workerVersion":"v","pool":"tpu"})") ==
        "hello: member 'pool' must be \"cpu\" or \"gpu\", got \"tpu\"");
  CHECK(worker_error(R"({"type":"hello","protocol":1,"worker":"","workerVersion":"v"})") ==
        "hello: member 'worker' must not be empty");
  CHECK(worker_error(R"({"type":"heartbeat","worker":"w1","loaded":"ck"})") ==
        "heartbeat: member 'loaded' must be a list of strings, got a string");
  CHECK(worker_error(R"({"type":"fail","worker":"w1","evaluationId":"e","shard":1,"attempt":1})") ==
        "fail: missing member 'reason'");
  CHECK(worker_error(R"({"type":"bye"})") == "bye: missing member 'worker'");

  std::string r = kResult;
  DecodeError err;
  REQUIRE_MESSAGE(decode_worker_message(r, &err).has_value(), err.error);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = r;
    size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    s.replace(at, from.size(), to);
    return worker_error(s);
  };
  CHECK(with(R"("shard":3)", R"("shard":"3")") == "result: member 'shard' must be an integer, got a string");
  CHECK(with(R"("shard":3)", R"("shard":-1)") == "result: member 'shard' must be between 0 and 2147483647, got -1");
  CHECK(with(R"("shard":3)", R"("shard":3.5)") == "result: member 'shard' must be an integer, got the number 3.5");
  CHECK(with(R"("attempt":1)", R"("attempt":0)") == "result: member 'attempt' must be between 1 and 2147483647, got 0");
  CHECK(with(R"("items":[)", R"("items":7,"x":[)") ==
        "result: member 'items' must be a list of items, got the number 7");
  CHECK(with(R"({"item":31,)", R"({"itemz":31,)") == "result: missing member 'items[1].item'");
  CHECK(with(R"("item":31)", R"("item":-4)") ==
        "result: member 'items[1].item' must be between 0 and 1125899906842624, got -4");
  CHECK(with(R"("stats":[0,1,2])", R"("stats":[0,1])") == "result: items[1].stats has 2 numbers, items[0].stats has 3");
  CHECK(with(R"("stats":[0,1,2])", R"("stats":[0,"1",2])") ==
        "result: member 'items[1].stats[]' must be a number, got a string");
  CHECK(with(R"("stats":[0,1,2])", R"("stats":{})") ==
        "result: member 'items[1].stats' must be a list of numbers, got an object");
  CHECK(with(R"("latencyMs":2.5)", R"("latencyMs":"slow")") ==
        "result: member 'items[0].latencyMs' must be a number, got a string");
  CHECK(with(R"("itemHash":"h")", R"("itemHash":5)") ==
        "result: member 'items[0].itemHash' must be a string, got the number 5");
  CHECK(with(R"("provenance":{"workerVersion":"wv",)", R"("provenance":{)") ==
        "result: provenance: missing member 'workerVersion'");
  CHECK(with(R"("libraries":{"torch":"1"})", R"("libraries":{"torch":1})") ==
        "result: provenance: member 'libraries.torch' must be a version string, got the number 1");
  CHECK(with(R"(,"provenance":{"workerVersion":"wv","codeCommit":"c","libraries":{"torch":"1"}})", "") ==
        "result: missing member 'provenance'");
  // NaN statistics decode (the aggregator rejects them with the item named).
  std::string nan = r;
  nan.replace(nan.find("[0,1,2]"), 7, "[NaN,1,2]");
  CHECK(decode_worker_message(nan, &err).has_value());
}

TEST_CASE("wire: random and truncated bytes never crash the decoder") {
  std::mt19937 rng(7);
  const std::string r = kResult;
  DecodeError err;
  for (size_t cut = 0; cut < r.size(); ++cut) {
    auto m = decode_worker_message(std::string_view(r).substr(0, cut), &err);
    CHECK_FALSE(m.has_value());
    CHECK_FALSE(err.error.empty());
  }
  int decoded = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = r;
    for (int k = 0; k < 3; ++k) s[rng() % s.size()] = static_cast<char>(rng() % 256);
    if (decode_worker_message(s, &err)) ++decoded;
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng() % 256);
    decode_worker_message(junk, &err);
    decode_service_message(junk, &err);
  }
  MESSAGE(decoded << " of 3000 mutated results still decoded");
  std::string deep(200, '[');
  CHECK_FALSE(decode_worker_message(deep, &err).has_value());
}

}  // namespace
}  // namespace runlens::eval::wire
