// The versioned schema: stores written by the first three schema versions
// (tests/store/data/runlens_v1.sql .. runlens_v4.sql, frozen) are
// upgraded in place, their rows kept and backfilled; version 1 as the code builds it today is still the
// schema that file was written with; newer or unmigrated stores are refused.
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "formats/jsonl_codec.h"
#include "store/sqlite/fresh_image.h"
#include "store/sqlite/sqlite_schema.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

const std::string kFixture = std::string(RUNLENS_SOURCE_DIR) + "/tests/store/data/runlens_v1.sql";
const std::string kFixtureV2 = std::string(RUNLENS_SOURCE_DIR) + "/tests/store/data/runlens_v2.sql";
const std::string kFixtureV3 = std::string(RUNLENS_SOURCE_DIR) + "/tests/store/data/runlens_v3.sql";
const std::string kFixtureV4 = std::string(RUNLENS_SOURCE_DIR) + "/tests/store/data/runlens_v4.sql";
const std::string kFixtureV5 = std::string(RUNLENS_SOURCE_DIR) + "/tests/store/data/runlens_v5.sql";
const std::string kFixtureV6 = std::string(RUNLENS_SOURCE_DIR) + "/tests/store/data/runlens_v6.sql";

std::string v1_store(const std::string& dir) {
  std::string db = dir + "/v1.db";
  SqliteFile f(db);
  f.exec(read_file(kFixture));
  return db;
}

std::string v2_store(const std::string& dir) {
  std::string db = dir + "/v2.db";
  SqliteFile f(db);
  f.exec(read_file(kFixtureV2));
  return db;
}

std::string v3_store(const std::string& dir) {
  std::string db = dir + "/v3.db";
  SqliteFile f(db);
  f.exec(read_file(kFixtureV3));
  return db;
}

std::string v4_store(const std::string& dir) {
  std::string db = dir + "/v4.db";
  SqliteFile f(db);
  f.exec(read_file(kFixtureV4));
  return db;
}

std::string v5_store(const std::string& dir) {
  std::string db = dir + "/v5.db";
  SqliteFile f(db);
  f.exec(read_file(kFixtureV5));
  return db;
}

std::string v6_store(const std::string& dir) {
  std::string db = dir + "/v6.db";
  SqliteFile f(db);
  f.exec(read_file(kFixtureV6));
  return db;
}

// `rows` with "|" + `column` after each line.
std::string with_column(const std::string& rows, const std::string& column) {
  std::string out;
  for (size_t p = 0, q; (q = rows.find('\n', p)) != std::string::npos; p = q + 1)
    out += rows.substr(p, q - p) + "|" + column + "\n";
  return out;
}

// The schema as SQLite keeps it (tables, indexes), comparable across files.
std::string schema_of(const std::string& db) {
  SqliteFile f(db);
  return f.rows("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name");
}

}  // namespace

TEST_CASE("migration: a version-1 store opens at the current version with its rows kept and backfilled") {
  std::string dir = fresh_dir("migrate");
  std::string db = v1_store(dir);
  REQUIRE(store::sqlite::schema_version(db) == 1);

  store::Store s = store::open_store(url_of(db));
  CHECK(store::sqlite::schema_version(db) == store::sqlite::kSchemaVersion);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT version FROM schema_version ORDER BY version") == "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    // Each version-1 alert became an incident of its own.
    CHECK(f.rows("SELECT incident_id, kind, opened_step, alert_count FROM incidents") ==
          "inc-00000000000000aa|straggler|12|1\n");
    CHECK(f.rows("SELECT incident_id FROM alerts") == "inc-00000000000000aa\n");
    CHECK(f.rows("SELECT restarts FROM runs") == "0\n");
    // The tables of tiered retention are there, empty.
    for (const char* t : {"rank_windows", "rank_step_blocks", "gpu_sample_blocks", "gpu_rollups", "node_rollups"}) {
      CHECK(f.count(t) == 0);
    }
  }

  // The upgraded store answers like a new one.
  auto run = s.graph->run("old-run");
  REQUIRE(run);
  CHECK(run->status == "completed");
  CHECK(run->step == 30);
  CHECK(run->config.size() == 2);
  CHECK(run->last_checkpoint_id == "old-run-ckpt-20");
  auto alerts = s.graph->alerts({});
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].alert.kind == "straggler");
  CHECK(alerts[0].incident_id == "inc-00000000000000aa");
  auto lineage = s.graph->lineage("v100");
  REQUIRE(lineage.size() == 1);
  REQUIRE(lineage[0].children.size() == 1);
  CHECK(lineage[0].children[0].type == "checkpoint");
  CHECK(lineage[0].children[0].children.back().type == "training_run");
  // And takes new rows of every kind.
  store::MetricBatch mb;
  for (int32_t rank : {0, 1}) {
    store::RankStepRow r;
    r.run_id = "old-run";
    r.step = 12;
    r.rank = rank;
    r.gpu = rank;
    r.step_ms = 2100;
    r.work_ms = rank ? 2100 : 1000;
    r.ratio_to_median = rank ? 2.1 : 1.0;
    r.kept_for = "failure";
    store::append_row(mb.rank_steps, r);
  }
  store::RankWindowRow w;
  w.run_id = "old-run";
  w.first_step = 1;
  w.last_step = 100;
  w.rank = 1;
  w.steps = 30;
  w.work_ms_sum = 63000;
  mb.rank_windows.push_back(w);
  s.metrics->write(mb);
  CHECK(s.metrics->rank_summaries("old-run", {}).size() == 1);
  auto ranks = s.metrics->rank_steps("old-run", {}, 10);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[1].node == "node-a");  // from the allocations
  CHECK(ranks[1].ratio_to_median == 2.1);
  CHECK_FALSE(ranks[1].comm_ms);
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: a version-2 store opens at version 4, its evaluation rows extended, lineage unchanged") {
  std::string dir = fresh_dir("migrate-v2");
  std::string db = v2_store(dir);
  REQUIRE(store::sqlite::schema_version(db) == 2);
  std::string before_runs;
  {
    SqliteFile f(db);
    before_runs = f.rows("SELECT * FROM runs ORDER BY run_id");
  }

  store::Store s = store::open_store(url_of(db));
  CHECK(s.schema_version == store::sqlite::kSchemaVersion);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT version FROM schema_version ORDER BY version") == "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    CHECK(f.rows("SELECT * FROM runs ORDER BY run_id") == before_runs);
    // The v2 tables were extended, not duplicated: their rows are kept.
    CHECK(f.rows("SELECT evaluation_id, model_id, model_version, checkpoint_id, run_id, status, created_at_ns, "
                 "benchmark, cache_key FROM evaluation_runs") ==
          "eval-v2-1|llama-x-7b|v200|v2-run-ckpt-50|v2-run|completed|1700000001000000000|NULL|NULL\n");
    CHECK(f.rows("SELECT evaluation_id, benchmark, metric, score, n, std_error FROM evaluation_scores ORDER BY 2") ==
          "eval-v2-1|gsm8k||0.42|NULL|NULL\neval-v2-1|mmlu||0.61|NULL|NULL\n");
    CHECK(f.rows("SELECT gate_id, evaluation_id, benchmark, threshold, passed, metric FROM quality_gates") ==
          "gate-mmlu|eval-v2-1|mmlu|0.6|1|NULL\n");
    CHECK(f.rows("SELECT dataset_id, dataset_version, content_hash FROM dataset_versions") == "|v42|NULL\n");
    CHECK(f.rows("SELECT model_id, model_version, run_id, checkpoint_id, status FROM model_versions") ==
          "llama-x-7b|v200|v2-run|v2-run-ckpt-50|NULL\n");
    CHECK(f.rows("SELECT checkpoint_id, step, uri, sha256, parent_checkpoint_id FROM checkpoints") ==
          "v2-run-ckpt-50|50|s3://ckpt/v2-run/50|sha256:aa11|NULL\n");
    for (const char* t : {"datasets", "benchmarks", "benchmark_versions", "evaluation_shards", "evaluation_items",
                          "evaluation_shard_metrics", "evaluation_cache"}) {
      CHECK(f.count(t) == 0);
    }
    // No parallel tables were left behind by the rebuilds.
    CHECK(f.rows("SELECT count(*) FROM sqlite_master WHERE name LIKE '%_v3'") == "0\n");
  }
  // The lineage answers as it did for the v2 rows.
  auto eval = s.graph->lineage("eval-v2-1");
  REQUIRE(eval.size() == 1);
  CHECK(eval[0].type == "evaluation_run");
  REQUIRE(eval[0].children.size() == 1);
  const auto& mv = eval[0].children[0];
  CHECK(mv.type == "model_version");
  CHECK(mv.id == "llama-x-7b:v200");
  REQUIRE(mv.children.size() == 2);
  CHECK(mv.children[0].type == "evaluation_run");
  CHECK(mv.children[0].id == "eval-v2-1");
  CHECK(mv.children[1].type == "checkpoint");
  CHECK(mv.children[1].id == "v2-run-ckpt-50");
  CHECK(mv.children[1].children.back().type == "training_run");
  auto by_version = s.graph->lineage("v200");
  REQUIRE(by_version.size() == 1);
  CHECK(by_version[0].children.size() == mv.children.size());
  auto run = s.graph->run("v2-run");
  REQUIRE(run);
  CHECK(run->step == 60);
  CHECK(s.graph->alerts({}).size() == 2);
  // The migrated evaluation reads through the evaluation store too.
  auto view = s.evals->evaluation("eval-v2-1");
  REQUIRE(view);
  CHECK(view->run.status == "completed");
  CHECK(view->run.run_id == "v2-run");
  auto mvv = s.evals->model_version("llama-x-7b", "v200");
  REQUIRE(mvv);
  REQUIRE(mvv->evaluations.size() == 1);
  CHECK(mvv->evaluations[0].evaluation_id == "eval-v2-1");
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: version 2 built by today's code is the schema the frozen v2 store was written with") {
  std::string dir = fresh_dir("schema-v2");
  std::string built = dir + "/built.db";
  { store::sqlite::open(built, store::OpenMode::kReadWrite, 2); }
  CHECK(store::sqlite::schema_version(built) == 2);
  CHECK(schema_of(built) == schema_of(v2_store(dir)));
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: version 3 built by today's code is the schema the frozen v3 store was written with") {
  std::string dir = fresh_dir("schema-v3");
  std::string built = dir + "/built.db";
  { store::sqlite::open(built, store::OpenMode::kReadWrite, 3); }
  CHECK(store::sqlite::schema_version(built) == 3);
  CHECK(schema_of(built) == schema_of(v3_store(dir)));
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: version 1 built by today's code is the schema the frozen store was written with") {
  std::string dir = fresh_dir("schema-v1");
  std::string built = dir + "/built.db";
  { store::sqlite::open(built, store::OpenMode::kReadWrite, 1); }
  CHECK(store::sqlite::schema_version(built) == 1);
  CHECK(schema_of(built) == schema_of(v1_store(dir)));
  // Migrations are numbered 1, 2, ... with nothing skipped.
  int expected = 1;
  for (const auto& m : store::sqlite_migrations()) CHECK(m.version == expected++);
  CHECK(store::sqlite_migrations().back().version == store::sqlite::kSchemaVersion);
  // A store migrated step by step has the schema of one made at once (from
  // the schema the build generates from the migrations), and the same history.
  { store::open_store(url_of(built)); }
  std::string fresh = dir + "/fresh.db";
  { store::open_store(url_of(fresh)); }
  CHECK(schema_of(built) == schema_of(fresh));
  auto history = [](const std::string& db) {
    return SqliteFile(db).rows("SELECT version, description FROM schema_version ORDER BY version");
  };
  CHECK(history(built) == history(fresh));
  CHECK(store::sqlite::schema_version(fresh) == store::sqlite::kSchemaVersion);
  std::filesystem::remove_all(dir);
}

// The files in `dir`, by name, one a line.
std::string listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.insert(e.path().filename().string());
  std::string out;
  for (const auto& n : names) out += n + "\n";
  return out;
}

TEST_CASE("migration: a new store written from the build's image is the store its schema's SQL makes") {
  std::string dir = fresh_dir("fresh-image");
  // From the image: nothing was there.
  std::string image = dir + "/image.db";
  REQUIRE(store::sqlite::place_fresh_image(image));
  CHECK(store::sqlite::schema_version(image) == store::sqlite::kSchemaVersion);
  // From the SQL: an empty file was there already, so no image is written.
  std::string sql = dir + "/sql.db";
  std::ofstream(sql).close();
  CHECK_FALSE(store::sqlite::place_fresh_image(sql));
  CHECK(std::filesystem::file_size(sql) == 0);
  { store::open_store(url_of(sql)); }
  { store::open_store(url_of(image)); }
  CHECK(schema_of(image) == schema_of(sql));
  for (const std::string& db : {image, sql}) {
    CAPTURE(db);
    SqliteFile f(db);
    CHECK(f.rows("PRAGMA integrity_check") == "ok\n");
    CHECK(f.rows("PRAGMA journal_mode") == "wal\n");
    CHECK(f.rows("PRAGMA page_size") == std::to_string(store::kSqlitePageSize) + "\n");
  }
  CHECK(SqliteFile(image).rows("SELECT version, description FROM schema_version ORDER BY version") ==
        SqliteFile(sql).rows("SELECT version, description FROM schema_version ORDER BY version"));
  // A store from the image takes rows and gives them back.
  {
    store::Store s = store::open_store(url_of(image));
    store::MetricBatch mb;
    mb.gpu_samples = {gpu_row("node-1", 100, 0), gpu_row("node-1", 200, 1)};
    s.metrics->write(mb);
    CHECK(s.metrics->gpu_samples({"node-1"}, INT64_MIN, INT64_MAX).size() == 2);
  }
  CHECK(SqliteFile(image).rows("PRAGMA integrity_check") == "ok\n");
  // Nothing is written where something is, or where it cannot be made; nothing is left beside.
  std::string before = SqliteFile(image).rows("SELECT count(*) FROM gpu_sample_blocks");
  CHECK_FALSE(store::sqlite::place_fresh_image(image));
  CHECK(SqliteFile(image).rows("SELECT count(*) FROM gpu_sample_blocks") == before);
  CHECK_FALSE(store::sqlite::place_fresh_image(dir));
  CHECK_FALSE(store::sqlite::place_fresh_image(dir + "/missing/x.db"));
  CHECK_FALSE(store::sqlite::place_fresh_image(":memory:"));
  CHECK_FALSE(store::sqlite::place_fresh_image("file:" + dir + "/uri.db"));
  CHECK_FALSE(std::filesystem::exists(dir + "/missing"));
  CHECK(listing(dir) == "image.db\nsql.db\n");
  // A read-only open makes nothing.
  CHECK_THROWS_AS(store::open_store(url_of(dir + "/none.db"), {store::OpenMode::kReadOnly}), store::StoreError);
  CHECK_FALSE(std::filesystem::exists(dir + "/none.db"));
  // Older versions are made by their migrations, not from the image.
  { store::sqlite::open(dir + "/v3.db", store::OpenMode::kReadWrite, 3); }
  CHECK(store::sqlite::schema_version(dir + "/v3.db") == 3);
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: stores made at once, from threads, by the same path all open whole") {
  std::string dir = fresh_dir("fresh-race");
  for (int round = 0; round < 5; ++round) {
    std::string db = dir + "/race-" + std::to_string(round) + ".db";
    std::vector<int> versions(6, -1);
    std::vector<std::string> errors(versions.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < versions.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          versions[i] = store::open_store(url_of(db)).schema_version;
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < versions.size(); ++i) {
      CAPTURE(i);
      CHECK(errors[i] == "");
      CHECK(versions[i] == store::sqlite::kSchemaVersion);
    }
    CHECK(SqliteFile(db).rows("PRAGMA integrity_check") == "ok\n");
    CHECK(SqliteFile(db).rows("SELECT count(*) FROM schema_version") ==
          std::to_string(store::sqlite::kSchemaVersion) + "\n");
  }
  // No file is left beside the stores.
  CHECK(listing(dir).find(".new-") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: a newer store is refused, an older one is not read without migrating") {
  std::string dir = fresh_dir("schema-newer");
  std::string db = v1_store(dir);
  CHECK_THROWS_WITH_AS(store::open_store(url_of(db), {store::OpenMode::kReadOnly}),
                       doctest::Contains("open it read-write once to migrate"), store::StoreError);
  { store::open_store(url_of(db)); }
  {
    SqliteFile f(db);
    f.exec("INSERT INTO schema_version VALUES (99, 'from the future')");
  }
  CHECK_THROWS_WITH_AS(store::open_store(url_of(db)), doctest::Contains("newer than this runlens understands"),
                       store::StoreError);
  CHECK_THROWS_AS(store::open_store(url_of(dir + "/missing/dir/x.db"), {store::OpenMode::kReadOnly}),
                  store::StoreError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: the store is in WAL mode") {
  std::string dir = fresh_dir("wal");
  { store::open_store(url_of(dir + "/w.db")); }
  SqliteFile f(dir + "/w.db");
  CHECK(f.rows("PRAGMA journal_mode") == "wal\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: a version-3 store opens at version 4, its gate decisions and promotion audit moved over") {
  std::string dir = fresh_dir("migrate-v3");
  std::string db = v3_store(dir);
  REQUIRE(store::sqlite::schema_version(db) == 3);
  std::string before_runs, before_scores, before_versions;
  {
    SqliteFile f(db);
    before_runs = f.rows("SELECT * FROM evaluation_runs ORDER BY evaluation_id");
    before_scores = f.rows("SELECT * FROM evaluation_scores ORDER BY evaluation_id, benchmark, metric");
    before_versions = f.rows("SELECT * FROM model_versions ORDER BY model_id, model_version");
  }

  store::Store s = store::open_store(url_of(db));
  CHECK(s.schema_version == store::sqlite::kSchemaVersion);
  CHECK(store::sqlite::schema_version(db) == store::sqlite::kSchemaVersion);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT version FROM schema_version ORDER BY version") == "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    CHECK(f.rows("SELECT * FROM evaluation_runs ORDER BY evaluation_id") == before_runs);
    CHECK(f.rows("SELECT * FROM evaluation_scores ORDER BY evaluation_id, benchmark, metric") == before_scores);
    CHECK(f.rows("SELECT * FROM model_versions ORDER BY model_id, model_version") == before_versions);
    // The decision's JSON moved to decision_json, its benchmark is the candidate's;
    // the metric row and the v2-style row are as they were; the audit rows are gone.
    CHECK(f.rows("SELECT gate_id, evaluation_id, benchmark, threshold, passed, metric, decided_ns, decision_json "
                 "FROM quality_gates ORDER BY gate_id") ==
          "g-00000000000000a1|ev-v2|toy-bench|0.05|1|NULL|1700000000300000000|"
          "{\"gateId\":\"g-00000000000000a1\",\"decidedNs\":1700000000300000000,\"policy\":\"toy-release\","
          "\"verdict\":\"PASS\",\"reasons\":[]}\n"
          "g-00000000000000a1/accuracy|ev-v2|toy-bench|-0.02|1|accuracy|1700000000300000000|NULL\n"
          "gate-legacy|ev-v1|toy-bench|0.6|1|NULL|NULL|NULL\n");
    CHECK(f.rows("SELECT model_id, model_version, seq, from_status, to_status, actor, decided_ns, gate_id, reason "
                 "FROM model_version_transitions ORDER BY seq") ==
          "toy-mlp|v1|1|gated|production|alice|1700000000050000000|NULL|\n"
          "toy-mlp|v2|2|canary|production|bob|1700000000400000000|g-00000000000000a1|\n"
          "toy-mlp|v1|3|production|retired|bob|1700000000400000000|NULL|superseded by toy-mlp:v2\n");
  }
  // And they read back through the evaluation store.
  auto gates = s.evals->gate_rows("g-00000000000000a1");
  REQUIRE(gates.size() == 2);
  CHECK(gates[0].benchmark == "toy-bench");
  CHECK(gates[0].decision_json.find("\"verdict\":\"PASS\"") != std::string::npos);
  CHECK(gates[1].decision_json.empty());
  auto v1 = s.evals->transitions("toy-mlp", "v1");
  REQUIRE(v1.size() == 2);
  CHECK(v1[0].seq == 1);
  CHECK(v1[0].actor == "alice");
  CHECK(v1[0].gate_id.empty());
  CHECK(v1[1].to_status == "retired");
  CHECK(v1[1].reason == "superseded by toy-mlp:v2");
  auto all = s.evals->transitions("toy-mlp", "");
  REQUIRE(all.size() == 3);
  CHECK(all[1].model_version == "v2");
  CHECK(all[1].gate_id == "g-00000000000000a1");
  auto mv = s.evals->model_version("toy-mlp", "v2");
  REQUIRE(mv);
  CHECK(mv->version.status == "production");
  CHECK(mv->evaluations.size() == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: version 4 built by today's code is the schema the frozen v4 store was written with") {
  std::string dir = fresh_dir("schema-v4");
  std::string built = dir + "/built.db";
  { store::sqlite::open(built, store::OpenMode::kReadWrite, 4); }
  CHECK(store::sqlite::schema_version(built) == 4);
  CHECK(schema_of(built) == schema_of(v4_store(dir)));
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: a version-4 store opens at version 5, its items without cluster ids, its alerts kept") {
  std::string dir = fresh_dir("migrate-v4");
  std::string db = v4_store(dir);
  REQUIRE(store::sqlite::schema_version(db) == 4);
  std::string before_items, before_alerts;
  {
    SqliteFile f(db);
    before_items = f.rows("SELECT * FROM evaluation_items ORDER BY evaluation_id, item");
    before_alerts = f.rows("SELECT * FROM alerts ORDER BY alert_id");
  }
  store::Store s = store::open_store(url_of(db));
  CHECK(s.schema_version == store::sqlite::kSchemaVersion);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT version FROM schema_version ORDER BY version") == "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    // The rows are as they were, with a NULL clusters_json after them.
    std::string expect;
    for (size_t p = 0, q; (q = before_items.find('\n', p)) != std::string::npos; p = q + 1)
      expect += before_items.substr(p, q - p) + "|NULL\n";
    CHECK(f.rows("SELECT * FROM evaluation_items ORDER BY evaluation_id, item") == expect);
    CHECK(f.rows("SELECT * FROM alerts ORDER BY alert_id") ==
          with_column(with_column(before_alerts, "0"), "NULL"));  // revision 0, no end
  }
  auto items = s.evals->items("ev-v4-1", std::nullopt);
  REQUIRE(items.size() == 2);
  CHECK(items[0].clusters.empty());
  CHECK(items[1].error == "timeout");
  // New items keep their cluster ids.
  store::ShardResult r;
  r.evaluation_id = "ev-v4-1";
  r.shard = 1;
  r.attempt = 1;
  store::ItemResult it;
  it.item = 2;
  it.scores = {{"accuracy", 1}};
  it.clusters = {{"passage_id", "p7"}, {"topic", "42"}};
  r.items = {it};
  {
    SqliteFile f(db);
    f.exec(
        "INSERT INTO evaluation_shards (evaluation_id, shard, dataset_partition, item_begin, item_end, status) "
        "VALUES ('ev-v4-1', 1, '1', 2, 3, 'RUNNING')");
  }
  REQUIRE(s.evals->write_shard_result(r));
  auto back = s.evals->items("ev-v4-1", 1);
  REQUIRE(back.size() == 1);
  CHECK(back[0].clusters == it.clusters);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT clusters_json FROM evaluation_items WHERE item = 2") ==
          "{\"passage_id\":\"p7\",\"topic\":\"42\"}\n");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: version 5 built by today's code is the schema the frozen v5 store was written with") {
  std::string dir = fresh_dir("schema-v5");
  std::string built = dir + "/built.db";
  { store::sqlite::open(built, store::OpenMode::kReadWrite, 5); }
  CHECK(store::sqlite::schema_version(built) == 5);
  CHECK(schema_of(built) == schema_of(v5_store(dir)));
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: a version-5 store opens at version 6: alerts get revision 0, v1 diagnoses theirs from attrs") {
  std::string dir = fresh_dir("migrate-v5");
  std::string db = v5_store(dir);
  REQUIRE(store::sqlite::schema_version(db) == 5);
  std::string before;
  {
    SqliteFile f(db);
    before = f.rows("SELECT * FROM alerts WHERE kind != 'diagnosis' ORDER BY alert_id");
  }
  store::Store s = store::open_store(url_of(db));
  CHECK(s.schema_version == store::sqlite::kSchemaVersion);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT version FROM schema_version ORDER BY version") == "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    // revision 0 (v6), no end (v7).
    CHECK(f.rows("SELECT * FROM alerts WHERE kind != 'diagnosis' ORDER BY alert_id") ==
          with_column(with_column(before, "0"), "NULL"));
    // The v1 contract's attrs.revision 2 (1 first) is revision 1 (0 first).
    CHECK(f.rows("SELECT alert_id, revision, incident_id FROM alerts WHERE kind = 'diagnosis'") ==
          "d1a9005e00000001|1|inc-ff6905e0a095d878\n");
  }
  auto diagnosis = [](const std::string& json) {
    store::GraphBatch b;
    store::StoredAlert a;
    std::string why;
    REQUIRE(jsonl::decode_alert(json, &a.alert, &why));
    a.json = json;
    a.incident_id = "inc-other";
    b.alerts.push_back(a);
    return b;
  };
  auto stored = [&] {
    SqliteFile f(db);
    return f.rows("SELECT revision, cause, incident_id FROM alerts WHERE alert_id = 'd1a9005e00000001'");
  };
  const std::string head = R"({"alert_id":"d1a9005e00000001","revision":)";
  const std::string tail =
      R"(,"kind":"diagnosis","severity":"info","time_ns":1767225867961841318,"run_id":"pretrain-4821","step":102,"summary":"s","symptom":"straggler","cause":")";
  // A lower revision, late, never replaces the higher one.
  s.graph->write(diagnosis(head + "0" + tail + "unknown\"}"));
  CHECK(stored() == "1|hardware_throttle|inc-ff6905e0a095d878\n");
  // The same revision again (a replay into the same store) replaces it.
  s.graph->write(diagnosis(head + "1" + tail + "network\"}"));
  CHECK(stored() == "1|network|inc-other\n");
  // A higher one replaces it, and keeps the incident its alert joined.
  s.graph->write(diagnosis(head + "2" + tail + "host_bottleneck\"}"));
  CHECK(stored() == "2|host_bottleneck|inc-other\n");
  store::AlertFilter filter;
  filter.run_id = "pretrain-4821";
  filter.kind = "diagnosis";
  auto alerts = s.graph->alerts(filter);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].alert.revision == 2);
  CHECK(alerts[0].alert.cause == "host_bottleneck");
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: version 6 built by today's code is the schema the frozen v6 store was written with") {
  std::string dir = fresh_dir("schema-v6");
  std::string built = dir + "/built.db";
  { store::sqlite::open(built, store::OpenMode::kReadWrite, 6); }
  CHECK(store::sqlite::schema_version(built) == 6);
  CHECK(schema_of(built) == schema_of(v6_store(dir)));
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: a version-6 store opens at version 7: its alerts are open until a closing revision ends them") {
  std::string dir = fresh_dir("migrate-v6");
  std::string db = v6_store(dir);
  REQUIRE(store::sqlite::schema_version(db) == 6);
  std::string before;
  {
    SqliteFile f(db);
    before = f.rows("SELECT * FROM alerts ORDER BY alert_id");
  }
  store::Store s = store::open_store(url_of(db));
  CHECK(s.schema_version == store::sqlite::kSchemaVersion);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT version, description FROM schema_version WHERE version = 7") ==
          "7|alert ends (alerts.ends_ns)\n");
    CHECK(f.rows("SELECT * FROM alerts ORDER BY alert_id") == with_column(before, "NULL"));
  }
  store::AlertFilter open;
  open.run_id = "pretrain-4821";
  open.resolved = false;
  CHECK(s.graph->alerts(open).size() == 3);
  // The data_starvation alert's closing revision (revision 2, ends_ns) ends it.
  store::GraphBatch b;
  store::StoredAlert a;
  a.json =
      R"({"alert_id":"0c0ffee000000002","revision":2,"kind":"data_starvation","severity":"warning","time_ns":1767225887861841318,"ends_ns":1767225897861841318,"run_id":"pretrain-4821","step":130,"rank":2,"node":"gpu-node-0","gpu":2,"summary":"DATA STARVATION: rank 2"})";
  std::string why;
  REQUIRE(jsonl::decode_alert(a.json, &a.alert, &why));
  b.alerts.push_back(a);
  s.graph->write(b);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT revision, ends_ns FROM alerts WHERE alert_id = '0c0ffee000000002'") ==
          "2|1767225897861841318\n");
  }
  store::AlertFilter resolved = open;
  resolved.resolved = true;
  auto ended = s.graph->alerts(resolved);
  REQUIRE(ended.size() == 1);
  CHECK(ended[0].alert.alert_id == "0c0ffee000000002");
  CHECK(ended[0].alert.ends_ns == 1767225897861841318);
  CHECK(s.graph->alerts(open).size() == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("migration: a version-7 store opens at version 8: its steps have no breakdown, new steps keep theirs") {
  std::string dir = fresh_dir("migrate-v7");
  std::string db = dir + "/v7.db";
  { store::sqlite::open(db, store::OpenMode::kReadWrite, 7); }
  {
    SqliteFile f(db);
    f.exec(
        "INSERT INTO step_stats (run_id, step, time_ns, world_size, reported, step_ms, work_min_ms, work_p50_ms, "
        "work_p95_ms, work_p99_ms, work_max_ms, slowest_rank, straggler_ratio, tokens, loss) "
        "VALUES ('run-7', 1, 1000, 8, 8, 2000, 1800, 1900, 1950, 1990, 2000, 3, 1.05, 0, 2.5)");
  }
  REQUIRE(store::sqlite::schema_version(db) == 7);
  store::Store s = store::open_store(url_of(db));
  CHECK(s.schema_version == store::sqlite::kSchemaVersion);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT version, description FROM schema_version WHERE version = 8") ==
          "8|step time breakdown (step_stats.forward_ms, backward_ms, optimizer_ms, comm_ms, data_wait_ms)\n");
    CHECK(f.rows("SELECT step, loss, forward_ms, backward_ms, optimizer_ms, comm_ms, data_wait_ms FROM step_stats") ==
          "1|2.5|NULL|NULL|NULL|NULL|NULL\n");
  }
  auto old_steps = s.graph->steps("run-7", {}, 10);
  REQUIRE(old_steps.size() == 1);
  CHECK(old_steps[0].stats.loss == 2.5);
  CHECK_FALSE(old_steps[0].stats.forward_ms);
  CHECK_FALSE(old_steps[0].stats.data_wait_ms);
  store::GraphBatch b;
  store::StepRow row;
  row.time_ns = 2000;
  row.stats.run_id = Symbol::intern("run-7");
  row.stats.step = 2;
  row.stats.world_size = 8;
  row.stats.reported = 8;
  row.stats.step_ms = 2100;
  row.stats.forward_ms = 600;
  row.stats.backward_ms = 1200.5;
  row.stats.optimizer_ms = 90;
  row.stats.data_wait_ms = 12.25;  // comm_ms not reported
  b.steps.push_back(row);
  s.graph->write(b);
  auto steps = s.graph->steps("run-7", {}, 10);
  REQUIRE(steps.size() == 2);
  CHECK(steps[1].stats.forward_ms == 600);
  CHECK(steps[1].stats.backward_ms == 1200.5);
  CHECK(steps[1].stats.optimizer_ms == 90);
  CHECK_FALSE(steps[1].stats.comm_ms);
  CHECK(steps[1].stats.data_wait_ms == 12.25);
  std::filesystem::remove_all(dir);
}

// A block of encoding 1 (what a v8 store holds), as the v8 writer packed it:
// per sample time_ns i64, gpu i32, presence u32, five f64 and four i64 fields.
std::string encoding1_block(const std::vector<std::tuple<int64_t, int32_t, double, int64_t>>& samples) {
  std::string out;
  auto put = [&out](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (const auto& [t, gpu, temp, xid] : samples) {
    put(t);
    put(gpu);
    put(uint32_t{(1u << 2) | (xid ? 1u << 7 : 0u)});  // temp_c, and xid when set
    for (double v : {0.0, 0.0, temp, 0.0, 0.0}) put(v);
    for (int64_t v : {int64_t{0}, int64_t{0}, xid, int64_t{0}}) put(v);
  }
  return out;
}

TEST_CASE(
    "migration: a version-8 store opens at the current version: its GPU blocks of fixed records still read, new "
    "ones are compact columns") {
  std::string dir = fresh_dir("migrate-v8");
  std::string db = dir + "/v8.db";
  { store::sqlite::open(db, store::OpenMode::kReadWrite, 8); }
  {
    std::string blob = encoding1_block({{100, 0, 61.5, 0}, {100, 1, 62.5, 79}, {200, 0, 63.5, 0}});
    SqliteFile f(db);
    f.exec(
        "INSERT INTO gpu_sample_blocks (node, first_ns, last_ns, kept_for, samples, data) "
        "VALUES ('node-8', 100, 200, 'failure', 3, " +
        sql_blob(blob) + ")");
  }
  store::Store s = store::open_store(url_of(db));
  CHECK(s.schema_version == store::sqlite::kSchemaVersion);
  {
    SqliteFile f(db);
    CHECK(f.rows("SELECT version, description FROM schema_version WHERE version >= 9") ==
          "9|GPU sample blocks as columns (gpu_sample_blocks.encoding)\n"
          "10|GPU sample blocks as compact columns (gpu_sample_blocks.encoding 3)\n");
    CHECK(f.rows("SELECT node, encoding FROM gpu_sample_blocks") == "node-8|1\n");
  }
  auto old_rows = s.metrics->gpu_samples({"node-8"}, INT64_MIN, INT64_MAX);
  REQUIRE(old_rows.size() == 3);
  CHECK(old_rows[1].time_ns == 100);
  CHECK(old_rows[1].sample.gpu == 1);
  CHECK(old_rows[1].sample.temp_c == 62.5);
  CHECK(old_rows[1].sample.has(Gpu::F::xid));
  CHECK(old_rows[1].sample.xid == 79);
  CHECK_FALSE(old_rows[0].sample.has(Gpu::F::xid));
  CHECK_FALSE(old_rows[0].sample.has(Gpu::F::util_pct));
  CHECK(old_rows[2].kept_for == "failure");

  // New blocks are compact columns (encoding 3): the same samples read back,
  // presence and all, fields no sample has taking no room, and samples of
  // mixed presence kept apart.
  store::MetricBatch mb;
  auto sample = [](int64_t t, int32_t gpu, double util, std::optional<int64_t> xid) {
    store::GpuSampleRow r = gpu_row("node-9", t, gpu);
    r.sample.util_pct = util;
    r.sample.set_present(Gpu::F::util_pct);
    if (xid) r.sample.xid = *xid, r.sample.set_present(Gpu::F::xid);
    return r;
  };
  mb.gpu_samples = {sample(300, 0, 91.25, std::nullopt), sample(300, 1, 92.5, 48), sample(400, 0, 93.75, std::nullopt)};
  s.metrics->write(mb);
  {
    SqliteFile f(db);
    // Header 12; times 300, +0, +100 (8 + 1 + 2); GPUs 0, 1, 0 (3); presences
    // util_pct, util_pct and xid, util_pct (1 + 2 + 1); util_pct and xid, 3 values each.
    CHECK(f.rows("SELECT node, encoding, samples, length(data) FROM gpu_sample_blocks ORDER BY node") ==
          "node-8|1|3|264\nnode-9|3|3|" + std::to_string(12 + 11 + 3 + 4 + 2 * 3 * 8) + "\n");
  }
  auto new_rows = s.metrics->gpu_samples({"node-9"}, INT64_MIN, INT64_MAX);
  const auto written = mb.gpu_samples.rows();
  REQUIRE(new_rows.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(new_rows[i].time_ns == written[i].time_ns);
    CHECK(new_rows[i].kept_for == "recent");
    CHECK(new_rows[i].sample == written[i].sample);
  }
  // A block whose bytes do not hold its samples is refused, not misread.
  {
    SqliteFile f(db);
    f.exec("UPDATE gpu_sample_blocks SET samples = 4 WHERE node = 'node-9'");
  }
  CHECK_THROWS_WITH_AS(s.metrics->gpu_samples({"node-9"}, INT64_MIN, INT64_MAX), doctest::Contains("corrupt GPU block"),
                       store::StoreError);
  std::filesystem::remove_all(dir);
}
