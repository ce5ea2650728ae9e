#include "operators/rules/rule_tree.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <span>
#include <sstream>

#include "schema/vocabulary.h"

namespace runlens::ops::rules {

namespace {
std::vector<std::string> words_of(std::span<const Term> terms, std::string_view except = {}) {
  std::vector<std::string> words;
  for (const Term& t : terms) {
    if (t.name != except) words.emplace_back(t.name);
  }
  return words;
}
}  // namespace

const std::vector<std::string>& alert_kinds() {
  static const std::vector<std::string> k = words_of(alert_kind::kAll, alert_kind::kDiagnosis);
  return k;
}

const std::vector<std::string>& causes() {
  static const std::vector<std::string> c = words_of(cause::kAll);
  return c;
}

const std::vector<std::string>& owners() {
  static const std::vector<std::string> o = words_of(owner::kAll);
  return o;
}

const std::vector<std::string>& event_kinds() {
  static const std::vector<std::string> e = words_of(event_kind::kAll);
  return e;
}

const std::vector<std::string>& locator_placeholders() {
  static const std::vector<std::string> p = {"where", "run",   "rank",    "node",       "gpu",
                                             "step",  "onset", "symptom", "named_ranks"};
  return p;
}

Decision RuleTree::decide(const Environment& env) const {
  Decision d;
  int at = root;
  for (size_t guard = 0; at >= 0 && guard <= nodes.size(); ++guard) {
    const RuleNode& n = nodes[static_cast<size_t>(at)];
    if (n.leaf >= 0) {
      d.leaf = &leaves[static_cast<size_t>(n.leaf)];
      return d;
    }
    int next = n.otherwise;
    for (const auto& [cond, child] : n.cases) {
      auto v = cond.expr.eval(env);
      bool taken = v && *v != 0;
      d.path.push_back({&cond, v, taken});
      if (taken) {
        next = child;
        break;
      }
    }
    at = next;
  }
  RUNLENS_CHECK(false, "every decision of a loaded tree ends in a leaf");
  return d;
}

int RuleSet::tree_for(std::string_view kind) const {
  for (size_t i = 0; i < trees.size(); ++i) {
    if (std::find(trees[i].symptoms.begin(), trees[i].symptoms.end(), kind) != trees[i].symptoms.end()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int64_t RuleSet::symptom_rank(std::string_view kind) const {
  int t = tree_for(kind);
  if (t < 0) return INT64_MIN;
  const auto& s = trees[static_cast<size_t>(t)].symptoms;
  auto pos = std::find(s.begin(), s.end(), kind) - s.begin();
  return trees[static_cast<size_t>(t)].priority * 1000 - pos;
}

std::vector<std::pair<size_t, std::string>> template_placeholders(std::string_view text) {
  std::vector<std::pair<size_t, std::string>> out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') continue;
    size_t close = text.find('}', i);
    if (close == std::string_view::npos) break;
    out.emplace_back(i + 1, std::string(text.substr(i + 1, close - i - 1)));
    i = close;
  }
  return out;
}

std::string render_template(std::string_view text, const std::function<std::string(std::string_view)>& lookup) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    size_t close = text[i] == '{' ? text.find('}', i) : std::string_view::npos;
    if (close == std::string_view::npos) {
      out += text[i];
      continue;
    }
    out += lookup(text.substr(i + 1, close - i - 1));
    i = close;
  }
  return out;
}

runtime::SourceLocation locate_in_scalar(const std::string& file, const std::string& raw, int line, int column,
                                         std::string_view value, size_t offset) {
  runtime::SourceLocation fallback{file, line, column};
  if (line <= 0 || column <= 0) return fallback;
  // The scalar's first character in the raw text.
  size_t p = 0;
  for (int l = 1; l < line && p < raw.size(); ++l) {
    p = raw.find('\n', p);
    if (p == std::string::npos) return fallback;
    ++p;
  }
  p += static_cast<size_t>(column - 1);
  // Align the value with the raw text, character by character: quotes,
  // escapes, block indicators and indentation are skipped; a space of a
  // folded value matches a line break.
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t found = p;
  for (size_t i = 0; i <= offset && i < value.size(); ++i) {
    size_t q = p;
    size_t limit = std::min(raw.size(), p + 256);
    while (q < limit && !(raw[q] == value[i] || (space(value[i]) && space(raw[q])))) ++q;
    if (q >= limit) return fallback;
    found = q;
    p = q + 1;
  }
  if (offset >= value.size()) found = p;  // just past the end (e.g. "unexpected end of expression")
  int l = 1, c = 1;
  for (size_t i = 0; i < found && i < raw.size(); ++i) {
    if (raw[i] == '\n')
      ++l, c = 1;
    else
      ++c;
  }
  return runtime::SourceLocation{file, l, c};
}

namespace {

class RuleParser {
 public:
  RuleParser(const Vocabulary& vocab, std::vector<runtime::Diagnostic>* diags) : vocab_(vocab), diags_(diags) {}

  std::optional<RuleTree> parse(const RuleFile& f) {
    file_ = &f;
    YAML::Node root;
    try {
      root = YAML::Load(f.text);
    } catch (const YAML::ParserException& e) {
      error(e.mark, "", "YAML syntax error: " + e.msg);
      return std::nullopt;
    }
    size_t before = diags_->size();
    if (!root.IsMap()) {
      error(root.IsDefined() ? root.Mark() : YAML::Mark(), "",
            "expected a mapping with 'name', 'symptoms', 'priority' and 'tree' at the top level");
      return std::nullopt;
    }
    RuleTree t;
    t.file = f.name;
    check_keys(root, {"name", "description", "symptoms", "priority", "before_steps", "after_steps", "tree"}, "rules");
    std::string path = "rules";
    if (!root["name"])
      error(root.Mark(), path, "missing 'name'");
    else {
      t.name = scalar(root["name"], path + ".name");
      bool valid = !t.name.empty() && std::all_of(t.name.begin(), t.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      });
      if (!valid)
        error(root["name"].Mark(), path + ".name",
              "invalid tree name '" + t.name + "' (use letters, digits, '_' and '-')");
      path += "." + t.name;
    }
    if (!root["symptoms"])
      error(root.Mark(), path, "missing 'symptoms' (the alert kinds this tree explains)");
    else
      parse_symptoms(root["symptoms"], path + ".symptoms", &t);
    if (!root["priority"])
      error(root.Mark(), path,
            "missing 'priority' (an integer; the highest-priority symptom of an incident picks the tree)");
    else if (auto p = integer(root["priority"], path + ".priority", -1000000, 1000000))
      t.priority = *p;
    if (root["before_steps"]) t.before_steps = integer(root["before_steps"], path + ".before_steps", 0, 4096);
    if (root["after_steps"]) t.after_steps = integer(root["after_steps"], path + ".after_steps", 0, 4096);
    if (!root["tree"])
      error(root.Mark(), path, "missing 'tree' (the decision tree)");
    else
      t.root = parse_node(root["tree"], path + ".tree", &t, 0);
    if (diags_->size() != before) return std::nullopt;
    return t;
  }

 private:
  runtime::SourceLocation loc(const YAML::Mark& m) const {
    if (m.is_null()) return runtime::SourceLocation{file_->name, 0, 0};
    return runtime::SourceLocation{file_->name, m.line + 1, m.column + 1};
  }
  void error(const YAML::Mark& m, const std::string& path, const std::string& msg) {
    diags_->push_back(runtime::Diagnostic{loc(m), path, msg});
  }
  void error_at(const runtime::SourceLocation& where, const std::string& path, const std::string& msg) {
    diags_->push_back(runtime::Diagnostic{where, path, msg});
  }
  runtime::SourceLocation inside(const YAML::Node& n, size_t offset) const {
    const YAML::Mark m = n.Mark();
    return locate_in_scalar(file_->name, file_->text, m.line + 1, m.column + 1, n.Scalar(), offset);
  }

  void check_keys(const YAML::Node& map, const std::vector<std::string>& allowed, const std::string& path) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      std::string k = it->first.IsScalar() ? it->first.Scalar() : "";
      if (!seen.insert(k).second) error(it->first.Mark(), path, "duplicate key '" + k + "'");
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        std::string hint = runtime::closest_match(k, allowed);
        error(it->first.Mark(), path,
              "unknown key '" + k + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
      }
    }
  }

  std::string scalar(const YAML::Node& n, const std::string& path) {
    if (!n.IsScalar()) {
      error(n.Mark(), path,
            std::string("expected a single value, got a ") + (n.IsSequence() ? "list"
                                                              : n.IsMap()    ? "mapping"
                                                                             : "null"));
      return {};
    }
    return n.Scalar();
  }

  std::optional<int64_t> integer(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi) {
    std::string s = scalar(n, path);
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (end != s.c_str() + s.size() || v < lo || v > hi) {
      error(n.Mark(), path,
            "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got '" + s + "'");
      return std::nullopt;
    }
    return v;
  }

  void parse_symptoms(const YAML::Node& n, const std::string& path, RuleTree* t) {
    if (!n.IsSequence() || n.size() == 0) {
      error(n.Mark(), path, "expected a non-empty list of alert kinds");
      return;
    }
    for (const auto& item : n) {
      std::string k = scalar(item, path);
      if (k.empty()) continue;
      const auto& kinds = alert_kinds();
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) {
        std::string hint = runtime::closest_match(k, kinds);
        error(item.Mark(), path,
              "unknown alert kind '" + k + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                  (k == alert_kind::kDiagnosis ? " (a diagnosis cannot be a symptom)" : ""));
        continue;
      }
      if (std::find(t->symptoms.begin(), t->symptoms.end(), k) != t->symptoms.end()) {
        error(item.Mark(), path, "symptom '" + k + "' is listed twice");
        continue;
      }
      t->symptoms.push_back(k);
      symptom_marks_.push_back(item.Mark());
    }
  }

  int parse_node(const YAML::Node& n, const std::string& path, RuleTree* t, int depth) {
    if (depth > 32) {
      error(n.Mark(), path, "decision tree nested too deeply (at most 32 levels)");
      return -1;
    }
    if (!n.IsMap()) {
      error(n.Mark(), path,
            "expected a mapping: a leaf (cause, owner, recommendation) or a decision (if / then / else, or cases / "
            "else)");
      return -1;
    }
    int index = static_cast<int>(t->nodes.size());
    t->nodes.emplace_back();
    if (n["cause"] || n["owner"]) {
      int leaf = parse_leaf(n, path, t);
      t->nodes[static_cast<size_t>(index)].leaf = leaf;
      return index;
    }
    RuleNode node;
    if (n["if"]) {
      check_keys(n, {"if", "then", "else"}, path);
      auto cond = condition(n["if"], path + ".if");
      if (!n["then"]) error(n.Mark(), path, "missing 'then' (what follows when the condition holds)");
      int then = n["then"] ? parse_node(n["then"], path + ".then", t, depth + 1) : -1;
      if (cond) node.cases.emplace_back(std::move(*cond), then);
    } else if (n["cases"]) {
      check_keys(n, {"cases", "else"}, path);
      const YAML::Node cases = n["cases"];
      if (!cases.IsSequence() || cases.size() == 0) {
        error(cases.Mark(), path + ".cases", "expected a non-empty list of {if, then}");
      } else {
        for (size_t i = 0; i < cases.size(); ++i) {
          std::string p = path + ".cases[" + std::to_string(i) + "]";
          const YAML::Node c = cases[i];
          if (!c.IsMap() || !c["if"] || !c["then"]) {
            error(c.Mark(), p, "expected a mapping with 'if' and 'then'");
            continue;
          }
          check_keys(c, {"if", "then"}, p);
          auto cond = condition(c["if"], p + ".if");
          int then = parse_node(c["then"], p + ".then", t, depth + 1);
          if (cond) node.cases.emplace_back(std::move(*cond), then);
        }
      }
    } else {
      error(n.Mark(), path, "expected a leaf ('cause', 'owner', 'recommendation') or a decision ('if' or 'cases')");
      return -1;
    }
    if (!n["else"])
      error(n.Mark(), path, "missing 'else' (what follows when no condition holds)");
    else
      node.otherwise = parse_node(n["else"], path + ".else", t, depth + 1);
    t->nodes[static_cast<size_t>(index)] = std::move(node);
    return index;
  }

  std::optional<Condition> condition(const YAML::Node& n, const std::string& path) {
    if (!n.IsScalar()) {
      error(n.Mark(), path,
            "expected a condition (an expression), got a " + std::string(n.IsSequence() ? "list" : "mapping"));
      return std::nullopt;
    }
    ParseError pe;
    auto e = parse_expr(n.Scalar(), vocab_, &pe);
    if (!e) {
      error_at(inside(n, pe.offset), path, "invalid condition: " + pe.message);
      return std::nullopt;
    }
    return Condition{std::move(*e), loc(n.Mark())};
  }

  int parse_leaf(const YAML::Node& n, const std::string& path, RuleTree* t) {
    check_keys(n, {"cause", "owner", "summary", "recommendation", "evidence"}, path);
    Leaf leaf;
    leaf.where = loc(n.Mark());
    auto one_of = [&](const char* key, const std::vector<std::string>& allowed, std::string* out) {
      if (!n[key]) {
        error(n.Mark(), path, std::string("missing '") + key + "'");
        return;
      }
      std::string v = scalar(n[key], path + "." + key);
      if (v.empty()) return;
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        std::string hint = runtime::closest_match(v, allowed);
        error(n[key].Mark(), path + "." + key,
              std::string("unknown ") + key + " '" + v + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                  "; expected one of: " + list);
        return;
      }
      *out = v;
    };
    one_of("cause", causes(), &leaf.cause);
    one_of("owner", owners(), &leaf.owner);
    if (n["summary"]) leaf.summary = template_text(n["summary"], path + ".summary");
    if (!n["recommendation"])
      error(n.Mark(), path, "missing 'recommendation' (what the owner should do)");
    else
      leaf.recommendation = template_text(n["recommendation"], path + ".recommendation");
    if (n["evidence"]) {
      const YAML::Node ev = n["evidence"];
      if (!ev.IsSequence())
        error(ev.Mark(), path + ".evidence", "expected a list of signal names");
      else {
        for (const auto& item : ev) {
          std::string s = scalar(item, path + ".evidence");
          if (s.empty()) continue;
          auto id = vocab_.signal(s);
          if (!id) {
            std::string hint = runtime::closest_match(s, vocab_.signal_names());
            error(item.Mark(), path + ".evidence",
                  "unknown signal '" + s + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
            continue;
          }
          leaf.evidence.push_back(*id);
        }
      }
    }
    t->leaves.push_back(std::move(leaf));
    return static_cast<int>(t->leaves.size() - 1);
  }

  std::string template_text(const YAML::Node& n, const std::string& path) {
    std::string text = scalar(n, path);
    for (const auto& [offset, placeholder] : template_placeholders(text)) {
      // {a|b}: the first of a and b that has a value.
      size_t start = 0;
      while (start <= placeholder.size()) {
        size_t bar = placeholder.find('|', start);
        if (bar == std::string::npos) bar = placeholder.size();
        std::string name = placeholder.substr(start, bar - start);
        const auto& loc_names = locator_placeholders();
        if (std::find(loc_names.begin(), loc_names.end(), name) == loc_names.end() && !vocab_.signal(name)) {
          std::vector<std::string> all = loc_names;
          for (const auto& s : vocab_.signal_names()) all.push_back(s);
          std::string hint = runtime::closest_match(name, all);
          error_at(inside(n, offset + start), path,
                   "unknown placeholder '" + name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                       "; placeholders are signal names and where, run, rank, node, gpu, step, onset, symptom");
        }
        start = bar + 1;
      }
    }
    return text;
  }

 public:
  std::vector<YAML::Mark> symptom_marks_;  // of the last parsed file, in symptom order

 private:
  const Vocabulary& vocab_;
  std::vector<runtime::Diagnostic>* diags_;
  const RuleFile* file_ = nullptr;
};

}  // namespace

RuleSet parse_rules(const std::vector<RuleFile>& files, const Vocabulary& vocab) {
  std::vector<runtime::Diagnostic> diags;
  RuleSet set;
  std::map<std::string, std::string> tree_of_symptom;  // kind -> "tree (file)"
  std::map<std::string, std::string> file_of_name;
  for (const auto& f : files) {
    RuleParser p(vocab, &diags);
    auto t = p.parse(f);
    if (!t) continue;
    bool ok = true;
    if (auto it = file_of_name.find(t->name); it != file_of_name.end()) {
      diags.push_back({runtime::SourceLocation{f.name, 1, 1}, "rules." + t->name,
                       "duplicate tree name '" + t->name + "' (also in " + it->second + ")"});
      ok = false;
    }
    for (size_t i = 0; i < t->symptoms.size(); ++i) {
      const auto& k = t->symptoms[i];
      if (auto it = tree_of_symptom.find(k); it != tree_of_symptom.end()) {
        const YAML::Mark& m = p.symptom_marks_[i];
        diags.push_back({runtime::SourceLocation{f.name, m.line + 1, m.column + 1}, "rules." + t->name + ".symptoms",
                         "symptom '" + k + "' is already explained by tree " + it->second});
        ok = false;
      }
    }
    if (!ok) continue;
    file_of_name[t->name] = f.name;
    for (const auto& k : t->symptoms) tree_of_symptom[k] = "'" + t->name + "' (" + f.name + ")";
    set.trees.push_back(std::move(*t));
  }
  if (!diags.empty()) throw runtime::ConfigError(diags);
  return set;
}

std::vector<RuleFile> read_rule_dir(const std::string& dir, const runtime::SourceLocation& where) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw runtime::ConfigError({runtime::Diagnostic{where, "", "rules directory not found: " + dir}});
  }
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string ext = e.path().extension().string();
    if (e.is_regular_file(ec) && (ext == ".yaml" || ext == ".yml")) paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    throw runtime::ConfigError(
        {runtime::Diagnostic{where, "", "no rule files (*.yaml) in the rules directory " + dir}});
  }
  std::vector<RuleFile> files;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    if (!in)
      throw runtime::ConfigError({runtime::Diagnostic{runtime::SourceLocation{p, 0, 0}, "", "cannot read rule file"}});
    std::stringstream ss;
    ss << in.rdbuf();
    files.push_back({p, ss.str()});
  }
  return files;
}

RuleSet load_rule_dir(const std::string& dir, const Vocabulary& vocab, const runtime::SourceLocation& where) {
  return parse_rules(read_rule_dir(dir, where), vocab);
}

}  // namespace runlens::ops::rules
