#include "schema/number_format.h"

#include <cmath>
#include <cstdio>

namespace runlens {

std::string fmt_num(double v, const char* printf_format) {
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, printf_format, v);
  if (n < 0) return std::string();
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  // "%.0f" of a huge value: hundreds of digits, never cut short.
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), printf_format, v);
  big.resize(static_cast<size_t>(n));
  return big;
}

std::string fmt_num(double v, NumberStyle style) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  double a = std::fabs(v);
  switch (style) {
    case NumberStyle::kSignificant6:
      return fmt_num(v, "%.6g");
    case NumberStyle::kShort:
      return fmt_num(v, a != 0 && (a < 1e-2 || a >= 1e6) ? "%.2g" : "%.3g");
    case NumberStyle::kShortWhole:
      if (a != 0 && (a < 1e-2 || a >= 1e6)) return fmt_num(v, "%.2g");
      return fmt_num(v, a >= 100 ? "%.0f" : "%.3g");
    case NumberStyle::kDecimals:
      if (a >= 1000 || v == std::floor(v)) return fmt_num(v, "%.0f");
      if (a >= 10) return fmt_num(v, "%.1f");
      if (a >= 1) return fmt_num(v, "%.2f");
      return fmt_num(v, "%.3g");
  }
  return fmt_num(v, "%.6g");
}

}  // namespace runlens
