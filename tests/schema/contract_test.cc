// The telemetry contract v1 has two spellings: the X-macro lists in
// schema/record.h and the Cap'n Proto schema in schema/telemetry.capnp. These
// tests check that they agree field for field (name, order, type, presence
// bit), pin the required fields, and check the canonical order and content
// hash that make pipeline output deterministic.
#include <capnp/schema.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "formats/capnp_codec.h"
#include "formats/jsonl_codec.h"
#include "schema/alert.h"
#include "schema/record.h"
#include "schema/telemetry.capnp.h"

namespace runlens {
namespace {

using capnp::schema::Type;

std::string lower_first(std::string_view s) {
  std::string out(s);
  if (!out.empty()) out[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[0])));
  return out;
}

// "GpuPeakFlops" -> "gpu_peak_flops": the JSONL name must follow from the Cap'n Proto one.
std::string snake_of_camel(std::string_view camel) {
  std::string out;
  for (size_t i = 0; i < camel.size(); ++i) {
    char c = camel[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (i) out.push_back('_');
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// "run_start" -> "runStart"
std::string camel_of_snake(std::string_view snake) {
  std::string out;
  bool up = false;
  for (char c : snake) {
    if (c == '_') {
      up = true;
      continue;
    }
    out.push_back(up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
    up = false;
  }
  return out;
}

std::string name_of(const capnp::StructSchema::Field& f) { return std::string(f.getProto().getName().cStr()); }

struct WireBody {
  Kind kind;
  capnp::StructSchema schema;
};

std::vector<WireBody> wire_bodies() {
  return {
      {Kind::kRunStart, capnp::Schema::from<wire::RunStart>()},
      {Kind::kStep, capnp::Schema::from<wire::Step>()},
      {Kind::kTrain, capnp::Schema::from<wire::Train>()},
      {Kind::kGpu, capnp::Schema::from<wire::Gpu>()},
      {Kind::kNode, capnp::Schema::from<wire::Node>()},
      {Kind::kCollective, capnp::Schema::from<wire::Collective>()},
      {Kind::kData, capnp::Schema::from<wire::Data>()},
      {Kind::kCheckpoint, capnp::Schema::from<wire::Checkpoint>()},
      {Kind::kEvent, capnp::Schema::from<wire::Occurrence>()},
      {Kind::kRunEnd, capnp::Schema::from<wire::RunEnd>()},
  };
}

// Whether a Cap'n Proto field type is the storage of a FieldType.
bool type_matches(FieldType ft, capnp::Type t) {
  switch (ft) {
    case FieldType::kI32:
      return t.which() == Type::INT32;
    case FieldType::kI64:
      return t.which() == Type::INT64;
    case FieldType::kF64:
      return t.which() == Type::FLOAT64;
    case FieldType::kBOOL:
      return t.which() == Type::BOOL;
    case FieldType::kSYM:
    case FieldType::kSTR:
      return t.which() == Type::TEXT;
    case FieldType::kCONFIG:
      return t.isList() && t.asList().getElementType().isStruct() &&
             t.asList().getElementType().asStruct() == capnp::Schema::from<wire::ConfigEntry>();
    case FieldType::kRANKS:
      return t.isList() && t.asList().getElementType().isStruct() &&
             t.asList().getElementType().asStruct() == capnp::Schema::from<wire::RankEntry>();
    case FieldType::kVALUE:
      return t.isStruct() && t.asStruct() == capnp::Schema::from<wire::Value>();
  }
  return false;
}

TEST_CASE("contract: every Cap'n Proto body is `present` then exactly the X-macro fields, in order") {
  auto bodies = wire_bodies();
  REQUIRE(bodies.size() == static_cast<size_t>(kContractKinds));
  for (const WireBody& wb : bodies) {
    const BodyInfo& info = body_info(wb.kind);
    std::string type_name(info.type_name);
    CAPTURE(type_name);
    CHECK(info.kind == wb.kind);
    CHECK(info.type_name == kind_name(wb.kind));
    // The presence mask is a UInt32: at most 32 fields per body.
    CHECK(info.field_count <= 32);

    auto fields = wb.schema.getFields();
    REQUIRE(fields.size() == static_cast<unsigned>(info.field_count + 1));
    CHECK(wb.schema.getUnionFields().size() == 0u);

    CHECK(name_of(fields[0]) == "present");
    CHECK(fields[0].getType().which() == Type::UINT32);
    CHECK(fields[0].getProto().getOrdinal().getExplicit() == 0);

    for (int i = 0; i < info.field_count; ++i) {
      const FieldInfo& fi = info.fields[i];
      auto f = fields[static_cast<unsigned>(i + 1)];
      std::string json_name(fi.name);
      CAPTURE(json_name);
      CHECK(name_of(f) == lower_first(fi.camel));
      // Declaration order and ordinal both say "bit i is the i-th field after present".
      CHECK(f.getProto().getOrdinal().getExplicit() == i + 1);
      CHECK(f.getProto().getCodeOrder() == i + 1);
      CHECK(f.getProto().getDiscriminantValue() == capnp::schema::Field::NO_DISCRIMINANT);
      CHECK(type_matches(fi.type, f.getType()));
      // The JSONL name is the snake_case of the Cap'n Proto name.
      CHECK(json_name == snake_of_camel(fi.camel));
    }
  }
}

TEST_CASE("contract: Event's union has one member per contract kind, in Kind order") {
  auto event = capnp::Schema::from<wire::Event>();
  auto bodies = wire_bodies();
  auto members = event.getUnionFields();
  REQUIRE(members.size() == static_cast<unsigned>(kContractKinds));
  for (int k = 0; k < kContractKinds; ++k) {
    auto f = members[static_cast<unsigned>(k)];
    std::string kind(kind_name(static_cast<Kind>(k)));
    CAPTURE(kind);
    CHECK(f.getProto().getDiscriminantValue() == k);
    CHECK(name_of(f) == camel_of_snake(kind_name(static_cast<Kind>(k))));
    REQUIRE(f.getType().isStruct());
    CHECK(f.getType().asStruct() == bodies[static_cast<size_t>(k)].schema);
  }
  auto envelope = event.getNonUnionFields();
  REQUIRE(envelope.size() == 2u);
  CHECK(name_of(envelope[0]) == "timeNs");
  CHECK(envelope[0].getType().which() == Type::INT64);
  CHECK(name_of(envelope[1]) == "tenant");
  CHECK(envelope[1].getType().which() == Type::TEXT);

  CHECK(wire::SCHEMA_VERSION == capnpc::kSchemaVersion);
}

TEST_CASE("contract: the X-macro enums, the field tables and the required fields agree") {
  struct Case {
    Kind kind;
    int enum_count;  // B::F::kCount
    std::set<std::string> required;
  };
  // The required set of contract v1; a change here is a contract change.
  const Case cases[] = {
      {Kind::kRunStart, static_cast<int>(RunStart::F::kCount), {"run_id", "world_size"}},
      {Kind::kStep, static_cast<int>(Step::F::kCount), {"run_id", "rank", "step", "step_ms"}},
      {Kind::kTrain, static_cast<int>(Train::F::kCount), {"run_id", "step"}},
      {Kind::kGpu, static_cast<int>(Gpu::F::kCount), {"node", "gpu"}},
      {Kind::kNode, static_cast<int>(NodeSample::F::kCount), {"node"}},
      {Kind::kCollective, static_cast<int>(Collective::F::kCount), {"run_id", "rank", "latency_ms"}},
      {Kind::kData, static_cast<int>(DataSample::F::kCount), {"run_id", "rank"}},
      {Kind::kCheckpoint, static_cast<int>(Checkpoint::F::kCount), {"run_id", "checkpoint_id"}},
      {Kind::kEvent, static_cast<int>(Occurrence::F::kCount), {"kind"}},
      {Kind::kRunEnd, static_cast<int>(RunEnd::F::kCount), {"run_id"}},
  };
  for (const Case& c : cases) {
    const BodyInfo& info = body_info(c.kind);
    std::string type_name(info.type_name);
    CAPTURE(type_name);
    CHECK(info.field_count == c.enum_count);
    std::set<std::string> required, names;
    for (int i = 0; i < info.field_count; ++i) {
      names.insert(std::string(info.fields[i].name));
      if (info.fields[i].required) required.insert(std::string(info.fields[i].name));
      // No JSONL name may collide with the envelope.
      CHECK(info.fields[i].name != "type");
      CHECK(info.fields[i].name != "time_ns");
      CHECK(info.fields[i].name != "tenant");
    }
    CHECK(names.size() == static_cast<size_t>(info.field_count));  // no duplicate names
    CHECK(required == c.required);
  }
  // `new` is stored as new_ and named "new" everywhere outside C++.
  const BodyInfo& ev = body_info(Kind::kEvent);
  CHECK(ev.fields[ev.field_count - 1].name == "new");
  CHECK(ev.fields[ev.field_count - 1].camel == "New");
}

TEST_CASE("contract: kind names round-trip and only contract kinds have field tables") {
  for (int k = 0; k < static_cast<int>(Kind::kCount); ++k) {
    Kind back;
    REQUIRE(kind_from_name(kind_name(static_cast<Kind>(k)), &back));
    CHECK(static_cast<int>(back) == k);
  }
  Kind out;
  CHECK_FALSE(kind_from_name("", &out));
  CHECK_FALSE(kind_from_name("Step", &out));
  CHECK_FALSE(kind_from_name("steps", &out));
  CHECK(kind_name(Kind::kStepRecord) == "step_record");
  CHECK(kind_name(Kind::kAlert) == "alert");
}

// --- records for the order and hash properties ------------------------------------

class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool coin() { return pick(2) == 0; }

  void value(int32_t& v) { v = pick(3); }
  void value(int64_t& v) { v = pick(3) - 1; }
  void value(double& v) {
    static const double kDoubles[] = {0.0, 1.5, -2.25, 1e300};
    v = kDoubles[pick(4)];
  }
  void value(bool& v) { v = coin(); }
  void value(Symbol& v) {
    static const char* kSyms[] = {"a", "b", "c"};
    v = Symbol::intern(kSyms[pick(3)]);
  }
  void value(std::string& v) { v = pick(2) ? "x" : "y\n"; }
  void value(Value& v) {
    v = coin() ? Value::of(static_cast<double>(pick(2))) : Value::of(std::string(pick(2) ? "1" : "s"));
  }
  void value(ConfigMap& m) {
    m.clear();
    int n = pick(3);
    for (int i = 0; i < n; ++i) {
      Value v;
      value(v);
      m.emplace_back(pick(2) ? "k" : "j", v);
    }
  }
  void value(RankList& l) {
    l.clear();
    int n = pick(3);
    for (int i = 0; i < n; ++i) l.push_back(RankPlacement{i, Symbol::intern(pick(2) ? "n1" : "n2"), pick(3) - 1});
  }

  template <class B>
  B body_of() {
    B b;
    fill(b);
    return b;
  }
  void fill(RunStart& b);
  void fill(Step& b);
  void fill(Train& b);
  void fill(Gpu& b);
  void fill(NodeSample& b);
  void fill(Collective& b);
  void fill(DataSample& b);
  void fill(Checkpoint& b);
  void fill(Occurrence& b);
  void fill(RunEnd& b);

  Record record() {
    Record r;
    r.time_ns = pick(3);
    static const char* kTenants[] = {"", "t1", "t2"};
    r.tenant = Symbol::intern(kTenants[pick(3)]);
    switch (static_cast<Kind>(pick(kContractKinds))) {
      case Kind::kRunStart:
        r.body = std::make_shared<const RunStart>(body_of<RunStart>());
        break;
      case Kind::kStep:
        r.body = body_of<Step>();
        break;
      case Kind::kTrain:
        r.body = body_of<Train>();
        break;
      case Kind::kGpu:
        r.body = body_of<Gpu>();
        break;
      case Kind::kNode:
        r.body = body_of<NodeSample>();
        break;
      case Kind::kCollective:
        r.body = body_of<Collective>();
        break;
      case Kind::kData:
        r.body = body_of<DataSample>();
        break;
      case Kind::kCheckpoint:
        r.body = body_of<Checkpoint>();
        break;
      case Kind::kEvent:
        r.body = body_of<Occurrence>();
        break;
      case Kind::kRunEnd:
        r.body = body_of<RunEnd>();
        break;
      default:
        break;
    }
    return r;
  }

 private:
  std::mt19937 rng_;
};

// Sets each field with probability 1/4 (required fields always), from small
// domains so that ties on every sort key are common.
#define RL_FILL_(T, name, Camel, req) \
  if (req || pick(4) == 0) {          \
    value(b.name);                    \
    b.set_present(B::F::name);        \
  }
#define RL_BODY_OF_(Type, LIST) \
  void Gen::fill(Type& b) {     \
    using B = Type;             \
    LIST(RL_FILL_)              \
  }
RL_BODY_OF_(RunStart, RUNLENS_RUN_START_FIELDS)
RL_BODY_OF_(Step, RUNLENS_STEP_FIELDS)
RL_BODY_OF_(Train, RUNLENS_TRAIN_FIELDS)
RL_BODY_OF_(Gpu, RUNLENS_GPU_FIELDS)
RL_BODY_OF_(NodeSample, RUNLENS_NODE_FIELDS)
RL_BODY_OF_(Collective, RUNLENS_COLLECTIVE_FIELDS)
RL_BODY_OF_(DataSample, RUNLENS_DATA_FIELDS)
RL_BODY_OF_(Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
RL_BODY_OF_(Occurrence, RUNLENS_OCCURRENCE_FIELDS)
RL_BODY_OF_(RunEnd, RUNLENS_RUN_END_FIELDS)
#undef RL_BODY_OF_
#undef RL_FILL_

int sign(int c) { return (c > 0) - (c < 0); }

// Content identity of a contract record: its JSONL line (canonical for contract kinds).
std::string content(const Record& r) { return jsonl::encode_record(r); }

TEST_CASE("canonical order: a strict total order over random records, time first, then kind") {
  Gen gen(20240611);
  std::vector<Record> recs;
  for (int i = 0; i < 160; ++i) recs.push_back(gen.record());
  // A deep copy of a few, so that equal content in distinct objects is covered.
  for (int i = 0; i < 20; ++i) {
    Record copy;
    std::string why;
    REQUIRE(jsonl::decode_record(content(recs[static_cast<size_t>(i)]), &copy, &why));
    recs.push_back(copy);
  }
  const size_t n = recs.size();
  std::vector<std::string> text(n);
  for (size_t i = 0; i < n; ++i) text[i] = content(recs[i]);

  std::vector<std::vector<int8_t>> s(n, std::vector<int8_t>(n));
  int equal_pairs = 0, same_time_kind_pairs = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) s[i][j] = static_cast<int8_t>(sign(compare_canonical(recs[i], recs[j])));
  }
  for (size_t i = 0; i < n; ++i) {
    CHECK(s[i][i] == 0);
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const Record &a = recs[i], &b = recs[j];
      // Antisymmetry.
      if (s[i][j] != -s[j][i]) FAIL_CHECK("not antisymmetric: ", text[i], " vs ", text[j]);
      // Totality: equal only when the content is equal.
      if ((s[i][j] == 0) != (text[i] == text[j]))
        FAIL_CHECK("equal order but different content (or vice versa): ", text[i], " vs ", text[j]);
      equal_pairs += s[i][j] == 0;
      // Time first, then kind.
      if (a.time_ns < b.time_ns && s[i][j] != -1) FAIL_CHECK("time not first: ", text[i], " vs ", text[j]);
      if (a.time_ns == b.time_ns && a.kind() < b.kind() && s[i][j] != -1) {
        FAIL_CHECK("kind not second: ", text[i], " vs ", text[j]);
      }
      same_time_kind_pairs += a.time_ns == b.time_ns && a.kind() == b.kind();
    }
  }
  // The generator must produce ties for the test to mean anything.
  CHECK(equal_pairs >= 40);
  CHECK(same_time_kind_pairs >= 200);

  // Transitivity over every triple: a <= b and b <= c imply a <= c, and strictly if either is strict.
  long violations = 0;
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (s[a][b] > 0) continue;
      for (size_t c = 0; c < n; ++c) {
        if (s[b][c] > 0) continue;
        int expect = (s[a][b] < 0 || s[b][c] < 0) ? -1 : 0;
        violations += s[a][c] != expect;
      }
    }
  }
  CHECK(violations == 0);
}

TEST_CASE("canonical order: sorting gives the same sequence whatever the arrival order") {
  Gen gen(7);
  std::vector<Record> recs;
  for (int i = 0; i < 300; ++i) recs.push_back(gen.record());
  auto less = [](const Record& a, const Record& b) { return compare_canonical(a, b) < 0; };
  auto sorted_text = [&](uint32_t seed) {
    std::vector<Record> v = recs;
    std::shuffle(v.begin(), v.end(), std::mt19937(seed));
    std::sort(v.begin(), v.end(), less);
    std::vector<std::string> out;
    for (const auto& r : v) out.push_back(content(r));
    return out;
  };
  auto first = sorted_text(1);
  for (uint32_t seed : {2u, 3u, 4u}) CHECK(sorted_text(seed) == first);
}

TEST_CASE("canonical order: symbols compare by text, not by interning order") {
  // Interned in reverse alphabetical order, so ids disagree with text order.
  Symbol zz = Symbol::intern("contract-test-zz"), aa = Symbol::intern("contract-test-aa");
  REQUIRE(zz.id() < aa.id());
  auto step = [](Symbol run) {
    Step s;
    s.run_id = run, s.rank = 0, s.step = 1, s.step_ms = 1;
    s.present = 0xF;
    Record r;
    r.time_ns = 10;
    r.body = s;
    return r;
  };
  CHECK(compare_canonical(step(aa), step(zz)) < 0);
  CHECK(compare_canonical(step(zz), step(aa)) > 0);
  Record ta = step(aa), tz = step(aa);
  ta.tenant = aa, tz.tenant = zz;
  CHECK(compare_canonical(ta, tz) < 0);
}

TEST_CASE("symbols: compare agrees with the texts' byte order, and text_hash is fnv1a of the text") {
  // Long shared prefixes (the 16 bytes kept as integers decide nothing),
  // lengths around 16, embedded NULs and bytes above 0x7f (compared unsigned).
  std::vector<std::string> texts = {"gpu-node-89",
                                    "gpu-node-9",
                                    "gpu-node-10",
                                    "gpu-node-100",
                                    "a",
                                    "ab",
                                    std::string("ab\0", 3),
                                    std::string("ab\0c", 4),
                                    "abcdefghijklmnop",
                                    "abcdefghijklmnopq",
                                    "abcdefghijklmno",
                                    "abcdefghijklmnoq",
                                    "\x80",
                                    "\x7f",
                                    "symbol-test-common-prefix-one",
                                    "symbol-test-common-prefix-two",
                                    "z"};
  std::mt19937 rng(11);
  for (int i = 0; i < 200; ++i) {
    std::string t;
    int len = static_cast<int>(rng() % 24);
    for (int j = 0; j < len; ++j) t.push_back(static_cast<char>("ab\0\xff"[rng() % 4]));
    texts.push_back(t);
  }
  auto sign = [](int c) { return (c > 0) - (c < 0); };
  for (const auto& x : texts) {
    Symbol a = Symbol::intern(x);
    CHECK(a.text_hash() == fnv1a(x));
    for (const auto& y : texts) {
      CAPTURE(x);
      CAPTURE(y);
      CHECK(sign(Symbol::compare(a, Symbol::intern(y))) == sign(x.compare(y)));
    }
  }
}

TEST_CASE("symbols: interning through the per-thread cache gives each text its one symbol") {
  // Thousands of texts that differ only in their last bytes (a fleet's node
  // names), more than the cache holds, so that texts share cache sets and
  // evict each other; then again in another order, and on another thread.
  std::vector<std::string> texts;
  for (int i = 0; i < 5000; ++i) texts.push_back("cache-test-node-" + std::to_string(i));
  for (int i = 0; i < 8; ++i) texts.push_back(std::string("c") + std::string(static_cast<size_t>(i), '\0'));
  std::vector<Symbol> first;
  for (const auto& t : texts) first.push_back(Symbol::intern(t));
  std::set<uint32_t> ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    CHECK(first[i].str() == texts[i]);
    ids.insert(first[i].id());
  }
  CHECK(ids.size() == texts.size());
  std::mt19937 rng(5);
  for (int round = 0; round < 3; ++round) {
    std::vector<size_t> order(texts.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) REQUIRE(Symbol::intern(texts[i]) == first[i]);
  }
  std::vector<Symbol> other(texts.size());
  std::thread([&] {
    for (size_t i = texts.size(); i-- > 0;) other[i] = Symbol::intern(texts[i]);
  }).join();
  CHECK(other == first);
}

// --- content hash: any difference in content changes it -------------------------

void mutate(int32_t& v) { v += 1; }
void mutate(int64_t& v) { v += 1; }
void mutate(double& v) { v += 1.5; }
void mutate(bool& v) { v = !v; }
void mutate(Symbol& v) { v = Symbol::intern(v.string() + "x"); }
void mutate(std::string& v) { v += "x"; }
void mutate(Value& v) { v = v.kind == Value::Kind::kNumber ? Value::of(std::string("1")) : Value::of(1.0); }
void mutate(ConfigMap& m) { m.back().second = Value::of(m.back().second.number + 1); }
void mutate(RankList& l) { l.back().gpu += 1; }

// Every field set, with values that make each mutation meaningful.
void full(int32_t& v) { v = 3; }
void full(int64_t& v) { v = 5; }
void full(double& v) { v = 0.0; }
void full(bool& v) { v = true; }
void full(Symbol& v) { v = Symbol::intern("s"); }
void full(std::string& v) { v = "str"; }
void full(Value& v) { v = Value::of(2.0); }
void full(ConfigMap& m) { m = {{"a", Value::of(1.0)}, {"b", Value::of(std::string("x"))}, {"c", Value::of(3.0)}}; }
void full(RankList& l) { l = {{0, Symbol::intern("n0"), 0}, {1, Symbol::intern("n1"), 1}}; }

Record wrap(const RunStart& b) {
  Record r;
  r.body = std::make_shared<const RunStart>(b);
  return r;
}
template <class B>
Record wrap(const B& b) {
  Record r;
  r.body = b;
  return r;
}

#define RL_FULL_(T, name, Camel, req) full(b.name), b.set_present(B::F::name);
#define RL_MUTATE_(T, name, Camel, req)                                         \
  {                                                                             \
    std::string field = #name;                                                  \
    CAPTURE(field);                                                             \
    B changed = b;                                                              \
    mutate(changed.name);                                                       \
    CHECK(content_hash(wrap(changed)) != h0);                                   \
    CHECK(compare_canonical(wrap(changed), wrap(b)) != 0);                      \
    B cleared = b;                                                              \
    cleared.clear(B::F::name);                                                  \
    CHECK(content_hash(wrap(cleared)) != h0);                                   \
    /* Absent is not the default value: clear the bit of a field holding 0 */   \
    B zero_absent = b, zero_present = b;                                        \
    zero_absent.name = {};                                                      \
    zero_present.name = {};                                                     \
    zero_absent.clear(B::F::name);                                              \
    CHECK(content_hash(wrap(zero_absent)) != content_hash(wrap(zero_present))); \
  }
#define RL_HASH_CASE_(Type, LIST)                           \
  SUBCASE(#Type) {                                          \
    using B = Type;                                         \
    B b;                                                    \
    LIST(RL_FULL_)                                          \
    const uint64_t h0 = content_hash(wrap(b));              \
    CHECK(content_hash(wrap(b)) == h0); /* deterministic */ \
    LIST(RL_MUTATE_)                                        \
    Record later = wrap(b), tenant = wrap(b);               \
    later.time_ns += 1;                                     \
    tenant.tenant = Symbol::intern("t");                    \
    CHECK(content_hash(later) != h0);                       \
    CHECK(content_hash(tenant) != h0);                      \
  }

TEST_CASE("content_hash: changing, clearing or zeroing any one field changes the hash"){
    RL_HASH_CASE_(RunStart, RUNLENS_RUN_START_FIELDS) RL_HASH_CASE_(Step, RUNLENS_STEP_FIELDS)
        RL_HASH_CASE_(Train, RUNLENS_TRAIN_FIELDS) RL_HASH_CASE_(Gpu, RUNLENS_GPU_FIELDS)
            RL_HASH_CASE_(NodeSample, RUNLENS_NODE_FIELDS) RL_HASH_CASE_(Collective, RUNLENS_COLLECTIVE_FIELDS)
                RL_HASH_CASE_(DataSample, RUNLENS_DATA_FIELDS) RL_HASH_CASE_(Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
                    RL_HASH_CASE_(Occurrence, RUNLENS_OCCURRENCE_FIELDS) RL_HASH_CASE_(RunEnd, RUNLENS_RUN_END_FIELDS)}
#undef RL_HASH_CASE_
#undef RL_MUTATE_
#undef RL_FULL_

TEST_CASE("content_hash: values swapped between fields, list order and config keys all count") {
  Step a;
  a.run_id = Symbol::intern("r"), a.rank = 0, a.step = 1, a.step_ms = 1;
  a.tokens = 1, a.samples = 2;
  a.present = 0xF;
  a.set_present(Step::F::tokens);
  a.set_present(Step::F::samples);
  Step swapped = a;
  std::swap(swapped.tokens, swapped.samples);
  CHECK(content_hash(wrap(a)) != content_hash(wrap(swapped)));
  // The same value in a different field.
  Step moved = a;
  moved.clear(Step::F::tokens);
  moved.set_present(Step::F::seq_len);
  moved.seq_len = 1;
  CHECK(content_hash(wrap(a)) != content_hash(wrap(moved)));

  RunStart rs;
  rs.run_id = Symbol::intern("r"), rs.world_size = 2;
  rs.present = 0;
  rs.set_present(RunStart::F::run_id);
  rs.set_present(RunStart::F::world_size);
  rs.set_present(RunStart::F::config);
  rs.set_present(RunStart::F::ranks);
  rs.config = {{"a", Value::of(1.0)}, {"b", Value::of(2.0)}};
  rs.ranks = {{0, Symbol::intern("n0"), 0}, {1, Symbol::intern("n1"), 1}};
  const uint64_t h0 = content_hash(wrap(rs));
  struct Change {
    const char* what;
    void (*apply)(RunStart&);
  };
  const Change changes[] = {
      {"config reordered", [](RunStart& r) { std::swap(r.config[0], r.config[1]); }},
      {"config key renamed", [](RunStart& r) { r.config[0].first = "z"; }},
      {"config number -> same-looking string", [](RunStart& r) { r.config[0].second = Value::of(std::string("1")); }},
      {"config entry dropped", [](RunStart& r) { r.config.pop_back(); }},
      {"config entry added", [](RunStart& r) { r.config.emplace_back("c", Value()); }},
      {"ranks reordered", [](RunStart& r) { std::swap(r.ranks[0], r.ranks[1]); }},
      {"rank renumbered", [](RunStart& r) { r.ranks[1].rank = 5; }},
      {"rank node changed", [](RunStart& r) { r.ranks[1].node = Symbol::intern("n9"); }},
      {"rank gpu unknown", [](RunStart& r) { r.ranks[1].gpu = -1; }},
      {"ranks emptied", [](RunStart& r) { r.ranks.clear(); }},
  };
  for (const Change& c : changes) {
    std::string what = c.what;
    CAPTURE(what);
    RunStart m = rs;
    c.apply(m);
    CHECK(content_hash(wrap(m)) != h0);
  }
}

// Alerts flow through sinks in canonical order too; ties are broken by the
// content hash, which must cover every field of an alert.
TEST_CASE("canonical order: alerts differing only in severity, value or diagnosis are not tied") {
  // Two alerts that differ in severity, value, threshold, kind, diagnosis,
  // evidence or attrs must not compare equal, or their order would depend on
  // arrival order.
  Alert a;
  a.alert_id = "00000000000000aa", a.kind = "straggler", a.time_ns = 5, a.run_id = Symbol::intern("r");
  a.summary = "rank 3 is slow";
  struct Change {
    const char* what;
    void (*apply)(Alert&);
  };
  const Change changes[] = {
      {"severity", [](Alert& x) { x.severity = Severity::kCritical; }},
      {"value", [](Alert& x) { x.value = 2.5; }},
      {"threshold", [](Alert& x) { x.threshold = 1.5; }},
      {"kind", [](Alert& x) { x.kind = "nan_loss"; }},
      {"cause", [](Alert& x) { x.cause = "slow dataloader"; }},
      {"evidence",
       [](Alert& x) {
         x.evidence.push_back({"step", 3, "slow", {}});
       }},
      {"attrs", [](Alert& x) { x.attrs.emplace_back("ratio", 1.7); }},
  };
  for (const Change& c : changes) {
    std::string what = c.what;
    CAPTURE(what);
    Alert b = a;
    c.apply(b);
    CHECK(content_hash(alert_record(a)) != content_hash(alert_record(b)));
    CHECK(compare_canonical(alert_record(a), alert_record(b)) != 0);
  }
}

}  // namespace
}  // namespace runlens
