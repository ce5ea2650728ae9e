// runlens synth: a synthetic run with injectable faults (cli/synth/).
#include "cli/synth/synth.h"

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "formats/jsonl_codec.h"
#include "formats/recording.h"

namespace runlens::cli {

namespace {

struct SynthFlags {
  synth::Options options;
  synth::Identity identity;
  std::vector<std::string> faults, config_sets;
  std::string out;
};

int run_synth(SynthFlags& f) {
  synth::Options& so = f.options;
  synth::Identity& identity = f.identity;
  for (const auto& text : f.faults) {
    synth::Fault fault;
    std::string error;
    if (!synth::parse_fault(text, &fault, &error)) {
      std::fprintf(stderr, "runlens synth: %s\n", error.c_str());
      return kExitUsage;
    }
    so.faults.push_back(fault);
  }
  for (const auto& kv : f.config_sets) {
    std::pair<std::string, Value> c;
    std::string error;
    if (!synth::parse_config_value(kv, &c, &error)) {
      std::fprintf(stderr, "runlens synth: --config: %s\n", error.c_str());
      return kExitUsage;
    }
    identity.config.push_back(std::move(c));
  }
  const std::string& synth_out = f.out;
  bool jsonl_out = ends_with(synth_out, ".jsonl");
  recording::Writer writer;
  std::string error;
  std::FILE* file = nullptr;
  if (jsonl_out) {
    file = std::fopen(synth_out.c_str(), "wb");
    if (!file) {
      std::fprintf(stderr, "runlens synth: cannot create %s\n", synth_out.c_str());
      return kExitFailure;
    }
  } else if (!writer.open(synth_out, &error)) {
    std::fprintf(stderr, "runlens synth: %s\n", error.c_str());
    return kExitFailure;
  }
  uint64_t n = 0;
  std::vector<Record> pending;
  std::string line;
  bool ok = true;
  synth::generate(so, [&](std::vector<Record>& rows) {
    synth::apply_identity(identity, rows);
    n += rows.size();
    if (jsonl_out) {
      for (const auto& r : rows) {
        line.clear();
        jsonl::encode_record(r, &line);
        line.push_back('\n');
        std::fwrite(line.data(), 1, line.size(), file);
      }
      return;
    }
    for (auto& r : rows) pending.push_back(std::move(r));
    if (pending.size() >= 4096) {
      ok &= writer.write(pending, &error);
      pending.clear();
    }
  });
  if (jsonl_out)
    std::fclose(file);
  else {
    ok &= writer.write(pending, &error);
    ok &= writer.close(&error);
  }
  if (!ok) {
    std::fprintf(stderr, "runlens synth: %s\n", error.c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "wrote %llu events (%d ranks, %lld steps) to %s\n", static_cast<unsigned long long>(n), so.ranks,
               static_cast<long long>(so.steps), synth_out.c_str());
  return kExitOk;
}

}  // namespace

Command add_synth(CLI::App& app) {
  auto f = std::make_shared<SynthFlags>();
  synth::Options& so = f->options;
  synth::Identity& identity = f->identity;
  auto* syn = app.add_subcommand("synth", "Generate a synthetic run with injectable faults");
  syn->add_option("--out", f->out, "Output file: *.jsonl or a recording (e.g. *.rlrec)")->required();
  syn->add_option("--run-id", so.run_id)->capture_default_str();
  syn->add_option("--ranks", so.ranks)->capture_default_str()->check(CLI::Range(1, 1 << 20));
  syn->add_option("--steps", so.steps)->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  syn->add_option("--gpus-per-node", so.gpus_per_node)->capture_default_str()->check(CLI::Range(1, 64));
  syn->add_option("--seed", so.seed)->capture_default_str();
  syn->add_option("--step-ms", so.step_ms, "Median work time per step")->capture_default_str();
  syn->add_option("--gpu-every", so.gpu_every, "Steps between GPU/node samples (0: none)")->capture_default_str();
  syn->add_option("--detail-every", so.detail_every,
                  "Steps between data-loader and collective (all_reduce) samples of every rank (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  syn->add_option("--node-prefix", so.node_prefix,
                  "Node names are PREFIX0, PREFIX1, ...: runs made to overlap in time need their own nodes, as on "
                  "a real fleet (GPU and node samples carry a node, not a run)")
      ->capture_default_str();
  syn->add_option("--gc-pause-rate", so.gc_pause_rate, "Chance per rank and step of a one-step pause")
      ->capture_default_str();
  syn->add_option("--fault", f->faults, synth::fault_help() + " (repeatable)");
  syn->add_option("--experiment-id", identity.experiment_id, "run_start experiment_id");
  syn->add_option("--job-id", identity.job_id, "run_start job_id");
  syn->add_option("--model-id", identity.model_id, "run_start model_id (default llama-x-7b)");
  syn->add_option("--model-version", identity.model_version, "run_start model_version");
  syn->add_option("--dataset-version", identity.dataset_version, "run_start dataset_version (default v42)");
  syn->add_option("--code-commit", identity.code_commit, "run_start code_commit");
  syn->add_option("--config", f->config_sets, "Set a run_start config key, KEY=VALUE (repeatable)");
  syn->add_option("--end-status", identity.end_status, "run_end status")
      ->check(CLI::IsMember({"completed", "failed", "aborted"}));
  syn->add_option("--end-reason", identity.end_reason, "run_end reason");
  return {syn, [f] { return run_synth(*f); }};
}

}  // namespace runlens::cli
