// The component registry: for every component type, its description
// (ComponentInfo: role, parameters, port kinds) and its factory. Registration
// is explicit: operators/builtin.cc and connectors/builtin.cc call one
// Register* function per component.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/operator.h"
#include "runtime/pipeline_spec.h"

namespace runlens::runtime {

// What a factory may use besides its parameters.
struct BuildContext {
  std::string component_id;
  std::string component_path;  // "operators.stragglers", for errors
  const Params* params = nullptr;
  // A factory reports a bad combination of values as a user error here.
  [[noreturn]] void fail(const std::string& param, const std::string& message) const {
    throw ConfigError({Diagnostic{params ? params->where(param) : SourceLocation{}, component_path, message}});
  }
  // Where a factory's warnings (a deprecated parameter) go; null drops them.
  // Warnings are values like errors: whoever loads the pipeline reports them
  // once, however often the components are built.
  std::vector<Diagnostic>* warnings = nullptr;
  void warn(const std::string& param, const std::string& message) const {
    if (warnings)
      warnings->push_back(Diagnostic{params ? params->where(param) : SourceLocation{}, component_path, message});
  }
};

template <class R>
class Registry final : public Catalog {
 public:
  using OperatorFactory = std::function<std::unique_ptr<OperatorDef<R>>(const BuildContext&)>;
  using SourceFactory = std::function<std::unique_ptr<SourceDef<R>>(const BuildContext&)>;

  explicit Registry(std::vector<std::string> kind_names) : kind_names_(std::move(kind_names)) {}

  void add_operator(ComponentInfo info, OperatorFactory f) {
    RUNLENS_CHECK(info.role != Role::kSource, "operators and sinks only");
    RUNLENS_CHECK(!entries_.count(info.type), "component type registered twice: " + info.type);
    std::string t = info.type;
    entries_[t] = Entry{std::move(info), std::move(f), nullptr};
  }
  void add_source(ComponentInfo info, SourceFactory f) {
    RUNLENS_CHECK(info.role == Role::kSource, "sources only");
    RUNLENS_CHECK(!entries_.count(info.type), "component type registered twice: " + info.type);
    std::string t = info.type;
    entries_[t] = Entry{std::move(info), nullptr, std::move(f)};
  }

  // A parameter that `type` took before and no longer does, and where it went.
  void add_moved_param(const std::string& type, const std::string& param, std::string where) {
    moved_[{type, param}] = std::move(where);
  }
  std::optional<std::string> moved_param(const std::string& type, const std::string& param) const override {
    auto it = moved_.find({type, param});
    return it == moved_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }

  const ComponentInfo* find(const std::string& type) const override {
    auto it = entries_.find(type);
    return it == entries_.end() ? nullptr : &it->second.info;
  }
  std::vector<std::string> types() const override {
    std::vector<std::string> t;
    for (const auto& [k, v] : entries_) t.push_back(k);
    return t;
  }
  std::string kind_name(unsigned kind) const override {
    return kind < kind_names_.size() ? kind_names_[kind] : "kind" + std::to_string(kind);
  }

  // Builds a component the parser accepted against this catalog. Factories
  // check and throw ConfigError; they allocate nothing outside the returned
  // value (no socket, file or store: that is open()'s and run()'s work), so
  // building is also how `runlens validate` checks a pipeline.
  std::unique_ptr<OperatorDef<R>> make_operator(const ComponentSpec& c,
                                                std::vector<Diagnostic>* warnings = nullptr) const {
    auto it = entries_.find(c.type);
    RUNLENS_CHECK(it != entries_.end() && it->second.op, "no operator or sink type '" + c.type + "' in this registry");
    BuildContext ctx{c.id, c.path(), &c.params, warnings};
    return it->second.op(ctx);
  }
  std::unique_ptr<SourceDef<R>> make_source(const ComponentSpec& c, std::vector<Diagnostic>* warnings = nullptr) const {
    auto it = entries_.find(c.type);
    RUNLENS_CHECK(it != entries_.end() && it->second.source, "no source type '" + c.type + "' in this registry");
    BuildContext ctx{c.id, c.path(), &c.params, warnings};
    return it->second.source(ctx);
  }

 private:
  struct Entry {
    ComponentInfo info;
    OperatorFactory op;
    SourceFactory source;
  };
  std::map<std::string, Entry> entries_;
  std::map<std::pair<std::string, std::string>, std::string> moved_;
  std::vector<std::string> kind_names_;
};

}  // namespace runlens::runtime
