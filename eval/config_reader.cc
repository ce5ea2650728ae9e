#include "eval/config_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "formats/canonical_json.h"

namespace runlens::eval {

ConfigReader::ConfigReader(std::string file, std::string document)
    : YamlChecker(std::move(file)), document_(std::move(document)) {}

std::string ConfigReader::join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

void ConfigReader::check_keys(const YAML::Node& map, const std::vector<std::string>& allowed, const std::string& path) {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    std::string k = it->first.IsScalar() ? it->first.Scalar() : "";
    if (!seen.insert(k).second) error(it->first.Mark(), join(path, k), "duplicate key '" + k + "'");
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string hint = runtime::closest_match(k, allowed);
      std::string where = path.empty() ? document_ : "'" + path + "'";
      error(it->first.Mark(), path,
            "unknown key '" + k + "' in " + where + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  }
}

YAML::Node ConfigReader::required(const YAML::Node& map, const std::string& key, const std::string& path,
                                  const char* what) {
  YAML::Node n = map[key];
  if (!n || n.IsNull()) {
    error(map.Mark(), join(path, key), "missing required key '" + key + "' (" + what + ")");
    return YAML::Node(YAML::NodeType::Undefined);
  }
  return n;
}

bool ConfigReader::expect_map(const YAML::Node& n, const std::string& path) {
  if (n.IsMap()) return true;
  error(n.Mark(), path, std::string("expected a mapping, got a ") + (n.IsSequence() ? "list" : "single value"));
  return false;
}

std::string ConfigReader::scalar(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) {
    error(n.Mark(), path, std::string("expected a single value, got a ") + (n.IsSequence() ? "list" : "mapping"));
    return {};
  }
  return n.Scalar();
}

std::string ConfigReader::name(const YAML::Node& n, const std::string& path) {
  std::string v = scalar(n, path);
  if (n.IsScalar() && v.empty()) error(n.Mark(), path, "expected a non-empty string");
  return v;
}

std::string ConfigReader::required_name(const YAML::Node& map, const std::string& key, const std::string& path) {
  YAML::Node n = required(map, key, path, "a string");
  return n ? name(n, join(path, key)) : std::string();
}

std::optional<int64_t> ConfigReader::integer(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi) {
  std::string t = scalar(n, path);
  if (!n.IsScalar()) return std::nullopt;
  int64_t v;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size()) {
    error(n.Mark(), path, "expected an integer, got '" + t + "'");
    return std::nullopt;
  }
  if (v < lo || v > hi) {
    error(n.Mark(), path,
          "out of range: must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + t);
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> ConfigReader::required_int(const YAML::Node& map, const std::string& key,
                                                  const std::string& path, int64_t lo, int64_t hi) {
  YAML::Node n = required(map, key, path, "an integer");
  return n ? integer(n, join(path, key), lo, hi) : std::nullopt;
}

std::optional<double> ConfigReader::number(const YAML::Node& n, const std::string& path, double lo, double hi) {
  std::string t = scalar(n, path);
  if (!n.IsScalar()) return std::nullopt;
  double v;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v)) {
    error(n.Mark(), path, "expected a number, got '" + t + "'");
    return std::nullopt;
  }
  if (v < lo || v > hi) {
    std::string range;
    json::append_canonical_number(&range, lo);
    range += " and ";
    json::append_canonical_number(&range, hi);
    error(n.Mark(), path, "out of range: must be between " + range + ", got " + t);
    return std::nullopt;
  }
  return v;
}

std::optional<bool> ConfigReader::boolean(const YAML::Node& n, const std::string& path) {
  std::string t = scalar(n, path);
  if (!n.IsScalar()) return std::nullopt;
  if (t == "true") return true;
  if (t == "false") return false;
  error(n.Mark(), path, "expected true or false, got '" + t + "'");
  return std::nullopt;
}

}  // namespace runlens::eval
