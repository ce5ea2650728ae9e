#include <cmath>
#include <cstdio>

#include "connectors/sinks/sinks.h"
#include "formats/jsonl_codec.h"

namespace runlens::connectors {
namespace {

// A closing revision: one short line, "[warning] straggler resolved run=... rank=3 after 12.5 s".
std::string resolved(const Alert& a) {
  std::string s = "[" + std::string(severity_name(a.severity)) + "] " + a.kind + " resolved";
  if (!a.run_id.empty()) s += " run=" + a.run_id.string();
  if (a.rank) s += " rank=" + std::to_string(*a.rank);
  if (!a.node.empty()) s += " node=" + a.node.string();
  if (a.gpu) s += " gpu=" + std::to_string(*a.gpu);
  char buf[48];
  std::snprintf(buf, sizeof buf, " after %.1f s", static_cast<double>(*a.ends_ns - a.time_ns) / 1e9);
  return s + buf + " (alert " + a.alert_id + ")";
}

std::string human(const Alert& a) {
  if (a.ends_ns) return resolved(a);
  std::string s = "[" + std::string(severity_name(a.severity)) + "] " + a.kind;
  // A later publication of the same alert (refined context, a changed diagnosis).
  if (a.revision > 0) s += " (revision " + std::to_string(a.revision) + ")";
  if (!a.run_id.empty()) s += " run=" + a.run_id.string();
  if (a.step) s += " step=" + std::to_string(*a.step);
  if (a.rank) s += " rank=" + std::to_string(*a.rank);
  if (!a.node.empty()) s += " node=" + a.node.string();
  if (a.gpu) s += " gpu=" + std::to_string(*a.gpu);
  if (!a.model_id.empty()) s += " model=" + a.model_id + (a.model_version.empty() ? "" : ":" + a.model_version);
  if (!a.evaluation_id.empty()) s += " evaluation=" + a.evaluation_id;
  s += ": " + a.summary;
  if (!a.cause.empty()) s += " | cause=" + a.cause + " owner=" + a.owner;
  return s;
}

class ConsoleSink final : public Operator {
 public:
  ConsoleSink(uint32_t kinds, bool json) : kinds_(kinds), json_(json) {}
  void process(const Record& r, Emitter&) override {
    if (!(kinds_ & mask(r.kind()))) return;
    std::string line;
    if (json_ || r.kind() != Kind::kAlert)
      jsonl::encode_record(r, &line);
    else
      line = human(r.alert());
    line.push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  void on_watermark(int64_t, Emitter&) override { std::fflush(stdout); }

 private:
  uint32_t kinds_;
  bool json_;
};

class ConsoleSinkDef final : public OperatorDef {
 public:
  ConsoleSinkDef(uint32_t kinds, bool json) : kinds_(kinds), json_(json) {}
  uint32_t accepts(uint32_t declared) const override { return declared & kinds_; }
  std::unique_ptr<Operator> open(const runtime::OperatorContext&) const override {
    return std::make_unique<ConsoleSink>(kinds_, json_);
  }

 private:
  uint32_t kinds_;
  bool json_;
};

}  // namespace

void RegisterConsoleSink(Registry& registry) {
  runtime::ComponentInfo info;
  info.type = "console";
  info.role = runtime::Role::kSink;
  info.doc = "Prints rows on standard output as they are released: alerts as one readable line each, or JSON.";
  info.params = {
      {.name = "kinds",
       .type = runtime::ParamType::kStringList,
       .default_value = "[alert]",
       .doc = "Row kinds to print."},
      {.name = "format",
       .type = runtime::ParamType::kString,
       .default_value = "text",
       .doc = "text (alerts as readable lines) or json.",
       .choices = {"text", "json"}},
  };
  info.accepts = ~0u >> (32 - static_cast<unsigned>(Kind::kCount));
  registry.add_operator(std::move(info), [](const runtime::BuildContext& ctx) {
    return std::make_unique<ConsoleSinkDef>(kinds_mask(ctx, "kinds"), ctx.params->get_string("format") == "json");
  });
}

}  // namespace runlens::connectors
