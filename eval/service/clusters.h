// Cluster ids of dataset items (docs/evaluation-service.md, "Clustered
// items"): a gate policy's `cluster: FIELD` groups items by the value of FIELD
// in the dataset item (several questions per passage). The service reads them
// from the dataset file it has hash-checked, stores them with each item
// (evaluation_items.clusters_json) and gives them to the gate.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace runlens::eval::service {

// Per field, per item index, the item's cluster id.
using ClusterIds = std::map<std::string, std::map<int64_t, std::string>>;

// Reads `fields` of every item of a JSON-lines file: item i is the i-th
// non-empty line (as the service counts items and the workers index them).
// A string value is the id as written; an integer (or a boolean) its JSON
// text; an item without the field, or with another type, has no id for it.
// "" or why the file could not be read (not .jsonl, a line that is not a JSON
// object, with its line number).
std::string read_cluster_ids(const std::string& path, const std::vector<std::string>& fields, ClusterIds* out);

}  // namespace runlens::eval::service
