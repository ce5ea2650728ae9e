// GET /v1/lineage/{id}: every entity the id names and what it leads to.
#include <algorithm>
#include <cmath>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

namespace {

void lineage_node(json::Writer& w, const store::LineageNode& n) {
  w.begin_object().key("type").str(n.type).key("id").str(n.id);
  w.key("attrs").begin_object();
  for (const auto& [k, v] : n.attrs) {
    w.key(k);
    if (const auto* i = std::get_if<int64_t>(&v))
      w.integer(*i);
    else if (const auto* d = std::get_if<double>(&v))
      w.num(*d);
    else
      w.str(std::get<std::string>(v));
  }
  w.end_object();
  w.key("children").begin_array();
  for (const auto& c : n.children) lineage_node(w, c);
  w.end_array().end_object();
}

}  // namespace

std::string get_lineage(const Call& call) {
  call.args({});  // it takes no parameters
  std::string id = call.match(1);
  auto s = call.open();
  auto roots = s.graph->lineage(id);
  if (roots.empty()) throw HttpError{404, "unknown id '" + id + "'"};
  std::string out;
  json::Writer w(&out);
  w.begin_object().key("id").str(id).key("matches").begin_array();
  for (const auto& n : roots) lineage_node(w, n);
  w.end_array().end_object();
  return out;
}

}  // namespace runlens::api
