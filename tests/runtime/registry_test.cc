// The registry: component descriptions and factories for a toy row type, its
// use as the parser's catalog, factory errors located at the parameter, and a
// whole pipeline from YAML text to outputs, all without a training type.
#include "runtime/registry.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/executor.h"

namespace rt = runlens::runtime;

namespace {

struct Row {
  int64_t time_ns = 0;
  uint64_t key = 0;
  unsigned kind = 0;  // 0 = reading, 1 = alert
  int64_t value = 0;
  bool operator==(const Row&) const = default;
};

}  // namespace

namespace runlens::runtime {
template <>
struct RowTraits<::Row> {
  static int64_t time_ns(const ::Row& r) { return r.time_ns; }
  static unsigned kind(const ::Row& r) { return r.kind; }
  static int priority(const ::Row& r) { return r.kind == 1 ? 0 : 2; }
  static int compare(const ::Row& a, const ::Row& b) {
    auto ta = std::tie(a.time_ns, a.key, a.kind, a.value);
    auto tb = std::tie(b.time_ns, b.key, b.kind, b.value);
    return ta < tb ? -1 : (tb < ta ? 1 : 0);
  }
  static int64_t weight(const ::Row&) { return 1; }
};
}  // namespace runlens::runtime

namespace {

constexpr unsigned kReading = 0, kAlert = 1;

// --- toy components ----------------------------------------------------------------
// `counter`: emits `count` readings, one per key round robin over `keys`, `step` apart.
class CounterSource final : public rt::SourceDef<Row> {
 public:
  CounterSource(int64_t count, int64_t keys, int64_t step) : count_(count), keys_(keys), step_(step) {}
  void run(rt::SourceOutput<Row>& out) override {
    std::vector<Row> batch;
    for (int64_t i = 0; i < count_; ++i) {
      batch.push_back(Row{i * step_, static_cast<uint64_t>(i % keys_), kReading, i});
      if (batch.size() == 5) out.push(batch);
    }
    out.push(batch);
  }
  std::string describe() const override { return "count=" + std::to_string(count_); }

 private:
  int64_t count_, keys_, step_;
};

// `above`: per key, an alert whenever the running sum crosses a multiple of `threshold`.
class Above final : public rt::Operator<Row> {
 public:
  explicit Above(int64_t threshold) : threshold_(threshold) {}
  void process(const Row& r, rt::Emitter<Row>& out) override {
    int64_t& sum = sums_[r.key];
    int64_t before = sum / threshold_;
    sum += r.value;
    if (sum / threshold_ > before) out.emit(Row{r.time_ns, r.key, kAlert, sum});
  }

 private:
  int64_t threshold_;
  std::map<uint64_t, int64_t> sums_;
};
class AboveDef final : public rt::OperatorDef<Row> {
 public:
  explicit AboveDef(int64_t threshold) : threshold_(threshold) {}
  bool partitioned() const override { return true; }
  std::optional<uint64_t> key(const Row& r) const override { return r.key; }
  std::unique_ptr<rt::Operator<Row>> open(const rt::OperatorContext&) const override {
    return std::make_unique<Above>(threshold_);
  }

 private:
  int64_t threshold_;
};

// `memory`: a sink that appends to a process-wide list (tests only).
std::mutex g_mu;
std::vector<Row> g_rows;
class Memory final : public rt::Operator<Row> {
 public:
  void process(const Row& r, rt::Emitter<Row>&) override {
    std::lock_guard lock(g_mu);
    g_rows.push_back(r);
  }
};
class MemoryDef final : public rt::OperatorDef<Row> {
 public:
  std::unique_ptr<rt::Operator<Row>> open(const rt::OperatorContext&) const override {
    return std::make_unique<Memory>();
  }
};

rt::ParamSpec param(std::string name, rt::ParamType type, std::optional<std::string> def) {
  rt::ParamSpec p;
  p.name = std::move(name);
  p.type = type;
  p.default_value = std::move(def);
  return p;
}

std::unique_ptr<rt::Registry<Row>> make_registry() {
  auto reg = std::make_unique<rt::Registry<Row>>(std::vector<std::string>{"reading", "alert"});
  reg->add_source({"counter",
                   rt::Role::kSource,
                   "counts",
                   {param("count", rt::ParamType::kInt, std::nullopt), param("keys", rt::ParamType::kInt, "3"),
                    param("step", rt::ParamType::kDuration, "1ms")},
                   0,
                   1u << kReading},
                  [](const rt::BuildContext& ctx) {
                    return std::make_unique<CounterSource>(ctx.params->get_int("count"), ctx.params->get_int("keys"),
                                                           ctx.params->get_duration_ns("step"));
                  });
  reg->add_operator({"above",
                     rt::Role::kOperator,
                     "alerts above a threshold",
                     {param("threshold", rt::ParamType::kInt, std::nullopt)},
                     1u << kReading,
                     1u << kAlert},
                    [](const rt::BuildContext& ctx) -> std::unique_ptr<rt::OperatorDef<Row>> {
                      // Validate in the factory: a bad combination is a located user error.
                      if (ctx.params->get_int("threshold") <= 0) ctx.fail("threshold", "threshold must be positive");
                      return std::make_unique<AboveDef>(ctx.params->get_int("threshold"));
                    });
  reg->add_operator({"memory", rt::Role::kSink, "keeps rows", {}, (1u << kReading) | (1u << kAlert), 0},
                    [](const rt::BuildContext&) { return std::make_unique<MemoryDef>(); });
  return reg;
}

rt::VarLookup no_vars() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

TEST_CASE("a registry describes its components as a catalog") {
  auto reg = make_registry();
  CHECK(reg->types() == std::vector<std::string>{"above", "counter", "memory"});
  REQUIRE(reg->find("above") != nullptr);
  CHECK(reg->find("above")->role == rt::Role::kOperator);
  CHECK(reg->find("memory")->role == rt::Role::kSink);
  CHECK(reg->find("counter")->emits == 1u << kReading);
  CHECK(reg->find("nothing") == nullptr);
  CHECK(reg->kind_name(kAlert) == "alert");
  CHECK(reg->kind_name(7) == "kind7");
  CHECK(reg->kinds_str((1u << kReading) | (1u << kAlert)) == "[reading, alert]");
}

TEST_CASE("registering a type twice, or in the wrong role, is an internal error") {
  auto reg = make_registry();
  auto none = [](const rt::BuildContext&) -> std::unique_ptr<rt::OperatorDef<Row>> { return nullptr; };
  auto no_source = [](const rt::BuildContext&) -> std::unique_ptr<rt::SourceDef<Row>> { return nullptr; };
  auto info = [](const char* type, rt::Role role) {
    rt::ComponentInfo i;
    i.type = type;
    i.role = role;
    return i;
  };
  CHECK_THROWS_AS(reg->add_operator(info("above", rt::Role::kOperator), none), rt::InternalError);
  CHECK_THROWS_AS(reg->add_operator(info("x", rt::Role::kSource), none), rt::InternalError);
  CHECK_THROWS_AS(reg->add_source(info("y", rt::Role::kOperator), no_source), rt::InternalError);
  CHECK_THROWS_AS(reg->add_source(info("counter", rt::Role::kSource), no_source), rt::InternalError);
  CHECK(reg->find("x") == nullptr);
  CHECK(reg->find("y") == nullptr);
}

TEST_CASE("a factory's error is a ConfigError located at the parameter, with the component path") {
  auto reg = make_registry();
  auto spec = rt::parse_pipeline_text(
      "sources:\n"
      "  src: {type: counter, count: 10}\n"
      "operators:\n"
      "  hot: {type: above, inputs: [src], threshold: -5}\n",
      "p.yaml", *reg, no_vars());
  const auto* hot = spec.find("hot");
  REQUIRE(hot != nullptr);
  try {
    reg->make_operator(*hot);
    FAIL("the factory accepted a negative threshold");
  } catch (const rt::ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    const auto& d = e.diagnostics()[0];
    CHECK(d.where.file == "p.yaml");
    CHECK(d.where.line == 4);
    CHECK(d.where.column == 48);
    CHECK(d.path == "operators.hot");
    CHECK(d.message == "threshold must be positive");
  }
}

TEST_CASE("a whole pipeline runs from YAML text with a toy row type, the same with any thread count") {
  const char* yaml =
      "settings:\n"
      "  lateness: 3ms\n"
      "sources:\n"
      "  src: {type: counter, count: 60, keys: 4}\n"
      "operators:\n"
      "  hot: {type: above, inputs: [src], threshold: 100, parallelism: 3}\n"
      "sinks:\n"
      "  alerts: {type: memory, inputs: [hot]}\n"
      "  all: {type: memory, inputs: [src]}\n";
  // The reference, computed plainly: readings 0..59, key i % 4.
  std::vector<Row> want;
  {
    std::map<uint64_t, int64_t> sums;
    for (int64_t i = 0; i < 60; ++i) {
      Row r{i * 1'000'000, static_cast<uint64_t>(i % 4), kReading, i};
      want.push_back(r);
      int64_t before = sums[r.key] / 100;
      sums[r.key] += i;
      if (sums[r.key] / 100 > before) want.push_back(Row{r.time_ns, r.key, kAlert, sums[r.key]});
    }
    std::sort(want.begin(), want.end(), [](auto& a, auto& b) { return rt::RowTraits<Row>::compare(a, b) < 0; });
  }
  auto reg = make_registry();
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    auto spec = rt::parse_pipeline_text(yaml, "p.yaml", *reg, no_vars());
    struct NoDeadLetters final : rt::DeadLetterSink {
      void write(const rt::DeadLetter&) override { ++n; }
      int n = 0;
    } dead;
    rt::ExecutorOptions o;
    o.threads = threads;
    o.lateness_ns = spec.settings.lateness_ns;
    o.dead_letters = &dead;
    rt::Executor<Row> ex(o);
    for (const auto& c : spec.components) {  // in topological order, as the executor needs
      if (c.role == rt::Role::kSource) {
        ex.add_source(c.id, c.type, c.info->emits, reg->make_source(c));
      } else {
        std::vector<std::string> inputs;
        for (const auto& in : c.inputs) inputs.push_back(in.name);
        ex.add_operator(c.id, c.type, c.info->accepts, c.info->emits, inputs, c.parallelism, reg->make_operator(c));
      }
    }
    {
      std::lock_guard lock(g_mu);
      g_rows.clear();
    }
    ex.run();
    std::vector<Row> got;
    {
      std::lock_guard lock(g_mu);
      got = g_rows;
    }
    // Two sinks append to one list: compare as a sorted multiset.
    std::sort(got.begin(), got.end(), [](auto& a, auto& b) { return rt::RowTraits<Row>::compare(a, b) < 0; });
    CHECK(got == want);
    CHECK(dead.n == 0);
    auto counters = ex.counters();
    REQUIRE(counters.size() == 4);
    CHECK(counters[0].node == "src");
    CHECK(counters[0].out == 60);
    CHECK(counters[1].node == "hot");
    CHECK(counters[1].in == 60);
  }
}

}  // namespace
