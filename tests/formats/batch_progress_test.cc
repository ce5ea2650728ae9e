// Contract v2's producer progress on Batch (producer, seq, watermarkNs,
// final): it round-trips through the codec, a batch without it (an old
// sender's, or one built with the v1 fields only) decodes with an empty
// producer and the same events, and a corrupt message leaves no progress behind.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "formats/capnp_codec.h"
#include "schema/telemetry.capnp.h"
#include "tests/formats/sample_events.h"

using namespace runlens;

TEST_CASE("batch progress round-trips with the events") {
  auto rows = test::sample_records();
  capnpc::BatchProgress p{"run-1/3/host/42.1.ab", 17, 1'767'225'600'123'456'789, true};
  std::string bytes = capnpc::encode_batch(rows, &p);
  std::vector<Record> out;
  std::vector<capnpc::EventIssue> issues;
  std::string error;
  capnpc::BatchProgress got;
  REQUIRE(capnpc::decode_batch(bytes.data(), bytes.size(), &out, &issues, &error, &got));
  CHECK(got.producer == p.producer);
  CHECK(got.seq == 17);
  CHECK(got.watermark_ns == p.watermark_ns);
  CHECK(got.final);
  CHECK(out.size() == rows.size());
  CHECK(issues.empty());
  // An empty batch carries progress too (a final batch with nothing left).
  std::string empty = capnpc::encode_batch(nullptr, 0, &p);
  out.clear();
  REQUIRE(capnpc::decode_batch(empty.data(), empty.size(), &out, &issues, &error, &got));
  CHECK(out.empty());
  CHECK(got.seq == 17);
}

TEST_CASE("a batch of an old sender (no producer) decodes as before, with no progress") {
  auto rows = test::sample_records();
  // Built with the v1 fields only, as a v1 sender's code would.
  std::vector<std::string> candidates{capnpc::encode_batch(rows)};
  {
    capnp::MallocMessageBuilder message;
    auto batch = message.initRoot<wire::Batch>();
    batch.setSchemaVersion(1);
    batch.initEvents(0);
    auto words = capnp::messageToFlatArray(message);
    candidates.emplace_back(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size());
  }
  for (const auto& bytes : candidates) {
    std::vector<Record> out;
    std::vector<capnpc::EventIssue> issues;
    std::string error;
    capnpc::BatchProgress got{"stale", 9, 9, true};
    REQUIRE(capnpc::decode_batch(bytes.data(), bytes.size(), &out, &issues, &error, &got));
    CHECK(got.producer.empty());
    CHECK(got.seq == 0);
    CHECK_FALSE(got.final);
  }
  // The events are the same with progress and without.
  std::string without = capnpc::encode_batch(rows), with;
  capnpc::BatchProgress p{"x", 1, 2, false};
  with = capnpc::encode_batch(rows, &p);
  std::vector<Record> a, b;
  std::vector<capnpc::EventIssue> issues;
  std::string error;
  REQUIRE(capnpc::decode_batch(with.data(), with.size(), &a, &issues, &error));
  REQUIRE(capnpc::decode_batch(without.data(), without.size(), &b, &issues, &error));
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].time_ns == b[i].time_ns);
    CHECK(content_hash(a[i]) == content_hash(b[i]));
  }
}

TEST_CASE("a corrupt message leaves no progress behind") {
  capnpc::BatchProgress p{"p", 3, 4, false};
  std::string bytes = capnpc::encode_batch(test::sample_records(), &p);
  bytes.resize(bytes.size() / 2 / 8 * 8);
  std::vector<Record> out;
  std::vector<capnpc::EventIssue> issues;
  std::string error;
  capnpc::BatchProgress got{"stale", 9, 9, true};
  CHECK_FALSE(capnpc::decode_batch(bytes.data(), bytes.size(), &out, &issues, &error, &got));
  CHECK(got.producer.empty());
  CHECK(out.empty());
  CHECK(error.find("corrupt") != std::string::npos);
}
