// What the evaluation layer's YAML parsers (suites, gate policies) share on
// top of runtime::YamlChecker: unknown and duplicate keys with a
// did-you-mean, required keys, and typed scalars with their ranges, each
// problem a Diagnostic at the node's file:line:col.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/yaml_checker.h"

namespace runlens::eval {

class ConfigReader : protected runtime::YamlChecker {
 protected:
  // `document` names the top level in messages: "a suite", "a gate policy".
  ConfigReader(std::string file, std::string document);

  static std::string join(const std::string& path, const std::string& key);

  // Reports keys of `map` (at `path`) that are not `allowed`, and repeated keys.
  void check_keys(const YAML::Node& map, const std::vector<std::string>& allowed, const std::string& path);
  // The node at map[key], or an undefined node and an error naming what is missing.
  YAML::Node required(const YAML::Node& map, const std::string& key, const std::string& path, const char* what);
  bool expect_map(const YAML::Node& n, const std::string& path);

  std::string scalar(const YAML::Node& n, const std::string& path);
  // A non-empty name or version string.
  std::string name(const YAML::Node& n, const std::string& path);
  std::string required_name(const YAML::Node& map, const std::string& key, const std::string& path);
  std::optional<int64_t> integer(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi);
  std::optional<int64_t> required_int(const YAML::Node& map, const std::string& key, const std::string& path,
                                      int64_t lo, int64_t hi);
  std::optional<double> number(const YAML::Node& n, const std::string& path, double lo, double hi);
  std::optional<bool> boolean(const YAML::Node& n, const std::string& path);

 private:
  std::string document_;
};

}  // namespace runlens::eval
