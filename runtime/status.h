// Errors. User and configuration errors are values carrying where they came
// from (file:line:col and a component path); broken internal invariants are
// a different thing, raised by RUNLENS_CHECK, and never caused by input.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace runlens::runtime {

struct SourceLocation {
  std::string file;
  int line = 0;             // 1-based; 0 = unknown
  int column = 0;           // 1-based
  std::string str() const;  // "file:line:col"
};

struct Diagnostic {
  SourceLocation where;
  std::string path;         // component path, e.g. "operators.stragglers"
  std::string message;      // static text first, values last
  std::string str() const;  // "file:line:col: error: message (in path)"
};

// An invalid pipeline or command line: nothing ran. Carries every problem found.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<Diagnostic> diags);
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

 private:
  std::vector<Diagnostic> diags_;
};

// A broken invariant of runlens itself: a bug, reported and not recovered from.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void fail_check(const char* expr, const char* file, int line, const std::string& why);

// "did you mean" for unknown names: the closest candidate within a small edit distance.
std::string closest_match(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace runlens::runtime

// Internal invariant. The message says why it must hold.
#define RUNLENS_CHECK(cond, why)                                                   \
  do {                                                                             \
    if (!(cond)) ::runlens::runtime::fail_check(#cond, __FILE__, __LINE__, (why)); \
  } while (0)
