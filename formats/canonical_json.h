// Canonical JSON: one byte string per JSON value, so that a hash of it
// identifies the value, not the way it was written. The encoding (also in
// docs/evaluation-service.md):
//   - no whitespace outside strings;
//   - object members sorted by key, compared as UTF-8 byte strings (RFC 8785
//     compares UTF-16 code units; the two orders agree for keys in the Basic
//     Multilingual Plane, which every key runlens writes is); duplicate keys
//     are an error;
//   - strings with json::append_escaped's escapes (\" \\ \n \r \t, other
//     control characters as \u00XX, everything else as its UTF-8 bytes);
//   - numbers: an integer-valued number with |x| < 2^53 as a decimal integer
//     (so 2048, 2048.0 and 2.048e3 agree; -0 is 0), any other number in its
//     shortest round-trip form (std::to_chars); NaN and infinities are an error;
//   - arrays keep their order; true, false and null as written.
#pragma once

#include <string>

#include "formats/json_reader.h"

namespace runlens::json {

// Appends the canonical encoding of `v` to `out`; false (with `why`, naming
// the member path) for a non-finite number or a duplicate key.
bool append_canonical(std::string* out, const Value& v, std::string* why);

// Parses `text` as JSON and returns its canonical encoding; false with `why`.
bool canonicalize(std::string_view text, std::string* out, std::string* why);

// The canonical number form alone (integers as such, else shortest round trip).
void append_canonical_number(std::string* out, double v);

}  // namespace runlens::json
