// Keyed state and snapshots (runtime/state/, docs/state.md), with toy types
// only: the encoding of every standard type round trips exactly; equal states
// give equal bytes whatever the hashing; restore rejects a wrong type or
// version, truncated, corrupt and mis-typed input with a StateError that
// says what and where; and an operator and an executor continue from a
// snapshot exactly where the uninterrupted run would be.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/executor.h"
#include "runtime/state/keyed_state.h"
#include "runtime/state/snapshot.h"

namespace st = runlens::runtime::state;
namespace rt = runlens::runtime;

namespace {

struct Inner {
  int32_t a = 0;
  std::string s;
  bool operator==(const Inner&) const = default;
  template <class Io>
  void fields(Io& io) {
    io(a, s);
  }
};

enum class Color : uint8_t { kRed, kGreen };

struct Everything {
  int64_t i64 = 0;
  int32_t i32 = 0;
  uint64_t u64 = 0;
  uint8_t u8 = 0;
  bool b = false;
  double d = 0;
  Color color = Color::kRed;
  std::string text;
  std::vector<bool> bits;
  std::deque<double> ring;
  std::list<Inner> list;
  std::array<int16_t, 3> arr{};
  std::map<int64_t, Inner> by_step;
  std::set<std::pair<int32_t, int64_t>> pairs;
  std::unordered_map<std::string, int64_t> hashed;
  std::unordered_set<int64_t> seen;
  std::optional<int32_t> none, some;
  std::variant<int64_t, std::string, Inner> var;
  std::shared_ptr<const Inner> p1, p2, null;
  bool operator==(const Everything& o) const {
    auto same_double = [](double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; };
    auto deref = [](const std::shared_ptr<const Inner>& p) { return p ? std::optional<Inner>(*p) : std::nullopt; };
    return i64 == o.i64 && i32 == o.i32 && u64 == o.u64 && u8 == o.u8 && b == o.b && same_double(d, o.d) &&
           color == o.color && text == o.text && bits == o.bits && ring.size() == o.ring.size() &&
           std::equal(ring.begin(), ring.end(), o.ring.begin(), same_double) && list == o.list && arr == o.arr &&
           by_step == o.by_step && pairs == o.pairs && hashed == o.hashed && seen == o.seen && none == o.none &&
           some == o.some && var == o.var && deref(p1) == deref(o.p1) && deref(p2) == deref(o.p2) && !null == !o.null;
  }
  template <class Io>
  void fields(Io& io) {
    io(i64, i32, u64, u8, b, d, color, text, bits, ring, list, arr, by_step, pairs, hashed, seen, none, some, var, p1,
       p2, null);
  }
};

Everything sample() {
  Everything e;
  e.i64 = std::numeric_limits<int64_t>::min();
  e.i32 = -7;
  e.u64 = std::numeric_limits<uint64_t>::max();
  e.u8 = 255;
  e.b = true;
  e.d = -0.0;
  e.color = Color::kGreen;
  e.text = std::string("with\0nul", 8);
  e.bits = {true, false, true};
  e.ring = {std::nan(""), std::numeric_limits<double>::infinity(), 1e-310, 3.25};
  e.list = {{1, "x"}, {2, ""}};
  e.arr = {-1, 0, 32767};
  e.by_step = {{-5, {3, "a"}}, {9, {4, "b"}}};
  e.pairs = {{1, 2}, {0, 9}};
  for (int i = 0; i < 50; ++i) e.hashed["k" + std::to_string(i)] = i * i;
  e.seen = {4, 8, 15, 16, 23, 42};
  e.some = 12;
  e.var = Inner{5, "v"};
  e.p1 = std::make_shared<const Inner>(Inner{6, "shared"});
  e.p2 = e.p1;
  return e;
}

std::string encode(const Everything& e) {
  st::Writer w;
  st::encode(w, e);
  return w.take();
}

Everything decode(const std::string& bytes) {
  st::Reader r(bytes, "test state");
  Everything e;
  st::decode(r, e);
  r.expect_end();
  return e;
}

// The message of the StateError that f throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const st::StateError& e) {
    return e.what();
  }
  return "";
}

constexpr st::StateType kToy{"toy", 3};

}  // namespace

TEST_CASE("state: every standard type round trips exactly, pointers shared stay shared") {
  Everything e = sample();
  std::string bytes = encode(e);
  Everything back = decode(bytes);
  CHECK(back == e);
  CHECK(std::signbit(back.d));
  CHECK(std::isnan(back.ring[0]));
  REQUIRE(back.p1);
  CHECK(back.p1.get() == back.p2.get());  // one object, as before
  CHECK(!back.null);
  CHECK(encode(back) == bytes);  // and it encodes the same again
}

TEST_CASE("state: unordered containers encode the same whatever their insertion order or bucket count") {
  std::unordered_map<std::string, int64_t> a, b;
  for (int i = 0; i < 100; ++i) a["k" + std::to_string(i)] = i;
  b.reserve(1000);
  for (int i = 99; i >= 0; --i) b["k" + std::to_string(i)] = i;
  st::Writer wa, wb;
  st::encode(wa, a);
  st::encode(wb, b);
  CHECK(wa.data() == wb.data());
}

TEST_CASE("state: KeyedState creates a key's state on first use and forgets it on reset") {
  st::KeyedState<std::string, Inner> k;
  k["run-a"].a = 4;
  CHECK(k.size() == 1);
  CHECK(k["run-a"].a == 4);
  CHECK(k.find("run-b") == k.end());
  CHECK(k.reset("run-a") == 1);
  CHECK(k.reset("run-a") == 0);
  CHECK(k["run-a"].a == 0);  // created afresh
  k["run-b"] = {7, "seven"};
  st::Writer w;
  st::encode(w, k);
  st::KeyedState<std::string, Inner> back;
  back["stale"] = {1, "replaced by the restore"};
  st::Reader r(w.data(), "keyed");
  st::decode(r, back);
  CHECK(back.size() == 2);
  CHECK(back.find("stale") == back.end());
  CHECK(back["run-b"] == Inner{7, "seven"});
}

TEST_CASE("snapshot: the header names the format, the type and its version") {
  std::string s = st::seal(kToy, "payload");
  CHECK(s.substr(0, 4) == "RLST");
  st::SnapshotInfo info = st::open(s, kToy);
  CHECK(info.format == 1);
  CHECK(info.type == "toy");
  CHECK(info.version == 3);
  CHECK(s.substr(info.payload_offset, info.payload_size) == "payload");
}

TEST_CASE("snapshot: restore rejects another type, another version, another format, and what is not a snapshot") {
  std::string s = st::seal(kToy, "payload");
  CHECK(error_of([&] { st::open(s, {"rank_join", 3}); }) == "state snapshot: holds 'toy' state, not 'rank_join'");
  CHECK(error_of([&] {
          st::open(s, {"toy", 4});
        }) == "state snapshot: 'toy' state version 3 cannot be read (this build reads version 4)");
  std::string other = s;
  other[4] = 2;
  CHECK(error_of([&] { st::open(other, kToy); }) ==
        "state snapshot: format version 2 is not supported (this build reads format 1)");
  CHECK(error_of([&] { st::open("{\"alert_id\": 1}", kToy); }) ==
        "state snapshot: not a runlens state snapshot (no RLST header)");
  CHECK(error_of([&] { st::open("", kToy); }) == "state snapshot: truncated: 0 bytes");
}

TEST_CASE("snapshot: every truncation and every flipped bit is an error, never a misread") {
  std::string s = st::seal(kToy, encode(sample()));
  for (size_t n = 0; n < s.size(); ++n) {
    CAPTURE(n);
    CHECK(!error_of([&] { st::open(s.substr(0, n), kToy); }).empty());
  }
  CHECK(error_of([&] {
          st::open(s.substr(0, s.size() - 1), kToy);
        }).starts_with("state snapshot: truncated: the payload of "));
  CHECK(error_of([&] { st::open(s + "x", kToy); }) == "state snapshot: 1 bytes after the checksum");
  for (size_t i = 5; i < s.size(); ++i) {
    for (int bit : {0, 3, 7}) {
      std::string bad = s;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      CAPTURE(i);
      CHECK(!error_of([&] { st::open(bad, kToy); }).empty());
    }
  }
  std::string bad = s;
  bad[s.size() - 10] ^= 1;
  CHECK(error_of([&] { st::open(bad, kToy); }) == "state snapshot: checksum mismatch: the snapshot is corrupt");
}

TEST_CASE("state: a payload of the wrong shape is an error that names the byte") {
  auto decode_as = [](const std::string& bytes, auto value) {
    return error_of([&] {
      st::Reader r(bytes, "toy state", 10);
      st::decode(r, value);
      r.expect_end();
    });
  };
  st::Writer w;
  w.bytes("text");
  CHECK(decode_as(w.data(), int64_t{}) == "state snapshot: toy state at byte 10: expected an integer, found a string");
  st::Writer big;
  big.i64(int64_t{1} << 40);
  CHECK(decode_as(big.data(), int32_t{}) ==
        "state snapshot: toy state at byte 17: the integer 1099511627776 is out of range");
  st::Writer three;
  three(int32_t{1}, std::string("s"), true);
  CHECK(decode_as(three.data(), Inner{}) ==
        "state snapshot: toy state at byte 12: a struct has 3 fields where 2 were expected");
  st::Writer huge;
  huge.seq(1'000'000'000);
  CHECK(decode_as(huge.data(), std::vector<int64_t>{}) ==
        "state snapshot: toy state at byte 16: a sequence of 1000000000 elements is longer than the input");
  st::Writer dup;
  dup.seq(2);
  dup(int64_t{1}, int64_t{2});
  dup(int64_t{1}, int64_t{3});
  CHECK(decode_as(dup.data(), std::map<int64_t, int64_t>{}) ==
        "state snapshot: toy state at byte 24: a key appears twice");
  st::Writer bad_ref;
  bad_ref.tag(st::Tag::kRef);
  bad_ref.varint(0);
  CHECK(decode_as(bad_ref.data(), std::shared_ptr<const Inner>{}) ==
        "state snapshot: toy state at byte 12: a reference to shared object 0 of 0 read");
  // A reference to an object of another type.
  st::Writer mixed;
  mixed.tag(st::Tag::kStruct);
  mixed.varint(2);
  st::encode(mixed, std::make_shared<const int64_t>(5));
  mixed.tag(st::Tag::kRef);
  mixed.varint(0);
  CHECK(decode_as(mixed.data(), std::pair<std::shared_ptr<const int64_t>, std::shared_ptr<const Inner>>{}) ==
        "state snapshot: toy state at byte 17: a reference to shared object 0 of another type");
  st::Writer tail;
  tail.i64(1);
  tail.i64(2);
  CHECK(decode_as(tail.data(), int64_t{}) == "state snapshot: toy state at byte 12: 2 bytes left over after the state");
  CHECK(decode_as(std::string("\x01", 1), int64_t{}) ==
        "state snapshot: toy state at byte 11: truncated: 1 more bytes needed");
  st::Writer var;
  var.tag(st::Tag::kVariant);
  var.varint(7);
  CHECK(decode_as(var.data(), std::variant<int64_t, std::string>{}) ==
        "state snapshot: toy state at byte 12: variant alternative 7 of 2");
}

// --- an operator and an executor -------------------------------------------------------

namespace {

struct Row {
  int64_t time_ns = 0;
  uint64_t key = 0;
  int64_t value = 0;
};

}  // namespace

namespace runlens::runtime {
template <>
struct RowTraits<::Row> {
  static int64_t time_ns(const ::Row& r) { return r.time_ns; }
  static unsigned kind(const ::Row&) { return 0; }
  static int priority(const ::Row&) { return 0; }
  static int compare(const ::Row& a, const ::Row& b) {
    auto ta = std::tie(a.time_ns, a.key, a.value), tb = std::tie(b.time_ns, b.key, b.value);
    return ta < tb ? -1 : (tb < ta ? 1 : 0);
  }
  static int64_t weight(const ::Row&) { return 1; }
};
}  // namespace runlens::runtime

namespace {

// A running sum per key, emitted on every row; a key whose sum passes 100
// starts again.
class RunningSum final : public st::Snapshottable<Row, RunningSum> {
 public:
  static constexpr st::StateType kState{"running_sum", 1};
  template <class Io>
  void state_fields(Io& io) {
    io(sums_, rows_);
  }
  void process(const Row& r, rt::Emitter<Row>& out) override {
    int64_t& s = sums_[r.key];
    s += r.value;
    ++rows_;
    out.emit(Row{r.time_ns, r.key, s * 1000 + rows_});
    if (s > 100) sums_.reset(r.key);
  }

 private:
  st::KeyedState<uint64_t, int64_t> sums_;
  int64_t rows_ = 0;
};

class Stateless final : public rt::Operator<Row> {
 public:
  void process(const Row&, rt::Emitter<Row>&) override {}
};

class SumDef final : public rt::OperatorDef<Row> {
 public:
  bool partitioned() const override { return true; }
  std::optional<uint64_t> key(const Row& r) const override { return r.key; }
  std::unique_ptr<rt::Operator<Row>> open(const rt::OperatorContext&) const override {
    return std::make_unique<RunningSum>();
  }
};

std::vector<Row> rows(int64_t from, int64_t to) {
  std::vector<Row> v;
  for (int64_t i = from; i < to; ++i) v.push_back(Row{i * 10, static_cast<uint64_t>(i % 5), (i * 37) % 23});
  return v;
}

std::vector<Row> run_op(rt::Operator<Row>& op, const std::vector<Row>& in) {
  std::vector<Row> out;
  rt::Emitter<Row> e(&out, rt::kBeginningOfTime);
  for (const Row& r : in) op.process(r, e);
  return out;
}

bool same(const std::vector<Row>& a, const std::vector<Row>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const Row& x, const Row& y) {
           return rt::RowTraits<Row>::compare(x, y) == 0;
         });
}

}  // namespace

TEST_CASE("Snapshottable: run half, snapshot, restore into a fresh instance, run the rest: the same output") {
  RunningSum whole;
  std::vector<Row> expected = run_op(whole, rows(0, 200));
  for (int64_t cut : {0, 1, 37, 100, 199, 200}) {
    CAPTURE(cut);
    RunningSum first;
    std::vector<Row> got = run_op(first, rows(0, cut));
    std::string snap = first.snapshot();
    RunningSum second;
    second.restore(snap);
    CHECK(second.snapshot() == snap);
    for (const Row& r : run_op(second, rows(cut, 200))) got.push_back(r);
    CHECK(same(got, expected));
  }
  RunningSum op;
  CHECK(error_of([&] {
          op.restore(st::seal({"rank_join", 1}, ""));
        }) == "state snapshot: holds 'rank_join' state, not 'running_sum'");
  Stateless none;
  CHECK(error_of([&] { (void)none.snapshot(); }) == "this operator does not support snapshots");
  CHECK(error_of([&] { none.restore(""); }) == "this operator does not support snapshots");
}

namespace {

class DeadLetters final : public rt::DeadLetterSink {
 public:
  void write(const rt::DeadLetter&) override {}
};

class VectorSource final : public rt::SourceDef<Row> {
 public:
  explicit VectorSource(std::vector<Row> rows) : rows_(std::move(rows)) {}
  void run(rt::SourceOutput<Row>& out) override {
    for (size_t i = 0; i < rows_.size(); i += 7) {
      std::vector<Row> batch(rows_.begin() + static_cast<long>(i),
                             rows_.begin() + static_cast<long>(std::min(i + 7, rows_.size())));
      out.push(batch);
    }
  }

 private:
  std::vector<Row> rows_;
};

class Collect final : public rt::Operator<Row> {
 public:
  explicit Collect(std::vector<Row>* out, std::mutex* mu) : out_(out), mu_(mu) {}
  void process(const Row& r, rt::Emitter<Row>&) override {
    std::lock_guard lock(*mu_);
    out_->push_back(r);
  }

 private:
  std::vector<Row>* out_;
  std::mutex* mu_;
};

class CollectDef final : public rt::OperatorDef<Row> {
 public:
  CollectDef(std::vector<Row>* out, std::mutex* mu) : out_(out), mu_(mu) {}
  std::unique_ptr<rt::Operator<Row>> open(const rt::OperatorContext&) const override {
    return std::make_unique<Collect>(out_, mu_);
  }

 private:
  std::vector<Row>* out_;
  std::mutex* mu_;
};

struct GraphRun {
  std::vector<Row> out;
  std::vector<std::string> snapshots;
};

// source -> sum (3 partitions) -> collect; restored from `from` when given.
GraphRun run_graph(std::vector<Row> input, const std::vector<std::string>* from = nullptr) {
  DeadLetters dead;
  rt::ExecutorOptions o;
  o.threads = 3;
  o.lateness_ns = 0;
  o.dead_letters = &dead;
  rt::Executor<Row> ex(o);
  GraphRun run;
  std::mutex mu;
  ex.add_source("src", "vector", 1, std::make_unique<VectorSource>(std::move(input)));
  ex.add_operator("sum", "running_sum", 1, 1, {"src"}, 3, std::make_unique<SumDef>());
  ex.add_operator("out", "collect", 1, 0, {"sum"}, 1, std::make_unique<CollectDef>(&run.out, &mu));
  if (from) ex.restore_state("sum", *from);
  ex.run();
  run.snapshots = ex.snapshot_state("sum");
  std::sort(run.out.begin(), run.out.end(),
            [](const Row& a, const Row& b) { return rt::RowTraits<Row>::compare(a, b) < 0; });
  return run;
}

}  // namespace

TEST_CASE("Executor: snapshot every partition at end of input, restore them into a new graph, continue") {
  GraphRun whole = run_graph(rows(0, 300));
  GraphRun first = run_graph(rows(0, 140));
  REQUIRE(first.snapshots.size() == 3);
  GraphRun second = run_graph(rows(140, 300), &first.snapshots);
  std::vector<Row> got = first.out;
  got.insert(got.end(), second.out.begin(), second.out.end());
  // Each partition's row counter continues too, so outputs match only if every
  // partition got its own snapshot back.
  CHECK(same(got, whole.out));
  CHECK(second.snapshots == whole.snapshots);

  DeadLetters dead;
  rt::ExecutorOptions o;
  o.threads = 2;
  o.dead_letters = &dead;
  rt::Executor<Row> ex(o);
  ex.add_source("src", "vector", 1, std::make_unique<VectorSource>(rows(0, 10)));
  ex.add_operator("sum", "running_sum", 1, 1, {"src"}, 2, std::make_unique<SumDef>());
  CHECK(error_of([&] { ex.restore_state("sum", first.snapshots); }) ==
        "operator 'sum' has 2 partitions; the snapshots are of 3");
  std::vector<std::string> broken = {first.snapshots[0], first.snapshots[1].substr(0, 9)};
  ex.restore_state("sum", broken);
  CHECK(error_of([&] { ex.run(); }).starts_with("operator 'sum' partition 1: state snapshot: truncated"));
}
