#include "engine/engine.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "connectors/builtin.h"
#include "connectors/metrics/metrics_hub.h"
#include "connectors/sinks/sinks.h"
#include "connectors/sources/sources.h"
#include "default_pipeline.h"
#include "formats/dead_letter.h"
#include "formats/jsonl_codec.h"
#include "runtime/executor.h"

namespace runlens {

const char* const kDefaultPipelineName = "<embedded pipelines/training-health.yaml>";

const std::string& default_pipeline_text() {
  static const std::string text(kEmbeddedDefaultPipeline);
  return text;
}

std::shared_ptr<const ops::Registry> make_builtin_registry() {
  auto r = std::make_shared<ops::Registry>(ops::kind_names());
  ops::RegisterBuiltinOperators(*r);
  connectors::RegisterBuiltinConnectors(*r);
  return r;
}

std::shared_ptr<const ops::Registry> registry_of(const runtime::PipelineSpec& spec) {
  auto r = std::dynamic_pointer_cast<const ops::Registry>(spec.catalog);
  return r ? r : make_builtin_registry();
}

namespace {
// Builds every component once, sources and sinks included, so that what its
// factory checks (a bad combination of values, an invalid rule file of
// root_cause, an unknown retention tier of the timeline sink) is reported
// when the pipeline is loaded, by `runlens validate` too, with file:line:col.
// Factories allocate nothing (no socket bound, no file created, no store
// opened), so this has no side effect.
// Factories' warnings (deprecated parameters) are printed here, once per load.
void check_components(const ops::Registry& registry, const runtime::PipelineSpec& spec) {
  std::vector<runtime::Diagnostic> diags, warnings;
  for (const auto& c : spec.components) {
    try {
      if (c.role == runtime::Role::kSource)
        registry.make_source(c, &warnings);
      else
        registry.make_operator(c, &warnings);
    } catch (const runtime::ConfigError& e) {
      diags.insert(diags.end(), e.diagnostics().begin(), e.diagnostics().end());
    }
  }
  for (const auto& w : warnings) std::fprintf(stderr, "runlens: %s: %s\n", w.where.str().c_str(), w.message.c_str());
  if (!diags.empty()) throw runtime::ConfigError(diags);
}
}  // namespace

runtime::PipelineSpec load_pipeline(const std::string& path, const std::map<std::string, std::string>& vars,
                                    std::shared_ptr<const ops::Registry> registry) {
  if (!registry) registry = make_builtin_registry();
  auto lookup = runtime::env_lookup(vars);
  auto spec = path.empty()
                  ? runtime::parse_pipeline_text(default_pipeline_text(), kDefaultPipelineName, *registry, lookup)
                  : runtime::parse_pipeline_file(path, *registry, lookup);
  spec.catalog = registry;
  check_components(*registry, spec);
  return spec;
}

std::string pipeline_dot(const runtime::PipelineSpec& spec) {
  auto registry = registry_of(spec);
  return spec.to_dot([&](const runtime::ComponentSpec& c) {
    return c.role == runtime::Role::kSource ? registry->make_source(c)->describe()
                                            : registry->make_operator(c)->describe();
  });
}

namespace {
// Stands in for the extra live sources of a pipeline during a replay.
class EmptySource final : public runtime::SourceDef<Record> {
 public:
  void run(runtime::SourceOutput<Record>&) override {}
};
}  // namespace

struct Engine::Impl {
  std::shared_ptr<const ops::Registry> registry;  // the engine's own (the spec's)
  runtime::PipelineSpec spec;
  EngineOptions options;
  std::unique_ptr<DeadLetterFile> dead_letters;
  // stop() may come from another thread at any time, also while run() sets
  // the executor up: `mu` orders the two, so that a stop() before the
  // executor exists is seen by run() and one after reaches the executor.
  std::mutex mu;
  std::unique_ptr<runtime::Executor<Record>> executor;  // set by run() under mu
  bool stop_requested = false;                          // under mu
};

Engine::Engine(runtime::PipelineSpec spec, EngineOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->registry = registry_of(spec);
  impl_->spec = std::move(spec);
  impl_->options = std::move(options);
}
Engine::~Engine() = default;

void Engine::stop() {
  std::lock_guard lock(impl_->mu);
  impl_->stop_requested = true;
  if (impl_->executor) impl_->executor->stop();
}

RunSummary Engine::run() {
  const auto& spec = impl_->spec;
  const auto& opt = impl_->options;
  const auto& reg = *impl_->registry;

  std::string dl_path =
      spec.settings.dead_letter.empty() ? opt.out_dir + "/dead_letter.jsonl" : spec.settings.dead_letter;
  std::error_code ec;
  std::filesystem::remove(dl_path, ec);  // a stale file from an earlier run would mislead
  impl_->dead_letters = std::make_unique<DeadLetterFile>(dl_path);

  runtime::ExecutorOptions eo;
  eo.threads = opt.threads;
  eo.queue_capacity = spec.settings.queue_capacity;
  eo.overflow = spec.settings.overflow;
  eo.backpressure_ns = spec.settings.backpressure_ns;
  eo.lateness_ns = spec.settings.lateness_ns;
  eo.idle_timeout_ns = spec.settings.idle_timeout_ns;
  eo.join_grace_ns = spec.settings.join_grace_ns;
  eo.dead_letters = impl_->dead_letters.get();
  auto ex = std::make_unique<runtime::Executor<Record>>(eo, [](const Record& r) { return jsonl::encode_record(r); });

  bool replay = !opt.replay_inputs.empty();
  bool replaced = false;
  size_t batch = static_cast<size_t>(opt.batch_size > 0 ? opt.batch_size : spec.settings.batch_size);
  for (const auto& c : spec.components) {
    if (c.role == runtime::Role::kSource) {
      std::unique_ptr<runtime::SourceDef<Record>> src;
      if (replay) {
        // Replay feeds the recording in place of the live sources: the first
        // source carries it, the others are silent.
        if (!replaced) {
          connectors::FileSourceOptions fo;
          fo.paths = opt.replay_inputs;
          fo.speed = opt.speed;
          fo.batch_size = batch;
          fo.progress = opt.progress;
          src = connectors::MakeFileSource(std::move(fo));
          replaced = true;
        } else {
          src = std::make_unique<EmptySource>();
        }
      } else {
        src = reg.make_source(c);
      }
      ex->add_source(c.id, replay ? "replay" : c.type, c.info->emits, std::move(src));
      continue;
    }
    std::vector<std::string> inputs;
    for (const auto& in : c.inputs) inputs.push_back(in.name);
    auto def = reg.make_operator(c);
    if (opt.metrics) connectors::attach_metrics_hub(*def, opt.metrics);
    ex->add_operator(c.id, c.type, c.info->accepts, c.info->emits, inputs, c.parallelism, std::move(def));
  }
  {
    std::lock_guard lock(impl_->mu);
    impl_->executor = std::move(ex);
    if (impl_->stop_requested) impl_->executor->stop();
  }

  // A scrape reads the counters (atomics) while the graph runs; after run()
  // the hub keeps their last values.
  struct CountersFeed {
    connectors::metrics::MetricsHub* hub;
    ~CountersFeed() {
      if (hub) hub->set_counters(nullptr);
    }
  } feed{opt.metrics.get()};
  if (feed.hub) {
    auto* executor = impl_->executor.get();
    feed.hub->set_counters([executor] { return executor->counters(); });
  }
  auto started = std::chrono::steady_clock::now();
  impl_->executor->run();
  impl_->dead_letters->flush();

  RunSummary s;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  s.counters = impl_->executor->counters();
  s.dead_letters = impl_->dead_letters->count();
  s.dead_letter_path = dl_path;
  for (const auto& c : spec.components) {
    if (c.role != runtime::Role::kSource) continue;
    for (const auto& snap : s.counters) {
      if (snap.node == c.id) s.source_rows += snap.in;
    }
  }
  return s;
}

}  // namespace runlens
