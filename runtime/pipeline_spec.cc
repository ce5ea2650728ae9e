#include "runtime/pipeline_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "runtime/yaml_checker.h"

namespace runlens::runtime {

std::string_view role_section(Role r) {
  switch (r) {
    case Role::kSource:
      return "sources";
    case Role::kOperator:
      return "operators";
    case Role::kSink:
      return "sinks";
  }
  return "?";
}

std::string Catalog::kinds_str(uint32_t mask) const {
  std::string s = "[";
  for (unsigned k = 0; k < 32; ++k) {
    if (mask & (1u << k)) s += (s.size() > 1 ? ", " : "") + kind_name(k);
  }
  return s + "]";
}

const ComponentSpec* PipelineSpec::find(const std::string& id) const {
  for (const auto& c : components) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

VarLookup env_lookup(std::map<std::string, std::string> overrides) {
  return [overrides = std::move(overrides)](const std::string& name) -> std::optional<std::string> {
    auto it = overrides.find(name);
    if (it != overrides.end()) return it->second;
    if (const char* v = std::getenv(name.c_str())) return std::string(v);
    return std::nullopt;
  };
}

std::optional<std::string> substitute_vars(const std::string& text, const VarLookup& vars, std::string* why) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c != '$') {
      out += c;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '$') {  // "$$" is a literal '$'
      out += '$';
      ++i;
      continue;
    }
    if (i + 1 >= text.size() || text[i + 1] != '{') {
      out += c;
      continue;
    }
    // The matching '}': a default may itself use ${VAR}, as in
    // ${RUNLENS_DB:-${RUNLENS_OUT}/runlens.db}.
    size_t close = std::string::npos;
    for (size_t j = i + 2, depth = 1; j < text.size(); ++j) {
      if (text[j] == '$' && j + 1 < text.size() && text[j + 1] == '$')
        ++j;  // "$$": a literal '$'
      else if (text[j] == '$' && j + 1 < text.size() && text[j + 1] == '{')
        ++depth, ++j;
      else if (text[j] == '}' && --depth == 0) {
        close = j;
        break;
      }
    }
    if (close == std::string::npos) {
      *why = "unterminated '${' in '" + text + "'";
      return std::nullopt;
    }
    std::string body = text.substr(i + 2, close - i - 2);
    std::string name = body;
    std::optional<std::string> fallback;
    if (size_t d = body.find(":-"); d != std::string::npos) {
      name = body.substr(0, d);
      fallback = body.substr(d + 2);
    }
    bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
    });
    if (!valid) {
      *why = "invalid variable name '" + name + "' in '" + text + "'";
      return std::nullopt;
    }
    auto v = vars(name);
    if (v && !v->empty())
      out += *v;
    else if (fallback) {
      auto expanded = substitute_vars(*fallback, vars, why);  // only when the default is used
      if (!expanded) return std::nullopt;
      out += *expanded;
    } else if (v)
      out += *v;
    else {
      *why = "undefined variable '" + name + "' (set it, or write ${" + name + ":-default})";
      return std::nullopt;
    }
    i = close;
  }
  return out;
}

namespace {

class Parser : YamlChecker {
 public:
  Parser(std::string file, const Catalog& catalog, const VarLookup& vars)
      : YamlChecker(std::move(file)), catalog_(catalog), vars_(vars) {}

  PipelineSpec parse(const std::string& text) {
    PipelineSpec spec;
    spec.file = file_;
    YAML::Node root = load_mapping(text, "'sources', 'operators' and 'sinks'");
    static const std::vector<std::string> kTop = {"version", "name", "settings", "sources", "operators", "sinks"};
    check_keys(root, kTop, "");
    if (root["version"] && scalar(root["version"], "version") != "1") {
      error(root["version"].Mark(), "version", "unsupported pipeline version (this runlens reads version 1)");
    }
    if (root["name"]) spec.name = scalar(root["name"], "name");
    if (root["settings"]) parse_settings(root["settings"], &spec.settings);

    std::vector<ComponentSpec> comps;
    const std::pair<const char*, Role> sections[] = {
        {"sources", Role::kSource}, {"operators", Role::kOperator}, {"sinks", Role::kSink}};
    for (const auto& [section, role] : sections) {
      YAML::Node n = root[section];
      if (!n || n.IsNull()) continue;
      if (!n.IsMap()) {
        error(n.Mark(), section, "expected a mapping of component names to components");
        continue;
      }
      for (auto it = n.begin(); it != n.end(); ++it) parse_component(it->first, it->second, role, &comps);
    }
    bool any_source = std::any_of(comps.begin(), comps.end(), [](auto& c) { return c.role == Role::kSource; });
    if (!any_source && diags_.empty()) error(root.Mark(), "sources", "a pipeline needs at least one source");

    wire(comps);
    if (!diags_.empty()) throw ConfigError(diags_);
    spec.components = topo_sort(std::move(comps));
    if (!diags_.empty()) throw ConfigError(diags_);
    return spec;
  }

 private:
  std::string scalar(const YAML::Node& n, const std::string& path, YAML::Mark at = YAML::Mark::null_mark()) {
    if (at.is_null()) at = n.Mark();
    if (!n.IsScalar()) {
      error(at, path, std::string("expected a single value, got a ") + (n.IsSequence() ? "list" : "mapping"));
      return {};
    }
    std::string why;
    auto v = substitute_vars(n.Scalar(), vars_, &why);
    if (!v) {
      error(at, path, why);
      return {};
    }
    return *v;
  }

  void check_keys(const YAML::Node& map, const std::vector<std::string>& allowed, const std::string& path) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      std::string k = it->first.as<std::string>("");
      if (!seen.insert(k).second) error(it->first.Mark(), path, "duplicate key '" + k + "'");
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        std::string hint = closest_match(k, allowed);
        error(it->first.Mark(), path,
              "unknown key '" + k + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
      }
    }
  }

  // Parses `value` against `spec` into `out`.
  void parse_param(const ParamSpec& spec, const YAML::Node& value, const YAML::Mark& key_mark, const std::string& path,
                   Params* out, bool is_default = false) {
    std::string p = path + "." + spec.name;
    // A default has no place in the file: it is located at its component.
    YAML::Mark at = is_default || value.Mark().is_null() ? key_mark : value.Mark();
    if (spec.type == ParamType::kStringList) {
      std::vector<std::string> items;
      if (value.IsSequence()) {
        for (const auto& item : value) {
          if (!item.IsScalar()) {
            error(is_default ? at : item.Mark(), p, "expected a list of strings");
            return;
          }
          items.push_back(scalar(item, p, is_default ? at : item.Mark()));
        }
      } else if (value.IsScalar()) {
        items.push_back(scalar(value, p));
      } else {
        error(at, p, "expected a list of strings, got a mapping");
        return;
      }
      out->set(spec.name, items, loc(at), spec.type);
      return;
    }
    if (!value.IsScalar()) {
      error(at, p,
            "expected " + std::string(param_type_name(spec.type)) + ", got a " +
                (value.IsSequence() ? "list" : (value.IsMap() ? "mapping" : "null")));
      return;
    }
    size_t before = diags_.size();
    std::string text = scalar(value, p, at);
    if (diags_.size() != before) return;
    std::string why;
    auto v = parse_param_scalar(spec, text, &why);
    if (!v) {
      error(at, p, "invalid value for '" + spec.name + "': " + why);
      return;
    }
    out->set(spec.name, *v, loc(at), spec.type);
  }

  void parse_settings(const YAML::Node& n, PipelineSettings* s) {
    s->where = loc(n.Mark());
    if (!n.IsMap()) {
      error(n.Mark(), "settings", "expected a mapping");
      return;
    }
    // Only what is written is parsed; the defaults are PipelineSettings' own.
    const PipelineSettings defaults;
    const std::vector<ParamSpec> specs = {
        {.name = "lateness",
         .type = ParamType::kDuration,
         .default_value = duration_text(defaults.lateness_ns),
         .min = 0},
        {.name = "idle_timeout",
         .type = ParamType::kDuration,
         .default_value = duration_text(defaults.idle_timeout_ns),
         .min = 0},
        {.name = "join_grace",
         .type = ParamType::kDuration,
         .default_value = duration_text(defaults.join_grace_ns),
         .min = 0},
        {.name = "queue_capacity",
         .type = ParamType::kInt,
         .default_value = int_text(defaults.queue_capacity),
         .min = 1,
         .max = 1e9},
        {.name = "overflow", .type = ParamType::kString, .default_value = "block", .choices = {"block", "shed"}},
        {.name = "backpressure",
         .type = ParamType::kDuration,
         .default_value = duration_text(defaults.backpressure_ns),
         .min = 0},
        {.name = "batch_size",
         .type = ParamType::kInt,
         .default_value = int_text(defaults.batch_size),
         .min = 1,
         .max = 1 << 20},
        {.name = "dead_letter", .type = ParamType::kString, .default_value = defaults.dead_letter},
    };
    std::vector<std::string> names;
    for (const auto& sp : specs) names.push_back(sp.name);
    check_keys(n, names, "settings");
    Params p;
    for (const auto& sp : specs) {
      if (n[sp.name]) parse_param(sp, n[sp.name], n[sp.name].Mark(), "settings", &p);
    }
    if (p.has("lateness")) s->lateness_ns = p.get_duration_ns("lateness");
    if (p.has("idle_timeout")) s->idle_timeout_ns = p.get_duration_ns("idle_timeout");
    if (p.has("join_grace")) s->join_grace_ns = p.get_duration_ns("join_grace");
    if (p.has("queue_capacity")) s->queue_capacity = p.get_int("queue_capacity");
    if (p.has("overflow"))
      s->overflow = p.get_string("overflow") == "shed" ? OverflowPolicy::kShed : OverflowPolicy::kBlock;
    if (p.has("backpressure")) s->backpressure_ns = p.get_duration_ns("backpressure");
    if (p.has("batch_size")) s->batch_size = p.get_int("batch_size");
    if (p.has("dead_letter")) s->dead_letter = p.get_string("dead_letter");
  }

  void parse_component(const YAML::Node& key, const YAML::Node& body, Role role, std::vector<ComponentSpec>* out) {
    ComponentSpec c;
    c.id = key.as<std::string>("");
    c.role = role;
    c.where = loc(key.Mark());
    std::string path = c.path();
    bool valid_id = !c.id.empty() && std::all_of(c.id.begin(), c.id.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
    });
    if (!valid_id) {
      error(key.Mark(), path, "invalid component name '" + c.id + "' (use letters, digits, '_' and '-')");
      return;
    }
    for (const auto& other : *out) {
      if (other.id == c.id) {
        error(key.Mark(), path, "duplicate component name '" + c.id + "' (also " + other.path() + ")");
        return;
      }
    }
    if (!body.IsMap()) {
      error(body.IsDefined() && !body.IsNull() ? body.Mark() : key.Mark(), path,
            "expected a mapping with at least 'type'");
      return;
    }
    YAML::Node type = body["type"];
    if (!type) {
      error(key.Mark(), path, "missing 'type'");
      return;
    }
    size_t before_type = diags_.size();
    c.type = scalar(type, path + ".type");
    if (diags_.size() != before_type) return;  // already reported (e.g. an undefined variable)
    c.info = catalog_.find(c.type);
    if (c.info == nullptr || c.info->role != role) {
      std::vector<std::string> same_role;
      for (const auto& t : catalog_.types()) {
        const ComponentInfo* i = catalog_.find(t);
        if (i && i->role == role) same_role.push_back(t);
      }
      std::string hint = closest_match(c.type, same_role);
      std::string list;
      for (const auto& t : same_role) list += (list.empty() ? "" : ", ") + t;
      std::string msg = c.info ? "'" + c.type + "' is not a component of " + std::string(role_section(role))
                               : "unknown component type '" + c.type + "'";
      error(type.Mark(), path + ".type",
            msg + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; expected one of: " + list);
      return;
    }

    std::vector<std::string> allowed = {"type"};
    if (role != Role::kSource) allowed.push_back("inputs");
    if (role == Role::kOperator) allowed.push_back("parallelism");
    for (const auto& p : c.info->params) allowed.push_back(p.name);

    std::set<std::string> seen;
    for (auto it = body.begin(); it != body.end(); ++it) {
      std::string k = it->first.as<std::string>("");
      if (!seen.insert(k).second) {
        error(it->first.Mark(), path, "duplicate key '" + k + "'");
        continue;
      }
      if (k == "type") continue;
      if (k == "inputs" && role != Role::kSource) {
        parse_inputs(it->second, path, &c);
        continue;
      }
      if (k == "parallelism" && role == Role::kOperator) {
        ParamSpec ps{.name = "parallelism",
                     .type = ParamType::kInt,
                     .default_value = int_text(c.parallelism),
                     .min = 0,
                     .max = 1024};
        Params tmp;
        parse_param(ps, it->second, it->first.Mark(), path, &tmp);
        if (tmp.has("parallelism")) c.parallelism = static_cast<int>(tmp.get_int("parallelism"));
        continue;
      }
      auto spec = std::find_if(c.info->params.begin(), c.info->params.end(), [&](auto& p) { return p.name == k; });
      if (spec == c.info->params.end()) {
        if (auto moved = catalog_.moved_param(c.type, k)) {
          error(it->first.Mark(), path, "parameter '" + k + "' of " + c.type + " has moved: " + *moved);
          continue;
        }
      }
      if (spec == c.info->params.end()) {
        std::string hint = closest_match(k, allowed);
        std::string why = role == Role::kSource && k == "inputs" ? " (sources have no inputs)" : "";
        error(it->first.Mark(), path,
              "unknown parameter '" + k + "' for " + c.type + why +
                  (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
        continue;
      }
      parse_param(*spec, it->second, it->first.Mark(), path, &c.params);
    }
    if (role != Role::kSource && !body["inputs"]) error(key.Mark(), path, "missing 'inputs' (the components it reads)");
    for (const auto& p : c.info->params) {
      if (c.params.has(p.name) || seen.count(p.name)) continue;  // given (an error in it is reported already)
      if (!p.default_value) {
        error(key.Mark(), path,
              "missing required parameter '" + p.name + "' (" + std::string(param_type_name(p.type)) + ": " + p.doc +
                  ")");
        continue;
      }
      // Defaults are parsed like written values (so they may use ${VAR});
      // an error in one is reported at the component, where to override it.
      YAML::Node def = p.type == ParamType::kStringList ? YAML::Load(*p.default_value) : YAML::Node(*p.default_value);
      if (p.type == ParamType::kStringList && (def.IsNull() || !def.IsDefined())) {
        c.params.set(p.name, std::vector<std::string>{}, c.where);
        continue;
      }
      parse_param(p, def, key.Mark(), path, &c.params, /*is_default=*/true);
    }
    out->push_back(std::move(c));
  }

  void parse_inputs(const YAML::Node& n, const std::string& path, ComponentSpec* c) {
    if (n.IsScalar()) {
      c->inputs.push_back({scalar(n, path + ".inputs"), loc(n.Mark())});
      return;
    }
    if (!n.IsSequence() || n.size() == 0) {
      error(n.Mark(), path + ".inputs", "expected a non-empty list of component names");
      return;
    }
    for (const auto& item : n) {
      if (!item.IsScalar()) {
        error(item.Mark(), path + ".inputs", "expected a component name");
        continue;
      }
      c->inputs.push_back({scalar(item, path + ".inputs"), loc(item.Mark())});
    }
  }

  void wire(const std::vector<ComponentSpec>& comps) {
    std::vector<std::string> outputs;
    for (const auto& c : comps) {
      if (c.role != Role::kSink) outputs.push_back(c.id);
    }
    for (const auto& c : comps) {
      std::set<std::string> seen;
      for (const auto& in : c.inputs) {
        if (!seen.insert(in.name).second) {
          diags_.push_back({in.where, c.path() + ".inputs", "input '" + in.name + "' is listed twice"});
          continue;
        }
        auto up = std::find_if(comps.begin(), comps.end(), [&](auto& o) { return o.id == in.name; });
        if (up == comps.end()) {
          std::string hint = closest_match(in.name, outputs);
          diags_.push_back(
              {in.where, c.path() + ".inputs",
               "unknown input '" + in.name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)")});
          continue;
        }
        if (up->role == Role::kSink) {
          diags_.push_back({in.where, c.path() + ".inputs", "input '" + in.name + "' is a sink and has no output"});
          continue;
        }
        if (up->id == c.id) {
          diags_.push_back({in.where, c.path() + ".inputs", "cycle: '" + c.id + "' reads its own output"});
          continue;
        }
        if ((up->info->emits & c.info->accepts) == 0) {
          diags_.push_back({in.where, c.path() + ".inputs",
                            "incompatible port types: '" + up->id + "' (" + up->type + ") emits " +
                                catalog_.kinds_str(up->info->emits) + " but " + c.type + " accepts " +
                                catalog_.kinds_str(c.info->accepts)});
        }
      }
    }
  }

  std::vector<ComponentSpec> topo_sort(std::vector<ComponentSpec> comps) {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < comps.size(); ++i) index[comps[i].id] = i;
    std::vector<int> state(comps.size(), 0);  // 0 new, 1 on stack, 2 done
    std::vector<size_t> order, stack;
    std::function<void(size_t)> visit = [&](size_t i) {
      if (state[i] == 2) return;
      if (state[i] == 1) {
        auto from = std::find(stack.begin(), stack.end(), i);
        std::string cycle;
        for (auto it = from; it != stack.end(); ++it) cycle += comps[*it].id + " -> ";
        cycle += comps[i].id;
        diags_.push_back({comps[i].where, comps[i].path(), "cycle in the pipeline: " + cycle});
        return;
      }
      state[i] = 1;
      stack.push_back(i);
      for (const auto& in : comps[i].inputs) {
        auto it = index.find(in.name);
        if (it != index.end() && diags_.empty()) visit(it->second);
      }
      stack.pop_back();
      state[i] = 2;
      order.push_back(i);
    };
    for (size_t i = 0; i < comps.size(); ++i) visit(i);
    std::vector<ComponentSpec> sorted;
    for (size_t i : order) sorted.push_back(std::move(comps[i]));
    return sorted;
  }

  const Catalog& catalog_;
  const VarLookup& vars_;
};

std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

}  // namespace

PipelineSpec parse_pipeline_text(const std::string& text, const std::string& file_name, const Catalog& catalog,
                                 const VarLookup& vars) {
  return Parser(file_name, catalog, vars).parse(text);
}

PipelineSpec parse_pipeline_file(const std::string& path, const Catalog& catalog, const VarLookup& vars) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError({Diagnostic{SourceLocation{path, 0, 0}, "", "cannot open pipeline file"}});
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_pipeline_text(ss.str(), path, catalog, vars);
}

std::string PipelineSpec::to_dot(const std::function<std::string(const ComponentSpec&)>& describe) const {
  std::ostringstream o;
  o << "digraph \"" << dot_escape(name.empty() ? file : name)
    << "\" {\n  rankdir=LR;\n  node [fontname=\"monospace\"];\n";
  for (const auto& c : components) {
    const char* shape = c.role == Role::kSource ? "invhouse" : (c.role == Role::kSink ? "house" : "box");
    std::string params = c.params.describe();
    std::string label = c.id + "\\n(" + c.type + ")";
    std::string line = describe ? describe(c) : std::string();
    if (!line.empty()) label += "\\n" + dot_escape(line);
    if (!params.empty()) label += "\\n" + dot_escape(params);
    o << "  \"" << dot_escape(c.id) << "\" [shape=" << shape << ", label=\"" << label << "\"];\n";
  }
  for (const auto& c : components) {
    for (const auto& in : c.inputs) o << "  \"" << dot_escape(in.name) << "\" -> \"" << dot_escape(c.id) << "\";\n";
  }
  o << "}\n";
  return o.str();
}

}  // namespace runlens::runtime
