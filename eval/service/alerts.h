// Evaluation alerts (spec section 36; docs/alerts.md, "Evaluation alerts"):
// the alert contract v2 objects a FAIL gate decision raises, one per failed
// gated metric, and where the service sends them (the store's alerts table,
// a ZeroMQ PUB stream in the zmq_pub sink's framing, a JSONL file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/gate.h"
#include "schema/alert.h"

namespace runlens::eval::service {

// What an alert says about the gate beyond its decision.
struct GateAlertContext {
  std::string model_id, model_version;  // the candidate's (store keys: "digits-mlp", "v2")
  std::string baseline_model_version;   // the baseline's MODEL:VERSION, or "" when unknown
  std::string gate_id;
  int64_t decided_ns = 0;
};

// The alerts a decision raises: none unless its verdict is FAIL; then one per
// metric whose verdict is FAIL, of the kind its dimension picks (quality:
// benchmark_regression, safety: safety_regression, latency:
// latency_regression; cost and reliability have no alert kind yet and raise
// none). value/threshold: the improvement-oriented difference and -margin, or
// for a broken cap the candidate rate's upper bound and the cap. alert_id:
// make_evaluation_alert_id(kind, model, version, candidate evaluation, metric).
std::vector<Alert> gate_alerts(const GateDecision& decision, const GateAlertContext& context);

// The evaluation kind of a gated dimension; "" when it has none.
std::string_view alert_kind_of(Dimension dimension);

// Where raised alerts go besides the store: a ZeroMQ PUB socket bound to an
// endpoint (two frames [kind, alert JSON], as the pipeline's zmq_pub sink
// sends them, so `runlens tail` reads both alike) and a JSONL file appended
// to. Not thread-safe: the service calls it under its mutex.
class AlertOutlets {
 public:
  AlertOutlets() = default;
  ~AlertOutlets();
  AlertOutlets(const AlertOutlets&) = delete;
  AlertOutlets& operator=(const AlertOutlets&) = delete;

  // Binds `endpoint` on `zmq_ctx` ("" = no stream); false and `error` when it cannot.
  bool bind(void* zmq_ctx, const std::string& endpoint, std::string* error);
  const std::string& endpoint() const { return endpoint_; }  // as bound (the port when :0 was asked)
  void set_jsonl(std::string path) { jsonl_ = std::move(path); }
  // Publishes and appends each alert (its contract JSON in `json`); "" or why the JSONL append failed.
  std::string send(const std::vector<Alert>& alerts, const std::vector<std::string>& json);
  void close();

 private:
  void* pub_ = nullptr;
  std::string endpoint_, jsonl_;
};

}  // namespace runlens::eval::service
