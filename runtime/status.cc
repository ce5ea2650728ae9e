#include "runtime/status.h"

#include <algorithm>

namespace runlens::runtime {

std::string SourceLocation::str() const {
  std::string s = file.empty() ? "<input>" : file;
  if (line > 0) s += ":" + std::to_string(line) + ":" + std::to_string(column);
  return s;
}

std::string Diagnostic::str() const {
  std::string s = (where.file.empty() && where.line == 0 ? std::string() : where.str() + ": ") + "error: " + message;
  if (!path.empty()) s += " (in " + path + ")";
  return s;
}

namespace {
std::string join(const std::vector<Diagnostic>& diags) {
  std::string s;
  for (const auto& d : diags) {
    if (!s.empty()) s += "\n";
    s += d.str();
  }
  return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

ConfigError::ConfigError(std::vector<Diagnostic> diags) : std::runtime_error(join(diags)), diags_(std::move(diags)) {}

void fail_check(const char* expr, const char* file, int line, const std::string& why) {
  throw InternalError(std::string("internal error: ") + why + " [" + expr + " at " + file + ":" + std::to_string(line) +
                      "]");
}

std::string closest_match(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, name.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(name, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

}  // namespace runlens::runtime
