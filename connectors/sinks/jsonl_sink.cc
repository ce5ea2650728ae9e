#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "connectors/sinks/sinks.h"
#include "formats/jsonl_codec.h"

namespace runlens::connectors {

uint32_t kinds_mask(const runtime::BuildContext& ctx, const std::string& param) {
  uint32_t m = 0;
  for (const auto& name : ctx.params->get_list(param)) {
    Kind k;
    if (!kind_from_name(name, &k)) ctx.fail(param, "unknown row kind '" + name + "' in " + param);
    m |= mask(k);
  }
  return m;
}

namespace {

class JsonlSink final : public Operator {
 public:
  JsonlSink(std::string path, uint32_t kinds, bool flush_each)
      : path_(std::move(path)), kinds_(kinds), flush_each_(flush_each) {
    std::error_code ec;
    auto parent = std::filesystem::path(path_).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    f_ = std::fopen(path_.c_str(), "wb");
    if (!f_) {
      throw runtime::ConfigError({runtime::Diagnostic{{}, "", "cannot create " + path_ + ": " + std::strerror(errno)}});
    }
  }
  ~JsonlSink() override {
    if (f_) std::fclose(f_);
  }

  void process(const Record& r, Emitter&) override {
    if (!(kinds_ & mask(r.kind()))) return;
    line_.clear();
    jsonl::encode_record(r, &line_);
    line_.push_back('\n');
    std::fwrite(line_.data(), 1, line_.size(), f_);
    dirty_ = true;
  }
  void on_watermark(int64_t, Emitter&) override {
    // Live readers (tail -f, dashboards) see each alert once its watermark passes.
    if (dirty_ && flush_each_) std::fflush(f_);
    dirty_ = false;
  }
  void finish(Emitter&) override { std::fflush(f_); }

 private:
  std::string path_;
  uint32_t kinds_;
  bool flush_each_;
  std::FILE* f_ = nullptr;
  std::string line_;
  bool dirty_ = false;
};

class JsonlSinkDef final : public OperatorDef {
 public:
  JsonlSinkDef(std::string path, uint32_t kinds, bool flush) : path_(std::move(path)), kinds_(kinds), flush_(flush) {}
  uint32_t accepts(uint32_t declared) const override { return declared & kinds_; }
  std::unique_ptr<Operator> open(const runtime::OperatorContext&) const override {
    return std::make_unique<JsonlSink>(path_, kinds_, flush_);
  }
  std::string describe() const override { return "path=" + path_; }

 private:
  std::string path_;
  uint32_t kinds_;
  bool flush_;
};

}  // namespace

void RegisterJsonlSink(Registry& registry) {
  runtime::ComponentInfo info;
  info.type = "jsonl";
  info.role = runtime::Role::kSink;
  info.doc =
      "Writes rows as JSON lines to a file, in canonical event-time order: alerts per the alert contract, "
      "telemetry per the telemetry contract. The file is replaced at start.";
  info.params = {
      {.name = "path", .type = runtime::ParamType::kString, .doc = "File to write (parent directories are created)."},
      {.name = "kinds",
       .type = runtime::ParamType::kStringList,
       .default_value = "[alert]",
       .doc = "Row kinds to write (alert, step, train, ..., step_record)."},
      {.name = "flush",
       .type = runtime::ParamType::kBool,
       .default_value = "true",
       .doc = "Flush after each watermark, so live readers see rows promptly."},
  };
  info.accepts = ~0u >> (32 - static_cast<unsigned>(Kind::kCount));
  registry.add_operator(std::move(info), [](const runtime::BuildContext& ctx) {
    const std::string& path = ctx.params->get_string("path");
    if (path.empty()) ctx.fail("path", "path must not be empty");
    return std::make_unique<JsonlSinkDef>(path, kinds_mask(ctx, "kinds"), ctx.params->get_bool("flush"));
  });
}

}  // namespace runlens::connectors
