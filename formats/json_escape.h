// The pieces of JSON string unescaping the two JSONL decoders share
// (formats/json_reader.cc, the reference, and formats/jsonl_fast_decode.cc).
#pragma once

#include <cstdint>
#include <string>

namespace runlens::json {

// The four hex digits of a \u escape at `p` (the caller checked that four
// bytes are there) into `out`: returns 4, or the index of the first byte that
// is not a hex digit.
inline int parse_hex4(const char* p, uint32_t* out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= static_cast<uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= static_cast<uint32_t>(c - 'A' + 10);
    else
      return i;
  }
  *out = v;
  return 4;
}

// The byte a one-character escape (the character after the backslash)
// stands for, or -1 when it is not one (\u is not: see parse_hex4).
inline int unescape_simple(char e) {
  switch (e) {
    case '"':
    case '\\':
    case '/':
      return e;
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    default:
      return -1;
  }
}

// The code point of a surrogate pair (hi in D800-DBFF, lo in DC00-DFFF).
inline uint32_t combine_surrogates(uint32_t hi, uint32_t lo) { return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00); }

// Appends code point `cp` (at most 0x10FFFF) to `out` as UTF-8.
inline void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace runlens::json
