// GET /v1/search?q=ID: what an identifier names (the run graph's lineage
// lookup, exact ids of section 1) plus the runs whose id starts with it.
#include <algorithm>
#include <set>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

namespace {

constexpr size_t kMaxMatches = 50;

// The contract's type names for the lineage's.
std::string type_name(const std::string& t) {
  if (t == "training_run") return "run";
  if (t == "evaluation_run") return "evaluation";
  return t;
}

void collect_runs(const store::LineageNode& n, std::set<std::string>* out, int depth) {
  if (n.type == "training_run") out->insert(n.id);
  for (const auto& [k, v] : n.attrs) {
    if (k == "run_id" && std::holds_alternative<std::string>(v) && !std::get<std::string>(v).empty())
      out->insert(std::get<std::string>(v));
  }
  if (depth > 0)
    for (const auto& c : n.children) collect_runs(c, out, depth - 1);
}

std::string label_of(const store::LineageNode& n) {
  std::string type = type_name(n.type);
  std::replace(type.begin(), type.end(), '_', ' ');
  std::string label = type + " " + n.id;
  for (const auto& [k, v] : n.attrs) {
    if ((k == "kind" || k == "status") && std::holds_alternative<std::string>(v) && !std::get<std::string>(v).empty())
      label += " (" + std::get<std::string>(v) + ")";
  }
  return label;
}

}  // namespace

std::string get_search(const Call& call) {
  Args a = call.args({"q"});
  std::string q = a.required("q");
  if (q.size() > 200) throw HttpError{400, "parameter 'q' is longer than 200 characters"};
  auto s = call.open();
  std::vector<store::LineageNode> found = s.graph->lineage(q);
  // A GPU is NODE/GPU: the node's lineage holds it.
  if (found.empty()) {
    size_t slash = q.rfind('/');
    if (slash != std::string::npos && slash > 0 && slash + 1 < q.size()) {
      for (auto& n : s.graph->lineage(q.substr(0, slash))) {
        if (n.type != "node") continue;
        for (auto& c : n.children)
          if (c.type == "gpu" && c.id == q) found.push_back(c);
      }
    }
  }
  std::string out;
  json::Writer w(&out);
  w.begin_object().key("q").str(q).key("matches").begin_array();
  size_t n = 0;
  std::set<std::string> runs_listed;
  for (const auto& node : found) {
    if (n == kMaxMatches) break;
    std::set<std::string> runs;
    collect_runs(node, &runs, 3);
    w.begin_object().key("type").str(type_name(node.type)).key("id").str(node.id);
    w.key("runIds").begin_array();
    for (const auto& r : runs) w.str(r);
    w.end_array().key("label").str(label_of(node)).end_object();
    if (node.type == "training_run") runs_listed.insert(node.id);
    ++n;
  }
  store::RunFilter f;
  f.run_id_prefix = q;
  f.limit = static_cast<int64_t>(kMaxMatches);
  for (const auto& r : s.graph->runs(f)) {
    if (n == kMaxMatches) break;
    if (runs_listed.count(r.run_id)) continue;
    w.begin_object().key("type").str("run").key("id").str(r.run_id);
    w.key("runIds").begin_array().str(r.run_id).end_array();
    std::string label = "run " + r.run_id;
    if (!r.model_id.empty()) label += " (" + r.model_id + (r.model_version.empty() ? "" : ":" + r.model_version) + ")";
    w.key("label").str(label).end_object();
    ++n;
  }
  w.end_array().key("count").integer(static_cast<int64_t>(n)).end_object();
  return out;
}

}  // namespace runlens::api
