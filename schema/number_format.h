// The one number formatter for text that people read: alert summaries,
// diagnosis evidence, timeline entries and the failure report. (JSON numbers
// are written by formats/json_writer, shortest round trip.) Call sites differ
// in how many digits they show, so the style is an explicit argument; each
// style's output is pinned by tests/schema/number_format_test.cc, because the
// summaries that use it are part of golden outputs.
#pragma once

#include <cstdint>
#include <string>

namespace runlens {

// Non-finite values are written "NaN", "Infinity" and "-Infinity" (the JSON
// words) in every style.
enum class NumberStyle : uint8_t {
  kSignificant6,  // "%.6g": 0.000123456789 -> "0.000123457", 1e9 -> "1e+09"
  // "%.3g", and "%.2g" below 0.01 or from 1e6 (magnitudes): 0.0003 -> "0.0003",
  // 3.14159 -> "3.14", 2e7 -> "2e+07": the report's figures.
  kShort,
  // As kShort, but whole numbers from 100: 1903.4 -> "1903": timeline entries.
  kShortWhole,
  // Whole from 1000 and for integral values, one decimal from 10, two from 1,
  // "%.3g" below 1: 91.24 -> "91.2", 0.00031 -> "0.00031": diagnosis evidence.
  kDecimals,
};
std::string fmt_num(double v, NumberStyle style);

// One printf conversion of `v` ("%.0f", "%.2f", "%.4g", "%g"), as printf
// writes it (non-finite values too), never cut short: alert summaries (whole
// numbers unless the call says otherwise) and describe().
std::string fmt_num(double v, const char* printf_format = "%.0f");

}  // namespace runlens
