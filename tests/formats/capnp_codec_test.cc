// connectors/capnp_codec: Records <-> Cap'n Proto Batch messages. The wire
// form must carry exactly what JSONL carries (JSONL -> Record -> Cap'n Proto
// -> Record -> JSONL is the identity), bad events are reported by index while
// the rest decode, and no message, however broken, crashes the decoder.
#include "formats/capnp_codec.h"

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "formats/jsonl_codec.h"
#include "schema/alert.h"
#include "schema/telemetry.capnp.h"
#include "tests/formats/sample_events.h"

// Prints vectors of lines in failure messages (doctest shows them as {?}).
namespace doctest {
template <>
struct StringMaker<std::vector<std::string>> {
  static String convert(const std::vector<std::string>& v) {
    std::string s = "{";
    for (const auto& x : v) s += "\n  " + x;
    s += v.empty() ? "}" : "\n}";
    return String(s.c_str());
  }
};
}  // namespace doctest

namespace runlens::capnpc {
namespace {

using test::kSampleLines;
using test::sample_records;

struct Decoded {
  bool ok = false;
  std::vector<Record> rows;
  std::vector<EventIssue> issues;
  std::string error;
};

Decoded decode(const std::string& bytes) {
  Decoded d;
  d.ok = decode_batch(bytes.data(), bytes.size(), &d.rows, &d.issues, &d.error);
  return d;
}

std::string bytes_of(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// A builder holding a copy of an encoded batch, to edit.
struct EditableBatch {
  explicit EditableBatch(const std::string& bytes) {
    REQUIRE(bytes.size() % 8 == 0);
    words = kj::heapArray<capnp::word>(bytes.size() / 8);
    std::memcpy(words.begin(), bytes.data(), bytes.size());
    capnp::FlatArrayMessageReader reader(words);
    builder.setRoot(reader.getRoot<wire::Batch>());
  }
  wire::Batch::Builder batch() { return builder.getRoot<wire::Batch>(); }
  wire::Event::Builder event(unsigned i) { return batch().getEvents()[i]; }
  std::string bytes() { return bytes_of(builder); }

  kj::Array<capnp::word> words;
  capnp::MallocMessageBuilder builder;
};

// Applies `f` to the presence mask of an event's body.
template <class F>
void edit_present(wire::Event::Builder ev, F f) {
#define RL_EDIT_(W, get)             \
  case wire::Event::W: {             \
    auto b = ev.get();               \
    b.setPresent(f(b.getPresent())); \
    return;                          \
  }
  switch (ev.which()) {
    RL_EDIT_(RUN_START, getRunStart)
    RL_EDIT_(STEP, getStep)
    RL_EDIT_(TRAIN, getTrain)
    RL_EDIT_(GPU, getGpu)
    RL_EDIT_(NODE, getNode)
    RL_EDIT_(COLLECTIVE, getCollective)
    RL_EDIT_(DATA, getData)
    RL_EDIT_(CHECKPOINT, getCheckpoint)
    RL_EDIT_(EVENT, getEvent)
    RL_EDIT_(RUN_END, getRunEnd)
  }
#undef RL_EDIT_
  FAIL("unknown union member");
}

std::vector<std::string> lines_of(const std::vector<Record>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(jsonl::encode_record(r));
  return out;
}

std::vector<std::string> sample_lines() { return {std::begin(kSampleLines), std::end(kSampleLines)}; }

TEST_CASE("capnp: JSONL -> Record -> Cap'n Proto -> Record -> JSONL is the identity for every type") {
  std::vector<Record> recs = sample_records();
  // All samples in one batch.
  Decoded d = decode(encode_batch(recs));
  REQUIRE(d.ok);
  CHECK(d.issues.empty());
  CHECK(lines_of(d.rows) == sample_lines());
  // Each sample alone.
  for (size_t i = 0; i < recs.size(); ++i) {
    CAPTURE(kSampleLines[i]);
    Decoded one = decode(encode_batch(&recs[i], 1));
    REQUIRE(one.ok);
    REQUIRE(one.rows.size() == 1u);
    CHECK(jsonl::encode_record(one.rows[0]) == kSampleLines[i]);
    CHECK(content_hash(one.rows[0]) == content_hash(recs[i]));
    CHECK(compare_canonical(one.rows[0], recs[i]) == 0);
  }
  // Encoding is deterministic.
  CHECK(encode_batch(recs) == encode_batch(recs));
}

TEST_CASE("capnp: a record with only its required fields round-trips with the others absent") {
  for (const Record& full : sample_records()) {
    const BodyInfo& info = body_info(full.kind());
    // Rebuild the line with the required fields only, through JSONL.
    std::string line = jsonl::encode_record(full);
    json::Value obj;
    json::ParseError pe;
    REQUIRE(json::parse(line, &obj, &pe));
    std::erase_if(obj.members, [&](const auto& m) {
      for (int i = 0; i < info.field_count; ++i) {
        if (info.fields[i].name == m.first) return !info.fields[i].required;
      }
      return false;  // the envelope
    });
    Record minimal;
    std::string why;
    REQUIRE(jsonl::decode_record(obj, &minimal, &why));
    Decoded d = decode(encode_batch(&minimal, 1));
    REQUIRE(d.ok);
    REQUIRE(d.rows.size() == 1u);
    CHECK(jsonl::encode_record(d.rows[0]) == jsonl::encode_record(minimal));
  }
}

TEST_CASE("capnp: values JSONL cannot tell apart survive the wire bit for bit") {
  Train t;
  t.run_id = Symbol::intern("r");
  t.step = INT64_MIN;
  t.rank = INT32_MAX;
  t.loss = std::numeric_limits<double>::quiet_NaN();
  t.val_loss = -0.0;
  t.lr = std::numeric_limits<double>::denorm_min();
  t.grad_norm = -std::numeric_limits<double>::infinity();
  t.weight_norm = std::numeric_limits<double>::max();
  t.nan_count = INT64_MAX;
  t.present = (1u << static_cast<unsigned>(Train::F::kCount)) - 1u;
  t.clear(Train::F::inf_count);
  Record r;
  r.time_ns = INT64_MIN;
  r.tenant = Symbol::intern("tenant with spaces / and \"quotes\"");
  r.body = t;
  Decoded d = decode(encode_batch(&r, 1));
  REQUIRE(d.ok);
  REQUIRE(d.rows.size() == 1u);
  const Train& back = d.rows[0].as<Train>();
  CHECK(d.rows[0].time_ns == INT64_MIN);
  CHECK(d.rows[0].tenant == r.tenant);
  CHECK(back.present == t.present);
  CHECK(back.step == INT64_MIN);
  CHECK(back.rank == INT32_MAX);
  CHECK(back.nan_count == INT64_MAX);
  using Pair = std::pair<double, double>;
  for (auto [got, want] : {Pair{back.loss, t.loss}, Pair{back.val_loss, t.val_loss}, Pair{back.lr, t.lr},
                           Pair{back.grad_norm, t.grad_norm}, Pair{back.weight_norm, t.weight_norm}}) {
    CHECK(std::bit_cast<uint64_t>(got) == std::bit_cast<uint64_t>(want));
  }
  CHECK(content_hash(d.rows[0]) == content_hash(r));

  // Config values and ranks, including an empty config and unknown placement.
  RunStart rs;
  rs.run_id = Symbol::intern("r");
  rs.world_size = 0;
  rs.config = {{"nan", Value::of(std::numeric_limits<double>::quiet_NaN())},
               {"s", Value::of(std::string(""))},
               {"", Value::of(1.0)}};
  rs.ranks = {{0, Symbol(), -1}, {-5, Symbol::intern("n"), 7}};
  rs.present = 0;
  for (auto f : {RunStart::F::run_id, RunStart::F::world_size, RunStart::F::config, RunStart::F::ranks})
    rs.set_present(f);
  Record rr;
  rr.body = std::make_shared<const RunStart>(rs);
  Decoded d2 = decode(encode_batch(&rr, 1));
  REQUIRE(d2.ok);
  REQUIRE(d2.rows.size() == 1u);
  CHECK(d2.rows[0].run_start() == rs);  // Value == compares number bits
}

TEST_CASE("capnp: derived rows are skipped, decoded rows are appended, empty batches are fine") {
  std::vector<Record> recs = sample_records();
  Alert a;
  a.alert_id = "0123456789abcdef", a.kind = "straggler", a.time_ns = 3;
  std::vector<Record> mixed = {recs[1], alert_record(a), recs[2]};
  Decoded d = decode(encode_batch(mixed));
  REQUIRE(d.ok);
  CHECK(lines_of(d.rows) == std::vector<std::string>{std::string(kSampleLines[1]), std::string(kSampleLines[2])});

  std::vector<Record> out = {recs[0]};
  std::vector<EventIssue> issues;
  std::string error;
  std::string bytes = encode_batch(&recs[3], 1);
  REQUIRE(decode_batch(bytes.data(), bytes.size(), &out, &issues, &error));
  CHECK(lines_of(out) == std::vector<std::string>{std::string(kSampleLines[0]), std::string(kSampleLines[3])});

  Decoded empty = decode(encode_batch(nullptr, 0));
  CHECK(empty.ok);
  CHECK(empty.rows.empty());
  CHECK(empty.issues.empty());
}

TEST_CASE("capnp: a buffer that is not word-aligned decodes the same") {
  std::string bytes = encode_batch(sample_records());
  for (size_t shift = 1; shift < 8; ++shift) {
    std::string buf(shift, '\0');
    buf += bytes;
    std::vector<Record> rows;
    std::vector<EventIssue> issues;
    std::string error;
    REQUIRE(decode_batch(buf.data() + shift, bytes.size(), &rows, &issues, &error));
    CHECK(lines_of(rows) == sample_lines());
  }
}

TEST_CASE("capnp: an event missing a required field is reported by index; the rest decode") {
  std::vector<Record> recs = sample_records();
  const std::string good = encode_batch(recs);
  int checked = 0;
  for (unsigned i = 0; i < recs.size(); ++i) {
    const BodyInfo& info = body_info(recs[i].kind());
    for (int bit = 0; bit < info.field_count; ++bit) {
      if (!info.fields[bit].required) continue;
      std::string name(info.fields[bit].name);
      CAPTURE(kSampleLines[i]);
      CAPTURE(name);
      EditableBatch eb(good);
      edit_present(eb.event(i), [bit](uint32_t p) { return p & ~(1u << bit); });
      Decoded d = decode(eb.bytes());
      REQUIRE(d.ok);
      REQUIRE(d.issues.size() == 1u);
      CHECK(d.issues[0].index == i);
      CHECK(d.issues[0].reason == "missing required field '" + name + "'");
      std::vector<std::string> want = sample_lines();
      want.erase(want.begin() + i);
      CHECK(lines_of(d.rows) == want);
      ++checked;
    }
  }
  CHECK(checked >= 19);

  // Several bad events in one batch: every index is reported, in order.
  EditableBatch eb(good);
  for (unsigned i : {0u, 4u, 10u}) edit_present(eb.event(i), [](uint32_t) { return 0u; });
  Decoded d = decode(eb.bytes());
  REQUIRE(d.ok);
  REQUIRE(d.issues.size() == 3u);
  CHECK(d.issues[0].index == 0u);
  CHECK(d.issues[1].index == 4u);
  CHECK(d.issues[2].index == 10u);
  CHECK(d.rows.size() == recs.size() - 3);
}

TEST_CASE("capnp: presence bits beyond the known fields are ignored") {
  std::vector<Record> recs = sample_records();
  EditableBatch eb(encode_batch(recs));
  for (unsigned i = 0; i < recs.size(); ++i)
    edit_present(eb.event(i), [](uint32_t p) { return p | 0x80000000u | (1u << 25); });
  Decoded d = decode(eb.bytes());
  REQUIRE(d.ok);
  CHECK(d.issues.empty());
  CHECK(lines_of(d.rows) == sample_lines());
}

TEST_CASE("capnp: an unknown event body (a newer schema) is an issue, not a failure") {
  std::vector<Record> recs = sample_records();
  EditableBatch eb(encode_batch(recs));
  auto event_schema = capnp::Schema::from<wire::Event>().getProto().getStruct();
  capnp::AnyStruct::Builder any(eb.event(2));
  auto data = any.getDataSection();
  size_t at = event_schema.getDiscriminantOffset() * 2u;
  REQUIRE(at + 2 <= data.size());
  data[at] = 99;  // discriminant 99: no such member in this schema
  data[at + 1] = 0;
  Decoded d = decode(eb.bytes());
  REQUIRE(d.ok);
  REQUIRE(d.issues.size() == 1u);
  CHECK(d.issues[0].index == 2u);
  CHECK(d.issues[0].reason.find("unknown event type") != std::string::npos);
  CHECK(d.rows.size() == recs.size() - 1);
}

TEST_CASE("capnp: schema versions") {
  std::vector<Record> recs = sample_records();
  struct Case {
    uint16_t version;
    bool ok;
  };
  for (Case c : {Case{0, false}, Case{1, true}, Case{2, true}, Case{65535, true}}) {
    CAPTURE(c.version);
    EditableBatch eb(encode_batch(recs));
    eb.batch().setSchemaVersion(c.version);
    Decoded d = decode(eb.bytes());
    CHECK(d.ok == c.ok);
    if (c.ok) {
      CHECK(lines_of(d.rows) == sample_lines());
    } else {
      CHECK(d.error.find("schemaVersion is 0") != std::string::npos);
      CHECK(d.rows.empty());
    }
  }
  // A message that is Cap'n Proto but not a batch: a Value whose union tag
  // reads as a schema version and whose text reads as a list of 6 empty events.
  capnp::MallocMessageBuilder other;
  other.initRoot<wire::Value>().setText("hello");
  Decoded d = decode(bytes_of(other));
  CHECK(d.rows.empty());
  CHECK((!d.ok || d.issues.size() == 6u));
}

TEST_CASE("capnp: buffers that are not Cap'n Proto messages") {
  struct Case {
    std::string bytes;
    std::string error;
  };
  const Case cases[] = {
      {"", "size 0 is not a multiple of 8"},
      {"abc", "size 3 is not a multiple of 8"},
      {std::string(12, '\0'), "size 12 is not a multiple of 8"},
      {std::string(8, '\0'), ""},           // one empty segment: no root
      {std::string(8, '\xff'), "corrupt"},  // 2^32 segments
      {"RUNLENSR" + std::string(8, '\0'), "corrupt"},
      {"{\"type\":\"step\",\"time_ns\":1}     ", "corrupt"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.bytes);
    Decoded d = decode(c.bytes);
    CAPTURE(d.error);
    CHECK_FALSE(d.ok);
    CHECK(d.rows.empty());
    CHECK(d.error.find(c.error) != std::string::npos);
  }
}

TEST_CASE("capnp: every truncation of a valid batch is refused without a crash") {
  const std::string bytes = encode_batch(sample_records());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    Decoded d;
    REQUIRE_NOTHROW(d = decode(bytes.substr(0, cut)));
    if (d.ok) FAIL_CHECK("a batch cut to ", cut, " of ", bytes.size(), " bytes was accepted");
    if (d.error.empty()) FAIL_CHECK("no error for a cut at ", cut);
  }
}

TEST_CASE("capnp: random bytes and random mutations never crash") {
  std::mt19937 rng(4242);
  int accepted = 0, refused = 0;
  auto run = [&](const std::string& buf) {
    Decoded d;
    try {
      d = decode(buf);
    } catch (...) {
      FAIL_CHECK("decode_batch threw on ", buf.size(), " bytes");
      return;
    }
    (d.ok ? accepted : refused) += 1;
    if (d.ok) {
      // Whatever decoded is a well-formed contract record that JSONL can carry.
      for (const Record& r : d.rows) {
        Record back;
        std::string why;
        if (!jsonl::decode_record(jsonl::encode_record(r), &back, &why))
          FAIL_CHECK("decoded record does not re-read: ", why);
      }
    } else if (d.error.empty()) {
      FAIL_CHECK("refused without an error");
    }
  };
  // Random words behind a plausible one-segment table, so the reader follows random pointers.
  for (int i = 0; i < 3000; ++i) {
    size_t words = 1 + rng() % 32;
    std::string buf(8 * (words + 1), '\0');
    uint32_t seg_words = static_cast<uint32_t>(words);
    std::memcpy(&buf[4], &seg_words, 4);
    for (size_t j = 8; j < buf.size(); ++j) buf[j] = static_cast<char>(rng() % 3 ? rng() & 0xff : 0);
    run(buf);
  }
  // Entirely random buffers.
  for (int i = 0; i < 1000; ++i) {
    std::string buf(8 * (rng() % 16), '\0');
    for (char& ch : buf) ch = static_cast<char>(rng() & 0xff);
    run(buf);
  }
  // A valid batch with a few bytes changed.
  const std::string good = encode_batch(sample_records());
  for (int i = 0; i < 3000; ++i) {
    std::string buf = good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) buf[rng() % buf.size()] ^= static_cast<char>(1 + rng() % 255);
    run(buf);
  }
  CHECK(accepted > 0);
  CHECK(refused > 0);
}

// A 40-byte message whose event list claims 2^29 - 1 (the most a list can
// hold) zero-sized events: Cap'n Proto lets a list of empty structs be any
// length, charging one word per element to the traversal limit, which
// decode_batch sets to 2^30 words.
std::string amplified_batch() {
  uint64_t w[5] = {};
  w[0] = uint64_t{4} << 32;                          // one segment of 4 words
  w[1] = (uint64_t{1} << 32) | (uint64_t{1} << 48);  // root: struct, 1 data word, 1 pointer
  w[2] = 1;                                          // schemaVersion = 1
  w[3] = 1 | (uint64_t{7} << 32);                    // events: inline-composite list of 0 words
  w[4] = ((uint64_t{1} << 29) - 1) << 2;             // tag: 2^29 - 1 elements, 0 data + 0 pointers
  return std::string(reinterpret_cast<const char*>(w), sizeof w);
}

TEST_CASE("capnp: a tiny message cannot make the decoder produce millions of events") {
  // Regression test, fixed (was: formats/capnp_codec.cc, decode_batch): traversalLimitInWords is
  // a fixed 2^30 words, so a 40-byte message may declare 2^29 - 1 zero-sized
  // events. decode_batch then calls out->reserve(2^29) (~110 GB of Records):
  // std::bad_alloc, which is not a kj::Exception, escapes decode_batch and
  // the ZeroMQ source or the recording reader that called it. With 2^26
  // events instead the reserve succeeds and the call takes ~26 s and ~6 GB
  // to report 67M EventIssues, all from 40 bytes (max_frame_bytes does not
  // help). The same holds for config and ranks lists inside a run_start.
  // Fix: bound the traversal limit by the message size (e.g. 4 * size/8 +
  // 1024 words), refuse an event count above size/8 before reserving, and
  // catch std::exception as well as kj::Exception.
  std::string bytes = amplified_batch();
  Decoded d;
  REQUIRE_NOTHROW(d = decode(bytes));
  CHECK(d.rows.size() + d.issues.size() <= bytes.size() / 8);
}

TEST_CASE("capnp: rank entries' gpu_model and node_type cross the wire; absent ones are not written") {
  const std::string line =
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0,"node":"n0","gpu":0,)"
      R"("gpu_model":"NVIDIA H100 80GB HBM3","node_type":"p5.48xlarge"},{"rank":1,"node":"n1","gpu":1}]})";
  Record rec;
  std::string why;
  REQUIRE(jsonl::decode_record(line, &rec, &why));
  const std::string bytes = encode_batch(&rec, 1);
  Decoded d = decode(bytes);
  REQUIRE(d.ok);
  REQUIRE(d.rows.size() == 1u);
  CHECK(jsonl::encode_record(d.rows[0]) == line);
  const RunStart& s = d.rows[0].run_start();
  REQUIRE(s.ranks.size() == 2u);
  CHECK(s.ranks[0].gpu_model.str() == "NVIDIA H100 80GB HBM3");
  CHECK(s.ranks[0].node_type.str() == "p5.48xlarge");
  CHECK(s.ranks[1].gpu_model.empty());
  CHECK(s.ranks[1].node_type.empty());
  CHECK(content_hash(d.rows[0]) == content_hash(rec));

  // On the wire: the entry without them has neither pointer set.
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  capnp::FlatArrayMessageReader reader(words);
  auto ranks = reader.getRoot<wire::Batch>().getEvents()[0].getRunStart().getRanks();
  REQUIRE(ranks.size() == 2u);
  CHECK(ranks[0].hasGpuModel());
  CHECK(ranks[0].getNodeType() == "p5.48xlarge");
  CHECK_FALSE(ranks[1].hasGpuModel());
  CHECK_FALSE(ranks[1].hasNodeType());
}

}  // namespace
}  // namespace runlens::capnpc
