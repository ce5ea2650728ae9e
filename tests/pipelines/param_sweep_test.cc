// Every parameter of every registered component, given an invalid value, is
// rejected by load_pipeline (what `runlens validate` runs, and `replay` and
// `run` before they start) with its message, at the file:line:col where the
// parser or the component's factory points. Type and range errors are swept
// from each ParamSpec; what only a factory checks (free text, lists, values
// that must agree with each other) is the table below, and every parameter
// must be covered by one or the other.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tests/pipelines/replay_run.h"

namespace {

namespace rt = runlens::runtime;
using runlens::make_builtin_registry;

// The valid settings a component needs to build at all (its required
// parameters, and zmq's one of bind/connect). Every file and socket they name
// is in the test's directory (SWEEP_DIR), so that the test sees any a build
// would create.
const std::map<std::string, std::map<std::string, std::string>> kBase = {
    {"file", {{"paths", "[\"${SWEEP_DIR}/in.jsonl\"]"}}},
    {"zmq", {{"bind", "ipc://${SWEEP_DIR}/in.sock"}, {"record", "${SWEEP_DIR}/in.rlrec"}}},
    {"jsonl", {{"path", "${SWEEP_DIR}/alerts.jsonl"}}},
    {"zmq_pub", {{"bind", "ipc://${SWEEP_DIR}/alerts.sock"}}},
    {"timeline", {{"store", "sqlite://${SWEEP_DIR}/runlens.db"}, {"timeline_path", "${SWEEP_DIR}/timeline.jsonl"}}},
    {"alertmanager", {{"url", "http://127.0.0.1:9"}}},
};

// What a factory checks, one case a line: the value given to `param` (with
// the base settings, and `also` on top), the message expected, and the
// parameter whose position it is reported at ("": the parameter given).
struct FactoryCase {
  std::string type, param, value, message, at;
  std::map<std::string, std::string> also = {};
  bool in_component = true;  // false: the rule loader's own diagnostic, without the component path
};
const std::vector<FactoryCase> kFactoryCases = {
    {"file", "paths", "[]", "paths must name at least one file", ""},
    {"file", "speed", "fast", "invalid speed 'fast' (max, realtime or e.g. 10x)", ""},
    {"zmq", "bind", "127.0.0.1:5555",
     "invalid endpoint '127.0.0.1:5555' (expected TRANSPORT://ADDRESS, e.g. tcp://127.0.0.1:5555 or ipc:///tmp/x)", ""},
    {"zmq", "bind", "\"\"", "give exactly one of 'bind' and 'connect'", ""},
    {"zmq", "connect", "tcp://127.0.0.1:5557", "give exactly one of 'bind' and 'connect'", "bind"},
    {"zmq",
     "connect",
     "tcp://127.0.0.1",
     "invalid endpoint 'tcp://127.0.0.1' (a tcp address ends in :PORT, e.g. tcp://127.0.0.1:5555)",
     "",
     {{"bind", "\"\""}}},
    {"prometheus_scrape", "targets", "[https://a:1/metrics]",
     "https targets are not supported (this build's HTTP client has no TLS): https://a:1/metrics", ""},
    {"prometheus_scrape", "targets", "[\"a:1, a:1\"]", "target http://a:1/metrics is listed twice", ""},
    {"prometheus_scrape", "nodes", "[b:2=node-b]", "'b:2' is not one of the targets", "", {{"targets", "[a:1]"}}},
    {"prometheus_scrape", "nodes", "[a:1]", "expected TARGET=NODE, got 'a:1'", "", {{"targets", "[a:1]"}}},
    {"prometheus_scrape",
     "formats",
     "[a:1=statsd]",
     "unknown format 'statsd' for a:1 (node_exporter or dcgm)",
     "",
     {{"targets", "[a:1]"}}},
    {"prometheus_scrape", "timeout", "10s", "timeout (10s) is longer than interval (5s)", ""},
    {"jsonl", "path", "\"\"", "path must not be empty", ""},
    {"jsonl", "kinds", "[alert, alerts]", "unknown row kind 'alerts' in kinds", ""},
    {"console", "kinds", "[stepp]", "unknown row kind 'stepp' in kinds", ""},
    {"metrics", "kinds", "[stepp]", "unknown row kind 'stepp' in kinds", ""},
    {"metrics", "kinds", "[gpu, step]",
     "the metrics sink reads only run_start, run_end, step_stats, collective, gpu, node, event and alert rows", ""},
    {"zmq_pub", "bind", "\"\"", "bind must not be empty", ""},
    {"alertmanager", "url", "127.0.0.1:9093", "expected an http:// URL, got '127.0.0.1:9093'", ""},
    {"alertmanager", "url", "http:///x", "the URL 'http:///x' names no host", ""},
    {"alertmanager", "backoff_max", "100ms", "backoff_max must not be below backoff", ""},
    {"zmq_pub", "bind", "inproc:/x",
     "invalid endpoint 'inproc:/x' (expected TRANSPORT://ADDRESS, e.g. tcp://127.0.0.1:5555 or ipc:///tmp/x)", ""},
    {"timeline", "store", "runlens.db",
     "store URL 'runlens.db' has no scheme: expected SCHEME://LOCATION, e.g. sqlite:///ABSOLUTE/PATH.db or "
     "sqlite://RELATIVE/PATH.db",
     ""},
    {"timeline", "store", "pg://x/y", "store URL 'pg://x/y' has an unknown scheme 'pg' (this build knows sqlite://)",
     ""},
    {"timeline", "rollups", "[1m:30d, 10s:1x]", "expected durations such as 10s, 1m, 1h or 30d in '10s:1x'", ""},
    {"timeline", "rollups", "[10s]", "expected RESOLUTION:RETENTION (e.g. 1m:30d), got '10s'", ""},
    {"timeline", "rollups", "[1h:10s]", "retention shorter than the resolution in '1h:10s'", ""},
    {"asof_join", "kinds", "[stragler]", "unknown alert kind 'stragler' in kinds (did you mean 'straggler'?)", ""},
    {"asof_join", "tolerance", "10m", "history (5m) must cover tolerance + lookahead (10m)", "history"},
    {"asof_join", "lookahead", "5m", "history (5m) must cover tolerance + lookahead (6m)", "history"},
    {"asof_join", "history", "30s", "history (30s) must cover tolerance + lookahead (1m)", ""},
    {"root_cause", "rules", "/nonexistent/rules", "rules directory not found: /nonexistent/rules", "", {}, false},
    {"root_cause", "history_steps", "10",
     "history_steps (10) must hold the window: at least before_steps + after_steps (25)", ""},
    {"root_cause", "before_steps", "300",
     "history_steps (256) must hold the window: at least before_steps + after_steps (305)", "history_steps"},
    {"root_cause", "after_steps", "250",
     "history_steps (256) must hold the window: at least before_steps + after_steps (270)", "history_steps"},
    {"straggler", "persist_k", "6", "persist_k (6) must not exceed persist_n (5)", ""},
    {"straggler", "persist_n", "2", "persist_k (3) must not exceed persist_n (2)", "persist_k"},
    {"comm_bottleneck", "persist_k", "6", "persist_k (6) must not exceed persist_n (5)", ""},
    {"comm_bottleneck", "persist_n", "2", "persist_k (3) must not exceed persist_n (2)", "persist_k"},
    {"data_starvation", "persist_k", "6", "persist_k (6) must not exceed persist_n (5)", ""},
    {"data_starvation", "persist_n", "2", "persist_k (3) must not exceed persist_n (2)", "persist_k"},
    {"gpu_health", "persist_k", "4", "persist_k (4) must not exceed persist_n (3)", ""},
    {"gpu_health", "persist_n", "1", "persist_k (2) must not exceed persist_n (1)", "persist_k"},
    {"host_bottleneck", "persist_k", "6", "persist_k (6) must not exceed persist_n (5)", ""},
    {"host_bottleneck", "persist_n", "2", "persist_k (3) must not exceed persist_n (2)", "persist_k"},
    {"spike_detect", "min_points", "101", "min_points (101) must not exceed window (100)", ""},
    {"spike_detect", "window", "10", "min_points (20) must not exceed window (10)", "min_points"},
    {"throughput_regression", "min_baseline", "60", "min_baseline (60) must not exceed baseline_steps (50)", ""},
    {"throughput_regression", "baseline_steps", "5", "min_baseline (10) must not exceed baseline_steps (5)",
     "min_baseline"},
};

// Free text that no value makes invalid when the pipeline is built (a path
// that cannot be written is found when the component opens it).
const std::set<std::pair<std::string, std::string>> kAnyText = {
    {"zmq", "topic"},         {"zmq", "record"}, {"timeline", "timeline_path"},
    {"timeline", "db"},        // deprecated: a path, turned into sqlite://PATH
    {"alertmanager", "link"},  // a URL template: any text is a link
};

const std::string kComponentLine = "<c>";  // key of the component's own line in `lines`

// A pipeline holding component `c` of `type` with `params` (in order), wired
// to inputs whose port types fit; `lines` gets each parameter's line.
std::string pipeline_with(const rt::Catalog& catalog, const std::string& type,
                          const std::vector<std::pair<std::string, std::string>>& params,
                          std::map<std::string, int>* lines) {
  const rt::ComponentInfo* info = catalog.find(type);
  REQUIRE(info != nullptr);
  std::vector<std::string> text = {"sources:", "  s: {type: file, paths: [in.jsonl]}"};
  auto component = [&] {
    text.push_back("  c:");
    (*lines)[kComponentLine] = static_cast<int>(text.size());
    text.push_back("    type: " + type);
    if (info->role != rt::Role::kSource) {
      // The upstream nodes below: s (telemetry), j (joined steps), st (alerts).
      std::string inputs;
      const std::pair<const char*, const char*> ups[] = {{"s", "file"}, {"j", "rank_join"}, {"st", "straggler"}};
      for (const auto& [id, up_type] : ups) {
        if (catalog.find(up_type)->emits & info->accepts) inputs += std::string(inputs.empty() ? "" : ", ") + id;
      }
      text.push_back("    inputs: [" + inputs + "]");
    }
    for (const auto& [k, v] : params) {
      text.push_back("    " + k + ": " + v);
      (*lines)[k] = static_cast<int>(text.size());
    }
  };
  if (info->role == rt::Role::kSource) component();
  text.push_back("operators:");
  text.push_back("  j: {type: rank_join, inputs: [s]}");
  text.push_back("  st: {type: straggler, inputs: [j]}");
  if (info->role == rt::Role::kOperator) component();
  if (info->role == rt::Role::kSink) {
    text.push_back("sinks:");
    component();
  }
  std::string out;
  for (const auto& l : text) out += l + "\n";
  return out;
}

struct Loaded {
  std::string file;
  std::map<std::string, int> lines;
  std::vector<rt::Diagnostic> diags;  // empty: it loaded
};

Loaded load(const std::string& dir, const std::string& type, std::map<std::string, std::string> given,
            const std::string& first = "") {
  auto registry = make_builtin_registry();
  std::map<std::string, std::string> params;
  auto base = kBase.find(type);
  if (base != kBase.end()) params = base->second;
  for (auto& [k, v] : given) params[k] = v;
  // The parameter under test first, then the rest.
  std::vector<std::pair<std::string, std::string>> ordered;
  if (!first.empty()) ordered.push_back({first, params.at(first)});
  for (const auto& [k, v] : params) {
    if (k != first) ordered.push_back({k, v});
  }
  Loaded l;
  static int n = 0;
  l.file = dir + "/p" + std::to_string(n++) + ".yaml";
  std::ofstream(l.file) << pipeline_with(*registry, type, ordered, &l.lines);
  try {
    runlens::load_pipeline(l.file, {{"RUNLENS_OUT", dir + "/out"}, {"SWEEP_DIR", dir}}, registry);
  } catch (const rt::ConfigError& e) {
    l.diags = e.diagnostics();
  }
  return l;
}

std::string diags_text(const Loaded& l) {
  std::string s;
  for (const auto& d : l.diags) s += d.str() + "\n";
  return s;
}

// The value's position of `param`: its line, after "    PARAM: ".
std::string value_at(const Loaded& l, const std::string& param) {
  return l.file + ":" + std::to_string(l.lines.at(param)) + ":" + std::to_string(5 + param.size() + 2);
}

// The invalid values that a ParamSpec rejects by itself: the text, and the
// start of the message the parser gives.
std::vector<std::pair<std::string, std::string>> invalid_values(const rt::ParamSpec& p) {
  std::vector<std::pair<std::string, std::string>> v;
  std::string invalid = "invalid value for '" + p.name + "': ";
  auto number = [](double x) { return rt::number_text(x); };
  switch (p.type) {
    case rt::ParamType::kInt:
      v.push_back({"1.5", invalid + "expected an integer, got '1.5'"});
      if (p.min) v.push_back({number(*p.min - 1), invalid + "must be at least " + std::to_string(*p.min)});
      if (p.max) v.push_back({number(*p.max + 1), invalid + "must be at most " + std::to_string(*p.max)});
      break;
    case rt::ParamType::kDouble:
      v.push_back({"high", invalid + "expected a number, got 'high'"});
      if (p.min) v.push_back({number(*p.min - 0.5), invalid + "must be at least " + std::to_string(*p.min)});
      if (p.max) v.push_back({number(*p.max + 0.5), invalid + "must be at most " + std::to_string(*p.max)});
      break;
    case rt::ParamType::kBool:
      v.push_back({"maybe", invalid + "expected true or false, got 'maybe'"});
      break;
    case rt::ParamType::kDuration:
      v.push_back({"soon", invalid + "expected a duration such as 500ms, 5s or 2m, got 'soon'"});
      v.push_back({"-5s", invalid + "expected a duration such as 500ms, 5s or 2m, got '-5s'"});
      if (p.min && *p.min > 0) v.push_back({"0s", invalid + "must be at least " + std::to_string(*p.min)});
      if (p.max) v.push_back({number(*p.max + 1) + "s", invalid + "must be at most " + std::to_string(*p.max)});
      break;
    case rt::ParamType::kString:
      if (!p.choices.empty()) v.push_back({"bogus", invalid + "expected one of "});
      break;
    case rt::ParamType::kStringList:
      v.push_back({"{a: 1}", "expected a list of strings, got a mapping"});  // no scalar to quote
      break;
  }
  return v;
}

}  // namespace

TEST_CASE("every registered component builds from its base settings") {
  std::string dir = runlens::testing::fresh_dir("sweep-base");
  auto registry = make_builtin_registry();
  for (const auto& type : registry->types()) {
    CAPTURE(type);
    auto l = load(dir, type, {});
    CHECK_MESSAGE(l.diags.empty(), diags_text(l));
  }
  // Building is side-effect free: no socket, store, file or output directory
  // appeared beside the pipelines written.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    CHECK(e.path().extension() == ".yaml");
  }
  CHECK(!std::filesystem::exists(dir + "/out"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("every parameter with a value of the wrong type or range is rejected at its position") {
  std::string dir = runlens::testing::fresh_dir("sweep-types");
  auto registry = make_builtin_registry();
  int checked = 0;
  for (const auto& type : registry->types()) {
    for (const auto& p : registry->find(type)->params) {
      for (const auto& [value, why] : invalid_values(p)) {
        CAPTURE(type);
        CAPTURE(p.name);
        CAPTURE(value);
        auto l = load(dir, type, {{p.name, value}}, p.name);
        REQUIRE_MESSAGE(l.diags.size() == 1, diags_text(l));
        const auto& d = l.diags[0];
        CHECK(d.where.str() == value_at(l, p.name));
        CHECK(d.message.rfind(why, 0) == 0);
        CHECK(d.path == std::string(rt::role_section(registry->find(type)->role)) + ".c." + p.name);
        ++checked;
      }
    }
  }
  CHECK(checked > 150);
  std::filesystem::remove_all(dir);
}

TEST_CASE("what factories check is rejected at the position the factory names") {
  std::string dir = runlens::testing::fresh_dir("sweep-factories");
  for (const auto& c : kFactoryCases) {
    CAPTURE(c.type);
    CAPTURE(c.param);
    CAPTURE(c.value);
    auto given = c.also;
    given[c.param] = c.value;
    auto l = load(dir, c.type, given, c.param);
    REQUIRE_MESSAGE(l.diags.size() == 1, diags_text(l));
    const auto& d = l.diags[0];
    std::string at = c.at.empty() ? c.param : c.at;
    // A parameter left at its default is located at the component's name.
    std::string where =
        l.lines.count(at) ? value_at(l, at) : l.file + ":" + std::to_string(l.lines.at(kComponentLine)) + ":3";
    CHECK(d.where.str() == where);
    CHECK(d.message.find(c.message) != std::string::npos);
    std::string path = std::string(rt::role_section(make_builtin_registry()->find(c.type)->role)) + ".c";
    CHECK(d.path == (c.in_component ? path : ""));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("every parameter is swept: by its type, by a factory case, or declared free text") {
  auto registry = make_builtin_registry();
  std::set<std::pair<std::string, std::string>> by_factory;
  for (const auto& c : kFactoryCases) by_factory.insert({c.type, c.param});
  for (const auto& type : registry->types()) {
    for (const auto& p : registry->find(type)->params) {
      CAPTURE(type);
      CAPTURE(p.name);
      bool swept = !invalid_values(p).empty() && p.type != rt::ParamType::kStringList;
      CHECK_MESSAGE((swept || by_factory.count({type, p.name}) || kAnyText.count({type, p.name})),
                    "add an invalid value for it to kFactoryCases, or list it in kAnyText");
    }
  }
}
