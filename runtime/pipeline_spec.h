// The YAML pipeline language: named components (sources, operators, sinks)
// wired by explicit `inputs:`, as Vector does. Parsing checks everything that
// can be checked without running: syntax, component types, parameter names
// and types, inputs, port types and cycles, and reports each problem with
// file:line:col and the component path.
//
//   settings:                 # optional, see PipelineSettings
//     lateness: 5s
//   sources:
//     telemetry: {type: zmq, bind: "${RUNLENS_LISTEN:-tcp://127.0.0.1:5555}"}
//   operators:
//     join: {type: rank_join, inputs: [telemetry], timeout: 30s}
//   sinks:
//     alerts: {type: jsonl, inputs: [join], path: "${RUNLENS_OUT}/alerts.jsonl"}
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/params.h"
#include "runtime/status.h"

namespace runlens::runtime {

enum class Role { kSource, kOperator, kSink };
std::string_view role_section(Role r);  // "sources", "operators", "sinks"

enum class OverflowPolicy { kBlock, kShed };

// What the parser needs to know of a component type; the executor's registry
// adds the factory. Row kinds are small integers named by the catalog.
struct ComponentInfo {
  std::string type;
  Role role = Role::kOperator;
  std::string doc;
  std::vector<ParamSpec> params;
  uint32_t accepts = 0;  // bitmask of row kinds read (sinks, operators)
  uint32_t emits = 0;    // bitmask of row kinds written (sources, operators)
};

class Catalog {
 public:
  virtual ~Catalog() = default;
  virtual const ComponentInfo* find(const std::string& type) const = 0;
  virtual std::vector<std::string> types() const = 0;
  virtual std::string kind_name(unsigned kind) const = 0;
  // Where a parameter that `type` no longer takes went, if it moved: a load
  // error at the parameter says so, rather than "unknown parameter".
  virtual std::optional<std::string> moved_param(const std::string& type, const std::string& param) const {
    return std::nullopt;
  }
  std::string kinds_str(uint32_t mask) const;  // "[step_record, alert]"
};

struct PipelineSettings {
  int64_t lateness_ns = 5'000'000'000;       // allowed out-of-orderness per source
  int64_t idle_timeout_ns = 30'000'000'000;  // a live source silent this long stops holding the watermark
  int64_t join_grace_ns = 500'000'000;       // live: how far behind this clock a joining producer's first event may be
  int64_t queue_capacity = 16384;            // rows per edge queue
  OverflowPolicy overflow = OverflowPolicy::kBlock;
  int64_t backpressure_ns = 1'000'000'000;  // shed: how long a full queue holds its producer back before shedding
  int64_t batch_size = 16384;               // rows per batch read by sources (docs/pipelines.md)
  std::string dead_letter;                  // path; empty = ${RUNLENS_OUT}/dead_letter.jsonl
  SourceLocation where;
};

struct InputRef {
  std::string name;
  SourceLocation where;
};

struct ComponentSpec {
  std::string id;
  Role role = Role::kOperator;
  std::string type;
  const ComponentInfo* info = nullptr;
  std::vector<InputRef> inputs;
  Params params;
  int parallelism = 0;   // 0 = the executor's thread count
  SourceLocation where;  // of the component's key
  std::string path() const { return std::string(role_section(role)) + "." + id; }
};

struct PipelineSpec {
  std::string file;
  std::string name;
  PipelineSettings settings;
  std::vector<ComponentSpec> components;  // in topological order (inputs first)
  // The catalog that components' `info` point into, when the spec keeps it
  // alive (engine's load_pipeline); null when the caller does.
  std::shared_ptr<const Catalog> catalog;

  const ComponentSpec* find(const std::string& id) const;
  // Graphviz DOT of the wiring: each component's name, type, the line
  // `describe` gives for it (its built definition's describe(), when the
  // caller built it) and its parameters.
  std::string to_dot(const std::function<std::string(const ComponentSpec&)>& describe = {}) const;
};

// Variables for ${VAR} and ${VAR:-default}: `overrides` first, then the process environment.
using VarLookup = std::function<std::optional<std::string>(const std::string&)>;
VarLookup env_lookup(std::map<std::string, std::string> overrides = {});

// Substitutes ${VAR} / ${VAR:-default} in one scalar; on error returns nullopt and fills `why`.
std::optional<std::string> substitute_vars(const std::string& text, const VarLookup& vars, std::string* why);

// Throws ConfigError with every problem found.
PipelineSpec parse_pipeline_file(const std::string& path, const Catalog& catalog, const VarLookup& vars);
PipelineSpec parse_pipeline_text(const std::string& text, const std::string& file_name, const Catalog& catalog,
                                 const VarLookup& vars);

}  // namespace runlens::runtime
