// Telemetry JSONL (contract v1, docs/telemetry.md) <-> Record, and the alert
// contract v2 (docs/alerts.md) <-> JSON.
#pragma once

#include <string>
#include <string_view>

#include "formats/json_reader.h"
#include "schema/alert.h"
#include "schema/record.h"

namespace runlens::jsonl {

// Decodes one line. On failure returns false with a reason that names the
// field and what was expected; the caller dead-letters the line. It runs a
// single pass straight into the record (formats/jsonl_fast_decode.cc) and
// hands every line that pass does not take (errors, rare shapes) to
// decode_record_dom, so records and reasons are exactly decode_record_dom's.
bool decode_record(std::string_view line, Record* out, std::string* error);
bool decode_record(const json::Value& object, Record* out, std::string* error);

// The reference decoder: parses the line into a json::Value, then sets the
// fields. Every error text comes from here.
bool decode_record_dom(std::string_view line, Record* out, std::string* error);
// The fast pass alone: true when it decoded the line (as decode_record_dom
// would), false when the line must go to decode_record_dom; `out` is then
// unspecified. For tests and benchmarks.
bool decode_record_fast(std::string_view line, Record* out);

// Encodes a record as one JSON object (no newline). Contract kinds round-trip
// exactly; step records are written as a summary.
void encode_record(const Record& r, std::string* out);
std::string encode_record(const Record& r);

void encode_alert(const Alert& a, std::string* out);
bool decode_alert(std::string_view line, Alert* out, std::string* error);

}  // namespace runlens::jsonl
