// The mapping between the evaluation core's types (eval/registry.h,
// eval/aggregator.h) and the store's rows (store/store.h): the one place
// that knows both. The provenance rule is the store's
// (store::missing_provenance); check_writable() here applies it to an
// EvaluationRun through to_record().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "eval/registry.h"
#include "eval/suite.h"
#include "store/store.h"

namespace runlens::eval::service {

store::EvaluationRecord to_record(const EvaluationRun& run);
EvaluationRun from_record(const store::EvaluationRecord& r);
std::optional<EvalStatus> parse_status(const std::string& name);  // "QUEUED" -> kQueued

// "" when the run may be written, else the store's message naming the missing fields.
std::string check_writable(const EvaluationRun& run);

// A promotion audit record's JSON (docs/api.md, GET .../audit): modelVersion,
// version, from, to, user, atNs, gateId (null when none), reason.
std::string transition_json(const store::TransitionRecord& t);

// Metrics: a NaN standard error (not defined) is stored as absent, and back.
std::vector<store::MetricValue> to_values(const std::vector<MetricResult>& metrics);
std::vector<MetricResult> from_values(const std::vector<store::MetricValue>& values);

// The stable names of an item's statistics in ItemResult::scores (the
// evaluation_items.scores_json object), one per statistic, in the order a
// worker sends them (the assignment's metrics order): a mean metric's one
// statistic under its own name ("accuracy"); the others as METRIC.PART:
// token-weighted "perplexity.loglik", "perplexity.count"; corpus BLEU
// "bleu.match1".."bleu.match4", "bleu.total1".."bleu.total4", "bleu.hyp_len",
// "bleu.ref_len"; pass@k "pass@k.n", "pass@k.c"; classification "f1.label",
// "f1.pred". They are what a restart or a cache hit reads back to re-feed
// the aggregator (docs/evaluation-service.md).
std::vector<std::string> stat_names(const Suite& suite);

// An item's statistics from its stored scores, in stat_names() order; false
// when one is missing.
bool stats_of(const store::ItemResult& item, const std::vector<std::string>& names, double* out);

// The temperature a suite decodes at: decoding.temperature, else 0 (greedy).
double suite_temperature(const Suite& suite);

// RFC 3339 UTC with milliseconds, e.g. 2026-12-01T11:25:00.123Z.
std::string rfc3339_now();

}  // namespace runlens::eval::service
