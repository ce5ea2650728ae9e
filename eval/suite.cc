#include "eval/suite.h"

#include <fnmatch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "eval/config_reader.h"
#include "formats/canonical_json.h"
#include "formats/json_writer.h"
#include "formats/sha256.h"
#include "runtime/params.h"

namespace runlens::eval {

using runtime::ConfigError;
using runtime::Diagnostic;
using runtime::SourceLocation;

std::string_view priority_name(Priority p) {
  static const char* kNames[] = {"P0", "P1", "P2", "P3"};
  return kNames[static_cast<int>(p)];
}

std::string_view priority_meaning(Priority p) {
  static const char* kMeanings[] = {"safety certification", "release candidate", "researcher evaluation",
                                    "exploratory evaluation"};
  return kMeanings[static_cast<int>(p)];
}

std::optional<Priority> parse_priority(std::string_view text) {
  if (text.size() == 2 && (text[0] == 'P' || text[0] == 'p') && text[1] >= '0' && text[1] <= '3') {
    return static_cast<Priority>(text[1] - '0');
  }
  return std::nullopt;
}

std::string_view pool_name(Pool p) { return p == Pool::kGpu ? "gpu" : "cpu"; }

std::optional<int64_t> parse_memory_mib(const std::string& text) {
  static const std::pair<const char*, double> kUnits[] = {
      {"TiB", 1024.0 * 1024}, {"TB", 1024.0 * 1024}, {"GiB", 1024}, {"GB", 1024}, {"MiB", 1}, {"MB", 1}};
  for (const auto& [unit, scale] : kUnits) {
    std::string_view u(unit);
    if (text.size() <= u.size() || text.compare(text.size() - u.size(), u.size(), u) != 0) continue;
    std::string num = text.substr(0, text.size() - u.size());
    while (!num.empty() && num.back() == ' ') num.pop_back();
    double v;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (ec != std::errc() || p != num.data() + num.size() || !std::isfinite(v) || v < 0) return std::nullopt;
    return static_cast<int64_t>(std::llround(v * scale));
  }
  return std::nullopt;
}

std::string MetricSpec::canonical_json() const {
  std::string s = "{\"args\":{";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) s += ',';
    json::append_escaped(&s, args[i].first);
    s += ':';
    if (args[i].second == "true" || args[i].second == "false")
      s += args[i].second;
    else
      json::append_escaped(&s, args[i].second);
  }
  s += "},\"k\":[";
  for (size_t i = 0; i < k.size(); ++i) s += (i ? "," : "") + std::to_string(k[i]);
  s += "],\"name\":";
  json::append_escaped(&s, name);
  return s + "}";
}

bool Suite::triggered_by(const std::string& model_id) const {
  for (const auto& p : on_checkpoint) {
    if (fnmatch(p.c_str(), model_id.c_str(), 0) == 0) return true;
  }
  return false;
}

const MetricSpec* Suite::find_metric(std::string_view name) const {
  for (const auto& m : metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string dataset_hash_mismatch(const Suite& suite, const std::string& actual_sha256) {
  if (actual_sha256 == suite.dataset.sha256) return {};
  return "dataset " + suite.dataset.id + " version " + suite.dataset.version + " has changed: its content hash is " +
         actual_sha256 + ", the suite expects " + suite.dataset.sha256 + " (at " + suite.dataset.sha256_where.str() +
         ")";
}

std::string Suite::dataset_path() const {
  if (dataset.path.empty() || dataset.path[0] == '/') return dataset.path;
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? dataset.path : file.substr(0, slash + 1) + dataset.path;
}

namespace {

class SuiteParser : ConfigReader {
 public:
  explicit SuiteParser(std::string file) : ConfigReader(std::move(file), "a suite") {}

  Suite parse(const std::string& text) {
    Suite s;
    s.file = file_;
    YAML::Node root = load_mapping(text, "'suite', 'benchmark', 'dataset', ...");
    check_keys(root,
               {"suite", "benchmark", "version", "evaluator", "dataset", "prompt", "metrics", "decoding",
                "partition_size", "priority", "deadline", "max_attempts", "workers", "judge", "on_checkpoint"},
               "");
    s.name = required_name(root, "suite", "");
    s.benchmark = required_name(root, "benchmark", "");
    s.version = required_name(root, "version", "");
    s.evaluator_version = required_name(root, "evaluator", "");
    if (auto n = required(root, "dataset", "", "a mapping")) parse_dataset(n, &s.dataset);
    if (auto n = required(root, "prompt", "", "a mapping")) parse_prompt(n, &s.prompt);
    if (auto n = required(root, "metrics", "", "a list")) parse_metrics(n, &s.metrics);
    if (root["decoding"]) s.decoding_json = to_canonical_json(root["decoding"], "decoding", /*check_decoding=*/true);
    if (auto v = required_int(root, "partition_size", "", 1, 1000000)) s.partition_size = *v;
    if (auto n = required(root, "priority", "", "P0, P1, P2 or P3")) {
      std::string p = scalar(n, "priority");
      if (auto pr = parse_priority(p))
        s.priority = *pr;
      else if (n.IsScalar())
        error(n.Mark(), "priority",
              "expected P0 (safety certification), P1 (release candidate), P2 (researcher) or P3 (exploratory), "
              "got '" +
                  p + "'");
    }
    if (root["deadline"]) {
      std::string d = scalar(root["deadline"], "deadline");
      auto ns = runtime::parse_duration_ns(d);
      if (!ns || *ns < 1000000000LL)
        error(root["deadline"].Mark(), "deadline",
              "expected a duration of at least 1s such as 30m or 2h, got '" + d + "'");
      else
        s.deadline_s = *ns / 1000000000LL;
    }
    if (root["max_attempts"]) {
      if (auto v = integer(root["max_attempts"], "max_attempts", 1, 10)) s.max_attempts = static_cast<int>(*v);
    }
    if (auto n = required(root, "workers", "", "a mapping")) parse_workers(n, &s.workers);
    if (root["judge"]) {
      JudgeSpec j;
      if (parse_judge(root["judge"], &j)) s.judge = std::move(j);
    }
    if (YAML::Node oc = root["on_checkpoint"]) {
      if (!oc.IsSequence()) {
        error(oc.Mark(), "on_checkpoint", "expected a list of model id patterns, e.g. [digits-*]");
      } else {
        for (size_t i = 0; i < oc.size(); ++i) {
          std::string p = name(oc[i], "on_checkpoint[" + std::to_string(i) + "]");
          if (!p.empty()) s.on_checkpoint.push_back(p);
        }
      }
    }
    cross_checks(root, &s);
    if (!diags_.empty()) throw ConfigError(diags_);
    return s;
  }

 private:
  std::string sha256_of(const YAML::Node& map, const std::string& key, const std::string& path) {
    YAML::Node n = required(map, key, path, "64 lowercase hex digits");
    if (!n) return {};
    std::string v = scalar(n, join(path, key));
    if (n.IsScalar() && !sha256::is_hex_digest(v)) {
      error(n.Mark(), join(path, key),
            "expected a SHA-256 content hash (64 lowercase hex digits), got '" + v + "' (" + std::to_string(v.size()) +
                " characters)");
    }
    return v;
  }

  void parse_dataset(const YAML::Node& n, DatasetRef* d) {
    if (!expect_map(n, "dataset")) return;
    check_keys(n, {"id", "version", "sha256", "path", "items", "first_item"}, "dataset");
    d->id = required_name(n, "id", "dataset");
    d->version = required_name(n, "version", "dataset");
    d->sha256 = sha256_of(n, "sha256", "dataset");
    if (n["sha256"]) d->sha256_where = loc(n["sha256"].Mark());
    if (n["path"]) d->path = name(n["path"], "dataset.path");
    if (n["items"]) d->items = integer(n["items"], "dataset.items", 1, 1000000000);
    if (n["first_item"]) {
      if (auto v = integer(n["first_item"], "dataset.first_item", 0, 1000000000)) d->first_item = *v;
    }
    if (!n["items"] && !n["path"]) error(n.Mark(), "dataset", "a dataset needs 'items' (the item count) or 'path'");
  }

  void parse_prompt(const YAML::Node& n, PromptTemplate* p) {
    if (!expect_map(n, "prompt")) return;
    check_keys(n, {"template", "version"}, "prompt");
    p->text = required_name(n, "template", "prompt");
    p->version = required_name(n, "version", "prompt");
    p->sha256 = sha256::hex(p->text);
  }

  void parse_workers(const YAML::Node& n, WorkerRequirements* w) {
    if (!expect_map(n, "workers")) return;
    check_keys(n, {"pool", "memory"}, "workers");
    if (auto p = required(n, "pool", "workers", "cpu or gpu")) {
      std::string v = scalar(p, "workers.pool");
      if (v == "gpu")
        w->pool = Pool::kGpu;
      else if (v == "cpu")
        w->pool = Pool::kCpu;
      else if (p.IsScalar())
        error(p.Mark(), "workers.pool", "expected cpu or gpu, got '" + v + "'");
    }
    if (auto m = required(n, "memory", "workers", "e.g. 16GiB")) {
      std::string v = scalar(m, "workers.memory");
      auto mib = parse_memory_mib(v);
      if (!m.IsScalar()) {
      } else if (!mib) {
        error(m.Mark(), "workers.memory", "expected a memory size such as 512MiB or 16GiB, got '" + v + "'");
      } else if (*mib < 1 || *mib > 16 * 1024 * 1024) {
        error(m.Mark(), "workers.memory", "out of range: must be between 1MiB and 16TiB, got " + v);
      } else {
        w->memory_mib = *mib;
      }
    }
  }

  void parse_metrics(const YAML::Node& n, std::vector<MetricSpec>* out) {
    if (!n.IsSequence()) {
      error(n.Mark(), "metrics", "expected a list of metrics");
      return;
    }
    if (n.size() == 0) error(n.Mark(), "metrics", "a suite needs at least one metric");
    const std::vector<std::string> names = metric_names();
    std::set<std::string> seen;
    for (size_t i = 0; i < n.size(); ++i) {
      YAML::Node item = n[i];
      const std::string path = "metrics[" + std::to_string(i) + "]";
      // Node::reset, not operator=: assigning one yaml-cpp node to another
      // overwrites the node it refers to.
      YAML::Node name_node, args;
      name_node.reset(item);
      args.reset(YAML::Node(YAML::NodeType::Undefined));
      if (item.IsMap() && item.size() == 1) {
        name_node.reset(item.begin()->first);
        args.reset(item.begin()->second);
      } else if (!item.IsScalar()) {
        error(item.Mark(), path, "expected a metric name, or a mapping of one metric name to its arguments");
        continue;
      }
      MetricSpec m;
      m.name = name_node.Scalar();
      m.where = loc(name_node.Mark());
      m.def = find_metric(m.name);
      if (!m.def) {
        std::string hint = runtime::closest_match(m.name, names);
        error(name_node.Mark(), path,
              "unknown metric '" + m.name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
        continue;
      }
      if (!seen.insert(m.name).second) error(name_node.Mark(), path, "metric '" + m.name + "' is listed twice");
      parse_metric_args(args, path + "." + m.name, &m);
      out->push_back(std::move(m));
    }
  }

  void parse_metric_args(const YAML::Node& args, const std::string& path, MetricSpec* m) {
    std::vector<std::string> allowed;
    for (const auto& a : m->def->args) allowed.emplace_back(a.name);
    bool has_args = args && !args.IsNull();
    if (has_args && !expect_map(args, path)) return;
    if (has_args) {
      if (allowed.empty()) {
        error(args.Mark(), path, "metric '" + m->name + "' takes no arguments");
        return;
      }
      check_keys(args, allowed, path);
    }
    for (const auto& a : m->def->args) {
      YAML::Node v = has_args ? args[std::string(a.name)] : YAML::Node();
      const std::string apath = path + "." + std::string(a.name);
      if (!v || v.IsNull()) {
        if (a.default_value.empty()) {
          error(has_args ? args.Mark() : YAML::Mark::null_mark(), apath,
                "metric '" + m->name + "' needs argument '" + std::string(a.name) + "' (" + std::string(a.doc) + ")");
          if (!has_args) diags_.back().where = m->where;
          continue;
        }
        if (a.type != ArgType::kIntList) m->args.emplace_back(a.name, a.default_value);
        continue;
      }
      switch (a.type) {
        case ArgType::kBool:
          if (auto b = boolean(v, apath)) m->args.emplace_back(a.name, *b ? "true" : "false");
          break;
        case ArgType::kChoice: {
          std::string t = scalar(v, apath);
          if (!v.IsScalar()) break;
          if (std::find(a.choices.begin(), a.choices.end(), t) == a.choices.end()) {
            std::string list;
            for (auto c : a.choices) list += (list.empty() ? "" : ", ") + std::string(c);
            error(v.Mark(), apath, "expected one of " + list + ", got '" + t + "'");
          } else {
            m->args.emplace_back(a.name, t);
          }
          break;
        }
        case ArgType::kIntList: {
          if (!v.IsSequence() || v.size() == 0) {
            error(v.Mark(), apath, "expected a non-empty list of integers such as [1, 5, 10]");
            break;
          }
          for (size_t i = 0; i < v.size(); ++i) {
            auto k = integer(v[i], apath + "[" + std::to_string(i) + "]", 1, 1000000);
            if (!k) continue;
            if (std::find(m->k.begin(), m->k.end(), *k) != m->k.end())
              error(v[i].Mark(), apath, "k = " + std::to_string(*k) + " is listed twice");
            else
              m->k.push_back(*k);
          }
          std::sort(m->k.begin(), m->k.end());
          break;
        }
      }
    }
    std::sort(m->args.begin(), m->args.end());
  }

  bool parse_judge(const YAML::Node& n, JudgeSpec* j) {
    if (!expect_map(n, "judge")) return false;
    size_t before = diags_.size();
    check_keys(n,
               {"model", "model_version", "prompt", "prompt_version", "rubric_version", "criteria", "scale",
                "temperature", "sampling"},
               "judge");
    j->model = required_name(n, "model", "judge");
    j->model_version = required_name(n, "model_version", "judge");
    j->prompt = required_name(n, "prompt", "judge");
    j->prompt_sha256 = sha256::hex(j->prompt);
    j->prompt_version = required_name(n, "prompt_version", "judge");
    j->rubric_version = required_name(n, "rubric_version", "judge");
    if (auto c = required(n, "criteria", "judge", "a list of rubric criteria")) {
      if (!c.IsSequence() || c.size() == 0) {
        error(c.Mark(), "judge.criteria", "expected a non-empty list of rubric criteria");
      } else {
        for (size_t i = 0; i < c.size(); ++i)
          j->criteria.push_back(name(c[i], "judge.criteria[" + std::to_string(i) + "]"));
      }
    }
    if (YAML::Node s = n["scale"]) {
      if (!s.IsSequence() || s.size() != 2) {
        error(s.Mark(), "judge.scale", "expected [lowest, highest], e.g. [1, 5]");
      } else {
        auto lo = number(s[0], "judge.scale[0]", -1e6, 1e6);
        auto hi = number(s[1], "judge.scale[1]", -1e6, 1e6);
        if (lo && hi && *lo >= *hi)
          error(s.Mark(), "judge.scale", "the lowest score must be below the highest");
        else if (lo && hi)
          j->scale_lo = *lo, j->scale_hi = *hi;
      }
    }
    if (n["temperature"]) {
      if (auto t = number(n["temperature"], "judge.temperature", 0, 2)) j->temperature = *t;
    }
    if (n["sampling"]) j->sampling_json = to_canonical_json(n["sampling"], "judge.sampling", false);
    return diags_.size() == before;
  }

  void cross_checks(const YAML::Node& root, Suite* s) {
    const MetricSpec* judge_metric = nullptr;
    for (const auto& m : s->metrics) {
      if (m.def->uses_judge) judge_metric = &m;
    }
    if (judge_metric && !root["judge"]) {
      diags_.push_back(Diagnostic{judge_metric->where, "judge",
                                  "metric '" + judge_metric->name + "' needs a 'judge' block (model, prompt, rubric)"});
    }
    const MetricSpec* pass = s->find_metric("pass@k");
    YAML::Node samples = root["decoding"] && root["decoding"].IsMap() ? root["decoding"]["samples"] : YAML::Node();
    if (pass && !pass->k.empty() && samples && samples.IsScalar()) {
      int64_t n = 0;
      const std::string& t = samples.Scalar();
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
      if (ec == std::errc() && p == t.data() + t.size() && n >= 1 && n < pass->k.back()) {
        diags_.push_back(Diagnostic{pass->where, "metrics.pass@k",
                                    "pass@k needs at least k samples per problem: k = " +
                                        std::to_string(pass->k.back()) + " but decoding.samples = " + t});
      }
    }
    if (!judge_metric && root["judge"]) {
      error(root["judge"].Mark(), "judge", "a 'judge' block is given but no metric uses it (add the 'judge' metric)");
    }
  }

  // YAML -> canonical JSON. Plain scalars are typed the YAML 1.2 core way
  // (null, true/false, numbers); quoted scalars stay strings.
  std::string to_canonical_json(const YAML::Node& n, const std::string& path, bool check_decoding) {
    if (!expect_map(n, path)) return "{}";
    json::Value v = to_json(n, path);
    if (check_decoding) check_decoding_values(n, path);
    std::string out, why;
    if (!json::append_canonical(&out, v, &why)) {
      error(n.Mark(), path, why);
      return "{}";
    }
    return out;
  }

  json::Value to_json(const YAML::Node& n, const std::string& path) {
    json::Value v;
    if (n.IsMap()) {
      v.type = json::Value::Type::kObject;
      std::set<std::string> seen;
      for (auto it = n.begin(); it != n.end(); ++it) {
        std::string k = it->first.IsScalar() ? it->first.Scalar() : "";
        if (!seen.insert(k).second) {
          error(it->first.Mark(), join(path, k), "duplicate key '" + k + "'");
          continue;
        }
        v.members.emplace_back(k, to_json(it->second, join(path, k)));
      }
    } else if (n.IsSequence()) {
      v.type = json::Value::Type::kArray;
      for (size_t i = 0; i < n.size(); ++i) v.items.push_back(to_json(n[i], path + "[" + std::to_string(i) + "]"));
    } else if (n.IsNull()) {
      v.type = json::Value::Type::kNull;
    } else {
      const std::string& t = n.Scalar();
      if (n.Tag() == "!") {  // quoted
        v.type = json::Value::Type::kString, v.text = t;
      } else if (t == "true" || t == "false") {
        v.type = json::Value::Type::kBool, v.boolean = t == "true";
      } else if (t == "null" || t == "~") {
        v.type = json::Value::Type::kNull;
      } else if (double d; !t.empty() && std::from_chars(t.data(), t.data() + t.size(), d).ptr == t.data() + t.size() &&
                           std::from_chars(t.data(), t.data() + t.size(), d).ec == std::errc()) {
        if (!std::isfinite(d)) error(n.Mark(), path, "expected a finite number, got '" + t + "'");
        v.type = json::Value::Type::kNumber, v.number = std::isfinite(d) ? d : 0;
      } else {
        v.type = json::Value::Type::kString, v.text = t;
      }
    }
    return v;
  }

  void check_decoding_values(const YAML::Node& n, const std::string& path) {
    if (n["temperature"]) number(n["temperature"], path + ".temperature", 0, 2);
    if (n["top_p"]) number(n["top_p"], path + ".top_p", 0, 1);
    if (n["max_tokens"]) integer(n["max_tokens"], path + ".max_tokens", 1, 1000000);
    if (n["samples"]) integer(n["samples"], path + ".samples", 1, 1000000);
  }
};

}  // namespace

Suite parse_suite(const std::string& text, const std::string& file) { return SuiteParser(file).parse(text); }

Suite load_suite(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError({Diagnostic{SourceLocation{path, 0, 0}, "", "cannot read the suite file"}});
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_suite(ss.str(), path);
}

}  // namespace runlens::eval
