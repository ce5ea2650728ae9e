// Quality-gate policies (configs/gates/*.yaml; the format is in
// docs/evaluation.md, "Quality gates"): which metrics of an evaluation a
// candidate model version is gated on against a baseline, per dimension
// (quality, safety, latency, cost, reliability), the non-inferiority margin
// each may regress by, its direction, whether it is a hard gate, and for a
// safety rate the cap its upper confidence bound must stay under. The
// parser checks a policy completely and reports every problem with its
// file:line:col, as the suite parser does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace runlens::eval {

enum class Dimension : uint8_t { kQuality, kSafety, kLatency, kCost, kReliability };
std::string_view dimension_name(Dimension d);  // "quality", ...
std::optional<Dimension> parse_dimension(std::string_view text);

enum class Direction : uint8_t { kHigherIsBetter, kLowerIsBetter };
std::string_view direction_name(Direction d);  // "higher_is_better", "lower_is_better"

// A metric output's natural direction: lower is better for perplexity,
// word_perplexity, cross_entropy, bits_per_byte and the safety rates
// (harmful_response_rate, jailbreak_success_rate, policy_violation_rate);
// higher for every other output (accuracy, f1, pass@K, log_probability, ...).
Direction default_direction(std::string_view output);
// The rates a cap applies to: a share of items (or of jailbreak attempts) with a harmful outcome.
bool is_safety_rate(std::string_view output);

// The upper confidence bound used for a safety cap.
enum class CapBound : uint8_t { kClopperPearson, kWilson };
std::string_view cap_bound_name(CapBound b);  // "clopper-pearson", "wilson"

struct GatedMetric {
  std::string metric;  // a metric output: "accuracy", "f1", "pass@1", "harmful_response_rate"
  Dimension dimension = Dimension::kQuality;
  // The non-inferiority margin delta (>= 0, in the metric's units); none =
  // no comparison with the baseline (a cap-only safety gate).
  std::optional<double> margin;
  Direction direction = Direction::kHigherIsBetter;
  bool hard = false;          // default: true in the safety dimension
  std::optional<double> cap;  // safety rates only: the candidate's upper bound must be <= cap
  // The item field that groups items into clusters (several questions per
  // passage); empty = items are independent. The gate's input gives each
  // item's cluster id under this key.
  std::string cluster;
  runtime::SourceLocation where;
};

struct GatePolicy {
  std::string file;
  std::string name;     // `gate:`
  std::string version;  // stored with every decision
  std::string suite;    // optional: the suite whose evaluations it gates; empty = any
  std::string description;
  double alpha = 0.05;  // one-sided level of every bound, in (0, 0.5)
  int64_t bootstrap_replicates = 2000;
  uint64_t bootstrap_seed = 1;
  CapBound cap_bound = CapBound::kClopperPearson;
  std::vector<GatedMetric> metrics;  // in file order, dimension by dimension

  const GatedMetric* find(std::string_view metric) const;
};

// Parses one policy; throws runtime::ConfigError with every problem found.
GatePolicy parse_gate_policy(const std::string& text, const std::string& file = "<gate>");
// Reads and parses a policy file.
GatePolicy load_gate_policy(const std::string& path);

}  // namespace runlens::eval
