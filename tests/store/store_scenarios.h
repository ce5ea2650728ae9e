// Replayed scenarios for the store tests: synthetic runs (a straggler, a NaN
// failure after an LR change, two runs that differ in LR) replayed through a
// pipeline with the timeline sink into real SQLite files, plus small readers
// (table counts, a full dump, JSON parsing).
#pragma once

#include <doctest/doctest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cli/synth/synth.h"
#include "engine/engine.h"
#include "formats/json_reader.h"
#include "formats/jsonl_codec.h"
#include "store/store.h"
#include "tests/pipelines/replay_run.h"

namespace runlens::testing {

// A synthetic run as a trainer would report it, with checkpoints every
// `checkpoint_every` steps (object URI and checksum included).
inline std::vector<Record> synth_run(const synth::Options& o, const synth::Identity& id = {},
                                     int64_t checkpoint_every = 0) {
  std::vector<Record> rows;
  synth::generate(o, [&](std::vector<Record>& batch) {
    synth::apply_identity(id, batch);
    int64_t last_step = -1;
    for (auto& r : batch) {
      if (r.kind() == Kind::kTrain) last_step = r.as<Train>().step;
      rows.push_back(std::move(r));
    }
    if (checkpoint_every > 0 && last_step > 0 && last_step % checkpoint_every == 0) {
      Checkpoint c;
      c.run_id = Symbol::intern(o.run_id);
      c.checkpoint_id = Symbol::intern(o.run_id + "/ckpt-" + std::to_string(last_step));
      c.step = last_step;
      c.duration_ms = 3000;
      c.size_bytes = int64_t{14} << 30;
      c.ok = true;
      c.uri = "s3://ckpt/" + o.run_id + "/" + std::to_string(last_step);
      c.sha256 = std::string(64, 'a' + static_cast<char>(last_step / checkpoint_every % 6));
      for (auto f :
           {Checkpoint::F::run_id, Checkpoint::F::checkpoint_id, Checkpoint::F::step, Checkpoint::F::duration_ms,
            Checkpoint::F::size_bytes, Checkpoint::F::ok, Checkpoint::F::uri, Checkpoint::F::sha256}) {
        c.set_present(f);
      }
      Record cr;
      cr.time_ns = rows.back().time_ns + 1'000'000;
      cr.body = c;
      rows.push_back(std::move(cr));
    }
  });
  return rows;
}

inline std::string write_jsonl(const std::string& path, const std::vector<Record>& rows) {
  std::ofstream out(path, std::ios::binary);
  std::string line;
  for (const auto& r : rows) {
    line.clear();
    jsonl::encode_record(r, &line);
    out << line << '\n';
  }
  return path;
}

// A pipeline of the core operators (join, straggler, nan_detect, step_stats,
// train_marks) and the store sink with `store_params` (YAML lines, e.g.
// "failure_window_steps: 20"), so that what the store keeps does not depend
// on which detectors the shipped pipeline carries.
inline std::string store_pipeline(const std::string& dir, const std::string& store_params = "") {
  std::string text =
      "version: 1\n"
      "name: store-test\n"
      "sources:\n"
      "  telemetry: {type: file, paths: [replaced-by-replay]}\n"
      "operators:\n"
      "  join: {type: rank_join, inputs: [telemetry], timeout: 30s}\n"
      "  stragglers: {type: straggler, inputs: [join]}\n"
      "  nan: {type: nan_detect, inputs: [telemetry]}\n"
      "  stats: {type: step_stats, inputs: [join, telemetry]}\n"
      "  marks: {type: train_marks, inputs: [telemetry]}\n"
      "sinks:\n"
      "  alerts: {type: jsonl, inputs: [join, stragglers, nan], path: \"${RUNLENS_OUT}/alerts.jsonl\"}\n"
      "  store:\n"
      "    type: timeline\n"
      "    inputs: [telemetry, join, stats, marks, stragglers, nan]\n";
  size_t start = 0;
  while (start < store_params.size()) {
    size_t nl = store_params.find('\n', start);
    if (nl == std::string::npos) nl = store_params.size();
    text += "    " + store_params.substr(start, nl - start) + "\n";
    start = nl + 1;
  }
  std::string path = dir + "/store-pipeline.yaml";
  std::ofstream(path) << text;
  return path;
}

// The store URL of the store file `db`.
inline std::string url_of(const std::string& db) { return store::store_url_of_file(db); }

// `runlens replay INPUT` as a child process writing the store file `db`, its
// output in DIR/NAME (log DIR/NAME.log); the exit status of std::system.
inline int replay_process(const std::string& input, const std::string& dir, const std::string& name,
                          const std::string& db, const std::string& flags = "") {
  return std::system((std::string(RUNLENS_BINARY) + " replay " + input + " " + flags + " --quiet --out " + dir + "/" +
                      name + " --set RUNLENS_PUBLISH=ipc://" + dir + "/" + name + ".sock --store sqlite://" + db +
                      " > " + dir + "/" + name + ".log 2>&1")
                         .c_str());
}

// Replays `inputs` the way `runlens replay` does, into `out` (RUNLENS_OUT) and
// the store file `db` (RUNLENS_STORE).
inline RunSummary replay_into(const std::vector<std::string>& inputs, const std::string& out, const std::string& db,
                              int threads = 2, const std::string& pipeline = "") {
  std::map<std::string, std::string> vars{
      {"RUNLENS_OUT", out}, {"RUNLENS_STORE", url_of(db)}, {"RUNLENS_PUBLISH", "ipc://" + out + "/alerts.sock"}};
  std::filesystem::create_directories(out);
  auto spec = load_pipeline(pipeline, vars);
  spec.settings.overflow = runtime::OverflowPolicy::kBlock;
  EngineOptions eo;
  eo.threads = threads;
  eo.replay_inputs = inputs;
  eo.out_dir = out;
  Engine engine(std::move(spec), eo);
  return engine.run();
}

// --- reading SQLite files directly ---

// A GPU sample row of `node` with only its GPU (and node) present.
inline store::GpuSampleRow gpu_row(const char* node, int64_t t, int32_t gpu, std::string kept_for = "recent") {
  store::GpuSampleRow r;
  r.time_ns = t;
  r.kept_for = std::move(kept_for);
  r.sample.node = Symbol::intern(node);
  r.sample.gpu = gpu;
  r.sample.set_present(Gpu::F::node);
  r.sample.set_present(Gpu::F::gpu);
  return r;
}

// Bytes as an SQL blob literal, X'..'.
inline std::string sql_blob(std::string_view bytes) {
  std::string out = "X'";
  for (unsigned char c : bytes) {
    out += "0123456789abcdef"[c >> 4];
    out += "0123456789abcdef"[c & 15];
  }
  return out + "'";
}

class SqliteFile {
 public:
  explicit SqliteFile(const std::string& path) {
    REQUIRE(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) == SQLITE_OK);
  }
  ~SqliteFile() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    std::string why = err ? err : "";
    sqlite3_free(err);
    REQUIRE_MESSAGE(rc == SQLITE_OK, why);
  }
  // Every row of a query as text, one line per row, columns separated by '|'.
  std::string rows(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    REQUIRE_MESSAGE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) == SQLITE_OK, sqlite3_errmsg(db_));
    std::string out;
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        if (c) out += '|';
        const auto* t = sqlite3_column_text(st, c);
        out += t ? reinterpret_cast<const char*>(t) : "NULL";
      }
      out += '\n';
    }
    sqlite3_finalize(st);
    return out;
  }
  int64_t count(const std::string& table) { return std::stoll(rows("SELECT count(*) FROM " + table)); }
  // Every table, every row, in key order: equal dumps mean equal stores.
  std::string dump() {
    std::string out;
    for (const auto& t : lines_of(rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"))) {
      int64_t columns = std::stoll(rows("SELECT count(*) FROM pragma_table_info('" + t + "')"));
      std::string order;
      for (int64_t c = 1; c <= columns; ++c) order += (c > 1 ? ", " : "") + std::to_string(c);
      out += "== " + t + "\n" + rows("SELECT * FROM " + t + " ORDER BY " + order);
    }
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

inline int64_t file_size(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

// The size of a store with its write-ahead log folded in.
// The bytes of data a store holds (SQLite's dbstat: the payload of every
// table and index), whatever its page size and the pages its empty tables take.
inline int64_t store_bytes(const std::string& db) {
  SqliteFile f(db);
  f.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  return std::stoll(f.rows("SELECT coalesce(sum(payload), 0) FROM dbstat"));
}

inline json::Value parse_json(const std::string& text) {
  json::Value v;
  json::ParseError e;
  REQUIRE_MESSAGE(json::parse(text, &v, &e), "not JSON at " << e.offset << ": " << text.substr(0, 300));
  return v;
}

// --- the shared scenario store ---

struct Scenarios {
  std::string dir, db;
  // Runs: "straggle" (rank 5 slow from step 60), "diverge" (LR x20 at step 150,
  // NaN from 160, run failed), "lr-a" and "lr-b" (same seed; lr 3e-4 vs 6e-4).
};

inline synth::Options small_run(const std::string& run_id, int64_t steps, uint64_t seed) {
  synth::Options o;
  o.run_id = run_id;
  o.ranks = 16;
  o.gpus_per_node = 4;
  o.steps = steps;
  o.seed = seed;
  o.gpu_every = 10;
  return o;
}

inline const Scenarios& scenarios() {
  static const Scenarios s = [] {
    Scenarios sc;
    sc.dir = fresh_dir("scenarios");
    sc.db = sc.dir + "/runlens.db";
    synth::Options straggle = small_run("straggle", 200, 3);
    synth::Fault f;
    std::string why;
    REQUIRE(synth::parse_fault("straggler:rank=5,from=60", &f, &why));
    straggle.faults.push_back(f);
    synth::Identity sid;
    sid.experiment_id = "exp-7";
    sid.model_version = "v140";
    sid.job_id = "job-11";

    synth::Options diverge = small_run("diverge", 200, 4);
    REQUIRE(synth::parse_fault("lr_change:step=150,factor=20", &f, &why));
    diverge.faults.push_back(f);
    REQUIRE(synth::parse_fault("nan:step=160", &f, &why));
    diverge.faults.push_back(f);
    synth::Identity did;
    did.experiment_id = "exp-7";
    did.end_status = "failed";
    did.end_reason = "loss diverged";

    synth::Options lr_a = small_run("lr-a", 150, 5), lr_b = small_run("lr-b", 150, 5);
    synth::Identity aid, bid;
    aid.experiment_id = bid.experiment_id = "exp-lr";
    aid.model_version = "v141";
    bid.model_version = "v142";
    aid.code_commit = bid.code_commit = "a94df2";
    bid.config.emplace_back("lr", Value::of(6e-4));
    bid.dataset_version = "v43";

    std::vector<std::string> files = {
        write_jsonl(sc.dir + "/straggle.jsonl", synth_run(straggle, sid)),
        write_jsonl(sc.dir + "/diverge.jsonl", synth_run(diverge, did)),
        write_jsonl(sc.dir + "/lr-a.jsonl", synth_run(lr_a, aid, 50)),
        write_jsonl(sc.dir + "/lr-b.jsonl", synth_run(lr_b, bid, 50)),
    };
    // One replay per file into the same store, as a user would run them.
    for (const auto& file : files) replay_into({file}, sc.dir + "/out", sc.db);
    return sc;
  }();
  static const struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{s.dir};
  return s;
}

}  // namespace runlens::testing
