// The YAML pipeline language, parsed against a toy catalog (no training
// components): every class of error is reported with its file:line:col, the
// component path and a message; variables, settings, defaults, topological
// order and the DOT rendering.
#include "runtime/pipeline_spec.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor.h"

namespace rt = runlens::runtime;

namespace {

// --- a toy catalog -------------------------------------------------------------------
constexpr unsigned kTick = 0, kSum = 1, kAlert = 2;
constexpr uint32_t bit(unsigned k) { return 1u << k; }

rt::ParamSpec param(std::string name, rt::ParamType type, std::optional<std::string> def, std::string doc = "",
                    std::vector<std::string> choices = {}, std::optional<double> min = std::nullopt,
                    std::optional<double> max = std::nullopt) {
  return rt::ParamSpec{std::move(name), type, std::move(def), std::move(doc), std::move(choices), min, max};
}

class ToyCatalog final : public rt::Catalog {
 public:
  ToyCatalog() {
    using T = rt::ParamType;
    add({"ticker",
         rt::Role::kSource,
         "emits ticks",
         {param("count", T::kInt, std::nullopt, "ticks to emit", {}, 1, 1000),
          param("burst", T::kInt, "1", "ticks at once", {}, 1, 1000),
          param("rate", T::kDouble, "1.0", "ticks per second", {}, 0), param("label", T::kString, "t"),
          param("jitter", T::kDuration, "0s", "", {}, std::nullopt, 60), param("loop", T::kBool, "false"),
          param("tags", T::kStringList, "[]")},
         0,
         bit(kTick)});
    add({"alarms", rt::Role::kSource, "emits alerts", {}, 0, bit(kAlert)});
    add({"summer",
         rt::Role::kOperator,
         "sums ticks",
         {param("threshold", T::kDouble, std::nullopt, "alert above"),
          param("window", T::kDuration, "1s", "", {}, 0.001), param("mode", T::kString, "sum", "", {"sum", "max"}),
          param("keys", T::kStringList, "[a, b]")},
         bit(kTick),
         bit(kSum)});
    add({"relay",
         rt::Role::kOperator,
         "passes everything",
         {},
         bit(kTick) | bit(kSum) | bit(kAlert),
         bit(kTick) | bit(kSum) | bit(kAlert)});
    add({"printer",
         rt::Role::kSink,
         "prints",
         {param("path", T::kString, "${OUT:-/tmp}/x.jsonl")},
         bit(kTick) | bit(kSum) | bit(kAlert),
         0});
    add({"alert_log", rt::Role::kSink, "alerts only", {}, bit(kAlert), 0});
    add({"strict_printer",
         rt::Role::kSink,
         "a default that needs a variable",
         {param("path", T::kString, "${RUNLENS_TOY_UNSET}/x.jsonl")},
         bit(kTick),
         0});
  }
  const rt::ComponentInfo* find(const std::string& type) const override {
    auto it = infos_.find(type);
    return it == infos_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> types() const override {
    std::vector<std::string> t;
    for (const auto& [k, v] : infos_) t.push_back(k);
    return t;
  }
  std::string kind_name(unsigned kind) const override {
    static const char* kNames[] = {"tick", "sum", "alert"};
    return kind < 3 ? kNames[kind] : "kind" + std::to_string(kind);
  }

 private:
  void add(rt::ComponentInfo info) {
    std::string t = info.type;
    infos_[t] = std::move(info);
  }
  std::map<std::string, rt::ComponentInfo> infos_;
};

const ToyCatalog& catalog() {
  static const ToyCatalog c;
  return c;
}

// Variables from this map only, never the process environment: hermetic.
rt::VarLookup vars(std::map<std::string, std::string> m = {{"OUT", "/out"}, {"EMPTY", ""}}) {
  return [m = std::move(m)](const std::string& name) -> std::optional<std::string> {
    auto it = m.find(name);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

rt::PipelineSpec parse(const std::string& yaml, const rt::VarLookup& v = vars()) {
  return rt::parse_pipeline_text(yaml, "pipe.yaml", catalog(), v);
}

// The diagnostics of a pipeline that must not parse.
std::vector<rt::Diagnostic> diagnostics(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const rt::ConfigError& e) {
    return e.diagnostics();
  }
  return {};
}

// --- errors, one line per case -----------------------------------------------------
struct ErrorCase {
  const char* name;
  const char* yaml;
  int line, column;
  const char* path;
  const char* message;  // a substring of the message
};

void CheckInvalid(const ErrorCase& c) {
  const std::string name = c.name, yaml = c.yaml;
  CAPTURE(name);
  CAPTURE(yaml);
  auto diags = diagnostics(c.yaml);
  std::string all;
  for (const auto& d : diags) all += d.str() + "\n";
  CAPTURE(all);
  CHECK(diags.size() == 1);
  if (diags.empty()) return;
  const auto& d = diags[0];
  CAPTURE(d.str());
  CHECK(d.where.file == "pipe.yaml");
  CHECK(d.where.line == c.line);
  CHECK(d.where.column == c.column);
  CHECK(d.path == c.path);
  CHECK(d.message.find(c.message) != std::string::npos);
}

#define SRC "sources:\n  src: {type: ticker, count: 3}\n"

TEST_CASE("each class of pipeline error is reported at its file:line:col with the component path") {
  // Columns are 1-based. In "  src: {type: ticker, count: 3, rate: 2}" the key
  // `type` is at 9, `count` at 23 and the key after it at 33.
  const std::vector<ErrorCase> cases = {
      // YAML itself
      {"unclosed flow mapping", "sources:\n  src: {type: ticker, count: 3\n", 3, 1, "", "YAML syntax error"},
      {"bad indentation", "sources:\n  src:\n    type: ticker\n   count: 3\n", 4, 4, "", "YAML syntax error"},
      {"top level not a mapping", "- a\n- b\n", 1, 1, "", "expected a mapping with 'sources'"},
      {"unknown top-level key (did you mean)", SRC "sink:\n  out: {type: printer, inputs: [src]}\n", 3, 1, "",
       "unknown key 'sink' (did you mean 'sinks'?)"},
      {"unsupported version", "version: 2\n" SRC, 1, 10, "version", "unsupported pipeline version"},
      {"a section that is not a mapping", "sources: [a, b]\n", 1, 10, "sources",
       "expected a mapping of component names to components"},
      {"no source", "sinks: {}\n", 1, 1, "sources", "a pipeline needs at least one source"},
      // components
      {"unknown component type (did you mean)", "sources:\n  src: {type: tikcer, count: 3}\n", 2, 15,
       "sources.src.type", "unknown component type 'tikcer' (did you mean 'ticker'?); expected one of: alarms, ticker"},
      {"a type of another role", "sources:\n  src: {type: summer, count: 3}\n", 2, 15, "sources.src.type",
       "'summer' is not a component of sources; expected one of: alarms, ticker"},
      {"missing type", "sources:\n  src: {count: 3}\n", 2, 3, "sources.src", "missing 'type'"},
      {"component not a mapping", "sources:\n  src: ticker\n", 2, 8, "sources.src",
       "expected a mapping with at least 'type'"},
      {"invalid component name", "sources:\n  a b: {type: ticker, count: 3}\n", 2, 3, "sources.a b",
       "invalid component name 'a b'"},
      {"duplicate component names across sections", SRC "operators:\n  src: {type: relay, inputs: [src]}\n", 4, 3,
       "operators.src", "duplicate component name 'src' (also sources.src)"},
      {"duplicate component names in a section", SRC "  src: {type: ticker, count: 4}\n", 3, 3, "sources.src",
       "duplicate component name 'src' (also sources.src)"},
      {"duplicate key in a component", "sources:\n  src: {type: ticker, count: 3, count: 4}\n", 2, 33, "sources.src",
       "duplicate key 'count'"},
      // parameters
      {"unknown parameter (did you mean)", "sources:\n  src: {type: ticker, count: 3, rat: 2}\n", 2, 33, "sources.src",
       "unknown parameter 'rat' for ticker (did you mean 'rate'?)"},
      {"inputs on a source", "sources:\n  src: {type: ticker, count: 3, inputs: [x]}\n", 2, 33, "sources.src",
       "unknown parameter 'inputs' for ticker (sources have no inputs)"},
      {"a list given for a number", "sources:\n  src: {type: ticker, count: 3, rate: [1, 2]}\n", 2, 39,
       "sources.src.rate", "expected number, got a list"},
      {"a mapping given for an int", "sources:\n  src: {type: ticker, count: 3, burst: {a: 1}}\n", 2, 40,
       "sources.src.burst", "expected int, got a mapping"},
      {"'abc' for an int", "sources:\n  src: {type: ticker, count: 3, burst: abc}\n", 2, 40, "sources.src.burst",
       "invalid value for 'burst': expected an integer, got 'abc'"},
      {"a fraction for an int", "sources:\n  src: {type: ticker, count: 3, burst: 2.5}\n", 2, 40, "sources.src.burst",
       "expected an integer, got '2.5'"},
      {"below the minimum", "sources:\n  src: {type: ticker, count: 3, burst: 0}\n", 2, 40, "sources.src.burst",
       "must be at least 1"},
      {"above the maximum", "sources:\n  src: {type: ticker, count: 3, burst: 1001}\n", 2, 40, "sources.src.burst",
       "must be at most 1000"},
      {"bad duration", "sources:\n  src: {type: ticker, count: 3, jitter: 5 parsecs}\n", 2, 41, "sources.src.jitter",
       "expected a duration such as 500ms, 5s or 2m, got '5 parsecs'"},
      {"duration above its maximum (in seconds)", "sources:\n  src: {type: ticker, count: 3, jitter: 2m}\n", 2, 41,
       "sources.src.jitter", "must be at most 60"},
      {"bad bool", "sources:\n  src: {type: ticker, count: 3, loop: maybe}\n", 2, 39, "sources.src.loop",
       "expected true or false, got 'maybe'"},
      {"a value outside the choices", SRC "operators:\n  s: {type: summer, inputs: [src], threshold: 1, mode: avg}\n",
       4, 56, "operators.s.mode", "expected one of sum, max, got 'avg'"},
      {"a mapping for a list of strings", "sources:\n  src: {type: ticker, count: 3, tags: {a: 1}}\n", 2, 39,
       "sources.src.tags", "expected a list of strings, got a mapping"},
      {"a list inside a list of strings", "sources:\n  src: {type: ticker, count: 3, tags: [a, [b]]}\n", 2, 43,
       "sources.src.tags", "expected a list of strings"},
      {"missing required parameter", "sources:\n  src: {type: ticker}\n", 2, 3, "sources.src",
       "missing required parameter 'count' (int: ticks to emit)"},
      {"a bad value of a required parameter is not also 'missing'", "sources:\n  src: {type: ticker, count: abc}\n", 2,
       30, "sources.src.count", "invalid value for 'count': expected an integer, got 'abc'"},
      {"bad parallelism", SRC "operators:\n  r: {type: relay, inputs: [src], parallelism: -1}\n", 4, 48,
       "operators.r.parallelism", "must be at least 0"},
      // inputs and wiring
      {"missing inputs", SRC "sinks:\n  out: {type: printer}\n", 4, 3, "sinks.out", "missing 'inputs'"},
      {"empty inputs", SRC "sinks:\n  out: {type: printer, inputs: []}\n", 4, 32, "sinks.out.inputs",
       "expected a non-empty list of component names"},
      {"unknown input (did you mean)", SRC "sinks:\n  out: {type: printer, inputs: [scr]}\n", 4, 33, "sinks.out.inputs",
       "unknown input 'scr' (did you mean 'src'?)"},
      {"an input listed twice", SRC "sinks:\n  out: {type: printer, inputs: [src, src]}\n", 4, 38, "sinks.out.inputs",
       "input 'src' is listed twice"},
      {"an input that is a sink",
       SRC "sinks:\n  out1: {type: printer, inputs: [src]}\n  out2: {type: printer, inputs: [out1]}\n", 5, 34,
       "sinks.out2.inputs", "input 'out1' is a sink and has no output"},
      {"incompatible port types",
       "sources:\n  al: {type: alarms}\noperators:\n  s: {type: summer, inputs: [al], threshold: 1}\n", 4, 30,
       "operators.s.inputs", "incompatible port types: 'al' (alarms) emits [alert] but summer accepts [tick]"},
      {"a component reading itself", SRC "operators:\n  a: {type: relay, inputs: [src, a]}\n", 4, 34,
       "operators.a.inputs", "cycle: 'a' reads its own output"},
      {"a cycle a -> b -> a", SRC "operators:\n  a: {type: relay, inputs: [src, b]}\n  b: {type: relay, inputs: [a]}\n",
       4, 3, "operators.a", "cycle in the pipeline: a -> b -> a"},
      // variables
      {"undefined variable", "sources:\n  src: {type: ticker, count: 3, label: \"${NOPE}\"}\n", 2, 40,
       "sources.src.label", "undefined variable 'NOPE' (set it, or write ${NOPE:-default})"},
      {"undefined variable in a block scalar",
       "sources:\n  src:\n    type: ticker\n    count: 3\n    label: x-${NOPE}\n", 5, 12, "sources.src.label",
       "undefined variable 'NOPE'"},
      {"invalid variable name", "sources:\n  src: {type: ticker, count: 3, label: \"${A-B}\"}\n", 2, 40,
       "sources.src.label", "invalid variable name 'A-B'"},
      {"unterminated variable", "sources:\n  src: {type: ticker, count: 3, label: \"${OUT\"}\n", 2, 40,
       "sources.src.label", "unterminated '${'"},
      // settings
      {"unknown setting (did you mean)", "settings:\n  latenes: 5s\n" SRC, 2, 3, "settings",
       "unknown key 'latenes' (did you mean 'lateness'?)"},
      {"bad overflow policy", "settings:\n  overflow: drop\n" SRC, 2, 13, "settings.overflow",
       "expected one of block, shed, got 'drop'"},
      {"negative lateness", "settings:\n  lateness: -1s\n" SRC, 2, 13, "settings.lateness", "expected a duration"},
      {"bad backpressure", "settings:\n  backpressure: soon\n" SRC, 2, 17, "settings.backpressure",
       "expected a duration"},
      {"zero queue capacity", "settings:\n  queue_capacity: 0\n" SRC, 2, 19, "settings.queue_capacity",
       "must be at least 1"},
      {"settings not a mapping", "settings: fast\n" SRC, 1, 11, "settings", "expected a mapping"},
  };
  for (const auto& c : cases) CheckInvalid(c);
}

TEST_CASE("Diagnostic::str() reads file:line:col: error: message (in path)") {
  auto diags = diagnostics("sources:\n  src: {type: tikcer, count: 3}\n");
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].str().rfind("pipe.yaml:2:15: error: unknown component type 'tikcer'", 0) == 0);
  CHECK(diags[0].str().find("(in sources.src.type)") != std::string::npos);
}

TEST_CASE("every problem of a pipeline is reported at once, in document order") {
  auto diags = diagnostics(
      "sources:\n"
      "  src: {type: ticker, count: 3, burst: abc, rat: 2}\n"
      "sinks:\n"
      "  out: {type: printer, inputs: [scr]}\n");
  REQUIRE(diags.size() == 3);
  CHECK(diags[0].path == "sources.src.burst");
  CHECK(diags[1].path == "sources.src");
  CHECK(diags[1].message.find("'rat'") != std::string::npos);
  CHECK(diags[2].path == "sinks.out.inputs");
  CHECK(diags[2].where.line == 4);
  try {
    parse("sources:\n  src: {type: ticker, count: 3, burst: abc, rat: 2}\n");
    FAIL("parsed");
  } catch (const rt::ConfigError& e) {  // what() holds every diagnostic, one per line
    std::string what = e.what();
    CHECK(std::count(what.begin(), what.end(), '\n') == 1);
    CHECK(what.find("pipe.yaml:2:40: error: invalid value for 'burst'") != std::string::npos);
  }
}

// --- variables ------------------------------------------------------------------
TEST_CASE("substitute_vars: ${VAR}, ${VAR:-default}, $$ and their errors") {
  struct Case {
    const char* in;
    std::optional<std::string> out;  // nullopt: an error...
    const char* why;                 // ...whose message contains this
  };
  const std::vector<Case> cases = {
      {"plain", "plain", ""},
      {"${OUT}/a", "/out/a", ""},
      {"${OUT:-/tmp}/a", "/out/a", ""},
      {"${UNSET:-/tmp}/a", "/tmp/a", ""},
      {"${UNSET:-}", "", ""},
      {"${EMPTY}", "", ""},                    // set but empty: empty
      {"${EMPTY:-fallback}", "fallback", ""},  // set but empty with :- : the default (as in sh)
      {"a${OUT}b${OUT}c", "a/outb/outc", ""},
      {"$$", "$", ""},
      {"$${OUT}", "${OUT}", ""},  // an escaped '$' does not start a variable
      {"cost: 5$", "cost: 5$", ""},
      {"$OUT", "$OUT", ""},  // only the braced form substitutes
      {"$$$${OUT}", "$${OUT}", ""},
      {"${OUT:-a:-b}", "/out", ""},
      {"${UNSET:-a:-b}", "a:-b", ""},
      {"${UNSET}", std::nullopt, "undefined variable 'UNSET' (set it, or write ${UNSET:-default})"},
      {"${}", std::nullopt, "invalid variable name ''"},
      {"${A B}", std::nullopt, "invalid variable name 'A B'"},
      {"${OUT", std::nullopt, "unterminated '${' in '${OUT'"},
      {"x ${UNSET} ${OUT}", std::nullopt, "undefined variable 'UNSET'"},
  };
  auto v = vars();
  for (const auto& c : cases) {
    CAPTURE(c.in);
    std::string why;
    auto got = rt::substitute_vars(c.in, v, &why);
    CHECK(got == c.out);
    if (!c.out) CHECK(why.find(c.why) != std::string::npos);
  }
}

TEST_CASE("env_lookup reads its overrides first, then the process environment") {
  ::setenv("RUNLENS_TOY_ENV", "from-env", 1);
  ::setenv("RUNLENS_TOY_BOTH", "from-env", 1);
  auto lookup = rt::env_lookup({{"RUNLENS_TOY_BOTH", "override"}, {"RUNLENS_TOY_ONLY", "only"}});
  CHECK(lookup("RUNLENS_TOY_ENV") == std::optional<std::string>("from-env"));
  CHECK(lookup("RUNLENS_TOY_BOTH") == std::optional<std::string>("override"));
  CHECK(lookup("RUNLENS_TOY_ONLY") == std::optional<std::string>("only"));
  CHECK(lookup("RUNLENS_TOY_NEVER_SET") == std::nullopt);
  ::unsetenv("RUNLENS_TOY_ENV");
  ::unsetenv("RUNLENS_TOY_BOTH");
}

TEST_CASE("variables are substituted in parameter values before they are parsed") {
  auto spec = parse(
      "sources:\n"
      "  src:\n"
      "    type: ticker\n"
      "    count: ${N:-7}\n"
      "    label: \"$${literal} at ${OUT}\"\n"
      "    jitter: ${J}\n"
      "    tags: [\"${OUT}\", x]\n",
      vars({{"OUT", "/out"}, {"J", "250ms"}}));
  const auto* src = spec.find("src");
  REQUIRE(src != nullptr);
  CHECK(src->params.get_int("count") == 7);
  CHECK(src->params.get_string("label") == "${literal} at /out");
  CHECK(src->params.get_duration_ns("jitter") == 250'000'000);
  CHECK(src->params.get_list("tags") == std::vector<std::string>{"/out", "x"});
  CHECK(src->params.where("count").line == 4);
  CHECK(src->params.where("count").column == 12);

  // A variable that makes a value invalid is reported like a bad value.
  auto diags = [&] {
    try {
      parse("sources:\n  src: {type: ticker, count: 3, burst: \"${N}\"}\n", vars({{"N", "many"}}));
    } catch (const rt::ConfigError& e) {
      return e.diagnostics();
    }
    return std::vector<rt::Diagnostic>{};
  }();
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].message == "invalid value for 'burst': expected an integer, got 'many'");
  CHECK(diags[0].where.column == 40);
}

// --- settings, defaults, order, DOT -----------------------------------------------
TEST_CASE("settings are parsed, and defaulted when absent") {
  auto defaults = parse(SRC).settings;
  rt::PipelineSettings want;
  CHECK(defaults.lateness_ns == want.lateness_ns);
  CHECK(defaults.idle_timeout_ns == want.idle_timeout_ns);
  CHECK(defaults.queue_capacity == want.queue_capacity);
  CHECK(defaults.overflow == rt::OverflowPolicy::kBlock);
  CHECK(defaults.backpressure_ns == 1'000'000'000);
  CHECK(defaults.backpressure_ns == rt::ExecutorOptions{}.backpressure_ns);
  CHECK(defaults.batch_size == want.batch_size);
  CHECK(defaults.dead_letter.empty());

  auto s = parse(
               "settings:\n"
               "  lateness: 250ms\n"
               "  idle_timeout: 2m\n"
               "  queue_capacity: 16\n"
               "  overflow: shed\n"
               "  backpressure: 250ms\n"
               "  batch_size: 7\n"
               "  dead_letter: ${OUT}/dead.jsonl\n" SRC)
               .settings;
  CHECK(s.lateness_ns == 250'000'000);
  CHECK(s.idle_timeout_ns == 120'000'000'000);
  CHECK(s.queue_capacity == 16);
  CHECK(s.overflow == rt::OverflowPolicy::kShed);
  CHECK(s.backpressure_ns == 250'000'000);
  CHECK(s.batch_size == 7);
  CHECK(s.dead_letter == "/out/dead.jsonl");
  CHECK(s.where.line == 2);

  CHECK(parse("settings:\n  overflow: block\n" SRC).settings.overflow == rt::OverflowPolicy::kBlock);
  CHECK(parse("settings:\n  lateness: 0\n" SRC).settings.lateness_ns == 0);
}

TEST_CASE("parameter defaults are applied, parsed like written values, and located at the component") {
  auto spec = parse(SRC
                    "operators:\n"
                    "  s: {type: summer, inputs: [src], threshold: 2}\n"
                    "sinks:\n"
                    "  out: {type: printer, inputs: [s]}\n");
  const auto* src = spec.find("src");
  REQUIRE(src != nullptr);
  CHECK(src->params.get_int("count") == 3);
  CHECK(src->params.get_int("burst") == 1);
  CHECK(src->params.get_double("rate") == 1.0);
  CHECK(src->params.get_string("label") == "t");
  CHECK(src->params.get_duration_ns("jitter") == 0);
  CHECK(src->params.get_bool("loop") == false);
  CHECK(src->params.get_list("tags").empty());
  CHECK(src->params.where("count").line == 2);  // written: at the value
  CHECK(src->params.where("count").column == 30);

  const auto* s = spec.find("s");
  REQUIRE(s != nullptr);
  CHECK(s->params.get_double("threshold") == 2.0);  // an int written for a number
  CHECK(s->params.get_duration_ns("window") == 1'000'000'000);
  CHECK(s->params.get_string("mode") == "sum");
  CHECK(s->params.get_list("keys") == std::vector<std::string>{"a", "b"});
  CHECK(s->parallelism == 0);

  // A default may use a variable, with its own default.
  CHECK(spec.find("out")->params.get_string("path") == "/out/x.jsonl");
  CHECK(parse(SRC "sinks:\n  out: {type: printer, inputs: [src]}\n", vars({})).find("out")->params.get_string("path") ==
        "/tmp/x.jsonl");
}

TEST_CASE("components, their paths, inputs, locations and parallelism are recorded") {
  auto spec = parse(
      "version: 1\n"
      "name: toy\n" SRC
      "operators:\n"
      "  r: {type: relay, inputs: src, parallelism: 3}\n"
      "sinks:\n"
      "  out: {type: alert_log, inputs: [r]}\n");
  CHECK(spec.name == "toy");
  CHECK(spec.file == "pipe.yaml");
  const auto* r = spec.find("r");
  REQUIRE(r != nullptr);
  CHECK(r->role == rt::Role::kOperator);
  CHECK(r->path() == "operators.r");
  CHECK(r->type == "relay");
  REQUIRE(r->info != nullptr);
  CHECK(r->info->type == "relay");
  CHECK(r->parallelism == 3);
  REQUIRE(r->inputs.size() == 1);  // a single name for `inputs`
  CHECK(r->inputs[0].name == "src");
  CHECK(r->inputs[0].where.line == 6);
  CHECK(r->inputs[0].where.column == 28);
  CHECK(r->where.line == 6);
  CHECK(r->where.column == 3);
  CHECK(spec.find("out")->path() == "sinks.out");
  CHECK(spec.find("src")->path() == "sources.src");
  CHECK(spec.find("nothing") == nullptr);
}

TEST_CASE("components come out in topological order, inputs first") {
  auto spec = parse(SRC
                    "operators:\n"
                    "  c: {type: relay, inputs: [b]}\n"
                    "  b: {type: relay, inputs: [a]}\n"
                    "  a: {type: relay, inputs: [src]}\n"
                    "  d: {type: relay, inputs: [c, a]}\n"
                    "sinks:\n"
                    "  out: {type: printer, inputs: [d, src]}\n");
  std::vector<std::string> order;
  for (const auto& c : spec.components) order.push_back(c.id);
  CHECK(order == std::vector<std::string>{"src", "a", "b", "c", "d", "out"});
  for (size_t i = 0; i < spec.components.size(); ++i) {  // the property itself
    for (const auto& in : spec.components[i].inputs) {
      auto at = std::find(order.begin(), order.end(), in.name) - order.begin();
      CHECK(static_cast<size_t>(at) < i);
    }
  }
}

TEST_CASE("to_dot() shows every component and every edge") {
  auto spec = parse("name: toy\n" SRC
                    "  al: {type: alarms}\n"
                    "operators:\n"
                    "  s: {type: summer, inputs: [src], threshold: 2}\n"
                    "  r: {type: relay, inputs: [s, al]}\n"
                    "sinks:\n"
                    "  out: {type: printer, inputs: [r, src]}\n");
  std::string dot = spec.to_dot();
  CAPTURE(dot);
  CHECK(dot.rfind("digraph \"toy\" {", 0) == 0);
  for (const char* edge :
       {"\"src\" -> \"s\";", "\"s\" -> \"r\";", "\"al\" -> \"r\";", "\"r\" -> \"out\";", "\"src\" -> \"out\";"}) {
    CAPTURE(edge);
    CHECK(dot.find(edge) != std::string::npos);
  }
  CHECK(std::count(dot.begin(), dot.end(), '>') == 5);  // those edges and no others
  CHECK(dot.find("\"src\" [shape=invhouse, label=\"src\\n(ticker)") != std::string::npos);
  CHECK(dot.find("\"s\" [shape=box") != std::string::npos);
  CHECK(dot.find("\"out\" [shape=house") != std::string::npos);
  CHECK(dot.find("threshold=2") != std::string::npos);  // parameters in the label...
  CHECK(dot.find("window=1s") != std::string::npos);    // ...durations as durations
  CHECK(dot.back() == '\n');
}

TEST_CASE("parse_pipeline_file reads a file and names it in diagnostics") {
  std::string path = "/tmp/runlens_pipeline_spec_test_" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream f(path);
    f << "sources:\n  src: {type: ticker, count: abc}\n";
  }
  try {
    rt::parse_pipeline_file(path, catalog(), vars());
    FAIL("parsed");
  } catch (const rt::ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].where.file == path);
    CHECK(e.diagnostics()[0].where.line == 2);
  }
  {
    std::ofstream f(path);
    f << SRC;
  }
  CHECK(rt::parse_pipeline_file(path, catalog(), vars()).components.size() == 1);
  std::remove(path.c_str());
  try {
    rt::parse_pipeline_file(path, catalog(), vars());
    FAIL("parsed a file that does not exist");
  } catch (const rt::ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].where.file == path);
    CHECK(e.diagnostics()[0].message == "cannot open pipeline file");
  }
}

TEST_CASE("a bad variable in a component's type gives one diagnostic") {
  // Regression test, fixed (was: runtime/pipeline_spec.cc, Parser::parse_component, at
  // `c.type = scalar(type, path + ".type");`): when the `type` holds an
  // undefined variable, scalar() reports it and returns "", and the lookup
  // goes on to report a second, misleading diagnostic "unknown component
  // type ''; expected one of: ..." at the same place. Fix: note
  // diags_.size() before scalar() and return if it grew.
  CheckInvalid({"undefined variable in the type", "sources:\n  src: {type: \"${NOPE}\", count: 3}\n", 2, 15,
                "sources.src.type", "undefined variable 'NOPE'"});
}

TEST_CASE("a parameter default is located at its component") {
  // Regression test, fixed (was: runtime/pipeline_spec.cc, Parser::parse_param and the defaults loop
  // in Parser::parse_component, `parse_param(p, def, key.Mark(), ...)`): the
  // comment there says an error in a default "is reported at the component",
  // but parse_param never uses its `key_mark` argument: it locates errors and Params::where() at
  // value.Mark(), and a default is a YAML::Node built from a string, whose
  // mark is null. So a bad default is reported with no line:col at all
  // ("pipe.yaml: error: ..."), and so is any BuildContext::fail() a factory
  // raises about a defaulted parameter (it uses Params::where()). A non-empty
  // list default is YAML::Load-ed, so its mark is 1:1 of the default's own
  // text, reported as line 1 of the pipeline. Fix: give parse_param the
  // location to use for defaults (key.Mark()) and use it for both the errors
  // and Params::set.
  auto diags = diagnostics(SRC "sinks:\n  out: {type: strict_printer, inputs: [src]}\n");
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].path == "sinks.out.path");
  CHECK(diags[0].message.find("undefined variable 'RUNLENS_TOY_UNSET'") != std::string::npos);
  CHECK(diags[0].where.line == 4);
  CHECK(diags[0].where.column == 3);

  auto spec = parse(SRC "operators:\n  s: {type: summer, inputs: [src], threshold: 2}\n");
  for (auto [id, name] :
       {std::pair{"src", "rate"}, std::pair{"src", "label"}, std::pair{"s", "window"}, std::pair{"s", "keys"}}) {
    CAPTURE(name);
    const auto* c = spec.find(id);
    REQUIRE(c != nullptr);
    CHECK(c->params.where(name).line == c->where.line);
    CHECK(c->params.where(name).column == c->where.column);
  }
}

TEST_CASE("Catalog::kinds_str names the kinds of a mask") {
  CHECK(catalog().kinds_str(0) == "[]");
  CHECK(catalog().kinds_str(bit(kAlert)) == "[alert]");
  CHECK(catalog().kinds_str(bit(kTick) | bit(kAlert)) == "[tick, alert]");
  CHECK(catalog().kinds_str(bit(5)) == "[kind5]");
  CHECK(rt::role_section(rt::Role::kSource) == "sources");
  CHECK(rt::role_section(rt::Role::kOperator) == "operators");
  CHECK(rt::role_section(rt::Role::kSink) == "sinks");
}

}  // namespace
