// schema::Record bound to the runtime: the RowTraits the executor needs, the
// component interfaces instantiated for runlens rows, and row-kind masks.
// Operators, connectors and the engine all build on this one binding; the
// runtime below it stays generic over the row type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/operator.h"
#include "runtime/registry.h"
#include "schema/alert.h"
#include "schema/record.h"

namespace runlens::runtime {
template <>
struct RowTraits<Record> {
  static int64_t time_ns(const Record& r) { return r.time_ns; }
  static unsigned kind(const Record& r) { return static_cast<unsigned>(r.body.index()); }
  static int priority(const Record& r) { return static_cast<int>(r.priority()); }
  static int compare(const Record& a, const Record& b) { return compare_canonical(a, b); }
  // A step record holds one step report per rank.
  static int64_t weight(const Record& r) {
    return r.kind() == Kind::kStepRecord ? 1 + static_cast<int64_t>(r.step_record().ranks.size()) : 1;
  }
};
}  // namespace runlens::runtime

namespace runlens {

using Operator = runtime::Operator<Record>;
using OperatorDef = runtime::OperatorDef<Record>;
using SourceDef = runtime::SourceDef<Record>;
using SourceOutput = runtime::SourceOutput<Record>;
using Emitter = runtime::Emitter<Record>;
using Registry = runtime::Registry<Record>;

constexpr uint32_t mask(Kind k) { return 1u << static_cast<unsigned>(k); }
constexpr uint32_t kAllContractKinds = (1u << kContractKinds) - 1;

// Names of the row kinds, by Kind value, for the registry.
std::vector<std::string> kind_names();

}  // namespace runlens
