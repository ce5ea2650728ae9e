// JSON pieces that several resources of the API write (server/*.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "formats/json_writer.h"
#include "store/store.h"

namespace runlens::api {

// A number, integer or string, or null when absent (an empty string is absent).
void opt_num(json::Writer& w, const char* key, std::optional<double> v);
void opt_int(json::Writer& w, const char* key, std::optional<int64_t> v);
void opt_str(json::Writer& w, const char* key, const std::string& v);
// A config value: number, string, or null.
void value(json::Writer& w, const Value& v);
// JSON the store holds (timeline details) under `key`, re-emitted so the response stays one document.
void raw_object(json::Writer& w, const char* key, const std::string& text);

// A run's identity and state (the members of GET /v1/runs' entries).
void run_summary(json::Writer& w, const store::RunRow& r);
// The median over ranks of their mean work time (0 when none).
double median_work(const std::vector<store::RankSummary>& rows);
// One rank's summary, as an object (GET /v1/runs/{runId}/ranks' entries).
void rank_row(json::Writer& w, const store::RankSummary& x, double median);
// One timeline entry, as an object.
void timeline_entry(json::Writer& w, const store::TimelineEntry& e);

}  // namespace runlens::api
