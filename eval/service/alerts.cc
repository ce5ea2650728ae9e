#include "eval/service/alerts.h"

#include <zmq.h>

#include <cmath>
#include <cstdio>

#include "schema/vocabulary.h"

namespace runlens::eval::service {

namespace {

std::string num(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string pct(double alpha) { return num(100 * (1 - alpha)) + "%"; }

}  // namespace

std::string_view alert_kind_of(Dimension dimension) {
  switch (dimension) {
    case Dimension::kQuality:
      return alert_kind::kBenchmarkRegression;
    case Dimension::kSafety:
      return alert_kind::kSafetyRegression;
    case Dimension::kLatency:
      return alert_kind::kLatencyRegression;
    case Dimension::kCost:
    case Dimension::kReliability:
      break;
  }
  return {};
}

std::vector<Alert> gate_alerts(const GateDecision& decision, const GateAlertContext& c) {
  std::vector<Alert> out;
  if (decision.verdict != Verdict::kFail) return out;
  const std::string mv = c.model_id + ":" + c.model_version;
  const std::string against = c.baseline_model_version.empty()
                                  ? "baseline evaluation " + decision.baseline_evaluation
                                  : c.baseline_model_version + " (evaluation " + decision.baseline_evaluation + ")";
  for (const MetricDecision& m : decision.metrics) {
    if (m.verdict != Verdict::kFail) continue;
    const std::string_view kind = alert_kind_of(m.dimension);
    if (kind.empty()) continue;
    Alert a;
    a.kind = std::string(kind);
    a.alert_id = make_evaluation_alert_id(kind, c.model_id, c.model_version, decision.candidate_evaluation, m.metric);
    a.severity = m.hard || m.dimension == Dimension::kSafety ? Severity::kCritical : Severity::kWarning;
    a.time_ns = c.decided_ns;
    a.model_id = c.model_id;
    a.model_version = c.model_version;
    a.evaluation_id = decision.candidate_evaluation;
    const bool cap_broken = m.cap && m.cap_upper > *m.cap;
    std::string head = kind == alert_kind::kBenchmarkRegression ? "BENCHMARK REGRESSION"
                       : kind == alert_kind::kSafetyRegression  ? "SAFETY REGRESSION"
                                                                : "LATENCY REGRESSION";
    if (cap_broken) {
      a.value = m.cap_upper;
      a.threshold = *m.cap;
      a.summary = head + ": " + mv + " " + m.metric + " is " + num(m.candidate) + " (" + std::to_string(m.cap_events) +
                  " of " + std::to_string(m.cap_n) + "), its " + pct(decision.alpha) + " " + m.cap_bound +
                  " upper bound " + num(m.cap_upper) + " is above the cap " + num(*m.cap) + " (gate " +
                  decision.policy + " v" + decision.policy_version + ", " + c.gate_id + ")";
    } else {
      a.value = m.difference;
      if (m.margin) a.threshold = -*m.margin;
      a.summary = head + ": " + mv + " " + m.metric + " " + num(m.candidate) + " against " + num(m.baseline) + " of " +
                  against + ": difference " + num(m.difference) + ", the " + pct(m.alpha_holm) + " upper bound " +
                  num(m.upper) + " is below -" + num(m.margin.value_or(0)) + " (" + std::to_string(m.n) +
                  " paired items, " + std::string(gate_method_name(m.method)) + " SE " + num(m.std_error) + "; gate " +
                  decision.policy + " v" + decision.policy_version + ", " + c.gate_id + ")";
    }
    auto attr = [&](const char* k, double v) {
      if (std::isfinite(v)) a.attrs.emplace_back(k, v);
    };
    attr("candidate", m.candidate);
    attr("baseline", m.baseline);
    if (m.margin) {
      attr("difference", m.difference);
      attr("lower", m.lower);
      attr("upper", m.upper);
      attr("std_error", m.std_error);
      attr("margin", *m.margin);
      attr("alpha_holm", m.alpha_holm);
    }
    attr("n", static_cast<double>(m.n));
    if (m.clusters) attr("clusters", static_cast<double>(m.clusters));
    attr("alpha", decision.alpha);
    if (m.cap) {
      attr("cap", *m.cap);
      attr("cap_upper", m.cap_upper);
      attr("cap_events", static_cast<double>(m.cap_events));
      attr("cap_n", static_cast<double>(m.cap_n));
    }
    attr("hard", m.hard ? 1 : 0);
    out.push_back(std::move(a));
  }
  return out;
}

AlertOutlets::~AlertOutlets() { close(); }

bool AlertOutlets::bind(void* zmq_ctx, const std::string& endpoint, std::string* error) {
  if (endpoint.empty()) return true;
  pub_ = zmq_socket(zmq_ctx, ZMQ_PUB);
  int linger = 1000, hwm = 100000;
  zmq_setsockopt(pub_, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(pub_, ZMQ_SNDHWM, &hwm, sizeof hwm);
  if (zmq_bind(pub_, endpoint.c_str()) != 0) {
    *error = "cannot bind the alert stream to " + endpoint + ": " + zmq_strerror(zmq_errno());
    zmq_close(pub_);
    pub_ = nullptr;
    return false;
  }
  char buf[256];
  size_t len = sizeof buf;
  endpoint_ = zmq_getsockopt(pub_, ZMQ_LAST_ENDPOINT, buf, &len) == 0 ? std::string(buf) : endpoint;
  return true;
}

std::string AlertOutlets::send(const std::vector<Alert>& alerts, const std::vector<std::string>& json) {
  for (size_t i = 0; i < alerts.size() && pub_; ++i) {
    // PUB never blocks: with no subscriber, or a slow one past its HWM, ZeroMQ drops the message.
    zmq_send(pub_, alerts[i].kind.data(), alerts[i].kind.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(pub_, json[i].data(), json[i].size(), ZMQ_DONTWAIT);
  }
  if (jsonl_.empty() || alerts.empty()) return {};
  std::FILE* f = std::fopen(jsonl_.c_str(), "ab");
  if (!f) return "cannot open " + jsonl_ + " to append alerts";
  bool ok = true;
  for (const auto& j : json) {
    ok &= std::fwrite(j.data(), 1, j.size(), f) == j.size();
    ok &= std::fputc('\n', f) != EOF;
  }
  ok &= std::fclose(f) == 0;
  return ok ? std::string() : "cannot append alerts to " + jsonl_;
}

void AlertOutlets::close() {
  if (pub_) zmq_close(pub_);
  pub_ = nullptr;
}

}  // namespace runlens::eval::service
