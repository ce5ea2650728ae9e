// Short names for operator code, and the definition of per-run operators.
// The row binding itself is schema/row.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "schema/row.h"

namespace runlens::ops {

using runlens::Emitter;
using runlens::kAllContractKinds;
using runlens::kind_names;
using runlens::mask;
using runlens::Operator;
using runlens::OperatorDef;
using runlens::Registry;
using runtime::BuildContext;
using runtime::ComponentInfo;
using runtime::ParamSpec;
using runtime::ParamType;
using runtime::Role;

// Partition key of a run: a hash of its text, so ownership does not depend
// on symbol ids.
inline uint64_t run_key(Symbol run) { return run.text_hash(); }

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
