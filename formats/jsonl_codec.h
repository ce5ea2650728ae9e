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
// field and what was expected; the caller dead-letters the line.
bool decode_record(std::string_view line, Record* out, std::string* error);
bool decode_record(const json::Value& object, Record* out, std::string* error);

// Encodes a record as one JSON object (no newline). Contract kinds round-trip
// exactly; step records are written as a summary.
void encode_record(const Record& r, std::string* out);
std::string encode_record(const Record& r);

void encode_alert(const Alert& a, std::string* out);
bool decode_alert(std::string_view line, Alert* out, std::string* error);

}  // namespace runlens::jsonl
