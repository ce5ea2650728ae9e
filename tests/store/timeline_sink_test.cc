// The timeline sink: what it keeps (tiered retention, spec sections 28-34),
// that its store is a function of the input alone, that replays of the same
// run replace it while several runs fill one store, and the timeline entries
// of node-level events, XIDs, checkpoints and restarts.
#include "connectors/sinks/timeline/timeline_sink.h"

#include <cmath>
#include <set>
#include <tuple>

#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

synth::Options healthy(const std::string& id, int32_t ranks, int64_t steps) {
  synth::Options o;
  o.run_id = id;
  o.ranks = ranks;
  o.steps = steps;
  o.gpus_per_node = 8;
  o.gc_pause_rate = 0;  // no one-step pauses: no alerts at all
  o.gpu_every = 0;      // rank-level rows only (GPU rows are the rollup test's)
  o.seed = 11;
  return o;
}

struct Stored {
  int64_t bytes = 0, step_stats = 0, rank_steps = 0, rank_windows = 0, alerts = 0;
};

Stored replay_one(const std::string& dir, const std::string& name, const std::vector<Record>& rows,
                  const std::string& store_params) {
  std::string sub = dir + "/" + name;
  std::filesystem::create_directories(sub);
  std::string input = write_jsonl(sub + "/in.jsonl", rows);
  std::string db = sub + "/runlens.db";
  replay_into({input}, sub + "/out", db, 2, store_pipeline(sub, store_params));
  Stored s;
  s.bytes = store_bytes(db);
  SqliteFile f(db);
  s.step_stats = f.count("step_stats");
  s.rank_steps = std::stoll(f.rows("SELECT coalesce(sum(ranks), 0) FROM rank_step_blocks"));
  s.rank_windows = f.count("rank_windows");
  s.alerts = f.count("alerts");
  return s;
}

}  // namespace

TEST_CASE("retention: the store grows with steps and alerts, not with ranks x steps") {
  std::string dir = fresh_dir("retention");
  const int64_t N = 20, W = 100;  // failure window (steps), per-rank summary window (steps)
  const std::string tiered = "failure_window_steps: " + std::to_string(N) + "\nrank_window: " + std::to_string(W);
  const std::string full = "failure_window_steps: 100000\nrank_window: " + std::to_string(W);  // every rank row kept

  std::map<std::pair<int, int>, Stored> t, f;
  for (int ranks : {16, 64}) {
    for (int steps : {200, 800}) {
      auto rows = synth_run(healthy("r", ranks, steps));
      std::string name = std::to_string(ranks) + "x" + std::to_string(steps);
      t[{ranks, steps}] = replay_one(dir, "tiered-" + name, rows, tiered);
      f[{ranks, steps}] = replay_one(dir, "full-" + name, rows, full);
      const Stored& s = t[{ranks, steps}];
      CHECK(s.alerts == 0);
      CHECK(s.step_stats == steps);                            // every step's aggregates
      CHECK(s.rank_steps == ranks * N);                        // full resolution: the last window only
      CHECK(s.rank_windows == ranks * ((steps + W - 1) / W));  // per-rank summaries per window
      CHECK(f[{ranks, steps}].rank_steps == ranks * steps);
      MESSAGE(name << ": data held, tiered " << s.bytes / 1024 << " KiB, full resolution "
                   << f[{ranks, steps}].bytes / 1024 << " KiB");
    }
  }
  // Four times the steps: the tiered store grows about as the steps do...
  double steps_growth = double(t[{64, 800}].bytes) / double(t[{64, 200}].bytes);
  CHECK(steps_growth < 4.5);
  // ...while four times the ranks adds a small fraction of what rank rows at
  // full resolution add.
  int64_t ranks_growth_tiered = t[{64, 800}].bytes - t[{16, 800}].bytes;
  int64_t ranks_growth_full = f[{64, 800}].bytes - f[{16, 800}].bytes;
  CHECK(ranks_growth_tiered * 8 < ranks_growth_full);
  CHECK(t[{64, 800}].bytes * 4 < f[{64, 800}].bytes);

  // An alert keeps a failure window of rank rows: N steps before it to N after.
  auto rows = synth_run([&] {
    synth::Options o = healthy("r", 64, 800);
    synth::Fault fault;
    std::string why;
    REQUIRE(synth::parse_fault("straggler:rank=9,from=300,to=305", &fault, &why));
    o.faults.push_back(fault);
    return o;
  }());
  Stored a = replay_one(dir, "tiered-alert", rows, tiered);
  CHECK(a.alerts == 1);
  CHECK(a.rank_steps > 64 * N);
  CHECK(a.rank_steps <= 64 * (N + 2 * N + 1));
  CHECK(a.step_stats == 800);
  std::filesystem::remove_all(dir);
}

TEST_CASE("retention: GPU and node rollups per tier, pruned to each tier's retention; raw GPU rows only in windows") {
  std::string dir = fresh_dir("rollups");
  synth::Options o = healthy("gpus", 16, 300);
  o.gpu_every = 1;  // a GPU and node sample every step (~2 s)
  auto rows = synth_run(o);
  std::string input = write_jsonl(dir + "/in.jsonl", rows);
  std::string db = dir + "/runlens.db";
  replay_into({input}, dir + "/out", db, 2, store_pipeline(dir, "rollups: [10s:2m, 1m:1h]\nfailure_window_time: 1m"));
  SqliteFile f(db);
  store::Store st = store::open_store(url_of(db));
  const int64_t s10 = 10'000'000'000, m1 = 60'000'000'000;
  // The run spans ~10 minutes: the 10 s tier keeps its last 2 minutes, the 1 min tier all of it.
  auto tier = [&](int64_t res) {
    auto rows = st.metrics->gpu_rollups({}, res, INT64_MIN, INT64_MAX);
    std::set<int64_t> buckets;
    for (const auto& r : rows) {
      buckets.insert(r.bucket_ns);
      CHECK(r.samples > 0);
      CHECK(r.util_pct.n == r.samples);
      CHECK(r.util_pct.max <= 110);
      CHECK(r.sm_clock_mhz.min > 0);
    }
    REQUIRE(!buckets.empty());
    CHECK(rows.size() == buckets.size() * 16);  // every GPU in every bucket
    return buckets;
  };
  auto ten = tier(s10), minute = tier(m1);
  CHECK(*ten.rbegin() - *ten.begin() <= 2 * m1);
  CHECK(ten.size() <= 13);
  CHECK(*minute.rbegin() - *minute.begin() >= 8 * m1);
  // A bucket's mean is over its samples: a 1 min bucket holds ~30 of them, a 10 s one ~5.
  auto one = st.metrics->gpu_rollups({"gpu-node-0"}, m1, *minute.begin() + m1, *minute.begin() + m1);
  REQUIRE(one.size() == 8);
  CHECK(one[0].samples >= 20);
  auto summary = st.metrics->gpu_summary({{"gpu-node-0", 0}, {"gpu-node-1", 3}}, INT64_MIN, INT64_MAX);
  CHECK(summary.gpus == 2);
  CHECK(*summary.util_mean > 80);
  CHECK(f.count("node_rollups") > 0);
  // No alert: full-resolution GPU rows are only those of the last minute, each once.
  auto raw = st.metrics->gpu_samples({}, INT64_MIN, INT64_MAX);
  REQUIRE(!raw.empty());
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  std::set<std::tuple<std::string, int32_t, int64_t>> seen;
  for (const auto& g : raw) {
    lo = std::min(lo, g.time_ns), hi = std::max(hi, g.time_ns);
    CHECK(g.kept_for == "recent");
    CHECK(seen.insert({g.sample.node.string(), g.sample.gpu, g.time_ns}).second);
    CHECK(g.sample.has(Gpu::F::util_pct));
  }
  CHECK(hi - lo <= m1);
  CHECK(raw.size() < 16 * 40);
  std::filesystem::remove_all(dir);
}

TEST_CASE("rollups are the same whatever the commit cadence, and blocks written by another replay are merged") {
  std::string dir = fresh_dir("rollup-merge");
  synth::Options o = healthy("gpus", 16, 120);
  o.gpu_every = 1;
  auto rows = synth_run(o);
  std::string input = write_jsonl(dir + "/in.jsonl", rows);
  const std::string tiers = "rollups: [10s:1h, 1m:1h]\n";
  auto rollups = [&](const std::string& db) {
    store::Store st = store::open_store(url_of(db));
    std::string out;
    for (int64_t res : {10'000'000'000ll, 60'000'000'000ll}) {
      for (const auto& r : st.metrics->gpu_rollups({}, res, INT64_MIN, INT64_MAX)) {
        out += r.node + "/" + std::to_string(r.gpu) + "@" + std::to_string(r.bucket_ns) +
               " n=" + std::to_string(r.samples) + " util=" + std::to_string(r.util_pct.sum) + "\n";
      }
    }
    return out;
  };
  // Once committed in large batches; once a row at a time, with open buckets
  // shown at every commit (each block is then written, read back and merged).
  replay_into({input}, dir + "/a", dir + "/a.db", 2, store_pipeline(dir, tiers));
  replay_into({input}, dir + "/b", dir + "/b.db", 2,
              store_pipeline(dir, tiers + "commit_rows: 1\ncommit_interval: 0s"));
  std::string want = rollups(dir + "/a.db");
  CHECK(!want.empty());
  CHECK(rollups(dir + "/b.db") == want);

  // Two replays into one store, each with half of every node's GPUs (two jobs
  // sharing nodes): the second one's blocks merge into the first one's.
  std::vector<Record> even, odd;
  for (const auto& r : rows) {
    if (r.kind() == Kind::kGpu) (r.as<Gpu>().gpu % 2 ? odd : even).push_back(r);
  }
  std::string c_db = dir + "/c.db";
  replay_into({write_jsonl(dir + "/even.jsonl", even)}, dir + "/c", c_db, 2, store_pipeline(dir, tiers));
  replay_into({write_jsonl(dir + "/odd.jsonl", odd)}, dir + "/c", c_db, 2, store_pipeline(dir, tiers));
  CHECK(rollups(c_db) == want);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the store is a function of the input: the same rows whatever the thread count and batch size") {
  std::string dir = fresh_dir("store-invariance");
  const auto& sc = scenarios();
  std::vector<std::string> inputs = {sc.dir + "/straggle.jsonl", sc.dir + "/diverge.jsonl"};
  std::string first;
  for (int threads : {1, 2, 4}) {
    std::string sub = dir + "/t" + std::to_string(threads);
    replay_into(inputs, sub, sub + "/runlens.db", threads);
    std::string dump = SqliteFile(sub + "/runlens.db").dump();
    std::string timeline = read_file(sub + "/timeline.jsonl");
    if (first.empty())
      first = dump + timeline;
    else
      CHECK_MESSAGE(dump + timeline == first, "threads " << threads);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("replaying the same run again replaces it; other runs fill the same store") {
  std::string dir = fresh_dir("store-replace");
  const auto& sc = scenarios();
  std::string db = dir + "/runlens.db";
  replay_into({sc.dir + "/straggle.jsonl"}, dir + "/out", db);
  std::string once = SqliteFile(db).dump();
  replay_into({sc.dir + "/straggle.jsonl"}, dir + "/out", db);
  CHECK(SqliteFile(db).dump() == once);
  replay_into({sc.dir + "/lr-a.jsonl"}, dir + "/out", db);
  SqliteFile f(db);
  CHECK(f.rows("SELECT run_id FROM runs ORDER BY run_id") == "lr-a\nstraggle\n");
  CHECK(f.rows("SELECT count(*) FROM step_stats WHERE run_id = 'straggle'") == "200\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("timeline: node-level XID events, GPU XIDs, checkpoints and a restart land on the run") {
  std::string dir = fresh_dir("timeline-events");
  synth::Options o = healthy("evt", 16, 60);
  o.gpus_per_node = 4;
  auto rows = synth_run(o, {}, 20);
  int64_t t30 = 0;
  for (const auto& r : rows) {
    if (r.kind() == Kind::kTrain && r.as<Train>().step == 30) t30 = r.time_ns;
  }
  REQUIRE(t30 > 0);
  // An XID reported by the node agent (no run_id), and one seen in a GPU sample.
  Occurrence xid;
  xid.kind = Symbol::intern("xid");
  xid.node = Symbol::intern("gpu-node-2");
  xid.gpu = 1;
  xid.code = 79;
  xid.message = "GPU has fallen off the bus";
  for (auto fl :
       {Occurrence::F::kind, Occurrence::F::node, Occurrence::F::gpu, Occurrence::F::code, Occurrence::F::message}) {
    xid.set_present(fl);
  }
  Record xr;
  xr.time_ns = t30 + 1000;
  xr.body = xid;
  rows.push_back(xr);
  Gpu g;
  g.node = Symbol::intern("gpu-node-3");
  g.gpu = 2;
  g.xid = 48;
  for (auto fl : {Gpu::F::node, Gpu::F::gpu, Gpu::F::xid}) g.set_present(fl);
  Record gr;
  gr.time_ns = t30 + 2000;
  gr.body = g;
  rows.push_back(gr);
  // The job restarts.
  Occurrence restart;
  restart.kind = Symbol::intern("restart");
  restart.run_id = Symbol::intern("evt");
  restart.set_present(Occurrence::F::kind);
  restart.set_present(Occurrence::F::run_id);
  Record rr;
  rr.time_ns = t30 + 3000;
  rr.body = restart;
  rows.push_back(rr);
  std::stable_sort(rows.begin(), rows.end(), [](const Record& a, const Record& b) { return a.time_ns < b.time_ns; });

  std::string db = dir + "/runlens.db";
  replay_into({write_jsonl(dir + "/in.jsonl", rows)}, dir + "/out", db);
  SqliteFile f(db);
  CHECK(f.rows("SELECT step, kind, severity, summary FROM timeline WHERE kind IN ('xid', 'restart') ORDER BY id") ==
        "30|xid|critical|xid 79 on gpu-node-2 GPU 1: GPU has fallen off the bus\n"
        "30|xid|critical|XID 48 on gpu-node-3 GPU 2\n"
        "30|restart|warning|restart\n");
  CHECK(f.rows("SELECT restarts FROM runs") == "1\n");
  CHECK(f.rows("SELECT checkpoint_id, step FROM checkpoints ORDER BY step") ==
        "evt/ckpt-20|20\nevt/ckpt-40|40\nevt/ckpt-60|60\n");
  CHECK(f.rows("SELECT object_uri, checksum LIKE 'sha256:%' FROM artifacts ORDER BY created_at_ns LIMIT 1") ==
        "s3://ckpt/evt/20|1\n");
  CHECK(f.rows("SELECT count(*) FROM timeline WHERE kind = 'checkpoint'") == "3\n");
  // timeline.jsonl holds the same entries, in the same order.
  auto lines = lines_of(read_file(dir + "/out/timeline.jsonl"));
  CHECK(static_cast<int64_t>(lines.size()) == f.count("timeline"));
  auto summaries = lines_of(f.rows("SELECT summary FROM timeline ORDER BY id"));
  for (size_t i = 0; i < lines.size() && i < summaries.size(); ++i) {
    auto v = parse_json(lines[i]);
    CHECK(v.find("summary")->text == summaries[i]);
    CHECK(v.find("run_id")->text == "evt");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a later start of a stored run continues it (a restarted job), keeping its history") {
  std::string dir = fresh_dir("store-continue");
  synth::Options o = healthy("cont", 16, 40);
  auto first = synth_run(o);
  o.start_ns += int64_t{3600} * 1'000'000'000;  // the job is started again an hour later
  o.seed = 12;
  auto second = synth_run(o);
  std::string db = dir + "/runlens.db";
  replay_into({write_jsonl(dir + "/a.jsonl", first)}, dir + "/out", db);
  replay_into({write_jsonl(dir + "/b.jsonl", second)}, dir + "/out", db);
  SqliteFile f(db);
  CHECK(f.rows("SELECT restarts, started_ns = " + std::to_string(synth::Options().start_ns) + ", status FROM runs") ==
        "1|1|completed\n");
  CHECK(f.rows("SELECT count(*) FROM timeline WHERE kind = 'restart'") == "1\n");
  CHECK(f.rows("SELECT count(*) FROM timeline WHERE kind = 'run_end'") == "2\n");
  // Tokens keep counting across the restart.
  CHECK(f.rows("SELECT tokens_processed FROM runs") == std::to_string(2 * 40 * 16 * 4 * 4096) + "\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a store write that fails fails the replay with the store's error, after the writer's wait") {
  std::string dir = fresh_dir("store-write-fails");
  const auto& sc = scenarios();
  std::string db = dir + "/runlens.db";
  replay_into({sc.dir + "/lr-a.jsonl"}, dir + "/out", db);  // creates and migrates the store
  SqliteFile other(db);
  other.exec("BEGIN IMMEDIATE");  // another writer holds the store past the busy timeout
  other.exec("UPDATE runs SET status = status");
  try {
    replay_into({sc.dir + "/straggle.jsonl"}, dir + "/out", db);
    FAIL("the replay did not fail");
  } catch (const store::StoreError& e) {
    CHECK(std::string(e.what()).find("locked") != std::string::npos);
  }
  other.exec("ROLLBACK");
  std::filesystem::remove_all(dir);
}

TEST_CASE("timeline sink parameters are checked when the pipeline is loaded") {
  std::string dir = fresh_dir("sink-params");
  // The parameter is line 16 of the pipeline; the position is its value's.
  const std::pair<const char*, const char*> cases[] = {
      {"rollups: [10s]", ":16:14: error: expected RESOLUTION:RETENTION (e.g. 1m:30d), got '10s' (in sinks.store)"},
      {"rollups: [1h:10s]", ":16:14: error: retention shorter than the resolution in '1h:10s' (in sinks.store)"},
      {"rollups: [fast:1d]",
       ":16:14: error: expected durations such as 10s, 1m, 1h or 30d in 'fast:1d' (in sinks.store)"},
      {"failure_window_steps: 0",
       ":16:27: error: invalid value for 'failure_window_steps': must be at least 1.000000, got 0 (in "
       "sinks.store.failure_window_steps)"},
      {"commit_rows: 0",
       ":16:18: error: invalid value for 'commit_rows': must be at least 1.000000, got 0 (in "
       "sinks.store.commit_rows)"},
  };
  for (const auto& [bad, error] : cases) {
    std::string path = store_pipeline(dir, bad);
    // Types and ranges are checked by the parser, the rest by the factory: both when the pipeline is loaded.
    CHECK_THROWS_WITH_AS(load_pipeline(path, {{"RUNLENS_OUT", dir}}), (path + error).c_str(), runtime::ConfigError);
  }
  // The series thresholds moved to train_marks: loading says where, at the parameter.
  for (const char* moved : {"lr_change_ratio: 2", "jump_ratio: 5"}) {
    std::string path = store_pipeline(dir, moved);
    std::string name = std::string(moved).substr(0, std::string(moved).find(':'));
    try {
      load_pipeline(path, {{"RUNLENS_OUT", dir}});
      FAIL("no error for " << moved);
    } catch (const runtime::ConfigError& e) {
      REQUIRE(e.diagnostics().size() == 1);
      const auto& d = e.diagnostics()[0];
      CHECK(d.where.file == path);
      CHECK(d.where.line == 16);  // the sink's parameters follow its inputs (store_pipeline)
      CHECK(d.where.column == 5);
      CHECK(d.path == "sinks.store");
      CHECK(d.message == "parameter '" + name +
                             "' of timeline has moved: set it on a train_marks operator and list that operator in "
                             "this sink's inputs (docs/storage.md)");
    }
  }
  store::RollupTier tier;
  std::string why;
  CHECK(connectors::parse_rollup_tier("1m:30d", &tier, &why));
  CHECK(tier.resolution_ns == 60'000'000'000);
  CHECK(tier.retention_ns == 30LL * 86400 * 1'000'000'000);
  std::filesystem::remove_all(dir);
}
