#include "server/render.h"

#include <algorithm>
#include <cmath>

#include "formats/json_reader.h"

namespace runlens::api {

namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
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
}  // namespace

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
void raw_object(json::Writer& w, const char* key, const std::string& text) {
  w.key(key);
  json::Value v;
  json::ParseError e;
  if (text.empty() || !json::parse(text, &v, &e))
    w.null();
  else
    parsed(w, v);
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

double median_work(const std::vector<store::RankSummary>& rows) {
  std::vector<double> work;
  for (const auto& x : rows) work.push_back(x.work_ms_mean);
  std::sort(work.begin(), work.end());
  return work.empty()      ? 0
         : work.size() % 2 ? work[work.size() / 2]
                           : (work[work.size() / 2 - 1] + work[work.size() / 2]) / 2;
}

void rank_row(json::Writer& w, const store::RankSummary& x, double median) {
  w.begin_object().key("rank").integer(x.rank);
  opt_str(w, "node", x.node);
  opt_int(w, "gpu", x.gpu >= 0 ? std::optional<int64_t>(x.gpu) : std::nullopt);
  w.key("stepTimeMs").num(std::round(x.work_ms_mean * 10) / 10);
  w.key("ratioToMedian").num(median > 0 ? std::round(x.work_ms_mean / median * 1000) / 1000 : 0);
  w.key("maxStepTimeMs").num(std::round(x.work_ms_max * 10) / 10);
  w.key("wallStepMs").num(std::round(x.step_ms_mean * 10) / 10);
  opt_num(w, "commMs", x.comm_ms_mean ? std::optional<double>(std::round(*x.comm_ms_mean * 10) / 10) : std::nullopt);
  opt_num(w, "dataWaitMs",
          x.data_wait_ms_mean ? std::optional<double>(std::round(*x.data_wait_ms_mean * 10) / 10) : std::nullopt);
  w.key("steps").integer(x.steps).key("slowestSteps").integer(x.slowest_count).end_object();
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

}  // namespace runlens::api
