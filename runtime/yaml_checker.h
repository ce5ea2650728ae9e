// What every YAML configuration parser here shares (pipelines, evaluation
// suites, later gate policies): positions as file:line:col, collected
// diagnostics, and loading a document whose top level must be a mapping.
// A parser derives from it and reports through error(); nothing is thrown
// until it has seen everything it can check.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/status.h"

namespace runlens::runtime {

class YamlChecker {
 protected:
  explicit YamlChecker(std::string file) : file_(std::move(file)) {}

  // The position of a node (1-based line and column); 0:0 for a null mark.
  SourceLocation loc(const YAML::Mark& m) const {
    if (m.is_null()) return SourceLocation{file_, 0, 0};
    return SourceLocation{file_, m.line + 1, m.column + 1};
  }
  void error(const YAML::Mark& m, const std::string& path, const std::string& msg) {
    diags_.push_back(Diagnostic{loc(m), path, msg});
  }

  // Parses `text`; throws ConfigError for a syntax error or a top level that
  // is not a mapping ("expected a mapping with <expected> at the top level").
  YAML::Node load_mapping(const std::string& text, const std::string& expected) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      error(e.mark, "", "YAML syntax error: " + e.msg);
      throw ConfigError(diags_);
    }
    if (!root.IsMap()) {
      error(root.IsDefined() ? root.Mark() : YAML::Mark(), "",
            "expected a mapping with " + expected + " at the top level");
      throw ConfigError(diags_);
    }
    return root;
  }

  std::string file_;
  std::vector<Diagnostic> diags_;
};

}  // namespace runlens::runtime
