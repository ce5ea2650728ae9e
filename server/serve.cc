#include "server/serve.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <variant>

#include "formats/json_reader.h"
#include "formats/json_writer.h"
#include "schema/vocabulary.h"
#include "store/store.h"

namespace runlens::api {

namespace {

using store::StepRange;

// A request that cannot be answered: 400 (bad parameter), 404 (unknown id), ...
struct ApiError {
  int status;
  std::string message;
};

std::string error_body(int status, const std::string& message) {
  std::string s;
  json::Writer(&s).begin_object().key("error").str(message).key("status").integer(status).end_object();
  return s;
}

// The query parameters of one request, checked against what the route takes.
class Args {
 public:
  Args(const httplib::Params& params, std::initializer_list<const char*> allowed) : params_(params) {
    for (const auto& [k, v] : params) {
      if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; }) == allowed.end()) {
        std::string list;
        for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
        throw ApiError{400,
                       "unknown parameter '" + k + "'" + (list.empty() ? "" : " (this route takes: " + list + ")")};
      }
      if (params.count(k) > 1) throw ApiError{400, "parameter '" + k + "' given more than once"};
    }
  }

  std::optional<std::string> text(const std::string& name) const {
    auto it = params_.find(name);
    if (it == params_.end()) return std::nullopt;
    return it->second;
  }
  std::string required(const std::string& name) const {
    auto v = text(name);
    if (!v || v->empty()) throw ApiError{400, "missing parameter '" + name + "'"};
    return *v;
  }
  std::optional<int64_t> integer(const std::string& name, int64_t min, int64_t max) const {
    auto v = text(name);
    if (!v) return std::nullopt;
    int64_t out = 0;
    const std::string& s = *v;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    bool ok = !s.empty() && ec == std::errc() && end == s.data() + s.size();
    if (!ok || out < min || out > max) {
      throw ApiError{400, "parameter '" + name + "' must be an integer from " + std::to_string(min) + " to " +
                              std::to_string(max) + ", got '" + s + "'"};
    }
    return out;
  }
  std::string choice(const std::string& name, const std::string& fallback,
                     const std::vector<std::string>& choices) const {
    auto v = text(name);
    if (!v) return fallback;
    std::string low = *v;
    std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return std::tolower(c); });
    if (std::find(choices.begin(), choices.end(), low) != choices.end()) return low;
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    throw ApiError{400, "parameter '" + name + "' must be one of " + list + ", got '" + *v + "'"};
  }
  StepRange steps() const {
    StepRange r{integer("fromStep", 0, INT64_MAX / 2), integer("toStep", 0, INT64_MAX / 2)};
    if (r.from && r.to && *r.from > *r.to) throw ApiError{400, "fromStep is after toStep"};
    return r;
  }

 private:
  const httplib::Params& params_;
};

// --- JSON helpers ---

void opt_num(json::Writer& w, const char* key, std::optional<double> v) {
  w.key(key);
  if (v)
    w.num(*v);
  else
    w.null();
}
void opt_int(json::Writer& w, const char* key, std::optional<int64_t> v) {
  w.key(key);
  if (v)
    w.integer(*v);
  else
    w.null();
}
void opt_str(json::Writer& w, const char* key, const std::string& v) {
  w.key(key);
  if (v.empty())
    w.null();
  else
    w.str(v);
}
void value(json::Writer& w, const Value& v) {
  if (v.kind == Value::Kind::kNumber)
    w.num(v.number);
  else if (v.kind == Value::Kind::kString)
    w.str(v.text);
  else
    w.null();
}
// Re-emits JSON the store holds (timeline details), so the response stays one document.
void parsed(json::Writer& w, const json::Value& v) {
  using T = json::Value::Type;
  switch (v.type) {
    case T::kNull:
      w.null();
      break;
    case T::kBool:
      w.boolean(v.boolean);
      break;
    case T::kNumber:
      v.integral ? w.integer(v.integer) : w.num(v.number);
      break;
    case T::kString:
      w.str(v.text);
      break;
    case T::kArray:
      w.begin_array();
      for (const auto& i : v.items) parsed(w, i);
      w.end_array();
      break;
    case T::kObject:
      w.begin_object();
      for (const auto& [k, i] : v.members) {
        w.key(k);
        parsed(w, i);
      }
      w.end_object();
      break;
  }
}
void raw_object(json::Writer& w, const char* key, const std::string& text) {
  w.key(key);
  json::Value v;
  json::ParseError e;
  if (text.empty() || !json::parse(text, &v, &e))
    w.null();
  else
    parsed(w, v);
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

void run_summary(json::Writer& w, const store::RunRow& r) {
  w.key("runId").str(r.run_id);
  opt_str(w, "experimentId", r.experiment_id);
  opt_str(w, "jobId", r.job_id);
  opt_str(w, "modelId", r.model_id);
  opt_str(w, "modelVersion", r.model_version);
  opt_str(w, "datasetVersion", r.dataset_version);
  opt_str(w, "codeCommit", r.code_commit);
  w.key("status").str(upper(r.status));
  opt_int(w, "step", r.step);
  w.key("worldSize").integer(r.world_size);
  w.key("startTimeNs").integer(r.started_ns);
  opt_int(w, "endTimeNs", r.ended_ns);
}

void timeline_entry(json::Writer& w, const store::TimelineEntry& e) {
  w.begin_object();
  opt_int(w, "step", e.step);
  w.key("timeNs").integer(e.time_ns);
  w.key("kind").str(e.kind);
  w.key("severity").str(e.severity);
  w.key("summary").str(e.summary);
  opt_str(w, "ref", e.ref);
  raw_object(w, "detail", e.detail_json);
  w.end_object();
}

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

// --- routes ---

class Routes {
 public:
  explicit Routes(std::string db_path) : db_path_(std::move(db_path)) {}

  store::Store open() const {
    try {
      return store::open_store(db_path_, {store::OpenMode::kReadOnly});
    } catch (const store::StoreError& e) {
      throw ApiError{503, e.what()};
    }
  }

  store::RunRow run_or_404(store::Store& s, const std::string& id) const {
    auto r = s.graph->run(id);
    if (!r) throw ApiError{404, "unknown run '" + id + "'"};
    return *r;
  }

  std::string health(const httplib::Request& req) const {
    Args a(req.params, {});
    open();
    std::string s;
    json::Writer(&s)
        .begin_object()
        .key("status")
        .str("ok")
        .key("schemaVersion")
        .integer(store::kSchemaVersion)
        .end_object();
    return s;
  }

  std::string runs(const httplib::Request& req) const {
    Args a(req.params, {"experiment", "model", "status", "limit"});
    store::RunFilter f;
    f.experiment_id = a.text("experiment").value_or("");
    f.model_id = a.text("model").value_or("");
    f.status = a.choice("status", "", {"running", "completed", "failed", "aborted"});
    f.limit = a.integer("limit", 1, 10000).value_or(100);
    auto s = open();
    auto rows = s.graph->runs(f);
    std::string out;
    json::Writer w(&out);
    w.begin_object().key("runs").begin_array();
    for (const auto& r : rows) {
      w.begin_object();
      run_summary(w, r);
      w.end_object();
    }
    w.end_array().key("count").integer(static_cast<int64_t>(rows.size())).end_object();
    return out;
  }

  // Spec section 39.
  std::string run(const httplib::Request& req) const {
    Args a(req.params, {});
    auto s = open();
    store::RunRow r = run_or_404(s, req.matches[1]);
    auto incidents = s.graph->incidents(r.run_id);
    auto agg = s.graph->aggregates(r.run_id);
    std::string out;
    json::Writer w(&out);
    w.begin_object();
    run_summary(w, r);
    w.key("tokensProcessed").integer(r.tokens_processed);
    w.key("restarts").integer(r.restarts);
    opt_str(w, "endReason", r.end_reason);
    w.key("metrics").begin_object();
    opt_num(w, "loss", r.loss);
    opt_num(w, "valLoss", r.val_loss);
    opt_num(w, "mfu", r.mfu);
    opt_num(w, "tokensPerSecond", r.tokens_per_s);
    opt_num(w, "learningRate", r.lr);
    opt_num(w, "gradNorm", r.grad_norm);
    opt_num(w, "stepTimeMsMedian", agg.step_ms_median);
    w.end_object();
    w.key("config").begin_object();
    for (const auto& [k, v] : r.config) {
      w.key(k);
      value(w, v);
    }
    w.end_object();
    opt_str(w, "latestCheckpointId", r.last_checkpoint_id);
    w.key("alerts").integer(agg.alerts);
    w.key("incidents").begin_array();
    for (const auto& i : incidents) {
      w.begin_object().key("incidentId").str(i.incident_id).key("kind").str(i.kind).key("severity").str(i.severity);
      opt_int(w, "openedStep", i.opened_step);
      opt_int(w, "lastStep", i.last_step);
      w.key("alertCount").integer(i.alert_count).end_object();
    }
    w.end_array().end_object();
    return out;
  }

  // Spec section 40: a bare array, slowest first by default.
  std::string ranks(const httplib::Request& req) const {
    Args a(req.params, {"sort", "order", "limit", "fromStep", "toStep"});
    std::string sort =
        a.choice("sort", "step_time", {"step_time", "ratio", "rank", "data_wait", "comm", "slowest_count"});
    std::string order = a.choice("order", sort == "rank" ? "asc" : "desc", {"asc", "desc"});
    int64_t limit = a.integer("limit", 1, 1'000'000).value_or(100);
    StepRange range = a.steps();
    auto s = open();
    store::RunRow r = run_or_404(s, req.matches[1]);
    auto rows = s.metrics->rank_summaries(r.run_id, range);
    std::vector<double> work;
    for (const auto& x : rows) work.push_back(x.work_ms_mean);
    std::sort(work.begin(), work.end());
    double median = work.empty()      ? 0
                    : work.size() % 2 ? work[work.size() / 2]
                                      : (work[work.size() / 2 - 1] + work[work.size() / 2]) / 2;
    auto key = [&](const store::RankSummary& x) -> double {
      if (sort == "ratio" || sort == "step_time") return x.work_ms_mean;
      if (sort == "data_wait") return x.data_wait_ms_mean.value_or(-1);
      if (sort == "comm") return x.comm_ms_mean.value_or(-1);
      if (sort == "slowest_count") return static_cast<double>(x.slowest_count);
      return x.rank;
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const auto& x, const auto& y) {
      double kx = key(x), ky = key(y);
      if (kx != ky) return order == "asc" ? kx < ky : kx > ky;
      return x.rank < y.rank;
    });
    if (static_cast<int64_t>(rows.size()) > limit) rows.resize(static_cast<size_t>(limit));
    std::string out;
    json::Writer w(&out);
    w.begin_array();
    for (const auto& x : rows) {
      w.begin_object().key("rank").integer(x.rank);
      opt_str(w, "node", x.node);
      opt_int(w, "gpu", x.gpu >= 0 ? std::optional<int64_t>(x.gpu) : std::nullopt);
      w.key("stepTimeMs").num(std::round(x.work_ms_mean * 10) / 10);
      w.key("ratioToMedian").num(median > 0 ? std::round(x.work_ms_mean / median * 1000) / 1000 : 0);
      w.key("maxStepTimeMs").num(std::round(x.work_ms_max * 10) / 10);
      w.key("wallStepMs").num(std::round(x.step_ms_mean * 10) / 10);
      opt_num(w, "commMs",
              x.comm_ms_mean ? std::optional<double>(std::round(*x.comm_ms_mean * 10) / 10) : std::nullopt);
      opt_num(w, "dataWaitMs",
              x.data_wait_ms_mean ? std::optional<double>(std::round(*x.data_wait_ms_mean * 10) / 10) : std::nullopt);
      w.key("steps").integer(x.steps).key("slowestSteps").integer(x.slowest_count).end_object();
    }
    w.end_array();
    return out;
  }

  // Spec section 41.
  std::string timeline(const httplib::Request& req) const {
    Args a(req.params, {"fromStep", "toStep", "limit"});
    StepRange range = a.steps();
    int64_t limit = a.integer("limit", 1, 1'000'000).value_or(10000);
    auto s = open();
    store::RunRow r = run_or_404(s, req.matches[1]);
    auto rows = s.graph->timeline(r.run_id, range, limit);
    std::string out;
    json::Writer w(&out);
    w.begin_object().key("runId").str(r.run_id);
    opt_int(w, "fromStep", range.from);
    opt_int(w, "toStep", range.to);
    w.key("events").begin_array();
    for (const auto& e : rows) timeline_entry(w, e);
    w.end_array().end_object();
    return out;
  }

  std::string steps(const httplib::Request& req) const {
    Args a(req.params, {"fromStep", "toStep", "limit"});
    StepRange range = a.steps();
    int64_t limit = a.integer("limit", 1, 1'000'000).value_or(1000);
    auto s = open();
    store::RunRow r = run_or_404(s, req.matches[1]);
    auto rows = s.graph->steps(r.run_id, range, limit);
    std::string out;
    json::Writer w(&out);
    w.begin_object().key("runId").str(r.run_id).key("steps").begin_array();
    for (const auto& row : rows) {
      const StepStats& x = row.stats;
      w.begin_object().key("step").integer(x.step).key("timeNs").integer(row.time_ns);
      w.key("worldSize").integer(x.world_size).key("reportedRanks").integer(x.reported);
      w.key("stepMs").num(x.step_ms);
      w.key("rankTimeMs")
          .begin_object()
          .key("min")
          .num(x.work_min)
          .key("p50")
          .num(x.work_p50)
          .key("p95")
          .num(x.work_p95);
      w.key("p99").num(x.work_p99).key("max").num(x.work_max).end_object();
      opt_int(w, "slowestRank", x.slowest_rank >= 0 ? std::optional<int64_t>(x.slowest_rank) : std::nullopt);
      w.key("stragglerRatio").num(x.straggler_ratio);
      w.key("tokens").integer(x.tokens);
      opt_num(w, "tokensPerSecond", x.tokens_per_s);
      opt_num(w, "mfu", x.mfu);
      opt_num(w, "dataWaitRatio", x.data_wait_ratio);
      opt_num(w, "communicationRatio", x.communication_ratio);
      opt_num(w, "loss", x.loss);
      opt_num(w, "valLoss", x.val_loss);
      opt_num(w, "learningRate", x.lr);
      opt_num(w, "gradNorm", x.grad_norm);
      w.end_object();
    }
    w.end_array().end_object();
    return out;
  }

  std::string alerts(const httplib::Request& req) const {
    Args a(req.params, {"runId", "kind", "since", "limit"});
    store::AlertFilter f;
    f.run_id = a.text("runId").value_or("");
    f.kind = a.text("kind").value_or("");
    f.since_ns = a.integer("since", 0, INT64_MAX);
    f.limit = a.integer("limit", 1, 100000).value_or(1000);
    auto s = open();
    if (!f.run_id.empty()) run_or_404(s, f.run_id);
    auto rows = s.graph->alerts(f);
    // Each alert is the alert contract's object (docs/alerts.md), as alerts.jsonl has it.
    std::string out = "{\"alerts\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i) out += ',';
      out += rows[i].json;
    }
    out += "],\"count\":" + std::to_string(rows.size()) + "}";
    return out;
  }

  std::string lineage(const httplib::Request& req) const {
    Args a(req.params, {});
    std::string id = req.matches[1];
    auto s = open();
    auto roots = s.graph->lineage(id);
    if (roots.empty()) throw ApiError{404, "unknown id '" + id + "'"};
    std::string out;
    json::Writer w(&out);
    w.begin_object().key("id").str(id).key("matches").begin_array();
    for (const auto& n : roots) lineage_node(w, n);
    w.end_array().end_object();
    return out;
  }

  std::string compare(const httplib::Request& req) const;

 private:
  std::string db_path_;
};

// Spec sections 23 and 42: what differs between two runs, inputs marked
// "changed", outcomes marked as regressions or improvements.
std::string Routes::compare(const httplib::Request& req) const {
  Args a(req.params, {"left", "right", "tolerance"});
  std::string left_id = a.required("left"), right_id = a.required("right");
  double tolerance = 0.02;
  if (auto t = a.text("tolerance")) {
    char* end = nullptr;
    tolerance = std::strtod(t->c_str(), &end);
    if (t->empty() || *end != 0 || !(tolerance >= 0 && tolerance <= 1)) {
      throw ApiError{400, "parameter 'tolerance' must be a number from 0 to 1, got '" + *t + "'"};
    }
  }
  auto s = open();
  store::RunRow L = run_or_404(s, left_id), R = run_or_404(s, right_id);
  auto la = s.graph->aggregates(L.run_id), ra = s.graph->aggregates(R.run_id);
  std::vector<std::string> changed;
  std::string out;
  json::Writer w(&out);
  w.begin_object();
  for (auto [key, row] : {std::pair<const char*, const store::RunRow*>{"left", &L}, {"right", &R}}) {
    w.key(key).begin_object();
    run_summary(w, *row);
    w.end_object();
  }

  // Inputs: config keys (left's order, then right-only keys), dataset, code, model.
  w.key("config").begin_array();
  std::vector<std::string> keys;
  for (const auto& [k, v] : L.config) keys.push_back(k);
  for (const auto& [k, v] : R.config) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  auto find = [](const ConfigMap& c, const std::string& k) -> const Value* {
    for (const auto& [key, v] : c) {
      if (key == k) return &v;
    }
    return nullptr;
  };
  std::vector<std::string> config_changed;
  for (const auto& k : keys) {
    const Value* lv = find(L.config, k);
    const Value* rv = find(R.config, k);
    bool diff = !lv || !rv || !(*lv == *rv);
    w.begin_object().key("key").str(k).key("left");
    lv ? value(w, *lv) : (void)w.null();
    w.key("right");
    rv ? value(w, *rv) : (void)w.null();
    w.key("changed").boolean(diff).end_object();
    if (diff) changed.push_back("config." + k), config_changed.push_back(k);
  }
  w.end_array();
  for (auto [key, l, r] :
       {std::tuple<const char*, std::string, std::string>{"dataset", L.dataset_version, R.dataset_version},
        {"codeCommit", L.code_commit, R.code_commit},
        {"model", L.model_id, R.model_id}}) {
    bool diff = l != r;
    w.key(key).begin_object();
    opt_str(w, "left", l);
    opt_str(w, "right", r);
    w.key("changed").boolean(diff).end_object();
    if (diff) changed.push_back(key);
  }
  w.key("worldSize").begin_object().key("left").integer(L.world_size).key("right").integer(R.world_size);
  w.key("changed").boolean(L.world_size != R.world_size).end_object();
  if (L.world_size != R.world_size) changed.push_back("worldSize");

  // Outcomes: relative differences beyond the tolerance.
  struct Metric {
    const char* name;
    std::optional<double> l, r;
    int better;  // +1: higher is better, -1: lower is better, 0: an input (just "changed")
  };
  const Metric metrics[] = {
      {"tokensPerSecond", la.tokens_per_s_mean, ra.tokens_per_s_mean, +1},
      {"mfu", la.mfu_mean, ra.mfu_mean, +1},
      {"stepTimeMs", la.step_ms_median, ra.step_ms_median, -1},
      {"loss", la.loss_last10, ra.loss_last10, -1},
      {"valLoss", la.val_loss_last, ra.val_loss_last, -1},
      {"learningRate", la.lr_max, ra.lr_max, 0},
  };
  std::vector<std::string> regressions;
  bool lr_changed =
      !config_changed.empty() && std::find(config_changed.begin(), config_changed.end(), "lr") != config_changed.end();
  w.key("metrics").begin_object();
  for (const auto& m : metrics) {
    w.key(m.name).begin_object();
    opt_num(w, "left", m.l);
    opt_num(w, "right", m.r);
    bool diff = false;
    std::string verdict = "unknown";
    if (m.l && m.r && std::isfinite(*m.l) && std::isfinite(*m.r)) {
      double delta = *m.r - *m.l;
      double rel = *m.l != 0 ? delta / std::fabs(*m.l) : (delta != 0 ? INFINITY : 0);
      w.key("delta").num(delta).key("relativeDelta").num(std::round(rel * 10000) / 10000);
      diff = std::fabs(rel) > tolerance;
      verdict = !diff                           ? "same"
                : m.better == 0                 ? "changed"
                : (delta > 0) == (m.better > 0) ? "improvement"
                                                : "regression";
    }
    w.key("changed").boolean(diff).key("verdict").str(verdict).end_object();
    if (diff) changed.push_back(std::string("metrics.") + m.name);
    if (verdict == "regression") regressions.push_back(m.name);
    if (m.better == 0 && diff && std::string(m.name) == "learningRate") lr_changed = true;
  }
  w.end_object();

  // LR and config changes inside each run (a scheduler change shows here, not in the config).
  w.key("lrChanges").begin_object();
  std::vector<std::string_view> training_kinds = {alert_kind::kNanLoss, alert_kind::kLossSpike, alert_kind::kGradSpike,
                                                  alert_kind::kDiagnosis};
  int64_t infra_alerts = 0;
  for (auto [key, row] : {std::pair<const char*, const store::RunRow*>{"left", &L}, {"right", &R}}) {
    w.key(key).begin_array();
    for (const auto& e : s.graph->timeline(row->run_id, {}, 100000)) {
      if (e.kind == "lr_change" ||
          (e.kind == event_kind::kConfigChange && e.summary.find(": lr ") != std::string::npos)) {
        timeline_entry(w, e);
        lr_changed = true;
      }
    }
    w.end_array();
    store::AlertFilter f;
    f.run_id = row->run_id;
    for (const auto& al : s.graph->alerts(f)) {
      if (std::find(training_kinds.begin(), training_kinds.end(), al.alert.kind) == training_kinds.end())
        ++infra_alerts;
    }
  }
  w.end_object();
  w.key("alerts").begin_object().key("left").integer(la.alerts).key("right").integer(ra.alerts).end_object();
  w.key("changedKeys").begin_array();
  for (const auto& c : changed) w.str(c);
  w.end_array();

  // The likely conclusion, in the spec's words.
  w.key("conclusion").begin_array();
  w.str(infra_alerts == 0 ? "Infrastructure appears healthy."
                          : "Infrastructure alerts in these runs: " + std::to_string(infra_alerts) + ".");
  std::string cfg;
  for (const auto& k : config_changed) cfg += (cfg.empty() ? "" : ", ") + k;
  if (!cfg.empty())
    w.str("Training configuration changed: " + cfg + ".");
  else if (lr_changed)
    w.str("Learning rate changed during a run.");
  if (!regressions.empty()) {
    std::string regs;
    for (const auto& r : regressions) regs += (regs.empty() ? "" : ", ") + r;
    std::string cause = lr_changed     ? " is correlated with the learning-rate change"
                        : !cfg.empty() ? " is correlated with the configuration change"
                                       : "";
    w.str("Regression in " + regs + cause + ".");
  }
  w.end_array();
  w.end_object();
  return out;
}

}  // namespace

struct ApiServer::Impl {
  ServeOptions options;
  Routes routes;
  httplib::Server server;
  std::thread thread;
  int port = 0;
  explicit Impl(ServeOptions o) : options(std::move(o)), routes(options.db_path) {}
};

ApiServer::ApiServer(ServeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  auto& svr = impl_->server;
  const Routes* routes = &impl_->routes;
  using Route = std::string (Routes::*)(const httplib::Request&) const;
  auto get = [&](const char* pattern, Route route) {
    svr.Get(pattern, [routes, route](const httplib::Request& req, httplib::Response& res) {
      try {
        res.set_content((routes->*route)(req), "application/json");
      } catch (const ApiError& e) {
        res.status = e.status;
        res.set_content(error_body(e.status, e.message), "application/json");
      } catch (const std::exception& e) {
        res.status = 500;
        res.set_content(error_body(500, e.what()), "application/json");
      }
    });
  };
  get("/v1/health", &Routes::health);
  get("/v1/runs", &Routes::runs);
  get("/v1/runs/compare", &Routes::compare);
  get(R"(/v1/runs/([^/]+))", &Routes::run);
  get(R"(/v1/runs/([^/]+)/ranks)", &Routes::ranks);
  get(R"(/v1/runs/([^/]+)/timeline)", &Routes::timeline);
  get(R"(/v1/runs/([^/]+)/steps)", &Routes::steps);
  get("/v1/alerts", &Routes::alerts);
  get(R"(/v1/lineage/(.+))", &Routes::lineage);  // ids may hold '/' (checkpoint ids do), sent as %2F
  // SO_REUSEADDR (a restart may bind at once) but not httplib's default
  // SO_REUSEPORT: a second server on a taken port must fail, not share it.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
  });
  // Unknown routes and methods get a JSON body too.
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 404 ? "no such route: " + req.method + " " + req.path : "request failed";
    res.set_content(error_body(res.status, msg), "application/json");
  });
}

ApiServer::~ApiServer() { stop(); }

bool ApiServer::start(std::string* error) {
  auto& svr = impl_->server;
  const auto& o = impl_->options;
  if (o.port == 0) {
    impl_->port = svr.bind_to_any_port(o.host);
    if (impl_->port < 0) impl_->port = 0;
  } else if (svr.bind_to_port(o.host, o.port)) {
    impl_->port = o.port;
  }
  if (impl_->port <= 0) {
    *error = "cannot listen on " + o.host + ":" + std::to_string(o.port);
    return false;
  }
  impl_->thread = std::thread([&svr] { svr.listen_after_bind(); });
  // stop() only takes effect once the server runs.
  for (int i = 0; i < 5000 && !svr.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

int ApiServer::port() const { return impl_->port; }

void ApiServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

int serve_until(const ServeOptions& options, const std::function<bool()>& should_stop) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(options.db_path, ec)) {
    std::fprintf(stderr, "runlens serve: no store at %s (replay or run a pipeline with a timeline sink first)\n",
                 options.db_path.c_str());
    return 2;
  }
  try {
    // Creates the store when missing and migrates an older one.
    store::open_store(options.db_path);
  } catch (const store::StoreError& e) {
    std::fprintf(stderr, "runlens serve: %s\n", e.what());
    return 1;
  }
  ApiServer server(options);
  std::string error;
  if (!server.start(&error)) {
    std::fprintf(stderr, "runlens serve: %s\n", error.c_str());
    return 2;
  }
  std::fprintf(stderr, "serving %s on http://%s:%d/v1/ until Ctrl-C\n", options.db_path.c_str(), options.host.c_str(),
               server.port());
  while (!should_stop()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.stop();
  return 0;
}

std::string store_path_of(const runtime::PipelineSpec& spec) {
  for (const auto& c : spec.components) {
    if (c.type == "timeline" && c.params.has("db")) return c.params.get_string("db");
  }
  return {};
}

}  // namespace runlens::api
