// Root-cause decision trees, declared in YAML (configs/rules/*.yaml; the
// format is documented in docs/rules.md). One file holds one tree:
//
//   name: straggler_localization
//   symptoms: [straggler, thermal_throttle]   # alert kinds this tree explains
//   priority: 60                              # the highest-priority symptom of an incident picks the tree
//   tree:
//     cases:                                  # the first case whose condition is true is taken
//       - if: here(thermal_throttle) or temp_c >= 88
//         then: {cause: hardware_throttle, owner: infrastructure, recommendation: "..."}
//     else:
//       if: cpu_pct >= 90                     # or a single if / then / else
//       then: {...}
//       else: {cause: unknown, owner: infrastructure, recommendation: "..."}
//
// Everything is checked when the files are loaded (runlens validate): YAML
// syntax, keys, the cause and owner lists of the alert contract, symptom
// kinds, conditions (rule_expr.h) and {placeholders}, each error with the
// file:line:col of the offending character, inside the YAML scalar.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "operators/rules/rule_expr.h"
#include "runtime/status.h"

namespace runlens::ops::rules {

// The words of the vocabulary (schema/vocabulary.h) that rules may name.
const std::vector<std::string>& alert_kinds();  // without "diagnosis"
const std::vector<std::string>& causes();
const std::vector<std::string>& owners();
// Event kinds of the telemetry contract that conditions may name.
const std::vector<std::string>& event_kinds();
// Placeholders every summary and recommendation may use besides signal names.
const std::vector<std::string>& locator_placeholders();

struct Condition {
  Expr expr;
  runtime::SourceLocation where;
};

struct Leaf {
  std::string cause, owner;
  std::string summary;         // template with {placeholders}; may be empty
  std::string recommendation;  // template
  std::vector<int> evidence;   // signals to report with their values
  runtime::SourceLocation where;
};

struct RuleNode {
  std::vector<std::pair<Condition, int>> cases;  // condition, node taken when it holds
  int otherwise = -1;                            // node taken when no case holds
  int leaf = -1;                                 // >= 0: this node is a leaf
};

// One evaluated condition on the way to a leaf.
struct PathStep {
  const Condition* condition = nullptr;
  std::optional<double> value;  // unknown, or the condition's value
  bool taken = false;
};

struct Decision {
  const Leaf* leaf = nullptr;
  std::vector<PathStep> path;
};

struct RuleTree {
  std::string name;
  std::string file;  // as shown in errors
  std::vector<std::string> symptoms;
  int64_t priority = 0;
  std::optional<int64_t> before_steps, after_steps;  // override the operator's window
  std::vector<RuleNode> nodes;
  std::vector<Leaf> leaves;
  int root = -1;

  Decision decide(const Environment& env) const;
};

struct RuleSet {
  std::vector<RuleTree> trees;  // in file-name order

  // The tree that explains alerts of `kind`, or -1.
  int tree_for(std::string_view kind) const;
  // How `kind` ranks as the symptom of an incident: the tree's priority, then
  // its place in the tree's symptom list (earlier is higher). Higher wins.
  int64_t symptom_rank(std::string_view kind) const;
};

struct RuleFile {
  std::string name;  // as shown in errors, e.g. "configs/rules/straggler.yaml"
  std::string text;
};

// Parses rule files into one set. Throws runtime::ConfigError with every
// problem found, each at its file:line:col.
RuleSet parse_rules(const std::vector<RuleFile>& files, const Vocabulary& vocab);

// Reads every *.yaml and *.yml file of `dir`, sorted by name. Throws
// runtime::ConfigError (a missing or empty directory is reported at `where`).
std::vector<RuleFile> read_rule_dir(const std::string& dir, const runtime::SourceLocation& where);
// Reads the files of `dir` (read_rule_dir) and parses them.
RuleSet load_rule_dir(const std::string& dir, const Vocabulary& vocab, const runtime::SourceLocation& where);

// The placeholders of a template ("{name}", or "{a|b}": the first of a and b
// that has a value), with the offsets of their text.
std::vector<std::pair<size_t, std::string>> template_placeholders(std::string_view text);
// Replaces each {name} by lookup(name).
std::string render_template(std::string_view text, const std::function<std::string(std::string_view)>& lookup);

// Where character `offset` of a YAML scalar's value lies in its file, given
// the raw file text and the scalar's position (1-based line and column, as
// yaml-cpp marks plus one). Follows quotes, escapes and folded lines; falls
// back to the scalar's own position when the value cannot be aligned.
runtime::SourceLocation locate_in_scalar(const std::string& file, const std::string& raw, int line, int column,
                                         std::string_view value, size_t offset);

}  // namespace runlens::ops::rules
