#include "eval/service/clusters.h"

#include <filesystem>
#include <fstream>

#include "formats/json_reader.h"

namespace runlens::eval::service {

std::string read_cluster_ids(const std::string& path, const std::vector<std::string>& fields, ClusterIds* out) {
  out->clear();
  if (fields.empty()) return {};
  if (std::filesystem::path(path).extension() != ".jsonl")
    return "cluster ids are read from JSON-lines (.jsonl) datasets only, not " + path;
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot read " + path;
  for (const auto& f : fields) (*out)[f];
  std::string line;
  int64_t item = 0, lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json::Value v;
    json::ParseError err;
    if (!json::parse(line, &v, &err) || v.type != json::Value::Type::kObject)
      return path + ":" + std::to_string(lineno) + ": not a JSON object, so its cluster ids cannot be read";
    for (const auto& f : fields) {
      const json::Value* x = v.find(f);
      if (!x) continue;
      if (x->type == json::Value::Type::kString)
        (*out)[f][item] = x->text;
      else if (x->type == json::Value::Type::kNumber && x->integral)
        (*out)[f][item] = std::to_string(x->integer);
      else if (x->type == json::Value::Type::kBool)
        (*out)[f][item] = x->boolean ? "true" : "false";
    }
    ++item;
  }
  return {};
}

}  // namespace runlens::eval::service
