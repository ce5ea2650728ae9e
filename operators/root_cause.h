// root_cause: turns symptom alerts into diagnoses (spec sections 24-27, 37,
// 53, 59): for each incident, the decision tree of its symptom
// (configs/rules/*.yaml, rule_tree.h) is evaluated over the signals around
// it, and the leaf it reaches becomes an alert of kind `diagnosis` with the
// symptom, cause, owner, evidence and recommendation (alert contract v2).
//
// Incidents. A symptom is an alert whose kind a tree lists. It joins an open
// incident of its run when it comes within `merge_steps` steps of the
// incident's last symptom and either is run-wide (a throughput_drop), or names
// the place of one of the incident's symptoms (the same GPU, the same node for
// a node-level kind such as host_bottleneck, or the same rank), or the
// incident has only run-wide symptoms so far; otherwise it opens one. One incident gives one
// diagnosis: a straggler, the throughput_drop it causes and the
// thermal_throttle of its GPU are one incident. The incident's symptom is the
// one of highest rank (RuleSet::symptom_rank), its onset the earliest onset
// of its symptoms (attrs.onset_step, else the step).
// An incident that holds a node-level symptom still open (no ends_ns: a host
// that stays saturated) also takes the symptoms at that node that come later
// than `merge_steps`, and is kept until it closes: a rank of a contended host
// that straggles 50 steps into the contention is the host's, not a new
// incident.
//
// Timing: diagnose now, refine later. The symptom that opens an incident is
// its own evidence: the incident is diagnosed at once (revision 0) over what
// has been delivered. It is judged again when the run's step_stats reach
// `after_steps` steps past the symptom, or when `max_wait` of event time has
// passed (a hung run), or when its run ends or fails (run_end, stops_run),
// so that the tree sees the steps after the onset and the alerts that
// follow. Timers fire interleaved with rows in event-time order. The
// incident's onset is settled when its window first closes: a symptom that
// joins later adds evidence (and may change the cause) but does not move it.
//
// Updates. A symptom that joins an incident re-evaluates it after its own
// hold; a revised symptom (asof_join's refined context: same alert_id, a
// higher revision) replaces the one held, and re-evaluates a diagnosed
// incident at once. A judgement is published (naming the incident's symptom
// of highest rank by then, at the time of the row or deadline that made it)
// only when anything a consumer sees differs from the last one published
// (cause, owner, symptom, evidence, summary, attrs), with the same alert_id
// and revision + 1. Consumers keep the highest revision of an alert_id.
//
// Signals (docs/rules.md): step signals come from step_stats (a ring of the
// last `history_steps` steps per run); GPU and node signals from the context
// attrs asof_join adds to per-rank alerts (gpu_temp_c, node_cpu_pct, ...) or
// from a hardware alert's own attrs; alerts and events of the run (including
// config_change events that spike_detect infers) are counted over the window
// [onset - before_steps, last symptom + after_steps].
//
// Partitioned by run. Reads step_stats, alerts and events; gpu and node
// samples reach it only through asof_join's attrs.
#pragma once

#include <memory>
#include <string>

#include "operators/operator.h"
#include "operators/rules/rule_tree.h"

namespace runlens::ops {

struct RootCauseOptions {
  std::shared_ptr<const rules::RuleSet> rules;  // required
  int64_t before_steps = 20;
  int64_t after_steps = 5;
  int64_t merge_steps = 30;
  int64_t max_wait_ns = 120'000'000'000;
  int64_t history_steps = 256;
};

// The signal and kind names conditions may use.
const rules::Vocabulary& root_cause_vocabulary();

// The rule files compiled into the binary from configs/rules/ (the fallback of
// the embedded default pipeline, and `rules: builtin`).
std::shared_ptr<const rules::RuleSet> builtin_rules();

// Resolves the `rules` parameter: "builtin"; an absolute directory; or a
// directory relative to the pipeline file `pipeline_file` (the compiled-in
// rules when the pipeline is the embedded one, whose name starts with '<').
// Throws runtime::ConfigError.
std::shared_ptr<const rules::RuleSet> load_rules(const std::string& spec, const runtime::SourceLocation& where);

void RegisterRootCause(Registry& registry);
std::unique_ptr<OperatorDef> MakeRootCause(const RootCauseOptions& options);

}  // namespace runlens::ops
