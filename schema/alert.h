// Rows that operators derive: the joined step record and the alert (alert
// contract v2, docs/alerts.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schema/record.h"
#include "schema/vocabulary.h"

namespace runlens {

// What a run_start told us about a run, shared by every row derived from it.
struct RunInfo {
  RunStart start;
  // Placement by rank (index = rank); node empty / gpu -1 where unknown.
  std::vector<RankPlacement> placement;

  const RankPlacement* place(int32_t rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < placement.size() ? &placement[rank] : nullptr;
  }
  static std::shared_ptr<const RunInfo> from(const RunStart& rs);
};

// One step of one run, joined across its ranks by rank_join.
struct StepRecord {
  Symbol run_id;
  int64_t step = 0;
  int32_t world_size = 0;
  std::vector<Step> ranks;       // the ranks that reported, ordered by rank
  std::vector<int32_t> missing;  // ranks that did not report before the timeout
  bool timed_out = false;        // emitted by the timeout, not by completion
  // Incomplete by shedding: the collector shed step reports of this run
  // within the step's time span (runtime ShedReport), so its missing ranks
  // may have reported. No rank_missing is raised for it and detectors skip it.
  bool shed = false;
  int64_t first_time_ns = 0;           // earliest rank report of this step
  std::shared_ptr<const RunInfo> run;  // null when no run_start was seen
  // Measured by rank_join (ops::measure_ranks), by position in `ranks`: each
  // rank's own work time (the wall step less its collective and data waits;
  // the wall step when those cover it all) and its ratio to the step's
  // median work (0 when the median is 0), and the slowest rank (-1: none).
  std::vector<double> work_ms, ratio_to_median;
  int32_t slowest_rank = -1;
};

// Per-step aggregates of one run (step_stats), spec sections 11, 28 and 58:
// what the hot store keeps for every step, and what detectors compare.
struct StepStats {
  Symbol run_id;
  int64_t step = 0;
  int32_t world_size = 0;
  int32_t reported = 0;  // ranks that reported the step
  double step_ms = 0;    // the job's step: the slowest rank's wall time
  // Ranks' own work time (step_ms - comm_ms - data_wait_ms where known).
  double work_min = 0, work_p50 = 0, work_p95 = 0, work_p99 = 0, work_max = 0;
  int32_t slowest_rank = -1;
  double straggler_ratio = 0;                 // work_max / work_p50
  int64_t tokens = 0;                         // summed over ranks (0 = unknown)
  std::optional<double> tokens_per_s;         // tokens / step wall time
  std::optional<double> mfu;                  // model FLOP/s / peak FLOP/s of the ranks that reported
  std::optional<double> data_wait_ratio;      // mean data_wait_ms / step_ms
  std::optional<double> communication_ratio;  // mean comm_ms / step_ms
  // The step's time breakdown: means over the ranks that reported each field
  // (schema v8 columns of the store; unset when no rank reported it).
  std::optional<double> forward_ms, backward_ms, optimizer_ms, comm_ms, data_wait_ms;
  // From the step's train event, when one arrived in time.
  std::optional<double> loss, val_loss, lr, grad_norm;
  std::shared_ptr<const RunInfo> run;
  bool shed = false;  // of a step record incomplete by shedding (StepRecord::shed): not judged
};

enum class Severity : uint8_t { kInfo, kWarning, kCritical };
std::string_view severity_name(Severity s);

struct Evidence {
  std::string kind;
  std::optional<int64_t> step;
  std::string detail;
  // The alert_id of the symptom this item is (a diagnosis's symptoms; alert
  // contract v2, written only when set): what a diagnosis explains.
  std::string alert_id;
  bool operator==(const Evidence&) const = default;
};

struct Alert {
  std::string alert_id;  // deterministic, see make_alert_id
  // 0 when first published; each later publication of the same alert_id
  // (refined context, an escalation, a changed diagnosis) carries the
  // previous revision + 1. Consumers keep the highest revision of an alert_id.
  int32_t revision = 0;
  std::string kind;
  Severity severity = Severity::kWarning;
  int64_t time_ns = 0;
  // Set on the closing revision of an alert whose incident closed (the
  // detector re-armed, the run ended): the event time it closed; the alert is
  // resolved from then on. Unset: open (or an event-like kind, docs/alerts.md).
  // JSONL "ends_ns", written only when set (alert contract v2).
  std::optional<int64_t> ends_ns;
  Symbol tenant;
  Symbol run_id;
  std::optional<int64_t> step;
  std::optional<int32_t> rank;
  Symbol node;
  std::optional<int32_t> gpu;
  // Evaluation alerts (benchmark_, safety_, latency_regression; contract v2):
  // the model version gated and the candidate evaluation; empty otherwise.
  std::string model_id, model_version, evaluation_id;
  std::optional<double> value;
  std::optional<double> threshold;
  std::string summary;
  // Diagnosis records only.
  std::string symptom, cause, owner, recommendation;
  std::vector<Evidence> evidence;
  // Extra numeric context (e.g. median_ms, ratio), written as "attrs".
  std::vector<std::pair<std::string, double>> attrs;

  bool operator==(const Alert&) const = default;
};

// alert_id: 16 hex digits of a hash over kind, run, rank, node, gpu and the
// incident's discriminator (usually its onset step). The same input gives the
// same id in replay and live, and a restarted pipeline can de-duplicate.
std::string make_alert_id(std::string_view kind, Symbol run_id, std::optional<int32_t> rank, Symbol node,
                          std::optional<int32_t> gpu, int64_t discriminator);
// The alert_id of `a` from its own kind and locators (set those first).
std::string make_alert_id(const Alert& a, int64_t discriminator);
// alert_id of an evaluation alert: 16 hex digits of a hash over kind,
// model_id, model_version, evaluation_id and the gated metric. The same gate
// decision (whenever it is taken again) gives the same id, so a store or a
// pager de-duplicates it; training kinds keep make_alert_id above.
std::string make_evaluation_alert_id(std::string_view kind, std::string_view model_id, std::string_view model_version,
                                     std::string_view evaluation_id, std::string_view metric);

// The closing revision of `open` (its latest publication): the same alert,
// revision + 1, with ends_ns = `end_ns`; its row's time is `end_ns`.
Record closing_record(const Alert& open, int64_t end_ns);

inline Record alert_record(Alert a) {
  Record r;
  r.time_ns = a.time_ns;
  r.tenant = a.tenant;
  r.body = std::make_shared<const Alert>(std::move(a));
  return r;
}

}  // namespace runlens
