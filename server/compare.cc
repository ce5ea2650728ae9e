// GET /v1/runs/compare?left=&right=[&tolerance=] (spec sections 23 and 42):
// renders reports/compare.h's comparison of two runs, and the evaluations of
// both runs' checkpoints (eval/walk/walk.h).
#include "reports/compare.h"

#include <cstdlib>

#include "eval/walk/walk.h"
#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

std::string get_compare(const Call& call) {
  Args a = call.args({"left", "right", "tolerance"});
  std::string left_id = a.required("left"), right_id = a.required("right");
  double tolerance = 0.02;
  if (auto t = a.text("tolerance")) {
    char* end = nullptr;
    tolerance = std::strtod(t->c_str(), &end);
    if (t->empty() || *end != 0 || !(tolerance >= 0 && tolerance <= 1)) {
      throw HttpError{400, "parameter 'tolerance' must be a number from 0 to 1, got '" + *t + "'"};
    }
  }
  auto s = call.open();
  store::RunRow L = run_or_404(s, left_id), R = run_or_404(s, right_id);
  report::ComparedRun left = report::read_compared_run(s, L), right = report::read_compared_run(s, R);
  report::RunComparison c = report::compare_runs(left, right, tolerance);

  std::string out;
  json::Writer w(&out);
  w.begin_object();
  for (auto [key, row] : {std::pair<const char*, const store::RunRow*>{"left", &L}, {"right", &R}}) {
    w.key(key).begin_object();
    run_summary(w, *row);
    w.end_object();
  }
  w.key("config").begin_array();
  for (const auto& d : c.config) {
    w.begin_object().key("key").str(d.key).key("left");
    d.left ? value(w, *d.left) : (void)w.null();
    w.key("right");
    d.right ? value(w, *d.right) : (void)w.null();
    w.key("changed").boolean(d.changed).end_object();
  }
  w.end_array();
  for (const auto& d : c.inputs) {
    w.key(d.name).begin_object();
    opt_str(w, "left", d.left);
    opt_str(w, "right", d.right);
    w.key("changed").boolean(d.changed).end_object();
  }
  w.key("worldSize").begin_object().key("left").integer(L.world_size).key("right").integer(R.world_size);
  w.key("changed").boolean(c.world_size_changed).end_object();
  w.key("metrics").begin_object();
  for (const auto& m : c.metrics) {
    w.key(m.name).begin_object();
    opt_num(w, "left", m.left);
    opt_num(w, "right", m.right);
    if (m.delta) w.key("delta").num(*m.delta).key("relativeDelta").num(*m.relative_delta);
    w.key("changed").boolean(m.changed).key("verdict").str(m.verdict).end_object();
  }
  w.end_object();
  w.key("lrChanges").begin_object();
  for (auto [key, entries] : {std::pair{"left", &c.lr_changes_left}, std::pair{"right", &c.lr_changes_right}}) {
    w.key(key).begin_array();
    for (const auto& e : *entries) timeline_entry(w, e);
    w.end_array();
  }
  w.end_object();
  w.key("alerts")
      .begin_object()
      .key("left")
      .integer(left.aggregates.alerts)
      .key("right")
      .integer(right.aggregates.alerts)
      .end_object();
  // Benchmarks evaluated on both runs' checkpoints, with their paired difference (eval/walk/walk.h).
  walk::write_run_evaluations(w, s, L.run_id, R.run_id);
  w.key("changedKeys").begin_array();
  for (const auto& k : c.changed_keys) w.str(k);
  w.end_array();
  w.key("conclusion").begin_array();
  for (const auto& line : c.conclusion) w.str(line);
  w.end_array();
  w.end_object();
  return out;
}

}  // namespace runlens::api
