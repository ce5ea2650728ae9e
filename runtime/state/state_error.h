// The error of a snapshot that cannot be taken or restored (docs/state.md).
#pragma once

#include <stdexcept>

namespace runlens::runtime::state {

// A snapshot that cannot be restored: a wrong type or version, truncated or
// corrupt bytes; or an operator that does not support snapshots. The message
// says what and where.
class StateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace runlens::runtime::state
