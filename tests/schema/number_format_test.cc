// schema/number_format.h replaced four local formatters (root_cause's
// evidence, nan_detect's reasons, the report's figures, the timeline sink's
// summaries) whose output is in golden files and the store. The reference
// functions below are those helpers as they were; each style must give their
// bytes on every value (the Velox habit: check the fast path against a plain
// reference).
#include "schema/number_format.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace runlens {
namespace {

std::string words_or(double v, bool* done) {
  *done = true;
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  *done = false;
  return {};
}

// operators/nan_detect.cc
std::string reference_significant6(double v) {
  bool done;
  std::string w = words_or(v, &done);
  if (done) return w;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// reports/report.cc
std::string reference_short(double v) {
  bool done;
  std::string w = words_or(v, &done);
  if (done) return w;
  char buf[32];
  double a = std::fabs(v);
  if (a != 0 && (a < 1e-2 || a >= 1e6))
    std::snprintf(buf, sizeof buf, "%.2g", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// connectors/sinks/timeline/timeline_sink.cc
std::string reference_short_whole(double v) {
  bool done;
  std::string w = words_or(v, &done);
  if (done) return w;
  char buf[32];
  double a = std::fabs(v);
  if (a != 0 && (a < 1e-2 || a >= 1e6))
    std::snprintf(buf, sizeof buf, "%.2g", v);
  else if (a >= 100)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// operators/root_cause.cc (its 48-byte buffer cut "%.0f" of values from 1e47 short).
std::string reference_decimals(double v) {
  char buf[48];
  double a = std::fabs(v);
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (a >= 1000 || v == std::floor(v))
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 10)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (a >= 1)
    std::snprintf(buf, sizeof buf, "%.2f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::vector<double> values() {
  std::vector<double> v = {0.0,
                           -0.0,
                           1,
                           -1,
                           10,
                           100,
                           1000,
                           0.01,
                           0.00999,
                           1e6,
                           999999.4,
                           999.96,
                           99.96,
                           9.996,
                           0.9996,
                           0.0003,
                           1903.4,
                           91.24,
                           3.14159,
                           2e7,
                           -2.5e-5,
                           1e40,
                           -1e40,
                           std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> exponent(-12, 12), sign(-1, 1);
  for (int i = 0; i < 20000; ++i) {
    double x = std::pow(10.0, exponent(rng)) * (sign(rng) < 0 ? -1 : 1);
    v.push_back(x);
    v.push_back(std::round(x));  // integral values take their own branch
  }
  return v;
}

TEST_CASE("fmt_num: each style gives the bytes of the helper it replaced") {
  for (double v : values()) {
    CAPTURE(v);
    CHECK(fmt_num(v, NumberStyle::kSignificant6) == reference_significant6(v));
    CHECK(fmt_num(v, NumberStyle::kShort) == reference_short(v));
    CHECK(fmt_num(v, NumberStyle::kShortWhole) == reference_short_whole(v));
    if (std::fabs(v) < 1e47) CHECK(fmt_num(v, NumberStyle::kDecimals) == reference_decimals(v));
  }
}

TEST_CASE("fmt_num: the examples of its header") {
  CHECK(fmt_num(0.000123456789, NumberStyle::kSignificant6) == "0.000123457");
  CHECK(fmt_num(1e9, NumberStyle::kSignificant6) == "1e+09");
  CHECK(fmt_num(0.0003, NumberStyle::kShort) == "0.0003");
  CHECK(fmt_num(3.14159, NumberStyle::kShort) == "3.14");
  CHECK(fmt_num(2e7, NumberStyle::kShort) == "2e+07");
  CHECK(fmt_num(0.0003, NumberStyle::kShortWhole) == "0.0003");
  CHECK(fmt_num(1903.4, NumberStyle::kShortWhole) == "1903");
  CHECK(fmt_num(91.24, NumberStyle::kDecimals) == "91.2");
  CHECK(fmt_num(0.00031, NumberStyle::kDecimals) == "0.00031");
  CHECK(fmt_num(3.0, NumberStyle::kDecimals) == "3");
  CHECK(fmt_num(2.345, NumberStyle::kDecimals) == "2.35");
  for (NumberStyle s :
       {NumberStyle::kSignificant6, NumberStyle::kShort, NumberStyle::kShortWhole, NumberStyle::kDecimals}) {
    CHECK(fmt_num(std::nan(""), s) == "NaN");
    CHECK(fmt_num(-std::numeric_limits<double>::infinity(), s) == "-Infinity");
  }
}

TEST_CASE("fmt_num: a printf conversion, as printf writes it, never cut short") {
  CHECK(fmt_num(1897.2287, "%.0f") == "1897");
  CHECK(fmt_num(1897.6) == "1898");  // whole numbers by default
  CHECK(fmt_num(1.9941, "%.2f") == "1.99");
  CHECK(fmt_num(0.00030001, "%.4g") == "0.0003");
  CHECK(fmt_num(1.5, "%g") == "1.5");
  CHECK(fmt_num(47.4, "%.0f%%") == "47%");
  CHECK(fmt_num(std::nan(""), "%.0f") == "nan");
  std::string big = fmt_num(1e300, "%.0f");
  CHECK(big.size() == 301);
  CHECK(big.rfind("10000000000000000525047602552044202487", 0) == 0);
  CHECK(big.find_first_not_of("0123456789") == std::string::npos);
  CHECK(fmt_num(-1e300, NumberStyle::kDecimals).size() == 302);
}

}  // namespace
}  // namespace runlens
