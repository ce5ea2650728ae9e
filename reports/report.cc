#include "reports/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "formats/json_writer.h"
#include "schema/number_format.h"
#include "schema/vocabulary.h"
#include "store/store.h"

namespace runlens::report {

namespace {

// 482910 -> "482,910", as the spec's page writes steps.
std::string step_text(int64_t s) {
  std::string digits = std::to_string(s < 0 ? -s : s), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return s < 0 ? "-" + out : out;
}

std::string percent(std::optional<double> fraction) {
  if (!fraction) return "unknown";
  return fmt_num(*fraction * 100, "%.0f%%");
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::string failure_phrase(const std::string& kind) {
  static const std::map<std::string_view, std::string> kPhrases = {
      {alert_kind::kNanLoss, "NaN loss detected"},
      {alert_kind::kStraggler, "Straggler detected"},
      {alert_kind::kRankMissing, "Rank stopped reporting"},
      {alert_kind::kJobStalled, "Job stalled"},
      {alert_kind::kNodeUnreachable, "Node unreachable"},
      {alert_kind::kStepAnomaly, "Implausible step number"},
      {alert_kind::kXidError, "GPU XID error"},
      {alert_kind::kOom, "Out of memory"},
      {alert_kind::kEccUncorrected, "Uncorrected ECC error"},
      {alert_kind::kLossSpike, "Loss spike"},
      {alert_kind::kGradSpike, "Gradient spike"},
      {alert_kind::kCheckpointFailure, "Checkpoint failed"},
      {alert_kind::kThermalThrottle, "GPU thermal throttling"},
  };
  auto it = kPhrases.find(kind);
  return it != kPhrases.end() ? it->second : kind;
}

// "training_instability" -> "Training instability."
std::string cause_sentence(const std::string& cause) {
  std::string s = cause;
  std::replace(s.begin(), s.end(), '_', ' ');
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s + ".";
}

struct Series {
  const char* name;
  const char* key;
  std::vector<std::pair<int64_t, double>> points;
  std::string trend() const {
    std::vector<double> finite;
    for (const auto& [s, v] : points) {
      if (std::isfinite(v)) finite.push_back(v);
    }
    if (finite.size() < 2 || finite.front() <= 0) return "";
    double r = finite.back() / finite.front();
    return r >= 1.5 ? "↑" : r <= 1 / 1.5 ? "↓" : "";
  }
  std::string text() const {
    if (points.empty()) return "no data";
    std::string s;
    for (const auto& [step, v] : points) s += (s.empty() ? "" : " → ") + fmt_num(v, NumberStyle::kShort);
    std::string t = trend();
    return t.empty() ? s : s + " " + t;
  }
};

struct Item {  // an event with its step, for "related events" and the infrastructure lists
  std::optional<int64_t> step;
  std::string kind, text;
};

struct Page {
  store::RunRow run;
  bool failed = false;
  bool critical = false;  // a critical alert or a failed run, not just a warning
  std::string failure_kind, failure_title, failure_summary;
  std::optional<int64_t> failure_step;
  std::string failure_alert_id;
  int64_t gpus = 0, nodes = 0;
  std::optional<int64_t> from_step, to_step;
  std::vector<Series> training;
  std::optional<double> gpu_util, mfu;
  int64_t gpu_xid = 0;
  std::vector<Item> gpu_errors, nccl_errors, oom, stragglers, missing_ranks;
  bool diagnosed = false;
  std::string cause, owner, cause_summary;
  std::vector<Item> evidence;
  std::vector<Item> related;
  std::vector<std::string> recommendation;
};

bool in(const std::string& k, std::initializer_list<std::string_view> set) {
  for (std::string_view s : set) {
    if (k == s) return true;
  }
  return false;
}

Page build(store::Store& s, const store::RunRow& run, const ReportOptions& o) {
  Page p;
  p.run = run;
  store::AlertFilter af;
  af.run_id = run.run_id;
  af.limit = 100000;
  auto alerts = s.graph->alerts(af);

  // The failure: the first critical alert, else the first alert, else a failed end.
  const store::StoredAlert* failure = nullptr;
  for (const auto& a : alerts) {
    if (a.alert.kind != alert_kind::kDiagnosis && a.alert.severity == Severity::kCritical) {
      failure = &a;
      break;
    }
  }
  for (size_t i = 0; !failure && i < alerts.size(); ++i) {
    if (alerts[i].alert.kind != alert_kind::kDiagnosis) failure = &alerts[i];
  }
  int64_t failure_ns = run.last_time_ns;
  if (failure) {
    p.failed = true;
    p.failure_kind = failure->alert.kind;
    p.failure_step = failure->alert.step ? failure->alert.step : run.step;
    p.failure_title = failure_phrase(p.failure_kind) + (p.failure_step ? " at step " + step_text(*p.failure_step) : "");
    p.failure_summary = failure->alert.summary;
    p.failure_alert_id = failure->alert.alert_id;
    p.critical = failure->alert.severity == Severity::kCritical || run.status == "failed" || run.status == "aborted";
    failure_ns = failure->alert.time_ns;
  } else if (run.status == "failed" || run.status == "aborted") {
    p.failed = true;
    p.critical = true;
    p.failure_kind = timeline_kind::kRunEnd;
    p.failure_step = run.step;
    p.failure_title = "Run " + run.status + (run.step ? " at step " + step_text(*run.step) : "");
    p.failure_summary = run.end_reason;
  }

  auto allocs = s.graph->allocations(run.run_id);
  std::set<std::string> nodes;
  std::vector<std::pair<std::string, int32_t>> gpus;
  for (const auto& a : allocs) {
    if (a.node.empty()) continue;
    nodes.insert(a.node);
    gpus.emplace_back(a.node, a.gpu);
  }
  p.gpus = allocs.empty() ? run.world_size : static_cast<int64_t>(allocs.size());
  p.nodes = static_cast<int64_t>(nodes.size());

  // Related events: the timeline of the window before the failure (and a little after).
  int64_t focus = p.failure_step.value_or(run.step.value_or(0));
  store::StepRange window{std::max<int64_t>(0, focus - o.window), focus + 10};
  for (const auto& e : s.graph->timeline(run.run_id, window, 100000)) {
    if (e.kind == timeline_kind::kRunStart || (e.kind == timeline_kind::kCheckpoint && e.severity == "info")) continue;
    p.related.push_back({e.step, e.kind, e.summary});
  }
  if (p.related.size() > 20) p.related.erase(p.related.begin(), p.related.end() - 20);

  // The training series: a step before the first related event, each related
  // step, and the two steps up to the failure.
  std::set<int64_t> points;
  for (const auto& r : p.related) {
    if (r.step && *r.step <= focus) points.insert(*r.step);
  }
  int64_t baseline = points.empty() ? focus - 3 : std::min(*points.begin() - 1, focus - 3);
  points.insert(baseline);
  for (int64_t k = 2; k >= 0; --k) points.insert(focus - k);
  while (points.size() > 6) points.erase(std::next(points.begin()));  // keep the baseline and the latest
  for (auto it = points.begin(); it != points.end();) it = *it < 0 ? points.erase(it) : std::next(it);
  std::map<int64_t, StepStats> at;
  if (!points.empty()) {
    for (const auto& row : s.graph->steps(run.run_id, {*points.begin(), *points.rbegin()}, 100000)) {
      at[row.stats.step] = row.stats;
    }
    p.from_step = *points.begin();
    p.to_step = *points.rbegin();
  }
  Series loss{"Loss", "loss", {}}, grad{"Gradient norm", "gradNorm", {}}, lr{"Learning rate", "learningRate", {}};
  for (int64_t step : points) {
    auto it = at.find(step);
    if (it == at.end()) continue;
    if (it->second.loss) loss.points.emplace_back(step, *it->second.loss);
    if (it->second.grad_norm) grad.points.emplace_back(step, *it->second.grad_norm);
    if (it->second.lr) lr.points.emplace_back(step, *it->second.lr);
  }
  p.training = {loss, grad, lr};

  // Infrastructure.
  auto agg = s.graph->aggregates(run.run_id);
  p.mfu = agg.mfu_mean;
  store::GpuSummary g = s.metrics->gpu_summary(gpus, run.started_ns, failure_ns);
  if (g.util_mean) p.gpu_util = *g.util_mean / 100;
  p.gpu_xid = g.xid;
  for (const auto& a : alerts) {
    const Alert& al = a.alert;
    Item item{al.step, al.kind, al.summary};
    if (al.rank && !al.node.empty() && al.gpu &&
        al.value) {  // "rank 13 (gpu-node-1 GPU 5) 2.03x" for the summary lines
      item.text = "rank " + std::to_string(*al.rank) + " (" + al.node.string() + " GPU " + std::to_string(*al.gpu) +
                  ") " + fmt_num(*al.value, NumberStyle::kShort) +
                  (al.threshold ? "x (threshold " + fmt_num(*al.threshold, NumberStyle::kShort) + ")" : "");
    }
    if (in(al.kind,
           {alert_kind::kXidError, alert_kind::kEccUncorrected, alert_kind::kNvlinkError, alert_kind::kPcieReplay,
            alert_kind::kThermalThrottle, alert_kind::kPowerThrottle, alert_kind::kClockLow})) {
      p.gpu_errors.push_back(item);
    } else if (in(al.kind, {alert_kind::kCommBottleneck})) {
      p.nccl_errors.push_back(item);
    } else if (in(al.kind, {alert_kind::kOom, alert_kind::kMemoryPressure})) {
      p.oom.push_back(item);
    } else if (al.kind == alert_kind::kStraggler) {
      p.stragglers.push_back(item);
    } else if (in(al.kind, {alert_kind::kRankMissing, alert_kind::kJobStalled, alert_kind::kNodeUnreachable})) {
      p.missing_ranks.push_back(item);  // one rank, the most of a job, or all of a node
    }
  }
  for (const auto& e : s.graph->timeline(run.run_id, {}, 100000)) {
    if (e.kind == event_kind::kXid)
      p.gpu_errors.push_back({e.step, e.kind, e.summary});
    else if (e.kind == event_kind::kNcclTimeout)
      p.nccl_errors.push_back({e.step, e.kind, e.summary});
    else if (e.kind == event_kind::kOom)
      p.oom.push_back({e.step, e.kind, e.summary});
  }

  // Likely cause: a diagnosis that explains the failure, else unknown with the evidence.
  const store::StoredAlert* diagnosis = nullptr;
  for (const auto& a : alerts) {
    if (a.alert.kind != alert_kind::kDiagnosis) continue;
    if (!diagnosis || (a.alert.symptom == p.failure_kind && diagnosis->alert.symptom != p.failure_kind)) diagnosis = &a;
  }
  if (diagnosis) {
    const Alert& d = diagnosis->alert;
    p.diagnosed = true;
    p.cause = d.cause.empty() ? std::string(cause::kUnknown) : d.cause;
    p.owner = d.owner;
    p.cause_summary = d.summary;
    const std::string prefix = "LIKELY CAUSE: ";  // the page has that heading already
    if (p.cause_summary.rfind(prefix, 0) == 0) p.cause_summary.erase(0, prefix.size());
    for (const auto& e : d.evidence) p.evidence.push_back({e.step, e.kind, e.detail});
    if (!d.recommendation.empty()) p.recommendation.push_back(d.recommendation);
  } else {
    p.cause = cause::kUnknown;
    p.cause_summary = "No diagnosis in the store for this run; the evidence at hand is listed.";
    for (const auto& r : p.related) {
      if (r.kind != timeline_kind::kAlert && (!r.step || !p.failure_step || *r.step <= *p.failure_step))
        p.evidence.push_back(r);
    }
    for (const auto& lists : {&p.stragglers, &p.gpu_errors, &p.nccl_errors, &p.oom, &p.missing_ranks}) {
      for (const auto& i : *lists) p.evidence.push_back(i);
    }
    p.recommendation.push_back(
        "No recommendation recorded (no diagnosis). Start from the related events: the earliest change before the "
        "failure is the first suspect.");
  }
  return p;
}

std::string render_text(const Page& p) {
  const std::string heavy = "━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━", light = "────────────────────────────────────";
  std::string t;
  auto line = [&](const std::string& s) { t += s + "\n"; };
  auto items = [&](const char* label, const std::vector<Item>& list) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%-14s ", label);
    if (list.empty()) return line(std::string(buf) + "none");
    line(std::string(buf) + list.front().text +
         (list.size() > 1 ? " (+" + std::to_string(list.size() - 1) + " more)" : ""));
  };
  line("TRAINING RUN " + p.run.run_id);
  line(heavy);
  line("STATUS");
  line(upper(p.run.status));
  if (p.failed) {
    line(p.critical ? "Failure:" : "Incident:");
    line(p.failure_title);
    if (!p.failure_summary.empty()) line(p.failure_summary);
  } else {
    line("No failure recorded.");
  }
  line("");
  line("MODEL");
  line(light);
  line((p.run.model_id.empty() ? "unknown" : p.run.model_id) +
       (p.run.model_version.empty() ? "" : " (version " + p.run.model_version + ")"));
  if (!p.run.dataset_version.empty()) line("Dataset: " + p.run.dataset_version);
  line("GPUs:");
  line(std::to_string(p.gpus) + (p.nodes ? " (" + std::to_string(p.nodes) + " nodes)" : ""));
  line("");
  line("TRAINING" +
       (p.from_step ? " (steps " + step_text(*p.from_step) + " to " + step_text(*p.to_step) + ")" : std::string()));
  line(light);
  for (const auto& s : p.training) {
    line(s.name);
    line(s.text());
  }
  line("");
  line("INFRASTRUCTURE");
  line(light);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%-14s %s", "GPU Util", percent(p.gpu_util).c_str());
  line(buf);
  std::snprintf(buf, sizeof buf, "%-14s %s", "MFU", percent(p.mfu).c_str());
  line(buf);
  items("GPU errors", p.gpu_errors);
  items("NCCL errors", p.nccl_errors);
  items("OOM", p.oom);
  items("Stragglers", p.stragglers);
  items("Missing ranks", p.missing_ranks);
  line("");
  line("LIKELY CAUSE");
  line(light);
  if (p.diagnosed) {
    line(cause_sentence(p.cause) + (p.owner.empty() ? "" : " Owner: " + p.owner + "."));
    if (!p.cause_summary.empty()) line(p.cause_summary);
  } else {
    line("Unknown.");
    line(p.cause_summary);
  }
  if (!p.evidence.empty()) {
    line("Evidence:");
    for (const auto& e : p.evidence) line("  " + (e.step ? step_text(*e.step) + "  " : "") + e.text);
  }
  line("");
  line("RELATED EVENTS");
  line(light);
  if (p.related.empty()) line("none");
  for (const auto& e : p.related) {
    std::snprintf(buf, sizeof buf, "%-10s ", e.step ? step_text(*e.step).c_str() : "-");
    line(buf + e.text);
  }
  line("");
  line("RECOMMENDATION");
  line(light);
  for (const auto& r : p.recommendation) line(r);
  return t;
}

void items_json(json::Writer& w, const char* key, const std::vector<Item>& list) {
  w.key(key).begin_array();
  for (const auto& i : list) {
    w.begin_object();
    w.key("step");
    if (i.step)
      w.integer(*i.step);
    else
      w.null();
    w.key("kind").str(i.kind).key("summary").str(i.text).end_object();
  }
  w.end_array();
}

std::string render_json(const Page& p) {
  std::string out;
  json::Writer w(&out);
  auto opt = [&](const char* k, std::optional<double> v) {
    w.key(k);
    if (v)
      w.num(*v);
    else
      w.null();
  };
  w.begin_object().key("runId").str(p.run.run_id).key("status").str(upper(p.run.status));
  w.key("failure");
  if (p.failed) {
    w.begin_object()
        .key("critical")
        .boolean(p.critical)
        .key("kind")
        .str(p.failure_kind)
        .key("title")
        .str(p.failure_title)
        .key("summary")
        .str(p.failure_summary);
    w.key("step");
    if (p.failure_step)
      w.integer(*p.failure_step);
    else
      w.null();
    if (!p.failure_alert_id.empty()) w.key("alertId").str(p.failure_alert_id);
    w.end_object();
  } else {
    w.null();
  }
  w.key("model").begin_object().key("modelId").str(p.run.model_id).key("modelVersion").str(p.run.model_version);
  w.key("datasetVersion").str(p.run.dataset_version).end_object();
  w.key("gpus").integer(p.gpus).key("nodes").integer(p.nodes);
  w.key("training").begin_object();
  w.key("fromStep");
  if (p.from_step)
    w.integer(*p.from_step);
  else
    w.null();
  w.key("toStep");
  if (p.to_step)
    w.integer(*p.to_step);
  else
    w.null();
  for (const auto& s : p.training) {
    w.key(s.key).begin_array();
    for (const auto& [step, v] : s.points) w.begin_object().key("step").integer(step).key("value").num(v).end_object();
    w.end_array();
  }
  w.end_object();
  w.key("infrastructure").begin_object();
  opt("gpuUtil", p.gpu_util);
  opt("mfu", p.mfu);
  items_json(w, "gpuErrors", p.gpu_errors);
  items_json(w, "ncclErrors", p.nccl_errors);
  items_json(w, "oom", p.oom);
  items_json(w, "stragglers", p.stragglers);
  items_json(w, "missingRanks", p.missing_ranks);
  w.end_object();
  w.key("likelyCause").begin_object().key("source").str(p.diagnosed ? "diagnosis" : "unknown");
  w.key("cause").str(p.cause).key("owner").str(p.owner).key("summary").str(p.cause_summary);
  items_json(w, "evidence", p.evidence);
  w.end_object();
  items_json(w, "relatedEvents", p.related);
  w.key("recommendation").begin_array();
  for (const auto& r : p.recommendation) w.str(r);
  w.end_array().end_object();
  return out;
}

}  // namespace

std::optional<std::string> failure_page(const ReportOptions& o) {
  // Read-write so that an older store is migrated first (reading takes no write lock).
  store::Store s =
      store::open_store(o.store_url, {o.read_only ? store::OpenMode::kReadOnly : store::OpenMode::kReadWrite});
  auto run = s.graph->run(o.run_id);
  if (!run) return std::nullopt;
  Page p = build(s, *run, o);
  return o.json ? render_json(p) + "\n" : render_text(p);
}

}  // namespace runlens::report
