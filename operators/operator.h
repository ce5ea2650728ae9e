// The row type of runlens pipelines (schema::Record) bound to the runtime:
// RowTraits and short names for operator code.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
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

namespace runlens::ops {

using Operator = runtime::Operator<Record>;
using OperatorDef = runtime::OperatorDef<Record>;
using Emitter = runtime::Emitter<Record>;
using Registry = runtime::Registry<Record>;
using runtime::BuildContext;
using runtime::ComponentInfo;
using runtime::ParamSpec;
using runtime::ParamType;
using runtime::Role;

constexpr uint32_t mask(Kind k) { return 1u << static_cast<unsigned>(k); }
constexpr uint32_t kAllContractKinds = (1u << kContractKinds) - 1;

// Names of the row kinds, by Kind value, for the registry.
std::vector<std::string> kind_names();

// Partition key of a run: a hash of its text, so ownership does not depend
// on symbol ids.
inline uint64_t run_key(Symbol run) { return fnv1a(run.str()); }

// The definition of an operator whose state is kept per run: rows are
// partitioned by run_id, and each partition is an `Op` built from the options
// (and the partition's context, when Op takes one). `describe` renders the
// options for `runlens graph`.
template <class Op, class Options>
class PerRunDef final : public OperatorDef {
 public:
  using Describe = std::string (*)(const Options&);
  PerRunDef(Options options, Describe describe) : o_(std::move(options)), describe_(describe) {}
  bool partitioned() const override { return true; }
  std::optional<uint64_t> key(const Record& r) const override { return run_key(r.run_id()); }
  std::unique_ptr<Operator> open(const runtime::OperatorContext& ctx) const override {
    if constexpr (std::is_constructible_v<Op, const Options&, const runtime::OperatorContext&>) {
      return std::make_unique<Op>(o_, ctx);
    } else {
      return std::make_unique<Op>(o_);
    }
  }
  std::string describe() const override { return describe_(o_); }

 private:
  Options o_;
  Describe describe_;
};

// Registers every built-in operator (operators/builtin.cc).
void RegisterBuiltinOperators(Registry& registry);

}  // namespace runlens::ops
