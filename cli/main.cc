// The runlens command line. Exit codes (docs/cli.md):
//   0 success; 1 runtime failure (I/O, a bug); 2 usage error or invalid
//   pipeline; 3 `--strict` and the input had dead letters.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <zmq.hpp>

#include "cli/synth/synth.h"
#include "connectors/sources/sources.h"
#include "engine/component_docs.h"
#include "engine/engine.h"
#include "formats/capnp_codec.h"
#include "formats/input_reader.h"
#include "formats/jsonl_codec.h"
#include "formats/recording.h"
#include "reports/report.h"
#include "runtime/params.h"
#include "schema/vocabulary.h"
#include "server/serve.h"

using namespace runlens;

namespace {

constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitDeadLetters = 3;

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal.store(sig); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::map<std::string, std::string> parse_sets(const std::vector<std::string>& sets) {
  std::map<std::string, std::string> vars;
  for (const auto& kv : sets) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw CLI::ValidationError("--set", "expected KEY=VALUE, got '" + kv + "'");
    vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return vars;
}

void print_summary(const RunSummary& s, bool replay) {
  std::fprintf(stderr, "%s", runtime::format_counters(s.counters).c_str());
  double rate = s.seconds > 0 ? static_cast<double>(s.source_rows) / s.seconds : 0;
  std::fprintf(stderr, "%s %llu events in %.3f s (%.0f events/s)", replay ? "replayed" : "processed",
               static_cast<unsigned long long>(s.source_rows), s.seconds, rate);
  if (s.dead_letters) {
    std::fprintf(stderr, "; %llu dead letters in %s", static_cast<unsigned long long>(s.dead_letters),
                 s.dead_letter_path.c_str());
  }
  std::fprintf(stderr, "\n");
}

// --- convert -------------------------------------------------------------------------
class CountingDeadLetters final : public runtime::DeadLetterSink {
 public:
  void write(const runtime::DeadLetter& d) override {
    ++count;
    std::fprintf(stderr, "dead letter: %s: %s\n", d.position.c_str(), d.reason.c_str());
  }
  uint64_t count = 0;
};

int convert(const std::string& in, const std::string& out) {
  std::string error;
  auto reader = InputReader::open(in, &error);
  if (!reader) {
    std::fprintf(stderr, "runlens convert: %s\n", error.c_str());
    return kExitFailure;
  }
  bool to_jsonl = ends_with(out, ".jsonl") || ends_with(out, ".json") || out == "-";
  recording::Writer writer;
  std::FILE* f = nullptr;
  if (to_jsonl) {
    f = out == "-" ? stdout : std::fopen(out.c_str(), "wb");
    if (!f) {
      std::fprintf(stderr, "runlens convert: cannot create %s\n", out.c_str());
      return kExitFailure;
    }
  } else if (!writer.open(out, &error)) {
    std::fprintf(stderr, "runlens convert: %s\n", error.c_str());
    return kExitFailure;
  }
  CountingDeadLetters dl;
  std::vector<Record> rows;
  std::vector<uint64_t> pos;
  uint64_t n = 0;
  bool more = true;
  std::string line;
  while (more) {
    rows.clear();
    pos.clear();
    more = reader->next(&rows, &pos, 4096, dl, "convert");
    n += rows.size();
    if (to_jsonl) {
      for (const auto& r : rows) {
        line.clear();
        jsonl::encode_record(r, &line);
        line.push_back('\n');
        std::fwrite(line.data(), 1, line.size(), f);
      }
    } else if (!writer.write(rows, &error)) {
      std::fprintf(stderr, "runlens convert: %s\n", error.c_str());
      return kExitFailure;
    }
  }
  if (f && f != stdout) std::fclose(f);
  if (!to_jsonl && !writer.close(&error)) {
    std::fprintf(stderr, "runlens convert: %s\n", error.c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "converted %llu events (%s -> %s)%s\n", static_cast<unsigned long long>(n), reader->format(),
               to_jsonl ? "jsonl" : "recording",
               dl.count ? (", " + std::to_string(dl.count) + " dead letters").c_str() : "");
  return kExitOk;
}

// --- record / tail ---------------------------------------------------------------------
int record(const std::string& bind, const std::string& connect, const std::string& out) {
  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::pull);
  sock.set(zmq::sockopt::linger, 0);
  std::string endpoint = bind.empty() ? connect : bind;
  try {
    if (!bind.empty())
      sock.bind(bind);
    else
      sock.connect(connect);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "runlens record: cannot %s %s: %s\n", bind.empty() ? "connect to" : "bind", endpoint.c_str(),
                 e.what());
    return kExitFailure;
  }
  recording::Writer writer;
  std::string error;
  if (!writer.open(out, &error)) {
    std::fprintf(stderr, "runlens record: %s\n", error.c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "recording %s to %s until Ctrl-C\n", endpoint.c_str(), out.c_str());
  uint64_t frames = 0, events = 0, rejected = 0;
  std::vector<Record> rows;
  std::vector<capnpc::EventIssue> issues;
  while (g_signal.load() == 0) {
    zmq::message_t msg;
    zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      if (zmq::poll(items, 1, std::chrono::milliseconds(100)) == 0) continue;
    } catch (const zmq::error_t&) {
      continue;
    }
    if (!sock.recv(msg, zmq::recv_flags::dontwait)) continue;
    // Keep the frame as it came, so a replay sees exactly what the live run saw;
    // frames that are not runlens batches are not recorded.
    rows.clear();
    issues.clear();
    if (!capnpc::decode_batch(msg.data(), msg.size(), &rows, &issues, &error)) {
      ++rejected;
      std::fprintf(stderr, "runlens record: frame %llu not recorded: %s\n",
                   static_cast<unsigned long long>(frames + rejected), error.c_str());
      continue;
    }
    std::string bytes(static_cast<const char*>(msg.data()), msg.size());
    if (!writer.write_encoded(bytes, static_cast<uint32_t>(rows.size() + issues.size()), &error)) {
      std::fprintf(stderr, "runlens record: %s\n", error.c_str());
      return kExitFailure;
    }
    ++frames;
    events += rows.size();
  }
  if (!writer.close(&error)) {
    std::fprintf(stderr, "runlens record: %s\n", error.c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "recorded %llu frames, %llu events to %s\n", static_cast<unsigned long long>(frames),
               static_cast<unsigned long long>(events), out.c_str());
  return kExitOk;
}

int tail(const std::string& connect, const std::vector<std::string>& kinds, int64_t max_count) {
  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::sub);
  sock.set(zmq::sockopt::linger, 0);
  if (kinds.empty()) sock.set(zmq::sockopt::subscribe, "");
  for (const auto& k : kinds) sock.set(zmq::sockopt::subscribe, k);
  try {
    sock.connect(connect);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "runlens tail: cannot connect to %s: %s\n", connect.c_str(), e.what());
    return kExitFailure;
  }
  int64_t n = 0;
  while (g_signal.load() == 0 && (max_count <= 0 || n < max_count)) {
    zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      if (zmq::poll(items, 1, std::chrono::milliseconds(100)) == 0) continue;
    } catch (const zmq::error_t&) {
      continue;
    }
    zmq::message_t topic, body;
    if (!sock.recv(topic, zmq::recv_flags::dontwait)) continue;
    if (!topic.more()) continue;
    if (!sock.recv(body, zmq::recv_flags::none)) continue;
    // A topic prefix matches longer kinds too (e.g. "straggler" vs "straggler_x"): filter exactly.
    std::string kind(static_cast<const char*>(topic.data()), topic.size());
    if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) continue;
    std::fwrite(body.data(), 1, body.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    ++n;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"runlens: streaming observability for large-model training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "runlens 0.1.0");

  // replay
  std::vector<std::string> inputs, sets;
  std::string pipeline, out_dir = "out", speed = "max";
  int threads = 0;
  int64_t batch = 0;
  bool quiet = false, no_progress = false, strict = false;
  auto* replay = app.add_subcommand("replay", "Replay recorded runs (JSONL or recordings) through a pipeline");
  replay->add_option("INPUT", inputs, "Telemetry files: JSONL or recordings, recognised by content")->required();
  replay->add_option("--pipeline", pipeline, "Pipeline file (default: the embedded pipelines/training-health.yaml)");
  replay->add_option("--out", out_dir, "Output directory; sets RUNLENS_OUT")->capture_default_str();
  replay->add_option("--speed", speed, "max, realtime, or a factor such as 10x")->capture_default_str();
  replay->add_option("--threads", threads, "Worker threads (default: all cores)");
  replay->add_option("--batch", batch, "Rows per batch read (default: the pipeline's batch_size)");
  replay->add_option("--set", sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  replay->add_flag("--quiet", quiet, "No progress bar and no counter summary");
  replay->add_flag("--no-progress", no_progress, "No progress bar");
  replay->add_flag("--strict", strict, "Exit 3 when the input had dead letters");

  // run
  auto* run = app.add_subcommand("run", "Run a pipeline live until SIGINT/SIGTERM");
  run->add_option("--pipeline", pipeline, "Pipeline file (default: the embedded pipelines/training-health.yaml)");
  run->add_option("--out", out_dir, "Output directory; sets RUNLENS_OUT")->capture_default_str();
  run->add_option("--threads", threads, "Worker threads (default: all cores)");
  run->add_option("--set", sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  run->add_flag("--quiet", quiet, "No counter summary at exit");
  std::string run_record;
  run->add_option("--record", run_record, "Also record every frame received to this recording (sets RUNLENS_RECORD)");
  int api_port = -1;
  run->add_option("--api-port", api_port,
                  "Also serve the query API (docs/api.md) on 127.0.0.1:PORT from the store "
                  "the pipeline's timeline sink writes")
      ->check(CLI::Range(0, 65535));

  // validate / graph / operators
  std::vector<std::string> files;
  auto* validate = app.add_subcommand("validate", "Check pipeline files; report file:line:col for each problem");
  validate->add_option("FILE", files, "Pipeline files")->required();
  validate->add_option("--set", sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  std::string graph_file;
  auto* graph = app.add_subcommand("graph", "Print a pipeline as Graphviz DOT");
  graph->add_option("FILE", graph_file, "Pipeline file (default: the embedded default)");
  graph->add_option("--set", sets, "Set a pipeline variable, KEY=VALUE (repeatable)");
  bool markdown = false;
  auto* operators = app.add_subcommand("operators", "List every component type and its parameters");
  operators->add_flag("--markdown", markdown, "Print docs/operators.md");
  bool contract = false;
  operators->add_flag("--contract", contract, "Print the telemetry contract's field table (docs/telemetry.md)");
  bool vocabulary = false;
  operators->add_flag("--vocabulary", vocabulary,
                      "Print the vocabulary's tables: kinds, causes, owners (docs/alerts.md)");

  // convert
  std::string conv_in, conv_out;
  auto* conv =
      app.add_subcommand("convert", "Convert JSONL <-> recording (output format by extension: .jsonl or other)");
  conv->add_option("IN", conv_in, "Input (format by content)")->required();
  conv->add_option("OUT", conv_out, "Output: *.jsonl for JSONL, anything else (e.g. *.rlrec) for a recording")
      ->required();

  // synth
  synth::Options so;
  std::vector<std::string> faults;
  std::string synth_out;
  auto* syn = app.add_subcommand("synth", "Generate a synthetic run with injectable faults");
  syn->add_option("--out", synth_out, "Output file: *.jsonl or a recording (e.g. *.rlrec)")->required();
  syn->add_option("--run-id", so.run_id)->capture_default_str();
  syn->add_option("--ranks", so.ranks)->capture_default_str()->check(CLI::Range(1, 1 << 20));
  syn->add_option("--steps", so.steps)->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  syn->add_option("--gpus-per-node", so.gpus_per_node)->capture_default_str()->check(CLI::Range(1, 64));
  syn->add_option("--seed", so.seed)->capture_default_str();
  syn->add_option("--step-ms", so.step_ms, "Median work time per step")->capture_default_str();
  syn->add_option("--gpu-every", so.gpu_every, "Steps between GPU/node samples (0: none)")->capture_default_str();
  syn->add_option("--gc-pause-rate", so.gc_pause_rate, "Chance per rank and step of a one-step pause")
      ->capture_default_str();
  syn->add_option("--fault", faults, synth::fault_help() + " (repeatable)");

  synth::Identity identity;
  std::vector<std::string> config_sets;
  syn->add_option("--experiment-id", identity.experiment_id, "run_start experiment_id");
  syn->add_option("--job-id", identity.job_id, "run_start job_id");
  syn->add_option("--model-id", identity.model_id, "run_start model_id (default llama-x-7b)");
  syn->add_option("--model-version", identity.model_version, "run_start model_version");
  syn->add_option("--dataset-version", identity.dataset_version, "run_start dataset_version (default v42)");
  syn->add_option("--code-commit", identity.code_commit, "run_start code_commit");
  syn->add_option("--config", config_sets, "Set a run_start config key, KEY=VALUE (repeatable)");
  syn->add_option("--end-status", identity.end_status, "run_end status")
      ->check(CLI::IsMember({"completed", "failed", "aborted"}));
  syn->add_option("--end-reason", identity.end_reason, "run_end reason");

  // serve / report
  api::ServeOptions serve_opts;
  auto* serve = app.add_subcommand("serve", "Serve the query API (docs/api.md) over a store until Ctrl-C");
  serve->add_option("--db", serve_opts.db_path, "The store (e.g. out/runlens.db)")->required();
  serve->add_option("--port", serve_opts.port, "TCP port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve->add_option("--host", serve_opts.host, "Address to bind")->capture_default_str();
  report::ReportOptions report_opts;
  std::string report_format = "text";
  std::vector<std::string> report_inputs;
  auto* rep = app.add_subcommand("report",
                                 "Print a run's failure page (spec section 24) from a store, a replay's "
                                 "output directory, or telemetry files (replayed first)");
  rep->add_option("INPUT", report_inputs,
                  "A store, a directory holding runlens.db (e.g. a replay's --out), or telemetry files to replay");
  rep->add_option("--db", report_opts.db_path, "The store (e.g. out/runlens.db)");
  rep->add_option("--run", report_opts.run_id, "Run id")->required();
  rep->add_option("--format", report_format, "text or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));

  // record / tail
  std::string rec_bind, rec_connect, rec_out;
  auto* rec = app.add_subcommand("record", "Record what arrives on a ZeroMQ endpoint to a recording, until Ctrl-C");
  auto* rb = rec->add_option("--bind", rec_bind, "Endpoint to bind (senders connect)");
  auto* rc = rec->add_option("--connect", rec_connect, "Endpoint to connect to");
  rb->excludes(rc);
  rec->add_option("--out", rec_out, "Recording file")->required();
  std::string tail_connect = "tcp://127.0.0.1:5556";
  std::vector<std::string> tail_kinds;
  int64_t tail_count = 0;
  auto* tl = app.add_subcommand("tail", "Print the live alert stream as JSON lines");
  tl->add_option("--connect", tail_connect, "Alert stream endpoint")->capture_default_str();
  tl->add_option("--kind", tail_kinds, "Only alerts of this kind (repeatable)");
  tl->add_option("--count", tail_count, "Exit after this many alerts");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);

  try {
    auto vars = parse_sets(sets);
    if (*replay || *run) vars.emplace("RUNLENS_OUT", out_dir);
    if (*replay || *run) {
      vars["RUNLENS_OUT"] = out_dir;
      if (!run_record.empty()) vars["RUNLENS_RECORD"] = run_record;
      runtime::PipelineSpec spec = load_pipeline(pipeline, vars);
      EngineOptions eo;
      eo.threads = threads;
      eo.out_dir = out_dir;
      eo.batch_size = batch;
      if (*replay) {
        eo.replay_inputs = inputs;
        auto sp = connectors::parse_speed(speed);
        if (!sp) {
          std::fprintf(stderr, "runlens replay: invalid --speed '%s' (max, realtime or e.g. 10x)\n", speed.c_str());
          return kExitUsage;
        }
        eo.speed = *sp;
        eo.progress = !quiet && !no_progress && isatty(STDERR_FILENO);
        // Replay never sheds: every event of the recording is processed.
        spec.settings.overflow = runtime::OverflowPolicy::kBlock;
      }
      // The query API of a live run reads the store its timeline sink writes.
      std::unique_ptr<api::ApiServer> api_server;
      if (*run && api_port >= 0) {
        std::string db = api::store_path_of(spec);
        if (db.empty()) {
          std::fprintf(stderr, "runlens run: --api-port needs a pipeline with a timeline sink\n");
          return kExitUsage;
        }
        api_server = std::make_unique<api::ApiServer>(api::ServeOptions{db, "127.0.0.1", api_port});
        std::string error;
        if (!api_server->start(&error)) {
          std::fprintf(stderr, "runlens run: %s\n", error.c_str());
          return kExitUsage;
        }
        std::fprintf(stderr, "query API on http://127.0.0.1:%d/v1/ (store %s)\n", api_server->port(), db.c_str());
      }
      Engine engine(std::move(spec), eo);
      std::atomic<bool> done{false};
      std::thread watcher([&] {
        while (!done.load()) {
          if (g_signal.load() != 0) {
            engine.stop();
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      });
      RunSummary summary;
      try {
        summary = engine.run();
      } catch (...) {
        done.store(true);
        watcher.join();
        throw;
      }
      done.store(true);
      watcher.join();
      if (!quiet) print_summary(summary, replay->parsed());
      if (strict && summary.dead_letters > 0) return kExitDeadLetters;
      return kExitOk;
    }
    if (*validate) {
      int bad = 0;
      for (const auto& f : files) {
        try {
          auto spec = load_pipeline(f, vars);
          std::printf("%s: ok (%zu components)\n", f.c_str(), spec.components.size());
        } catch (const runtime::ConfigError& e) {
          ++bad;
          for (const auto& d : e.diagnostics()) std::fprintf(stderr, "%s\n", d.str().c_str());
        }
      }
      return bad ? kExitUsage : kExitOk;
    }
    if (*graph) {
      auto spec = load_pipeline(graph_file, vars);
      std::printf("%s", spec.to_dot().c_str());
      return kExitOk;
    }
    if (*operators) {
      std::printf("%s", contract     ? contract_markdown().c_str()
                        : vocabulary ? vocabulary_markdown().c_str()
                        : markdown   ? operators_markdown().c_str()
                                     : operators_text().c_str());
      return kExitOk;
    }
    if (*conv) return convert(conv_in, conv_out);
    if (*syn) {
      for (const auto& f : faults) {
        synth::Fault fault;
        std::string error;
        if (!synth::parse_fault(f, &fault, &error)) {
          std::fprintf(stderr, "runlens synth: %s\n", error.c_str());
          return kExitUsage;
        }
        so.faults.push_back(fault);
      }
      for (const auto& kv : config_sets) {
        std::pair<std::string, Value> c;
        std::string error;
        if (!synth::parse_config_value(kv, &c, &error)) {
          std::fprintf(stderr, "runlens synth: --config: %s\n", error.c_str());
          return kExitUsage;
        }
        identity.config.push_back(std::move(c));
      }
      bool jsonl_out = ends_with(synth_out, ".jsonl");
      recording::Writer writer;
      std::string error;
      std::FILE* f = nullptr;
      if (jsonl_out) {
        f = std::fopen(synth_out.c_str(), "wb");
        if (!f) {
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
            std::fwrite(line.data(), 1, line.size(), f);
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
        std::fclose(f);
      else {
        ok &= writer.write(pending, &error);
        ok &= writer.close(&error);
      }
      if (!ok) {
        std::fprintf(stderr, "runlens synth: %s\n", error.c_str());
        return kExitFailure;
      }
      std::fprintf(stderr, "wrote %llu events (%d ranks, %lld steps) to %s\n", static_cast<unsigned long long>(n),
                   so.ranks, static_cast<long long>(so.steps), synth_out.c_str());
      return kExitOk;
    }
    if (*rec) {
      if (rec_bind.empty() == rec_connect.empty()) {
        std::fprintf(stderr, "runlens record: give exactly one of --bind and --connect\n");
        return kExitUsage;
      }
      return record(rec_bind, rec_connect, rec_out);
    }
    if (*tl) return tail(tail_connect, tail_kinds, tail_count);
    if (*serve) return api::serve_until(serve_opts, [] { return g_signal.load() != 0; });
    if (*rep) {
      report_opts.json = report_format == "json";
      namespace fs = std::filesystem;
      std::string tmp;
      if (report_opts.db_path.empty()) {
        if (report_inputs.empty()) {
          std::fprintf(stderr, "runlens report: give a store (--db FILE), a directory, or telemetry files\n");
          return kExitUsage;
        }
        const std::string& first = report_inputs[0];
        std::ifstream probe(first, std::ios::binary);
        char magic[16] = {};
        probe.read(magic, sizeof magic);
        if (report_inputs.size() == 1 && fs::is_directory(first)) {
          report_opts.db_path = (fs::path(first) / "runlens.db").string();
        } else if (report_inputs.size() == 1 && std::string(magic, 15) == "SQLite format 3") {
          report_opts.db_path = first;
        } else {
          // Telemetry: replay it through the default pipeline into a scratch store first.
          tmp = (fs::temp_directory_path() / ("runlens-report-" + std::to_string(getpid()))).string();
          fs::create_directories(tmp);
          std::map<std::string, std::string> rvars{{"RUNLENS_OUT", tmp},
                                                   {"RUNLENS_PUBLISH", "ipc://" + tmp + "/alerts"}};
          auto spec = load_pipeline("", rvars);
          spec.settings.overflow = runtime::OverflowPolicy::kBlock;
          // The console sink would print every alert before the page: keep the page alone on stdout.
          std::erase_if(spec.components, [](const runtime::ComponentSpec& c) { return c.type == "console"; });
          EngineOptions eo;
          eo.replay_inputs = report_inputs;
          eo.out_dir = tmp;
          Engine(std::move(spec), eo).run();
          report_opts.db_path = tmp + "/runlens.db";
        }
      }
      int rc = report::report_main(report_opts);
      if (!tmp.empty()) std::filesystem::remove_all(tmp);
      return rc;
    }
  } catch (const runtime::ConfigError& e) {
    for (const auto& d : e.diagnostics()) std::fprintf(stderr, "%s\n", d.str().c_str());
    return kExitUsage;
  } catch (const CLI::ValidationError& e) {
    std::fprintf(stderr, "runlens: %s\n", e.what());
    return kExitUsage;
  } catch (const runtime::InternalError& e) {
    std::fprintf(stderr, "runlens: %s\nThis is a bug in runlens; please report it with the input that caused it.\n",
                 e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runlens: %s\n", e.what());
    return kExitFailure;
  }
  return kExitOk;
}
