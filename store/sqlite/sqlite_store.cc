// The embedded store: one SQLite file in WAL mode (readers never wait for the
// writer, so `runlens serve` can read while `runlens run` writes). Every
// statement is a constant string with bound parameters, prepared once per
// connection; no SQL is ever built from values.
#include "store/sqlite/sqlite_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include "formats/json_reader.h"
#include "formats/json_writer.h"
#include "formats/jsonl_codec.h"
#include "schema/bytes.h"
#include "schema/symbol_index.h"
#include "sqlite_fresh_schema.h"
#include "store/sqlite/background_sync.h"
#include "store/sqlite/fresh_image.h"
#include "store/sqlite/gpu_blocks.h"
#include "store/sqlite/sqlite_schema.h"
#include "store/sqlite/wal_checkpointer.h"
#include "store/store.h"

namespace runlens::store {

namespace {

using sqlite::kSchemaVersion;

// --- a connection and its statements --------------------------------------------------

class Db {
 public:
  Db(const std::string& path, OpenMode mode) : path_(path) {
    int flags = mode == OpenMode::kReadOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    flags |= SQLITE_OPEN_NOMUTEX;  // one thread at a time uses a connection
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw StoreError("cannot open store " + path + ": " + why);
    }
    sqlite3_busy_timeout(db_, 10000);
    sqlite3_extended_result_codes(db_, 1);
  }
  ~Db() {
    if (!place_at_.empty()) {
      try {
        place();
      } catch (const StoreError&) {  // left where it was built
      }
    }
    close();
  }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* raw() const { return db_; }
  const std::string& path() const { return path_; }

  // A prepared statement for `sql` that no live Query holds: queries nest
  // (walking the lineage reads runs while reading checkpoints).
  sqlite3_stmt* acquire(const char* sql) {
    if (!db_) throw StoreError("store " + path_ + " is closed");
    auto& list = cache_[sql];
    for (auto& [st, busy] : list) {
      if (!busy) {
        busy = true;
        return st;
      }
    }
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK) {
      fail("cannot prepare statement");
    }
    list.emplace_back(st, true);
    return st;
  }
  void release(const char* sql, sqlite3_stmt* st) {
    for (auto& [s, busy] : cache_[sql]) {
      if (s == st) busy = false;
    }
  }

  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t changes() const { return sqlite3_changes64(db_); }

  // Statements without values (schema, pragmas, transactions).
  void exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      failed_ = true;
      std::string why = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      throw StoreError("store " + path_ + ": " + why);
    }
  }

  [[noreturn]] void fail(const std::string& what) {
    failed_ = true;
    throw StoreError("store " + path_ + ": " + what + ": " + sqlite3_errmsg(db_));
  }

  // Checkpoints the log on a thread of its own from now on (the writing
  // connection of a store in WAL mode).
  void checkpoint_in_background() { checkpointer_ = std::make_unique<sqlite::WalCheckpointer>(db_, path_); }

  // This connection builds a new store whole (open_db): place() puts it at
  // `final_path`.
  void build_for(std::string final_path) { place_at_ = std::move(final_path); }
  bool building() const { return !place_at_.empty(); }
  // A statement or transaction failed on this connection. A store built whole
  // has no log, so what a failed transaction wrote cannot be rolled back:
  // place() then removes the store instead.
  void mark_failed() { failed_ = true; }

  // A store built whole is made durable by one sync, when it is put in
  // place, and that sync is on the run's clock: 30 MB of a 500-step replay's
  // store took 30-50 ms to sync after the last row, and 20-35 ms even when
  // its pages had been written back already (docs/performance.md, "A store
  // built whole, synced on the way"): the file system's journal commit and
  // the disk's cache flush wait for all that was written since the last
  // sync. So while it is built a thread of its own syncs it after each
  // commit (one sync at a time; commits during one are covered by the
  // next), and place()'s sync waits for the last commits only. Those syncs
  // promise nothing: the store is not at its path until place() synced it.
  void after_commit() {
    if (!building()) return;
    if (!syncer_) syncer_ = std::make_unique<sqlite::BackgroundSync>(path_);
    syncer_->request();
  }

  // A store built whole, put in place: back in WAL mode as every store is,
  // closed, synced, then linked to its path, which must still be free (link(),
  // unlike rename(), fails where a file appeared meanwhile). Then the name
  // it was built under goes, and the directory is synced. When that fails the
  // built store stays under that name, which the error gives. One that a
  // failed write may have left half-written is removed, and nothing is put
  // in place.
  void place() {
    const std::string to = std::exchange(place_at_, "");
    if (to.empty()) return;
    if (failed_) {
      close();
      ::unlink(path_.c_str());
      throw StoreError("the new store was not put in place at " + to +
                       ": a write to it failed, and a store built whole has no log to roll it back; it is removed");
    }
    auto fail_place = [&](const std::string& why) {
      throw StoreError("cannot put the new store " + path_ + " in place at " + to + ": " + why +
                       "; the store is left at " + path_);
    };
    // A write-back the syncs on the way saw fail is not reported again to
    // the sync below (background_sync.h): theirs counts as its.
    const int synced_on_the_way = syncer_ ? syncer_->stop() : 0;
    char* err = nullptr;
    if (sqlite3_exec(db_, "PRAGMA journal_mode = WAL", nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      close();
      fail_place(why);
    }
    close();
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fdatasync(fd) != 0 || synced_on_the_way != 0) {
      const int e = synced_on_the_way != 0 ? synced_on_the_way : errno;
      if (fd >= 0) ::close(fd);
      fail_place(std::strerror(e));
    }
    ::close(fd);
    if (::link(path_.c_str(), to.c_str()) != 0) {
      const int e = errno;
      fail_place(e == EEXIST ? "a file appeared there while it was built" : std::strerror(e));
    }
    ::unlink(path_.c_str());
    sync_directory(to);
  }

 private:
  void close() {
    syncer_.reset();        // waits for a sync in flight (place() took its error)
    checkpointer_.reset();  // before the close, which checkpoints what is left
    for (auto& [sql, list] : cache_) {
      for (auto& [st, busy] : list) sqlite3_finalize(st);
    }
    cache_.clear();
    if (db_) sqlite3_close(db_);
    db_ = nullptr;
  }

  static void sync_directory(const std::string& file) {
    std::string dir = std::filesystem::path(file).parent_path().string();
    const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
  }

  std::string path_;
  std::string place_at_;                            // while building a new store whole: where it goes
  bool failed_ = false;                             // mark_failed()
  std::unique_ptr<sqlite::BackgroundSync> syncer_;  // after_commit()'s, while building
  sqlite3* db_ = nullptr;
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer_;
  // By the address of the SQL text (a literal or a static string): (statement, in use).
  std::unordered_map<const char*, std::vector<std::pair<sqlite3_stmt*, bool>>> cache_;
};

// One use of a prepared statement: values bound in order with arg(), rows
// read with next(); reset on destruction so the statement can be reused.
class Query {
 public:
  Query(Db& db, const char* sql) : db_(db), sql_(sql), st_(db.acquire(sql)) {}
  ~Query() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
    db_.release(sql_, st_);
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  Query& arg(int64_t v) { return check(sqlite3_bind_int64(st_, ++n_, v)); }
  Query& arg(int32_t v) { return arg(static_cast<int64_t>(v)); }
  Query& arg(bool v) { return arg(static_cast<int64_t>(v ? 1 : 0)); }
  // Non-finite numbers are kept as the text JSON output uses ("NaN"): SQLite
  // would store a NaN as NULL, and a NaN loss is exactly what must not vanish.
  Query& arg(double v) {
    if (std::isfinite(v)) return check(sqlite3_bind_double(st_, ++n_, v));
    return arg_text(std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
  }
  Query& arg_text(std::string_view v) {
    return check(sqlite3_bind_text(st_, ++n_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Query& arg(const std::string& v) { return arg_text(v); }
  Query& arg(const char* v) { return arg_text(v); }
  Query& null() { return check(sqlite3_bind_null(st_, ++n_)); }
  Query& blob(const std::string& v) {
    return check(sqlite3_bind_blob(st_, ++n_, v.data(), static_cast<int>(v.size()), SQLITE_STATIC));
  }
  // Empty text is stored as NULL (absent).
  Query& opt_text(std::string_view v) { return v.empty() ? null() : arg_text(v); }
  template <class T>
  Query& opt(const std::optional<T>& v) {
    return v ? arg(*v) : null();
  }

  // Steps once; true while there is a row.
  bool next() {
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    db_.fail("statement failed");
  }
  void run() {
    while (next()) {
    }
  }

  bool is_null(int c) const { return sqlite3_column_type(st_, c) == SQLITE_NULL; }
  int64_t i64(int c) const { return sqlite3_column_int64(st_, c); }
  double f64(int c) const {
    if (sqlite3_column_type(st_, c) == SQLITE_TEXT) {
      std::string_view t = text_view(c);
      if (t == "NaN") return std::numeric_limits<double>::quiet_NaN();
      if (t == "Infinity") return std::numeric_limits<double>::infinity();
      if (t == "-Infinity") return -std::numeric_limits<double>::infinity();
    }
    return sqlite3_column_double(st_, c);
  }
  std::string text(int c) const { return std::string(text_view(c)); }
  std::string_view blob(int c) const {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, c));
    return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(st_, c))) : std::string_view();
  }
  std::optional<int64_t> opt_i64(int c) const { return is_null(c) ? std::nullopt : std::optional<int64_t>(i64(c)); }
  std::optional<double> opt_f64(int c) const { return is_null(c) ? std::nullopt : std::optional<double>(f64(c)); }

 private:
  std::string_view text_view(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
    return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(st_, c))) : std::string_view();
  }
  Query& check(int rc) {
    if (rc != SQLITE_OK) db_.fail("cannot bind parameter " + std::to_string(n_));
    return *this;
  }
  Db& db_;
  const char* sql_;
  sqlite3_stmt* st_;
  int n_ = 0;
};

class Transaction {
 public:
  explicit Transaction(Db& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (done_) return;
    sqlite3_exec(db_.raw(), "ROLLBACK", nullptr, nullptr, nullptr);
    db_.mark_failed();  // a store built whole has no log to roll back with
  }
  void commit() {
    db_.exec("COMMIT");
    done_ = true;
    db_.after_commit();
  }

 private:
  Db& db_;
  bool done_ = false;
};

int read_version(Db& db) {
  Query has(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
  if (!has.next() || has.i64(0) == 0) return 0;
  Query v(db, "SELECT coalesce(max(version), 0) FROM schema_version");
  return v.next() ? static_cast<int>(v.i64(0)) : 0;
}

void migrate(Db& db, int target) {
  int current = read_version(db);
  int latest = sqlite_migrations().back().version;
  if (current > latest) {
    throw StoreError("store " + db.path() + " has schema version " + std::to_string(current) +
                     ", newer than this runlens understands (" + std::to_string(latest) + ")");
  }
  if (current == 0 && target == latest) {
    // A new store: the schema the migrations leave, made in one transaction
    // (generated by the build from them: store/sqlite/gen/fresh_schema_gen.cc).
    static_assert(kFreshSchemaVersion == kSchemaVersion, "the generated schema is not the current one");
    Transaction tx(db);
    // Re-read inside the write lock: another process may have made it meanwhile.
    if (read_version(db) == 0) {
      db.exec(kFreshSchema);
      tx.commit();
      return;
    }
    current = read_version(db);
  }
  for (const Migration& m : sqlite_migrations()) {
    if (m.version <= current || m.version > target) continue;
    Transaction tx(db);
    // Re-read inside the write lock: another process may have migrated meanwhile.
    if (read_version(db) >= m.version) continue;
    db.exec(m.sql);
    Query(db, "INSERT INTO schema_version (version, description) VALUES (?, ?)")
        .arg(m.version)
        .arg(m.description)
        .run();
    tx.commit();
  }
}

// A store built whole is built beside its path under this name and a
// suffix, PID-N.
constexpr std::string_view kBuilding = ".building-";

// Stores that a process killed while it built them whole left beside `path`
// (PATH.building-PID-N whose process is gone), removed: nothing reads them,
// and one killed in a transaction is not whole. Those of live processes stay.
void remove_stale_builds(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + std::string(kBuilding);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(p.parent_path().empty() ? fs::path(".") : p.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const char* digits = name.c_str() + prefix.size();
    char* end = nullptr;
    const long pid = std::strtol(digits, &end, 10);
    if (end == digits || *end != '-' || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    fs::remove(entry.path(), ec);
  }
}

std::shared_ptr<Db> open_db(const std::string& requested, OpenMode mode, int target_version, bool build_whole) {
  std::string path = requested;
  // A new store built whole goes beside its path, with no log (its pages are
  // written once) and no syncs; Db::place() syncs it once and puts it in place.
  const bool is_new = mode == OpenMode::kReadWrite && sqlite::free_file_path(requested);
  const bool whole = is_new && build_whole && target_version == kSchemaVersion;
  if (mode == OpenMode::kReadWrite) {
    // A new store's directory is made here (an error shows when opening).
    auto parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (is_new) remove_stale_builds(path);
    if (whole) {
      static std::atomic<unsigned> next{0};
      path += std::string(kBuilding) + std::to_string(getpid()) + "-" + std::to_string(next++);
    }
    // A new store at the current version is written whole from the build's
    // image (store/sqlite/fresh_image.h); migrate() below then finds it done.
    if (target_version == kSchemaVersion) sqlite::place_fresh_image(path);
  }
  auto db = std::make_shared<Db>(path, mode);
  if (mode == OpenMode::kReadWrite) {
    // The page size of a new store made here, not from the image.
    db->exec(("PRAGMA page_size = " + std::to_string(kSqlitePageSize)).c_str());
    if (whole) {
      db->exec("PRAGMA journal_mode = OFF");
      db->exec("PRAGMA synchronous = OFF");
      db->build_for(requested);
    } else {
      // WAL: one writer, many readers that never block on it. NORMAL sync is
      // durable across application crashes and cheap per commit.
      db->exec("PRAGMA journal_mode = WAL");
      db->exec("PRAGMA synchronous = NORMAL");
      // The log is checkpointed on a thread of its own (store/sqlite/
      // wal_checkpointer.h): the writer never waits for the copy and its
      // fsyncs, and what is left for the checkpoint at close (on the exit
      // path of a replay) stays small. An in-memory store has no log.
      Query journal(*db, "PRAGMA journal_mode");
      if (journal.next() && journal.text(0) == "wal") db->checkpoint_in_background();
    }
    migrate(*db, target_version);
  } else {
    int v = read_version(*db);
    if (v != kSchemaVersion) {
      throw StoreError("store " + path + " has schema version " + std::to_string(v) + ", this runlens reads version " +
                       std::to_string(kSchemaVersion) +
                       (v < kSchemaVersion ? " (open it read-write once to migrate)" : ""));
    }
  }
  return db;
}

// --- packed blocks of high-cardinality rows ------------------------------------------
//
// Full-resolution rank rows come a whole step at a time (a thousand ranks), and
// GPU rows a node at a time: SQLite keeps each step of a run, and each batch of
// a node's GPU samples, as one row whose blob packs the rows (fixed-size
// little-endian records), which makes them cheap to write and small. The
// interface stays row by row; an analytics store would keep plain rows.

static_assert(std::endian::native == std::endian::little, "blocks are little-endian");

template <class T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T take(const char*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

// gpu i32, samples u32, then per field (util_pct, temp_c, power_w,
// sm_clock_mhz, mem_used_bytes) n u32 and mean, min, max f32 (a rollup is a
// summary: float precision is plenty, and it halves the largest table), then
// throttle_reasons i64 and xid i64.
constexpr size_t kRollupRecord = 4 + 4 + 5 * (4 + 3 * 4) + 2 * 8;

void pack_rollup(std::string* out, const GpuRollupRow& r) {
  put<int32_t>(out, r.gpu);
  put<uint32_t>(out, static_cast<uint32_t>(r.samples));
  for (const Agg* a : {&r.util_pct, &r.temp_c, &r.power_w, &r.sm_clock_mhz, &r.mem_used_bytes}) {
    put<uint32_t>(out, static_cast<uint32_t>(a->n));
    put<float>(out, static_cast<float>(a->n ? a->sum / static_cast<double>(a->n) : 0));
    put<float>(out, static_cast<float>(a->min));
    put<float>(out, static_cast<float>(a->max));
  }
  put<int64_t>(out, r.throttle_reasons);
  put<int64_t>(out, r.xid);
}

GpuRollupRow unpack_rollup(const char*& p) {
  GpuRollupRow r;
  r.gpu = take<int32_t>(p);
  r.samples = take<uint32_t>(p);
  for (Agg* a : {&r.util_pct, &r.temp_c, &r.power_w, &r.sm_clock_mhz, &r.mem_used_bytes}) {
    a->n = take<uint32_t>(p);
    a->sum = static_cast<double>(take<float>(p)) * static_cast<double>(a->n);
    a->min = take<float>(p);
    a->max = take<float>(p);
  }
  r.throttle_reasons = take<int64_t>(p);
  r.xid = take<int64_t>(p);
  return r;
}

// --- the run graph -------------------------------------------------------------------

constexpr const char* kRunColumns =
    "run_id, tenant, experiment_id, job_id, model_id, model_version, dataset_version, code_commit, world_size, "
    "gpu_peak_flops, model_flops_per_token, status, end_reason, started_ns, ended_ns, last_time_ns, step, "
    "tokens_processed, restarts, loss, val_loss, lr, grad_norm, mfu, tokens_per_s";

RunRow read_run(const Query& q) {
  RunRow r;
  r.run_id = q.text(0);
  r.tenant = q.text(1);
  r.experiment_id = q.text(2);
  r.job_id = q.text(3);
  r.model_id = q.text(4);
  r.model_version = q.text(5);
  r.dataset_version = q.text(6);
  r.code_commit = q.text(7);
  r.world_size = static_cast<int32_t>(q.i64(8));
  r.gpu_peak_flops = q.opt_f64(9);
  r.model_flops_per_token = q.opt_f64(10);
  r.status = q.text(11);
  r.end_reason = q.text(12);
  r.started_ns = q.i64(13);
  r.ended_ns = q.opt_i64(14);
  r.last_time_ns = q.i64(15);
  r.step = q.opt_i64(16);
  r.tokens_processed = q.i64(17);
  r.restarts = static_cast<int32_t>(q.i64(18));
  r.loss = q.opt_f64(19);
  r.val_loss = q.opt_f64(20);
  r.lr = q.opt_f64(21);
  r.grad_norm = q.opt_f64(22);
  r.mfu = q.opt_f64(23);
  r.tokens_per_s = q.opt_f64(24);
  return r;
}

constexpr const char* kStepColumns =
    "run_id, step, time_ns, world_size, reported, step_ms, work_min_ms, work_p50_ms, work_p95_ms, work_p99_ms, "
    "work_max_ms, slowest_rank, straggler_ratio, tokens, tokens_per_s, mfu, data_wait_ratio, communication_ratio, "
    "loss, val_loss, lr, grad_norm, forward_ms, backward_ms, optimizer_ms, comm_ms, data_wait_ms";

StepRow read_step(const Query& q) {
  StepRow r;
  StepStats& s = r.stats;
  s.run_id = Symbol::intern(q.text(0));
  s.step = q.i64(1);
  r.time_ns = q.i64(2);
  s.world_size = static_cast<int32_t>(q.i64(3));
  s.reported = static_cast<int32_t>(q.i64(4));
  s.step_ms = q.f64(5);
  s.work_min = q.f64(6);
  s.work_p50 = q.f64(7);
  s.work_p95 = q.f64(8);
  s.work_p99 = q.f64(9);
  s.work_max = q.f64(10);
  s.slowest_rank = q.is_null(11) ? -1 : static_cast<int32_t>(q.i64(11));
  s.straggler_ratio = q.f64(12);
  s.tokens = q.i64(13);
  s.tokens_per_s = q.opt_f64(14);
  s.mfu = q.opt_f64(15);
  s.data_wait_ratio = q.opt_f64(16);
  s.communication_ratio = q.opt_f64(17);
  s.loss = q.opt_f64(18);
  s.val_loss = q.opt_f64(19);
  s.lr = q.opt_f64(20);
  s.grad_norm = q.opt_f64(21);
  s.forward_ms = q.opt_f64(22);
  s.backward_ms = q.opt_f64(23);
  s.optimizer_ms = q.opt_f64(24);
  s.comm_ms = q.opt_f64(25);
  s.data_wait_ms = q.opt_f64(26);
  return r;
}

class SqliteRunGraph final : public RunGraph {
 public:
  explicit SqliteRunGraph(std::shared_ptr<Db> db) : db_(std::move(db)) {}

  void write(const GraphBatch& b) override {
    if (b.empty()) return;
    Db& db = *db_;
    Transaction tx(db);
    for (const auto& run : b.replace_runs) {
      for (const char* sql : {"DELETE FROM runs WHERE run_id = ?", "DELETE FROM run_config WHERE run_id = ?",
                              "DELETE FROM rank_allocations WHERE run_id = ?",
                              "DELETE FROM checkpoints WHERE run_id = ?", "DELETE FROM artifacts WHERE run_id = ?",
                              "DELETE FROM alerts WHERE run_id = ?", "DELETE FROM incidents WHERE run_id = ?",
                              "DELETE FROM timeline WHERE run_id = ?", "DELETE FROM step_stats WHERE run_id = ?"}) {
        Query(db, sql).arg(run).run();
      }
    }
    for (const auto& r : b.runs) write_run(r);
    for (const auto& a : b.allocations) {
      if (!a.node.empty()) {
        Query(db, "INSERT OR IGNORE INTO clusters (cluster_id) VALUES ('default')").run();
        Query(db, "INSERT OR IGNORE INTO nodes (node) VALUES (?)").arg(a.node).run();
        if (a.gpu >= 0) Query(db, "INSERT OR IGNORE INTO gpus (node, gpu) VALUES (?, ?)").arg(a.node).arg(a.gpu).run();
      }
      Query(db, "INSERT OR REPLACE INTO rank_allocations (run_id, rank, node, gpu) VALUES (?, ?, ?, ?)")
          .arg(a.run_id)
          .arg(a.rank)
          .opt_text(a.node)
          .opt(a.gpu >= 0 ? std::optional<int64_t>(a.gpu) : std::nullopt)
          .run();
    }
    for (const auto& c : b.checkpoints) {
      Query(db,
            "INSERT INTO checkpoints (run_id, checkpoint_id, step, time_ns, duration_ms, size_bytes, "
            "upload_ms, ok, uri, sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            // An upsert, not a replace: what the registry added (parent, content hash) stays.
            "ON CONFLICT (run_id, checkpoint_id) DO UPDATE SET step = excluded.step, time_ns = excluded.time_ns, "
            "duration_ms = excluded.duration_ms, size_bytes = excluded.size_bytes, upload_ms = excluded.upload_ms, "
            "ok = excluded.ok, uri = coalesce(excluded.uri, checkpoints.uri), "
            "sha256 = coalesce(excluded.sha256, checkpoints.sha256)")
          .arg(c.run_id)
          .arg(c.checkpoint_id)
          .opt(c.step)
          .arg(c.time_ns)
          .opt(c.duration_ms)
          .opt(c.size_bytes)
          .opt(c.upload_ms)
          .opt(c.ok)
          .opt_text(c.uri)
          .opt_text(c.sha256)
          .run();
    }
    for (const auto& a : b.artifacts) {
      Query(db,
            "INSERT OR REPLACE INTO artifacts (artifact_id, run_id, artifact_type, object_uri, checksum, "
            "created_at_ns, checkpoint_id) VALUES (?, ?, ?, ?, ?, ?, ?)")
          .arg(a.artifact_id)
          .arg(a.run_id)
          .arg(a.artifact_type)
          .arg(a.object_uri)
          .opt_text(a.checksum)
          .arg(a.created_at_ns)
          .opt_text(a.checkpoint_id)
          .run();
    }
    for (const auto& s : b.alerts) {
      const Alert& a = s.alert;
      // The highest revision of an alert_id wins (a lower one, late, never
      // replaces it); a revision keeps the incident its alert joined first.
      Query(db,
            "INSERT INTO alerts (alert_id, run_id, kind, severity, time_ns, step, rank, node, gpu, cause, "
            "json, incident_id, revision, ends_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (alert_id) DO UPDATE SET run_id = excluded.run_id, kind = excluded.kind, "
            "severity = excluded.severity, time_ns = excluded.time_ns, step = excluded.step, rank = excluded.rank, "
            "node = excluded.node, gpu = excluded.gpu, cause = excluded.cause, json = excluded.json, "
            "incident_id = CASE WHEN excluded.revision > alerts.revision THEN coalesce(alerts.incident_id, "
            "excluded.incident_id) ELSE excluded.incident_id END, revision = excluded.revision, ends_ns = "
            "excluded.ends_ns "
            "WHERE excluded.revision >= alerts.revision")
          .arg(a.alert_id)
          .opt_text(a.run_id.str())
          .arg(a.kind)
          .arg_text(severity_name(a.severity))
          .arg(a.time_ns)
          .opt(a.step)
          .opt(a.rank)
          .opt_text(a.node.str())
          .opt(a.gpu)
          .opt_text(a.cause)
          .arg(s.json)
          .opt_text(s.incident_id)
          .arg(static_cast<int64_t>(a.revision))
          .opt(a.ends_ns)
          .run();
    }
    for (const auto& i : b.incidents) {
      Query(db,
            "INSERT OR REPLACE INTO incidents (incident_id, run_id, kind, severity, opened_ns, opened_step, last_ns, "
            "last_step, alert_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
          .arg(i.incident_id)
          .opt_text(i.run_id)
          .arg(i.kind)
          .arg(i.severity)
          .arg(i.opened_ns)
          .opt(i.opened_step)
          .arg(i.last_ns)
          .opt(i.last_step)
          .arg(i.alert_count)
          .run();
    }
    for (const auto& e : b.timeline) {
      Query(db,
            "INSERT INTO timeline (run_id, step, time_ns, kind, severity, summary, ref, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
          .arg(e.run_id)
          .opt(e.step)
          .arg(e.time_ns)
          .arg(e.kind)
          .arg(e.severity)
          .arg(e.summary)
          .opt_text(e.ref)
          .opt_text(e.detail_json)
          .run();
    }
    for (const auto& r : b.steps) {
      const StepStats& s = r.stats;
      Query(db,
            "INSERT OR REPLACE INTO step_stats (run_id, step, time_ns, world_size, reported, step_ms, work_min_ms, "
            "work_p50_ms, work_p95_ms, work_p99_ms, work_max_ms, slowest_rank, straggler_ratio, tokens, tokens_per_s, "
            "mfu, data_wait_ratio, communication_ratio, loss, val_loss, lr, grad_norm, forward_ms, backward_ms, "
            "optimizer_ms, comm_ms, data_wait_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
          .arg_text(s.run_id.str())
          .arg(s.step)
          .arg(r.time_ns)
          .arg(s.world_size)
          .arg(s.reported)
          .arg(s.step_ms)
          .arg(s.work_min)
          .arg(s.work_p50)
          .arg(s.work_p95)
          .arg(s.work_p99)
          .arg(s.work_max)
          .opt(s.slowest_rank >= 0 ? std::optional<int64_t>(s.slowest_rank) : std::nullopt)
          .arg(s.straggler_ratio)
          .arg(s.tokens)
          .opt(s.tokens_per_s)
          .opt(s.mfu)
          .opt(s.data_wait_ratio)
          .opt(s.communication_ratio)
          .opt(s.loss)
          .opt(s.val_loss)
          .opt(s.lr)
          .opt(s.grad_norm)
          .opt(s.forward_ms)
          .opt(s.backward_ms)
          .opt(s.optimizer_ms)
          .opt(s.comm_ms)
          .opt(s.data_wait_ms)
          .run();
    }
    tx.commit();
  }

  std::vector<RunRow> runs(const RunFilter& f) override {
    static const std::string sql = std::string("SELECT ") + kRunColumns +
                                   " FROM runs WHERE (?1 = '' OR experiment_id = ?1) AND (?2 = '' OR model_id = ?2) "
                                   "AND (?3 = '' OR status = ?3) AND (?5 IS NULL OR started_ns >= ?5) "
                                   "AND (?6 IS NULL OR started_ns <= ?6) AND (?7 = '' OR instr(lower(run_id), ?7) "
                                   "OR instr(lower(coalesce(job_id, '')), ?7) "
                                   "OR instr(lower(coalesce(experiment_id, '')), ?7) "
                                   "OR instr(lower(coalesce(model_id, '')), ?7)) "
                                   "AND (?8 = '' OR substr(run_id, 1, length(?8)) = ?8) "
                                   "ORDER BY started_ns DESC, run_id LIMIT ?4";
    std::string text = f.text;
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    Query q(*db_, sql.c_str());
    q.arg(f.experiment_id)
        .arg(f.model_id)
        .arg(f.status)
        .arg(f.limit)
        .opt(f.since_ns)
        .opt(f.until_ns)
        .arg(text)
        .arg(f.run_id_prefix);
    std::vector<RunRow> out;
    while (q.next()) out.push_back(read_run(q));
    return out;
  }

  std::optional<RunRow> run(const std::string& run_id) override {
    static const std::string sql = std::string("SELECT ") + kRunColumns + " FROM runs WHERE run_id = ?";
    std::optional<RunRow> row;
    {
      Query q(*db_, sql.c_str());
      q.arg(run_id);
      if (!q.next()) return std::nullopt;
      row = read_run(q);
    }
    Query c(*db_, "SELECT key, number, text FROM run_config WHERE run_id = ? ORDER BY position");
    c.arg(run_id);
    while (c.next()) {
      row->config.emplace_back(c.text(0), c.is_null(1) ? Value::of(c.text(2)) : Value::of(c.f64(1)));
    }
    Query k(*db_,
            "SELECT checkpoint_id FROM checkpoints WHERE run_id = ? AND ok IS NOT 0 ORDER BY time_ns DESC LIMIT 1");
    k.arg(run_id);
    if (k.next()) row->last_checkpoint_id = k.text(0);
    return row;
  }

  RunAggregates aggregates(const std::string& run_id) override {
    RunAggregates a;
    {
      Query q(*db_,
              "SELECT count(*), avg(tokens_per_s), avg(mfu), max(CASE WHEN typeof(lr) = 'real' THEN lr END) "
              "FROM step_stats WHERE run_id = ?");
      q.arg(run_id);
      if (q.next()) {
        a.steps = q.i64(0);
        a.tokens_per_s_mean = q.opt_f64(1);
        a.mfu_mean = q.opt_f64(2);
        a.lr_max = q.opt_f64(3);
      }
    }
    {
      Query q(*db_,
              "SELECT step_ms FROM step_stats WHERE run_id = ?1 ORDER BY step_ms "
              "LIMIT 1 OFFSET (SELECT count(*) FROM step_stats WHERE run_id = ?1) / 2");
      q.arg(run_id);
      if (q.next()) a.step_ms_median = q.f64(0);
    }
    {
      Query q(*db_,
              "SELECT avg(loss) FROM (SELECT loss FROM step_stats WHERE run_id = ? AND typeof(loss) = 'real' "
              "AND abs(loss) < 1e308 ORDER BY step DESC LIMIT 10)");
      q.arg(run_id);
      if (q.next()) a.loss_last10 = q.opt_f64(0);
    }
    {
      Query q(*db_, "SELECT lr FROM step_stats WHERE run_id = ? AND lr IS NOT NULL ORDER BY step DESC LIMIT 1");
      q.arg(run_id);
      if (q.next()) a.lr_last = q.opt_f64(0);
    }
    {
      Query q(*db_,
              "SELECT val_loss FROM step_stats WHERE run_id = ? AND val_loss IS NOT NULL ORDER BY step DESC LIMIT 1");
      q.arg(run_id);
      if (q.next()) a.val_loss_last = q.opt_f64(0);
    }
    {
      Query q(*db_, "SELECT count(*) FROM alerts WHERE run_id = ?");
      q.arg(run_id);
      if (q.next()) a.alerts = q.i64(0);
    }
    return a;
  }

  std::vector<RankAllocation> allocations(const std::string& run_id) override {
    Query q(*db_, "SELECT run_id, rank, node, gpu FROM rank_allocations WHERE run_id = ? ORDER BY rank");
    q.arg(run_id);
    std::vector<RankAllocation> out;
    while (q.next()) {
      out.push_back(
          {q.text(0), static_cast<int32_t>(q.i64(1)), q.text(2), q.is_null(3) ? -1 : static_cast<int32_t>(q.i64(3))});
    }
    return out;
  }

  std::vector<CheckpointRow> checkpoints(const std::string& run_id) override {
    Query q(*db_,
            "SELECT run_id, checkpoint_id, step, time_ns, duration_ms, size_bytes, upload_ms, ok, uri, sha256 "
            "FROM checkpoints WHERE run_id = ? ORDER BY time_ns, checkpoint_id");
    q.arg(run_id);
    std::vector<CheckpointRow> out;
    while (q.next()) out.push_back(read_checkpoint(q));
    return out;
  }

  std::vector<TimelineEntry> timeline(const std::string& run_id, StepRange range, int64_t limit) override {
    Query q(*db_,
            "SELECT run_id, step, time_ns, kind, severity, summary, ref, detail FROM timeline WHERE run_id = ?1 "
            "AND (?2 IS NULL OR step >= ?2) AND (?3 IS NULL OR step <= ?3) ORDER BY step, time_ns, id LIMIT ?4");
    q.arg(run_id).opt(range.from).opt(range.to).arg(limit);
    std::vector<TimelineEntry> out;
    while (q.next()) {
      out.push_back({q.text(0), q.opt_i64(1), q.i64(2), q.text(3), q.text(4), q.text(5), q.text(6), q.text(7)});
    }
    return out;
  }

  std::vector<StepRow> steps(const std::string& run_id, StepRange range, int64_t limit) override {
    static const std::string sql = std::string("SELECT ") + kStepColumns +
                                   " FROM step_stats WHERE run_id = ?1 AND (?2 IS NULL OR step >= ?2) "
                                   "AND (?3 IS NULL OR step <= ?3) ORDER BY step LIMIT ?4";
    Query q(*db_, sql.c_str());
    q.arg(run_id).opt(range.from).opt(range.to).arg(limit);
    std::vector<StepRow> out;
    while (q.next()) out.push_back(read_step(q));
    return out;
  }

  std::vector<StoredAlert> alerts(const AlertFilter& f) override {
    Query q(*db_,
            "SELECT json, incident_id FROM alerts WHERE (?1 = '' OR run_id = ?1) AND (?2 = '' OR kind = ?2) "
            "AND (?3 IS NULL OR time_ns >= ?3) AND (?5 IS NULL OR (ends_ns IS NOT NULL) = ?5) "
            "ORDER BY time_ns, alert_id LIMIT ?4");
    q.arg(f.run_id).arg(f.kind).opt(f.since_ns).arg(f.limit);
    q.opt(f.resolved ? std::optional<int64_t>(*f.resolved ? 1 : 0) : std::nullopt);
    std::vector<StoredAlert> out;
    while (q.next()) {
      StoredAlert s;
      s.json = q.text(0);
      s.incident_id = q.text(1);
      std::string why;
      if (!jsonl::decode_alert(s.json, &s.alert, &why))
        throw StoreError("store " + db_->path() + ": bad alert row: " + why);
      out.push_back(std::move(s));
    }
    return out;
  }

  std::vector<IncidentRow> incidents(const std::string& run_id) override {
    Query q(*db_,
            "SELECT incident_id, run_id, kind, severity, opened_ns, opened_step, last_ns, last_step, alert_count "
            "FROM incidents WHERE run_id = ? ORDER BY opened_ns, incident_id");
    q.arg(run_id);
    std::vector<IncidentRow> out;
    while (q.next()) out.push_back(read_incident(q));
    return out;
  }

  std::map<std::string, IncidentCounts> incident_counts(const std::vector<std::string>& run_ids) override {
    std::string ids;
    json::Writer w(&ids);
    w.begin_array();
    for (const auto& id : run_ids) w.str(id);
    w.end_array();
    // One query for all the runs: incidents by run (incidents_by_run), each
    // looked up among its run's alerts (alerts_by_run) for an end.
    Query q(*db_,
            "SELECT i.run_id, count(*), sum(NOT EXISTS (SELECT 1 FROM alerts a WHERE a.run_id = i.run_id "
            "AND a.incident_id = i.incident_id AND a.ends_ns IS NOT NULL)) FROM incidents i "
            "WHERE i.run_id IN (SELECT value FROM json_each(?1)) GROUP BY i.run_id");
    q.arg(ids);
    std::map<std::string, IncidentCounts> out;
    while (q.next()) out[q.text(0)] = IncidentCounts{q.i64(1), q.i64(2)};
    return out;
  }

  std::vector<LineageNode> lineage(const std::string& id) override;

 private:
  static CheckpointRow read_checkpoint(const Query& q) {
    CheckpointRow c;
    c.run_id = q.text(0);
    c.checkpoint_id = q.text(1);
    c.step = q.opt_i64(2);
    c.time_ns = q.i64(3);
    c.duration_ms = q.opt_f64(4);
    c.size_bytes = q.opt_i64(5);
    c.upload_ms = q.opt_f64(6);
    if (!q.is_null(7)) c.ok = q.i64(7) != 0;
    c.uri = q.text(8);
    c.sha256 = q.text(9);
    return c;
  }
  static IncidentRow read_incident(const Query& q) {
    return {q.text(0), q.text(1), q.text(2), q.text(3), q.i64(4), q.i64(6), q.opt_i64(5), q.opt_i64(7), q.i64(8)};
  }

  void write_run(const RunRow& r) {
    Db& db = *db_;
    if (!r.experiment_id.empty()) {
      Query(db, "INSERT OR IGNORE INTO experiments (experiment_id, tenant) VALUES (?, ?)")
          .arg(r.experiment_id)
          .arg(r.tenant)
          .run();
    }
    if (!r.model_id.empty()) Query(db, "INSERT OR IGNORE INTO models (model_id) VALUES (?)").arg(r.model_id).run();
    if (!r.model_version.empty()) {
      Query(db,
            "INSERT INTO model_versions (model_id, model_version, run_id, checkpoint_id) VALUES (?1, ?2, ?3, ?4) "
            "ON CONFLICT (model_id, model_version) DO UPDATE SET run_id = excluded.run_id, "
            "checkpoint_id = coalesce(excluded.checkpoint_id, model_versions.checkpoint_id)")
          .arg(r.model_id)
          .arg(r.model_version)
          .arg(r.run_id)
          .opt_text(r.last_checkpoint_id)
          .run();
    }
    if (!r.dataset_version.empty()) {
      Query(db, "INSERT OR IGNORE INTO dataset_versions (dataset_version) VALUES (?)").arg(r.dataset_version).run();
    }
    Query(db,
          "INSERT OR REPLACE INTO runs (run_id, tenant, experiment_id, job_id, model_id, model_version, "
          "dataset_version, code_commit, world_size, gpu_peak_flops, model_flops_per_token, status, end_reason, "
          "started_ns, ended_ns, last_time_ns, step, tokens_processed, restarts, loss, val_loss, lr, grad_norm, mfu, "
          "tokens_per_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .arg(r.run_id)
        .arg(r.tenant)
        .opt_text(r.experiment_id)
        .opt_text(r.job_id)
        .opt_text(r.model_id)
        .opt_text(r.model_version)
        .opt_text(r.dataset_version)
        .opt_text(r.code_commit)
        .arg(r.world_size)
        .opt(r.gpu_peak_flops)
        .opt(r.model_flops_per_token)
        .arg(r.status)
        .opt_text(r.end_reason)
        .arg(r.started_ns)
        .opt(r.ended_ns)
        .arg(r.last_time_ns)
        .opt(r.step)
        .arg(r.tokens_processed)
        .arg(r.restarts)
        .opt(r.loss)
        .opt(r.val_loss)
        .opt(r.lr)
        .opt(r.grad_norm)
        .opt(r.mfu)
        .opt(r.tokens_per_s)
        .run();
    if (!r.config.empty()) {
      Query(db, "DELETE FROM run_config WHERE run_id = ?").arg(r.run_id).run();
      int64_t pos = 0;
      for (const auto& [key, v] : r.config) {
        Query q(db, "INSERT OR REPLACE INTO run_config (run_id, key, position, number, text) VALUES (?, ?, ?, ?, ?)");
        q.arg(r.run_id).arg(key).arg(pos++);
        if (v.kind == Value::Kind::kNumber)
          q.arg(v.number).null();
        else
          q.null().arg(v.text);
        q.run();
      }
    }
  }

  // --- lineage ---
  LineageNode run_node(const std::string& run_id, bool full);
  LineageNode checkpoint_node(const CheckpointRow& c, bool with_run);
  LineageNode model_version_node(const std::string& model_id, const std::string& version, const std::string& run_id,
                                 const std::string& checkpoint_id);
  std::vector<std::string> run_ids(const char* sql, const std::string& id);

  std::shared_ptr<Db> db_;
};

// --- lineage: walk the graph from any identifier ---------------------------------------

void attr(LineageNode* n, const std::string& key, const std::string& text) {
  if (!text.empty()) n->attrs.emplace_back(key, text);
}
void attr(LineageNode* n, const std::string& key, int64_t v) { n->attrs.emplace_back(key, v); }

std::vector<std::string> SqliteRunGraph::run_ids(const char* sql, const std::string& id) {
  Query q(*db_, sql);
  q.arg(id);
  std::vector<std::string> out;
  while (q.next()) out.push_back(q.text(0));
  return out;
}

LineageNode SqliteRunGraph::checkpoint_node(const CheckpointRow& c, bool with_run) {
  LineageNode n{"checkpoint", c.checkpoint_id, {}, {}};
  attr(&n, "run_id", c.run_id);
  if (c.step) attr(&n, "step", static_cast<int64_t>(*c.step));
  attr(&n, "time_ns", static_cast<int64_t>(c.time_ns));
  if (c.ok) attr(&n, "ok", std::string(*c.ok ? "true" : "false"));
  attr(&n, "uri", c.uri);
  attr(&n, "sha256", c.sha256);
  Query a(*db_,
          "SELECT artifact_id, artifact_type, object_uri, checksum, created_at_ns FROM artifacts "
          "WHERE run_id = ? AND checkpoint_id = ? ORDER BY artifact_id");
  a.arg(c.run_id).arg(c.checkpoint_id);
  while (a.next()) {
    LineageNode art{"artifact", a.text(0), {}, {}};
    attr(&art, "artifact_type", a.text(1));
    attr(&art, "object_uri", a.text(2));
    attr(&art, "checksum", a.text(3));
    attr(&art, "created_at_ns", static_cast<int64_t>(a.i64(4)));
    n.children.push_back(std::move(art));
  }
  if (with_run) n.children.push_back(run_node(c.run_id, true));
  return n;
}

LineageNode SqliteRunGraph::model_version_node(const std::string& model_id, const std::string& version,
                                               const std::string& run_id, const std::string& checkpoint_id) {
  LineageNode n{"model_version", model_id.empty() ? version : model_id + ":" + version, {}, {}};
  attr(&n, "model_id", model_id);
  attr(&n, "model_version", version);
  Query e(*db_,
          "SELECT evaluation_id, status FROM evaluation_runs WHERE model_id = ? AND model_version = ? ORDER BY "
          "evaluation_id");
  e.arg(model_id).arg(version);
  while (e.next()) {
    LineageNode ev{"evaluation_run", e.text(0), {}, {}};
    attr(&ev, "status", e.text(1));
    n.children.push_back(std::move(ev));
  }
  bool placed = false;
  if (!checkpoint_id.empty()) {
    Query c(*db_,
            "SELECT run_id, checkpoint_id, step, time_ns, duration_ms, size_bytes, upload_ms, ok, uri, sha256 "
            "FROM checkpoints WHERE run_id = ? AND checkpoint_id = ?");
    c.arg(run_id).arg(checkpoint_id);
    if (c.next()) {
      CheckpointRow row = read_checkpoint(c);
      n.children.push_back(checkpoint_node(row, true));
      placed = true;
    }
  }
  if (!placed && !run_id.empty() && run(run_id)) n.children.push_back(run_node(run_id, true));
  return n;
}

LineageNode SqliteRunGraph::run_node(const std::string& run_id, bool full) {
  LineageNode n{"training_run", run_id, {}, {}};
  auto r = run(run_id);
  if (!r) return n;
  attr(&n, "status", r->status);
  if (r->step) attr(&n, "step", static_cast<int64_t>(*r->step));
  attr(&n, "world_size", static_cast<int64_t>(r->world_size));
  attr(&n, "started_ns", static_cast<int64_t>(r->started_ns));
  if (!full) return n;
  if (!r->experiment_id.empty()) n.children.push_back({"experiment", r->experiment_id, {}, {}});
  if (!r->job_id.empty()) n.children.push_back({"job", r->job_id, {}, {}});
  if (!r->code_commit.empty()) n.children.push_back({"code_commit", r->code_commit, {}, {}});
  if (!r->dataset_version.empty()) n.children.push_back({"dataset_version", r->dataset_version, {}, {}});
  if (!r->config.empty()) {
    LineageNode config{"config", run_id, {}, {}};
    for (const auto& [k, v] : r->config) {
      if (v.kind == Value::Kind::kNumber)
        config.attrs.emplace_back(k, v.number);
      else
        config.attrs.emplace_back(k, v.text);
    }
    n.children.push_back(std::move(config));
  }
  if (!r->model_id.empty()) n.children.push_back({"model", r->model_id, {}, {}});
  if (!r->model_version.empty()) {
    LineageNode mv{
        "model_version", r->model_id.empty() ? r->model_version : r->model_id + ":" + r->model_version, {}, {}};
    attr(&mv, "checkpoint_id", r->last_checkpoint_id);
    n.children.push_back(std::move(mv));
  }
  for (const auto& c : checkpoints(run_id)) n.children.push_back(checkpoint_node(c, false));
  // Infrastructure lineage: cluster -> node -> GPU (with the rank it ran).
  std::map<std::string, LineageNode> nodes;
  for (const auto& a : allocations(run_id)) {
    if (a.node.empty()) continue;
    auto [it, fresh] = nodes.try_emplace(a.node, LineageNode{"node", a.node, {}, {}});
    LineageNode g{"gpu", a.node + "/" + std::to_string(a.gpu), {}, {}};
    attr(&g, "gpu", static_cast<int64_t>(a.gpu));
    attr(&g, "rank", static_cast<int64_t>(a.rank));
    it->second.children.push_back(std::move(g));
  }
  if (!nodes.empty()) {
    LineageNode cluster{"cluster", "default", {}, {}};
    for (auto& [name, node] : nodes) cluster.children.push_back(std::move(node));
    n.children.push_back(std::move(cluster));
  }
  for (const auto& i : incidents(run_id)) {
    LineageNode in{"incident", i.incident_id, {}, {}};
    attr(&in, "kind", i.kind);
    attr(&in, "severity", i.severity);
    if (i.opened_step) attr(&in, "opened_step", static_cast<int64_t>(*i.opened_step));
    attr(&in, "alert_count", static_cast<int64_t>(i.alert_count));
    n.children.push_back(std::move(in));
  }
  return n;
}

std::vector<LineageNode> SqliteRunGraph::lineage(const std::string& id) {
  std::vector<LineageNode> out;
  if (run(id)) out.push_back(run_node(id, true));
  {
    std::vector<std::tuple<std::string, std::string, std::string, std::string>> versions;
    Query q(*db_,
            "SELECT model_id, model_version, coalesce(run_id, ''), coalesce(checkpoint_id, '') FROM model_versions "
            "WHERE model_version = ?1 OR model_id || ':' || model_version = ?1 ORDER BY model_id, model_version");
    q.arg(id);
    while (q.next()) versions.emplace_back(q.text(0), q.text(1), q.text(2), q.text(3));
    for (const auto& [m, v, r, c] : versions) out.push_back(model_version_node(m, v, r, c));
  }
  {
    std::vector<CheckpointRow> cks;
    Query q(*db_,
            "SELECT run_id, checkpoint_id, step, time_ns, duration_ms, size_bytes, upload_ms, ok, uri, sha256 "
            "FROM checkpoints WHERE checkpoint_id = ? ORDER BY run_id");
    q.arg(id);
    while (q.next()) cks.push_back(read_checkpoint(q));
    for (const auto& c : cks) out.push_back(checkpoint_node(c, true));
  }
  {
    std::vector<std::pair<std::string, std::string>> models;
    Query q(*db_, "SELECT model_id FROM models WHERE model_id = ?");
    q.arg(id);
    if (q.next()) {
      LineageNode n{"model", id, {}, {}};
      std::vector<std::tuple<std::string, std::string, std::string>> versions;
      Query v(*db_,
              "SELECT model_version, coalesce(run_id, ''), coalesce(checkpoint_id, '') FROM model_versions "
              "WHERE model_id = ? ORDER BY model_version");
      v.arg(id);
      while (v.next()) versions.emplace_back(v.text(0), v.text(1), v.text(2));
      for (const auto& [ver, r, c] : versions) n.children.push_back(model_version_node(id, ver, r, c));
      for (const auto& r :
           run_ids("SELECT run_id FROM runs WHERE model_id = ? AND model_version IS NULL ORDER BY run_id", id)) {
        n.children.push_back(run_node(r, false));
      }
      out.push_back(std::move(n));
    }
  }
  struct Group {
    const char* type;
    const char* exists;
    const char* runs;
    bool full;
  };
  static const Group kGroups[] = {
      {"experiment", "SELECT experiment_id FROM experiments WHERE experiment_id = ?",
       "SELECT run_id FROM runs WHERE experiment_id = ? ORDER BY started_ns, run_id", true},
      {"job", "SELECT job_id FROM runs WHERE job_id = ? LIMIT 1",
       "SELECT run_id FROM runs WHERE job_id = ? ORDER BY started_ns, run_id", true},
      {"dataset_version", "SELECT dataset_version FROM dataset_versions WHERE dataset_version = ?",
       "SELECT run_id FROM runs WHERE dataset_version = ? ORDER BY started_ns, run_id", false},
      {"code_commit", "SELECT code_commit FROM runs WHERE code_commit = ? LIMIT 1",
       "SELECT run_id FROM runs WHERE code_commit = ? ORDER BY started_ns, run_id", false},
  };
  for (const Group& g : kGroups) {
    if (run_ids(g.exists, id).empty()) continue;
    LineageNode n{g.type, id, {}, {}};
    for (const auto& r : run_ids(g.runs, id)) n.children.push_back(run_node(r, g.full));
    out.push_back(std::move(n));
  }
  {
    Query q(*db_, "SELECT node, cluster_id FROM nodes WHERE node = ?");
    q.arg(id);
    if (q.next()) {
      LineageNode n{"node", id, {}, {}};
      attr(&n, "cluster_id", q.text(1));
      std::vector<int64_t> gpus;
      Query g(*db_, "SELECT gpu FROM gpus WHERE node = ? ORDER BY gpu");
      g.arg(id);
      while (g.next()) gpus.push_back(g.i64(0));
      for (int64_t gpu : gpus) {
        LineageNode gn{"gpu", id + "/" + std::to_string(gpu), {}, {}};
        std::vector<std::string> runs;
        Query r(*db_, "SELECT run_id FROM rank_allocations WHERE node = ? AND gpu = ? ORDER BY run_id");
        r.arg(id).arg(gpu);
        while (r.next()) runs.push_back(r.text(0));
        for (const auto& run_id : runs) gn.children.push_back(run_node(run_id, false));
        n.children.push_back(std::move(gn));
      }
      out.push_back(std::move(n));
    }
  }
  {
    std::optional<std::pair<std::string, std::string>> hit;  // run, kind
    Query q(*db_, "SELECT coalesce(run_id, ''), kind, severity, step, incident_id FROM alerts WHERE alert_id = ?");
    q.arg(id);
    if (q.next()) {
      LineageNode n{"alert", id, {}, {}};
      attr(&n, "kind", q.text(1));
      attr(&n, "severity", q.text(2));
      if (auto s = q.opt_i64(3)) attr(&n, "step", static_cast<int64_t>(*s));
      attr(&n, "incident_id", q.text(4));
      std::string run_id = q.text(0);
      if (!run_id.empty()) n.children.push_back(run_node(run_id, true));
      out.push_back(std::move(n));
    }
  }
  {
    Query q(
        *db_,
        "SELECT coalesce(run_id, ''), kind, severity, opened_step, alert_count FROM incidents WHERE incident_id = ?");
    q.arg(id);
    if (q.next()) {
      LineageNode n{"incident", id, {}, {}};
      attr(&n, "kind", q.text(1));
      attr(&n, "severity", q.text(2));
      if (auto s = q.opt_i64(3)) attr(&n, "opened_step", static_cast<int64_t>(*s));
      attr(&n, "alert_count", static_cast<int64_t>(q.i64(4)));
      std::string run_id = q.text(0);
      Query a(*db_, "SELECT alert_id, kind, step FROM alerts WHERE incident_id = ? ORDER BY time_ns, alert_id");
      a.arg(id);
      while (a.next()) {
        LineageNode al{"alert", a.text(0), {}, {}};
        attr(&al, "kind", a.text(1));
        if (auto s = a.opt_i64(2)) attr(&al, "step", static_cast<int64_t>(*s));
        n.children.push_back(std::move(al));
      }
      if (!run_id.empty()) n.children.push_back(run_node(run_id, true));
      out.push_back(std::move(n));
    }
  }
  {
    Query q(*db_,
            "SELECT run_id, artifact_type, object_uri, checksum, created_at_ns, coalesce(checkpoint_id, '') "
            "FROM artifacts WHERE artifact_id = ?");
    q.arg(id);
    if (q.next()) {
      LineageNode n{"artifact", id, {}, {}};
      attr(&n, "artifact_type", q.text(1));
      attr(&n, "object_uri", q.text(2));
      attr(&n, "checksum", q.text(3));
      attr(&n, "created_at_ns", static_cast<int64_t>(q.i64(4)));
      std::string run_id = q.text(0);
      n.children.push_back(run_node(run_id, true));
      out.push_back(std::move(n));
    }
  }
  {
    Query q(*db_,
            "SELECT coalesce(model_id, ''), coalesce(model_version, ''), coalesce(run_id, ''), "
            "coalesce(checkpoint_id, ''), coalesce(status, '') FROM evaluation_runs WHERE evaluation_id = ?");
    q.arg(id);
    if (q.next()) {
      LineageNode n{"evaluation_run", id, {}, {}};
      attr(&n, "status", q.text(4));
      std::string m = q.text(0), v = q.text(1), r = q.text(2), c = q.text(3);
      if (!v.empty())
        n.children.push_back(model_version_node(m, v, r, c));
      else if (!r.empty())
        n.children.push_back(run_node(r, true));
      out.push_back(std::move(n));
    }
  }
  return out;
}

// --- high-cardinality rows -------------------------------------------------------------

// What a batch's GPU samples and rollups become in the store, made from the
// batch alone (no connection): the blocks to insert, in the order they are
// inserted. The writer makes them itself, unless the sink made them already
// on its own thread while the writer was behind (MetricRows::prepare).
struct SqliteBlocks final : PreparedRows {
  struct GpuBlock {
    Symbol node, kept_for;
    int64_t first_ns = 0, last_ns = 0, samples = 0;
    std::string data;  // encoding kGpuCompact
  };
  // A tier's bucket of a node: the batch's rows of it (indices into
  // MetricBatch::gpu_rollups; the last of a GPU's wins), by GPU, packed.
  struct RollupBlock {
    int64_t resolution_ns = 0, bucket_ns = 0;
    std::vector<size_t> rows;
    std::string data;
  };
  std::vector<GpuBlock> gpu;
  std::vector<RollupBlock> rollups;
};

std::shared_ptr<const SqliteBlocks> make_blocks(const MetricBatch& b) {
  auto out = std::make_shared<SqliteBlocks>();
  // One block per node (and reason) of the batch, in time order, the blocks
  // in the order of (node name, reason). Samples are grouped by the node's
  // symbol (a batch holds a few hundred groups and a hundred thousand
  // samples; the samples of one node mostly come together), and only the
  // groups are sorted by name. A group's samples are encoded where they lie
  // in the batch's log, never unpacked (sqlite::pack_gpu_compact).
  struct NodeRows {
    Symbol node;
    Symbol kept_for;
    std::vector<GpuSampleLog::Entry> entries;
  };
  std::vector<NodeRows> by_node;
  SymbolIndex<std::vector<size_t>> groups_of;                        // node -> by_node indices
  std::unordered_map<uint32_t, std::vector<size_t>> more_groups_of;  // nodes without a slot there
  size_t last = SIZE_MAX;
  b.gpu_samples.for_each([&](const GpuSampleLog::Entry& g) {
    const Symbol node = g.node(), kept_for = g.kept_for();
    if (last == SIZE_MAX || by_node[last].node != node || by_node[last].kept_for != kept_for) {
      last = SIZE_MAX;
      std::vector<size_t>* slot = groups_of.slot(node);
      auto& candidates = slot ? *slot : more_groups_of[node.id()];
      for (size_t i : candidates) {
        if (by_node[i].kept_for == kept_for) last = i;
      }
      if (last == SIZE_MAX) {
        last = by_node.size();
        candidates.push_back(last);
        by_node.push_back({node, kept_for, {}});
      }
    }
    by_node[last].entries.push_back(g);
  });
  std::sort(by_node.begin(), by_node.end(), [](const NodeRows& x, const NodeRows& y) {
    int c = x.node.str().compare(y.node.str());
    return c != 0 ? c < 0 : x.kept_for.str() < y.kept_for.str();
  });
  auto earlier = [](const GpuSampleLog::Entry& x, const GpuSampleLog::Entry& y) { return x.time_ns() < y.time_ns(); };
  out->gpu.reserve(by_node.size());
  for (auto& [node, kept_for, entries] : by_node) {
    if (!std::is_sorted(entries.begin(), entries.end(), earlier))
      std::stable_sort(entries.begin(), entries.end(), earlier);
    SqliteBlocks::GpuBlock& g = out->gpu.emplace_back();
    g.node = node;
    g.kept_for = kept_for;
    g.first_ns = entries.front().time_ns();
    g.last_ns = entries.back().time_ns();
    g.samples = static_cast<int64_t>(entries.size());
    sqlite::pack_gpu_compact(&g.data, entries);
  }
  // One block per tier, node and bucket, its GPUs in order.
  std::map<std::tuple<int64_t, std::string_view, int64_t>, std::map<int32_t, size_t>> buckets;
  for (size_t i = 0; i < b.gpu_rollups.size(); ++i) {
    const GpuRollupRow& r = b.gpu_rollups[i];
    buckets[{r.resolution_ns, r.node, r.bucket_ns}][r.gpu] = i;
  }
  out->rollups.reserve(buckets.size());
  for (const auto& [key, gpus] : buckets) {
    SqliteBlocks::RollupBlock& block = out->rollups.emplace_back();
    block.resolution_ns = std::get<0>(key);
    block.bucket_ns = std::get<2>(key);
    block.rows.reserve(gpus.size());
    for (const auto& [gpu, i] : gpus) {
      block.rows.push_back(i);
      pack_rollup(&block.data, b.gpu_rollups[i]);
    }
  }
  return out;
}

class SqliteMetricRows final : public MetricRows {
 public:
  explicit SqliteMetricRows(std::shared_ptr<Db> db) : db_(std::move(db)) {}

  std::shared_ptr<const PreparedRows> prepare(const MetricBatch& b) const override { return make_blocks(b); }

  void write(const MetricBatch& b) override {
    if (b.empty()) return;
    Db& db = *db_;
    Transaction tx(db);
    for (const auto& run : b.replace_runs) {
      Query(db, "DELETE FROM rank_step_blocks WHERE run_id = ?").arg(run).run();
      Query(db, "DELETE FROM rank_windows WHERE run_id = ?").arg(run).run();
    }
    // One row per step of a run, its block as the timeline builder packed it.
    for (const RankStepBlock& block : b.rank_steps) {
      Query(db,
            "INSERT OR IGNORE INTO rank_step_blocks (run_id, step, time_ns, kept_for, ranks, data) "
            "VALUES (?, ?, ?, ?, ?, ?)")
          .arg(block.run_id)
          .arg(block.step)
          .arg(block.time_ns)
          .arg(block.kept_for)
          .arg(static_cast<int64_t>(block.ranks()))
          .blob(block.data)
          .run();
    }
    std::shared_ptr<const SqliteBlocks> made;
    const SqliteBlocks* blocks = dynamic_cast<const SqliteBlocks*>(b.prepared.get());
    if (!blocks) {
      made = make_blocks(b);
      blocks = made.get();
    }
    for (const SqliteBlocks::GpuBlock& g : blocks->gpu) {
      Query(db,
            "INSERT OR IGNORE INTO gpu_sample_blocks (node, first_ns, last_ns, kept_for, samples, data, encoding) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)")
          .arg_text(g.node.str())
          .arg(g.first_ns)
          .arg(g.last_ns)
          .arg_text(g.kept_for.str())
          .arg(g.samples)
          .blob(g.data)
          .arg(sqlite::kGpuCompact)
          .run();
    }
    auto window = [&](const RankWindowRow& w, const char* sql) {
      Query(db, sql)
          .arg(w.run_id)
          .arg(w.first_step)
          .arg(w.rank)
          .arg(w.last_step)
          .opt_text(w.node)
          .opt(w.gpu >= 0 ? std::optional<int64_t>(w.gpu) : std::nullopt)
          .arg(w.steps)
          .arg(w.work_ms_sum)
          .arg(w.work_ms_max)
          .arg(w.step_ms_sum)
          .arg(w.ratio_sum)
          .arg(w.comm_ms_sum)
          .arg(w.comm_n)
          .arg(w.data_wait_ms_sum)
          .arg(w.data_wait_n)
          .arg(w.slowest_count)
          .run();
    };
    for (const auto& w : b.rank_windows) {
      window(w,
             "INSERT OR REPLACE INTO rank_windows (run_id, first_step, rank, last_step, node, gpu, steps, work_ms_sum, "
             "work_ms_max, step_ms_sum, ratio_sum, comm_ms_sum, comm_n, data_wait_ms_sum, data_wait_n, slowest_count) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    }
    for (const auto& w : b.rank_window_additions) {
      window(
          w,
          "INSERT INTO rank_windows (run_id, first_step, rank, last_step, node, gpu, steps, work_ms_sum, "
          "work_ms_max, step_ms_sum, ratio_sum, comm_ms_sum, comm_n, data_wait_ms_sum, data_wait_n, slowest_count) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, first_step, rank) DO UPDATE "
          "SET "
          "steps = steps + excluded.steps, work_ms_sum = work_ms_sum + excluded.work_ms_sum, "
          "work_ms_max = max(work_ms_max, excluded.work_ms_max), step_ms_sum = step_ms_sum + excluded.step_ms_sum, "
          "ratio_sum = ratio_sum + excluded.ratio_sum, comm_ms_sum = comm_ms_sum + excluded.comm_ms_sum, "
          "comm_n = comm_n + excluded.comm_n, data_wait_ms_sum = data_wait_ms_sum + excluded.data_wait_ms_sum, "
          "data_wait_n = data_wait_n + excluded.data_wait_n, slowest_count = slowest_count + excluded.slowest_count");
    }
    // One block per tier, node and bucket. A new block is one insert; a block
    // already stored (a bucket shown while open, GPUs of the node that closed
    // it in an earlier batch, or another writer's rows of the node) is read,
    // merged GPU by GPU and replaced.
    std::string data;
    for (const SqliteBlocks::RollupBlock& block : blocks->rollups) {
      const std::string& node = b.gpu_rollups[block.rows.front()].node;
      Query(db,
            "INSERT INTO gpu_rollups (resolution_ns, node, bucket_ns, gpus, data) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING")
          .arg(block.resolution_ns)
          .arg_text(node)
          .arg(block.bucket_ns)
          .arg(static_cast<int64_t>(block.rows.size()))
          .blob(block.data)
          .run();
      if (db.changes() > 0) continue;
      std::map<int32_t, GpuRollupRow> merged;
      {
        Query old(db, "SELECT gpus, data FROM gpu_rollups WHERE resolution_ns = ? AND node = ? AND bucket_ns = ?");
        old.arg(block.resolution_ns).arg_text(node).arg(block.bucket_ns);
        if (old.next()) {
          std::string_view bytes = old.blob(1);
          if (bytes.size() != static_cast<size_t>(old.i64(0)) * kRollupRecord) db.fail("corrupt rollup block");
          const char* p = bytes.data();
          for (int64_t i = 0; i < old.i64(0); ++i) {
            GpuRollupRow r = unpack_rollup(p);
            merged[r.gpu] = r;
          }
        }
      }
      data.clear();
      for (size_t i : block.rows) merged[b.gpu_rollups[i].gpu] = b.gpu_rollups[i];
      for (const auto& [gpu, row] : merged) pack_rollup(&data, row);
      Query(db, "UPDATE gpu_rollups SET gpus = ?, data = ? WHERE resolution_ns = ? AND node = ? AND bucket_ns = ?")
          .arg(static_cast<int64_t>(merged.size()))
          .blob(data)
          .arg(block.resolution_ns)
          .arg_text(node)
          .arg(block.bucket_ns)
          .run();
    }
    for (const auto& r : b.node_rollups) {
      Query(db,
            "INSERT OR REPLACE INTO node_rollups (resolution_ns, node, bucket_ns, samples, cpu_avg, cpu_max, "
            "mem_used_max, net_tx_avg, net_rx_avg, disk_read_avg, disk_write_avg, tcp_retransmits_total, "
            "rdma_errors_total) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
          .arg(r.resolution_ns)
          .arg(r.node)
          .arg(r.bucket_ns)
          .arg(r.samples)
          .opt(r.cpu_pct.mean())
          .opt(max_of(r.cpu_pct))
          .opt(max_of(r.mem_used_bytes))
          .opt(r.net_tx_bps.mean())
          .opt(r.net_rx_bps.mean())
          .opt(r.disk_read_bps.mean())
          .opt(r.disk_write_bps.mean())
          .arg(r.tcp_retransmits_total)
          .arg(r.rdma_errors_total)
          .run();
    }
    for (const auto& t : b.prune) {
      Query(db,
            "DELETE FROM gpu_rollups WHERE resolution_ns = ?1 AND bucket_ns < "
            "(SELECT max(bucket_ns) FROM gpu_rollups WHERE resolution_ns = ?1) - ?2")
          .arg(t.resolution_ns)
          .arg(t.retention_ns)
          .run();
      Query(db,
            "DELETE FROM node_rollups WHERE resolution_ns = ?1 AND bucket_ns < "
            "(SELECT max(bucket_ns) FROM node_rollups WHERE resolution_ns = ?1) - ?2")
          .arg(t.resolution_ns)
          .arg(t.retention_ns)
          .run();
    }
    tx.commit();
  }

  std::vector<RankSummary> rank_summaries(const std::string& run_id, StepRange range) override {
    Query q(*db_,
            "SELECT rank, max(node), max(gpu), sum(steps), sum(work_ms_sum), max(work_ms_max), sum(step_ms_sum), "
            "sum(ratio_sum), sum(comm_ms_sum), sum(comm_n), sum(data_wait_ms_sum), sum(data_wait_n), "
            "sum(slowest_count) FROM rank_windows WHERE run_id = ?1 AND (?2 IS NULL OR last_step >= ?2) "
            "AND (?3 IS NULL OR first_step <= ?3) GROUP BY rank ORDER BY rank");
    q.arg(run_id).opt(range.from).opt(range.to);
    std::vector<RankSummary> out;
    while (q.next()) {
      RankSummary s;
      s.rank = static_cast<int32_t>(q.i64(0));
      s.node = q.text(1);
      s.gpu = q.is_null(2) ? -1 : static_cast<int32_t>(q.i64(2));
      s.steps = q.i64(3);
      if (s.steps <= 0) continue;
      double n = static_cast<double>(s.steps);
      s.work_ms_mean = q.f64(4) / n;
      s.work_ms_max = q.f64(5);
      s.step_ms_mean = q.f64(6) / n;
      s.ratio_mean = q.f64(7) / n;
      if (q.i64(9) > 0) s.comm_ms_mean = q.f64(8) / static_cast<double>(q.i64(9));
      if (q.i64(11) > 0) s.data_wait_ms_mean = q.f64(10) / static_cast<double>(q.i64(11));
      s.slowest_count = q.i64(12);
      out.push_back(std::move(s));
    }
    return out;
  }

  std::vector<RankStepRow> rank_steps(const std::string& run_id, StepRange range, int64_t limit) override {
    std::map<int32_t, std::string> nodes;
    {
      Query a(*db_, "SELECT rank, node FROM rank_allocations WHERE run_id = ? AND node IS NOT NULL");
      a.arg(run_id);
      while (a.next()) nodes[static_cast<int32_t>(a.i64(0))] = a.text(1);
    }
    Query q(*db_,
            "SELECT step, time_ns, kept_for, ranks, data FROM rank_step_blocks WHERE run_id = ?1 "
            "AND (?2 IS NULL OR step >= ?2) AND (?3 IS NULL OR step <= ?3) ORDER BY step");
    q.arg(run_id).opt(range.from).opt(range.to);
    std::vector<RankStepRow> out;
    while (q.next() && static_cast<int64_t>(out.size()) < limit) {
      std::string_view data = q.blob(4);
      int64_t n = q.i64(3);
      if (n < 0 || data.size() != static_cast<size_t>(n) * rank_record::kBytes)
        throw StoreError("store " + db_->path() + ": corrupt rank block");
      const char* p = data.data();
      std::string kept_for = q.text(2);
      for (int64_t i = 0; i < n && static_cast<int64_t>(out.size()) < limit; ++i) {
        RankStepRow r = rank_record::read(p);
        p += rank_record::kBytes;
        r.run_id = run_id;
        r.step = q.i64(0);
        r.time_ns = q.i64(1);
        r.kept_for = kept_for;
        if (auto it = nodes.find(r.rank); it != nodes.end()) r.node = it->second;
        out.push_back(std::move(r));
      }
    }
    return out;
  }

  std::vector<RankStepRow> rank_steps_of(const std::string& run_id, int32_t rank, StepRange range) override {
    Query q(*db_,
            "SELECT step, time_ns, kept_for, ranks, data FROM rank_step_blocks WHERE run_id = ?1 "
            "AND (?2 IS NULL OR step >= ?2) AND (?3 IS NULL OR step <= ?3) ORDER BY step");
    q.arg(run_id).opt(range.from).opt(range.to);
    std::vector<RankStepRow> out;
    while (q.next()) {
      std::string_view data = q.blob(4);
      int64_t n = q.i64(3);
      if (n < 0 || data.size() != static_cast<size_t>(n) * rank_record::kBytes)
        throw StoreError("store " + db_->path() + ": corrupt rank block");
      for (int64_t i = 0; i < n; ++i) {
        const char* p = data.data() + i * static_cast<int64_t>(rank_record::kBytes);
        int32_t r = 0;
        std::memcpy(&r, p, sizeof r);
        if (r != rank) continue;
        RankStepRow row = rank_record::read(p);
        row.run_id = run_id;
        row.step = q.i64(0);
        row.time_ns = q.i64(1);
        row.kept_for = q.text(2);
        out.push_back(std::move(row));
        break;
      }
    }
    return out;
  }

  std::vector<RankWindowRatio> rank_window_ratios(const std::string& run_id, StepRange range) override {
    Query q(*db_,
            "SELECT first_step, last_step, rank, steps, ratio_sum FROM rank_windows WHERE run_id = ?1 "
            "AND (?2 IS NULL OR last_step >= ?2) AND (?3 IS NULL OR first_step <= ?3) ORDER BY first_step, rank");
    q.arg(run_id).opt(range.from).opt(range.to);
    std::vector<RankWindowRatio> out;
    while (q.next()) {
      out.push_back({q.i64(0), q.i64(1), static_cast<int32_t>(q.i64(2)), q.i64(3), q.f64(4)});
    }
    return out;
  }

  std::vector<RankWindowRow> rank_windows_of(const std::string& run_id, int32_t rank, StepRange range) override {
    Query q(*db_,
            "SELECT first_step, last_step, coalesce(node, ''), gpu, steps, work_ms_sum, work_ms_max, step_ms_sum, "
            "ratio_sum, comm_ms_sum, comm_n, data_wait_ms_sum, data_wait_n, slowest_count FROM rank_windows "
            "WHERE run_id = ?1 AND rank = ?4 AND (?2 IS NULL OR last_step >= ?2) AND (?3 IS NULL OR first_step <= ?3) "
            "ORDER BY first_step");
    q.arg(run_id).opt(range.from).opt(range.to).arg(static_cast<int64_t>(rank));
    std::vector<RankWindowRow> out;
    while (q.next()) {
      RankWindowRow w;
      w.run_id = run_id;
      w.rank = rank;
      w.first_step = q.i64(0);
      w.last_step = q.i64(1);
      w.node = q.text(2);
      w.gpu = q.is_null(3) ? -1 : static_cast<int32_t>(q.i64(3));
      w.steps = q.i64(4);
      w.work_ms_sum = q.f64(5);
      w.work_ms_max = q.f64(6);
      w.step_ms_sum = q.f64(7);
      w.ratio_sum = q.f64(8);
      w.comm_ms_sum = q.f64(9);
      w.comm_n = q.i64(10);
      w.data_wait_ms_sum = q.f64(11);
      w.data_wait_n = q.i64(12);
      w.slowest_count = q.i64(13);
      out.push_back(std::move(w));
    }
    return out;
  }

  std::vector<RankStepRatios> rank_step_ratios(const std::string& run_id, StepRange range,
                                               const std::string& kept_for) override {
    Query q(*db_,
            "SELECT step, kept_for, ranks, data FROM rank_step_blocks WHERE run_id = ?1 "
            "AND (?2 IS NULL OR step >= ?2) AND (?3 IS NULL OR step <= ?3) AND (?4 = '' OR kept_for = ?4) "
            "ORDER BY step");
    q.arg(run_id).opt(range.from).opt(range.to).arg(kept_for);
    std::vector<RankStepRatios> out;
    while (q.next()) {
      std::string_view data = q.blob(3);
      int64_t n = q.i64(2);
      if (n < 0 || data.size() != static_cast<size_t>(n) * rank_record::kBytes)
        throw StoreError("store " + db_->path() + ": corrupt rank block");
      RankStepRatios s;
      s.step = q.i64(0);
      s.kept_for = q.text(1);
      s.ranks.reserve(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const char* p = data.data() + i * static_cast<int64_t>(rank_record::kBytes);
        int32_t rank = 0;
        double ratio = 0;
        std::memcpy(&rank, p, sizeof rank);
        std::memcpy(&ratio, p + rank_record::kRatioAt, sizeof ratio);
        s.ranks.emplace_back(rank, ratio);
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  std::vector<NodeRollupRow> node_rollups(const std::vector<std::string>& nodes, int64_t resolution_ns, int64_t from_ns,
                                          int64_t to_ns) override {
    std::vector<NodeRollupRow> out;
    auto read = [&](Query& q) {
      while (q.next()) {
        NodeRollupRow r;
        r.node = q.text(0);
        r.resolution_ns = resolution_ns;
        r.bucket_ns = q.i64(1);
        r.samples = q.i64(2);
        auto mean = [&](Agg* a, int c) {
          if (q.is_null(c)) return;
          a->n = r.samples > 0 ? r.samples : 1;
          a->sum = q.f64(c) * static_cast<double>(a->n);
          a->min = a->max = q.f64(c);
        };
        mean(&r.cpu_pct, 3);
        if (!q.is_null(4)) r.cpu_pct.max = q.f64(4);
        if (!q.is_null(5)) {
          r.mem_used_bytes.n = 1;
          r.mem_used_bytes.sum = r.mem_used_bytes.min = r.mem_used_bytes.max = q.f64(5);
        }
        mean(&r.net_tx_bps, 6);
        mean(&r.net_rx_bps, 7);
        mean(&r.disk_read_bps, 8);
        mean(&r.disk_write_bps, 9);
        r.tcp_retransmits_total = q.i64(10);
        r.rdma_errors_total = q.i64(11);
        out.push_back(std::move(r));
      }
    };
    // Statements are cached by the address of their text: both are static.
    static const std::string columns =
        "SELECT node, bucket_ns, samples, cpu_avg, cpu_max, mem_used_max, net_tx_avg, net_rx_avg, disk_read_avg, "
        "disk_write_avg, tcp_retransmits_total, rdma_errors_total FROM node_rollups WHERE resolution_ns = ?1 "
        "AND bucket_ns BETWEEN ?2 AND ?3 ";
    static const std::string all = columns + "ORDER BY node, bucket_ns";
    static const std::string one = columns + "AND node = ?4 ORDER BY bucket_ns";
    if (nodes.empty()) {
      Query q(*db_, all.c_str());
      q.arg(resolution_ns).arg(from_ns).arg(to_ns);
      read(q);
    }
    for (const auto& node : nodes) {
      Query q(*db_, one.c_str());
      q.arg(resolution_ns).arg(from_ns).arg(to_ns).arg(node);
      read(q);
    }
    return out;
  }

  std::vector<int64_t> rollup_resolutions() override {
    // Each tier's first row by the primary key (resolution_ns, node, bucket_ns): a skip scan, not a table scan.
    std::vector<int64_t> out;
    std::optional<int64_t> next;
    for (;;) {
      Query q(*db_, "SELECT min(resolution_ns) FROM gpu_rollups WHERE ?1 IS NULL OR resolution_ns > ?1");
      q.opt(next);
      if (!q.next() || q.is_null(0)) break;
      next = q.i64(0);
      out.push_back(*next);
    }
    return out;
  }

  std::vector<GpuSampleRow> gpu_samples(const std::vector<std::string>& nodes, int64_t from_ns,
                                        int64_t to_ns) override {
    std::vector<GpuSampleRow> out;
    auto read = [&](Query& q) {
      std::vector<GpuSampleRow> block;
      while (q.next()) {
        Symbol node = Symbol::intern(q.text(0));
        std::string kept_for = q.text(1);
        std::string_view data = q.blob(3);
        int64_t n = q.i64(2);
        block.clear();
        if (!sqlite::unpack_gpu_block(q.i64(4), data, n, node, kept_for, &block))
          throw StoreError("store " + db_->path() + ": corrupt GPU block");
        for (auto& r : block) {
          if (r.time_ns >= from_ns && r.time_ns <= to_ns) out.push_back(std::move(r));
        }
      }
    };
    if (nodes.empty()) {
      Query q(
          *db_,
          "SELECT node, kept_for, samples, data, encoding FROM gpu_sample_blocks WHERE last_ns >= ? AND first_ns <= ? "
          "ORDER BY node, first_ns");
      q.arg(from_ns).arg(to_ns);
      read(q);
    }
    for (const auto& node : nodes) {
      Query q(*db_,
              "SELECT node, kept_for, samples, data, encoding FROM gpu_sample_blocks WHERE node = ? AND last_ns >= ? "
              "AND first_ns <= ? ORDER BY first_ns");
      q.arg(node).arg(from_ns).arg(to_ns);
      read(q);
    }
    return out;
  }

  std::vector<GpuRollupRow> gpu_rollups(const std::vector<std::string>& nodes, int64_t resolution_ns, int64_t from_ns,
                                        int64_t to_ns) override {
    std::vector<GpuRollupRow> out;
    auto read = [&](Query& q) {
      while (q.next()) {
        std::string_view bytes = q.blob(3);
        int64_t n = q.i64(2);
        if (n < 0 || bytes.size() != static_cast<size_t>(n) * kRollupRecord) db_->fail("corrupt rollup block");
        const char* p = bytes.data();
        std::string node = q.text(0);
        for (int64_t i = 0; i < n; ++i) {
          GpuRollupRow r = unpack_rollup(p);
          r.node = node;
          r.resolution_ns = resolution_ns;
          r.bucket_ns = q.i64(1);
          out.push_back(std::move(r));
        }
      }
    };
    if (nodes.empty()) {
      Query q(
          *db_,
          "SELECT node, bucket_ns, gpus, data FROM gpu_rollups WHERE resolution_ns = ? AND bucket_ns BETWEEN ? AND ? "
          "ORDER BY node, bucket_ns");
      q.arg(resolution_ns).arg(from_ns).arg(to_ns);
      read(q);
    }
    for (const auto& node : nodes) {
      Query q(*db_,
              "SELECT node, bucket_ns, gpus, data FROM gpu_rollups WHERE resolution_ns = ? AND node = ? "
              "AND bucket_ns BETWEEN ? AND ? ORDER BY bucket_ns");
      q.arg(resolution_ns).arg(node).arg(from_ns).arg(to_ns);
      read(q);
    }
    return out;
  }

  GpuSummary gpu_summary(const std::vector<std::pair<std::string, int32_t>>& gpus, int64_t from_ns,
                         int64_t to_ns) override {
    GpuSummary s;
    std::optional<int64_t> finest;
    {
      Query q(*db_, "SELECT min(resolution_ns) FROM gpu_rollups");
      if (q.next()) finest = q.opt_i64(0);
    }
    if (!finest) return s;
    std::map<std::string, std::set<int32_t>> wanted;
    for (const auto& [node, gpu] : gpus) wanted[node].insert(gpu);
    std::vector<std::string> nodes;
    for (const auto& [node, set] : wanted) nodes.push_back(node);
    double util_sum = 0;
    int64_t util_n = 0;
    std::set<std::pair<std::string, int32_t>> seen;
    for (const auto& r : gpu_rollups(nodes, *finest, from_ns, to_ns)) {
      if (!wanted[r.node].count(r.gpu)) continue;
      seen.insert({r.node, r.gpu});
      s.samples += r.samples;
      util_sum += r.util_pct.sum;
      util_n += r.util_pct.n;
      if (r.temp_c.n && (!s.temp_max || r.temp_c.max > *s.temp_max)) s.temp_max = r.temp_c.max;
      if (r.power_w.n && (!s.power_max || r.power_w.max > *s.power_max)) s.power_max = r.power_w.max;
      if (r.sm_clock_mhz.n && (!s.sm_clock_min || r.sm_clock_mhz.min < *s.sm_clock_min))
        s.sm_clock_min = r.sm_clock_mhz.min;
      s.throttle_reasons |= r.throttle_reasons;
      if (r.xid != 0) s.xid = r.xid;
    }
    s.gpus = static_cast<int64_t>(seen.size());
    if (util_n > 0) s.util_mean = util_sum / static_cast<double>(util_n);
    return s;
  }

 private:
  static std::optional<double> max_of(const Agg& a) { return a.n ? std::optional<double>(a.max) : std::nullopt; }
  std::shared_ptr<Db> db_;
};

// --- the evaluation store --------------------------------------------------------------

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string library_versions_json(const std::vector<std::pair<std::string, std::string>>& libs) {
  auto sorted = libs;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  json::Writer w(&out);
  w.begin_object();
  for (const auto& [k, v] : sorted) w.key(k).str(v);
  w.end_object();
  return out;
}

double json_number(const json::Value& v) {
  if (v.type == json::Value::Type::kNumber) return v.number;
  if (v.text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (v.text == "Infinity") return std::numeric_limits<double>::infinity();
  if (v.text == "-Infinity") return -std::numeric_limits<double>::infinity();
  return 0;
}

// The columns of evaluation_runs read by read_evaluation(), in its order.
constexpr const char* kEvaluationColumns =
    "SELECT evaluation_id, coalesce(model_id, ''), coalesce(model_version, ''), coalesce(checkpoint_id, ''), "
    "coalesce(checkpoint_hash, ''), coalesce(run_id, ''), coalesce(dataset_id, ''), coalesce(dataset_version, ''), "
    "coalesce(dataset_hash, ''), coalesce(benchmark, ''), coalesce(benchmark_version, ''), coalesce(suite, ''), "
    "coalesce(prompt_template_version, ''), coalesce(prompt_template_hash, ''), coalesce(evaluator_version, ''), "
    "coalesce(uses_judge, 0), coalesce(judge_model, ''), coalesce(judge_model_version, ''), "
    "coalesce(judge_prompt_version, ''), coalesce(judge_prompt_hash, ''), coalesce(rubric_version, ''), "
    "temperature, coalesce(decoding_json, ''), coalesce(code_commit, ''), coalesce(worker_version, ''), "
    "coalesce(library_versions_json, ''), coalesce(cache_key, ''), coalesce(cached_from, ''), coalesce(status, ''), "
    "coalesce(started_at, ''), coalesce(completed_at, ''), coalesce(created_at_ns, 0) FROM evaluation_runs ";

EvaluationRecord read_evaluation(const Query& q) {
  EvaluationRecord r;
  int c = 0;
  for (std::string* f :
       {&r.evaluation_id, &r.model_id, &r.model_version, &r.checkpoint_id, &r.checkpoint_hash, &r.run_id, &r.dataset_id,
        &r.dataset_version, &r.dataset_hash, &r.benchmark, &r.benchmark_version, &r.suite, &r.prompt_template_version,
        &r.prompt_template_hash, &r.evaluator_version}) {
    *f = q.text(c++);
  }
  r.uses_judge = q.i64(c++) != 0;
  for (std::string* f :
       {&r.judge_model, &r.judge_model_version, &r.judge_prompt_version, &r.judge_prompt_hash, &r.rubric_version}) {
    *f = q.text(c++);
  }
  r.temperature = q.opt_f64(c++);
  r.decoding_json = q.text(c++);
  r.code_commit = q.text(c++);
  r.worker_version = q.text(c++);
  json::Value libs;
  json::ParseError err;
  std::string text = q.text(c++);
  if (!text.empty() && json::parse(text, &libs, &err)) {
    for (const auto& [k, v] : libs.members) r.library_versions.emplace_back(k, v.text);
  }
  r.cache_key = q.text(c++);
  r.cached_from = q.text(c++);
  r.status = q.text(c++);
  r.started_at = q.text(c++);
  r.completed_at = q.text(c++);
  r.created_ns = q.i64(c++);
  return r;
}

ShardRecord read_shard(const Query& q) {
  ShardRecord s;
  s.evaluation_id = q.text(0);
  s.shard = static_cast<int32_t>(q.i64(1));
  s.dataset_partition = q.text(2);
  s.item_begin = q.i64(3);
  s.item_end = q.i64(4);
  s.status = q.text(5);
  s.attempt = static_cast<int32_t>(q.i64(6));
  s.worker = q.text(7);
  s.cache_key = q.text(8);
  if (auto a = q.opt_i64(9)) s.result_attempt = static_cast<int32_t>(*a);
  return s;
}

constexpr const char* kShardColumns =
    "SELECT evaluation_id, shard, coalesce(dataset_partition, ''), item_begin, item_end, status, attempt, "
    "coalesce(worker, ''), coalesce(cache_key, ''), result_attempt FROM evaluation_shards ";

MetricValue read_metric(const Query& q, int c) {
  MetricValue m;
  m.name = q.text(c);
  m.value = q.is_null(c + 1) ? 0 : q.f64(c + 1);
  m.n = q.is_null(c + 2) ? 0 : q.i64(c + 2);
  m.std_error = q.opt_f64(c + 3);
  return m;
}

class SqliteEvalStore final : public EvalStore {
 public:
  explicit SqliteEvalStore(std::shared_ptr<Db> db) : db_(std::move(db)) {}

  bool register_model_version(const ModelVersionRecord& v) override {
    if (v.model_id.empty() || v.version.empty()) throw StoreError("a model version needs a model id and a version");
    Db& db = *db_;
    Transaction tx(db);
    {
      Query q(db,
              "SELECT coalesce(checkpoint_id, ''), created_ns FROM model_versions WHERE model_id = ? AND "
              "model_version = ?");
      q.arg(v.model_id).arg(v.version);
      if (q.next()) {
        std::string have = q.text(0);
        bool registered = !q.is_null(1);
        if (!v.checkpoint_id.empty() && !have.empty() && have != v.checkpoint_id) {
          throw StoreError("model version " + v.id() + " is registered with checkpoint " + have + ", not " +
                           v.checkpoint_id);
        }
        if (registered && (v.checkpoint_id.empty() || have == v.checkpoint_id)) return false;
      }
    }
    Query(db, "INSERT OR IGNORE INTO models (model_id, created_ns) VALUES (?, ?)").arg(v.model_id).arg(now_ns()).run();
    Query(db,
          "INSERT INTO model_versions (model_id, model_version, run_id, checkpoint_id, status, created_ns) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (model_id, model_version) DO UPDATE SET "
          "run_id = coalesce(model_versions.run_id, excluded.run_id), "
          "checkpoint_id = coalesce(model_versions.checkpoint_id, excluded.checkpoint_id), "
          "status = coalesce(model_versions.status, excluded.status), "
          "created_ns = coalesce(model_versions.created_ns, excluded.created_ns)")
        .arg(v.model_id)
        .arg(v.version)
        .opt_text(v.run_id)
        .opt_text(v.checkpoint_id)
        .arg(v.status.empty() ? std::string("registered") : v.status)
        .arg(v.created_ns ? v.created_ns : now_ns())
        .run();
    tx.commit();
    return true;
  }

  bool register_checkpoint(const CheckpointRecord& c) override {
    if (c.checkpoint_id.empty()) throw StoreError("a checkpoint needs an id");
    if (!is_sha256_hex(c.content_hash)) {
      throw StoreError("checkpoint " + c.checkpoint_id + ": content hash '" + c.content_hash +
                       "' is not a SHA-256 (64 hex digits)");
    }
    Db& db = *db_;
    Transaction tx(db);
    {
      Query q(db,
              "SELECT run_id, coalesce(sha256, ''), coalesce(parent_checkpoint_id, '') FROM checkpoints WHERE "
              "checkpoint_id = ? ORDER BY run_id");
      q.arg(c.checkpoint_id);
      while (q.next()) {
        if (!c.run_id.empty() && q.text(0) != c.run_id) continue;
        std::string have = q.text(1);
        if (!have.empty() && have != c.content_hash) {
          throw StoreError("checkpoint " + c.checkpoint_id + " is registered with content hash " + have + ", not " +
                           c.content_hash);
        }
        if (have == c.content_hash && (c.parent_id.empty() || q.text(2) == c.parent_id)) return false;
      }
    }
    Query(db,
          "INSERT INTO checkpoints (run_id, checkpoint_id, step, time_ns, uri, sha256, parent_checkpoint_id, "
          "registered_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?4) ON CONFLICT (run_id, checkpoint_id) DO UPDATE SET "
          "step = coalesce(checkpoints.step, excluded.step), uri = coalesce(checkpoints.uri, excluded.uri), "
          "sha256 = excluded.sha256, parent_checkpoint_id = coalesce(excluded.parent_checkpoint_id, "
          "checkpoints.parent_checkpoint_id), registered_ns = excluded.registered_ns")
        .arg(c.run_id)
        .arg(c.checkpoint_id)
        .opt(c.step)
        .arg(now_ns())
        .opt_text(c.uri)
        .arg(c.content_hash)
        .opt_text(c.parent_id)
        .run();
    tx.commit();
    return true;
  }

  bool register_dataset_version(const DatasetVersionRecord& d) override {
    if (d.dataset_id.empty() || d.version.empty())
      throw StoreError("a dataset version needs a dataset id and a version");
    std::string name = d.dataset_id + ":" + d.version;
    if (!is_sha256_hex(d.content_hash)) {
      throw StoreError("dataset version " + name + ": content hash '" + d.content_hash +
                       "' is not a SHA-256 (64 hex digits)");
    }
    Db& db = *db_;
    Transaction tx(db);
    {
      Query q(db,
              "SELECT coalesce(content_hash, ''), coalesce(items, 0) FROM dataset_versions WHERE dataset_id = ? AND "
              "dataset_version = ?");
      q.arg(d.dataset_id).arg(d.version);
      if (q.next()) {
        if (q.text(0) != d.content_hash) {
          throw StoreError("dataset version " + name + " is registered with content hash " + q.text(0) + ", not " +
                           d.content_hash);
        }
        if (q.i64(1) != d.items) {
          throw StoreError("dataset version " + name + " is registered with " + std::to_string(q.i64(1)) +
                           " items, not " + std::to_string(d.items));
        }
        return false;
      }
    }
    Query(db, "INSERT OR IGNORE INTO datasets (dataset_id, created_ns) VALUES (?, ?)")
        .arg(d.dataset_id)
        .arg(now_ns())
        .run();
    Query(
        db,
        "INSERT INTO dataset_versions (dataset_id, dataset_version, content_hash, items, created_ns) VALUES (?, ?, ?, "
        "?, ?)")
        .arg(d.dataset_id)
        .arg(d.version)
        .arg(d.content_hash)
        .arg(d.items)
        .arg(now_ns())
        .run();
    tx.commit();
    return true;
  }

  bool register_benchmark_version(const BenchmarkVersionRecord& b) override {
    if (b.benchmark.empty() || b.version.empty())
      throw StoreError("a benchmark version needs a benchmark and a version");
    Db& db = *db_;
    Transaction tx(db);
    {
      Query q(
          db,
          "SELECT coalesce(content_hash, '') FROM benchmark_versions WHERE benchmark = ? AND benchmark_version = ?");
      q.arg(b.benchmark).arg(b.version);
      if (q.next()) {
        if (q.text(0) != b.content_hash) {
          throw StoreError("benchmark version " + b.benchmark + ":" + b.version + " is registered with content hash '" +
                           q.text(0) + "', not '" + b.content_hash + "'");
        }
        return false;
      }
    }
    Query(db, "INSERT OR IGNORE INTO benchmarks (benchmark, created_ns) VALUES (?, ?)")
        .arg(b.benchmark)
        .arg(now_ns())
        .run();
    Query(db,
          "INSERT INTO benchmark_versions (benchmark, benchmark_version, content_hash, created_ns) VALUES (?, ?, ?, ?)")
        .arg(b.benchmark)
        .arg(b.version)
        .opt_text(b.content_hash)
        .arg(now_ns())
        .run();
    tx.commit();
    return true;
  }

  void set_model_version_status(const std::string& model_id, const std::string& version,
                                const std::string& status) override {
    Db& db = *db_;
    Transaction tx(db);
    Query(db, "UPDATE model_versions SET status = ? WHERE model_id = ? AND model_version = ?")
        .arg(status)
        .arg(model_id)
        .arg(version)
        .run();
    if (db.changes() == 0) throw StoreError("no model version " + model_id + ":" + version);
    tx.commit();
  }

  void write_evaluation(const EvaluationRecord& r) override {
    if (std::string why = check_writable(r); !why.empty()) throw StoreError(why);
    Db& db = *db_;
    Transaction tx(db);
    Query q(db,
            "INSERT OR REPLACE INTO evaluation_runs (evaluation_id, model_id, model_version, checkpoint_id, "
            "checkpoint_hash, run_id, dataset_id, dataset_version, dataset_hash, benchmark, benchmark_version, suite, "
            "prompt_template_version, prompt_template_hash, evaluator_version, uses_judge, judge_model, "
            "judge_model_version, judge_prompt_version, judge_prompt_hash, rubric_version, temperature, decoding_json, "
            "code_commit, worker_version, library_versions_json, cache_key, cached_from, status, started_at, "
            "completed_at, created_at_ns, updated_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (const std::string* f :
         {&r.evaluation_id, &r.model_id, &r.model_version, &r.checkpoint_id, &r.checkpoint_hash}) {
      q.arg(*f);
    }
    q.opt_text(r.run_id);
    for (const std::string* f :
         {&r.dataset_id, &r.dataset_version, &r.dataset_hash, &r.benchmark, &r.benchmark_version}) {
      q.arg(*f);
    }
    q.opt_text(r.suite).arg(r.prompt_template_version).arg(r.prompt_template_hash).arg(r.evaluator_version);
    q.arg(r.uses_judge);
    for (const std::string* f :
         {&r.judge_model, &r.judge_model_version, &r.judge_prompt_version, &r.judge_prompt_hash, &r.rubric_version}) {
      q.opt_text(*f);
    }
    q.opt(r.temperature).arg(r.decoding_json).arg(r.code_commit).arg(r.worker_version);
    q.arg(library_versions_json(r.library_versions)).arg(r.cache_key).opt_text(r.cached_from).arg(r.status);
    q.arg(r.started_at).opt_text(r.completed_at).arg(r.created_ns ? r.created_ns : now_ns()).arg(now_ns());
    q.run();
    tx.commit();
  }

  void set_evaluation_status(const std::string& evaluation_id, const std::string& status,
                             const std::string& completed_at) override {
    Db& db = *db_;
    Transaction tx(db);
    std::optional<EvaluationRecord> r;
    {
      static const std::string by_id = std::string(kEvaluationColumns) + "WHERE evaluation_id = ?";
      Query q(db, by_id.c_str());
      q.arg(evaluation_id);
      if (q.next()) r = read_evaluation(q);
    }
    if (!r) throw StoreError("no evaluation " + evaluation_id);
    r->status = status;
    if (!completed_at.empty()) r->completed_at = completed_at;
    if (std::string why = check_writable(*r); !why.empty()) throw StoreError(why);
    Query(db, "UPDATE evaluation_runs SET status = ?, completed_at = ?, updated_ns = ? WHERE evaluation_id = ?")
        .arg(status)
        .opt_text(r->completed_at)
        .arg(now_ns())
        .arg(evaluation_id)
        .run();
    tx.commit();
  }

  void set_metrics(const std::string& evaluation_id, const std::vector<MetricValue>& metrics) override {
    Db& db = *db_;
    Transaction tx(db);
    std::string benchmark;
    {
      Query q(db, "SELECT coalesce(benchmark, '') FROM evaluation_runs WHERE evaluation_id = ?");
      q.arg(evaluation_id);
      if (!q.next()) throw StoreError("no evaluation " + evaluation_id);
      benchmark = q.text(0);
    }
    Query(db, "DELETE FROM evaluation_scores WHERE evaluation_id = ? AND metric <> ''").arg(evaluation_id).run();
    for (const MetricValue& m : metrics) {
      Query(db,
            "INSERT OR REPLACE INTO evaluation_scores (evaluation_id, benchmark, metric, score, n, std_error) VALUES "
            "(?, ?, ?, ?, ?, ?)")
          .arg(evaluation_id)
          .arg(benchmark)
          .arg(m.name)
          .arg(m.value)
          .arg(m.n)
          .opt(m.std_error)
          .run();
    }
    tx.commit();
  }

  void add_shards(const std::vector<ShardRecord>& shards) override {
    Db& db = *db_;
    Transaction tx(db);
    for (const ShardRecord& s : shards) {
      Query(db,
            "INSERT OR IGNORE INTO evaluation_shards (evaluation_id, shard, dataset_partition, item_begin, item_end, "
            "status, attempt, worker, cache_key, updated_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
          .arg(s.evaluation_id)
          .arg(s.shard)
          .opt_text(s.dataset_partition)
          .arg(s.item_begin)
          .arg(s.item_end)
          .arg(s.status)
          .arg(s.attempt)
          .opt_text(s.worker)
          .opt_text(s.cache_key)
          .arg(now_ns())
          .run();
    }
    tx.commit();
  }

  void set_shard_status(const std::string& evaluation_id, int32_t shard, const std::string& status, int32_t attempt,
                        const std::string& worker) override {
    Db& db = *db_;
    Transaction tx(db);
    Query(db,
          "UPDATE evaluation_shards SET status = ?, attempt = ?, worker = ?, updated_ns = ? WHERE evaluation_id = ? "
          "AND shard = ?")
        .arg(status)
        .arg(attempt)
        .opt_text(worker)
        .arg(now_ns())
        .arg(evaluation_id)
        .arg(shard)
        .run();
    if (db.changes() == 0) throw StoreError("evaluation " + evaluation_id + " has no shard " + std::to_string(shard));
    tx.commit();
  }

  bool write_shard_result(const ShardResult& r) override {
    Db& db = *db_;
    Transaction tx(db);
    std::string cache_key;
    {
      Query q(db,
              "SELECT result_attempt, coalesce(cache_key, '') FROM evaluation_shards WHERE evaluation_id = ? AND "
              "shard = ?");
      q.arg(r.evaluation_id).arg(r.shard);
      if (!q.next()) {
        throw StoreError("evaluation " + r.evaluation_id + " has no shard " + std::to_string(r.shard));
      }
      if (!q.is_null(0)) return false;  // results already kept: a duplicate or a late retry
      cache_key = q.text(1);
    }
    for (const ItemResult& it : r.items) {
      std::string scores;
      json::Writer w(&scores);
      w.begin_object();
      for (const auto& [k, v] : it.scores) w.key(k).num(v);
      w.end_object();
      std::string clusters;
      if (!it.clusters.empty()) {
        json::Writer c(&clusters);
        c.begin_object();
        for (const auto& [k, v] : it.clusters) c.key(k).str(v);
        c.end_object();
      }
      Query(db,
            "INSERT OR REPLACE INTO evaluation_items (evaluation_id, item, shard, attempt, item_hash, scores_json, "
            "response_hash, latency_ms, error, clusters_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
          .arg(r.evaluation_id)
          .arg(it.item)
          .arg(r.shard)
          .arg(r.attempt)
          .opt_text(it.item_hash)
          .arg(scores)
          .opt_text(it.response_hash)
          .arg(it.latency_ms)
          .opt_text(it.error)
          .opt_text(clusters)
          .run();
    }
    for (const MetricValue& m : r.metrics) {
      Query(db,
            "INSERT OR REPLACE INTO evaluation_shard_metrics (evaluation_id, shard, metric, attempt, value, n, "
            "std_error) VALUES (?, ?, ?, ?, ?, ?, ?)")
          .arg(r.evaluation_id)
          .arg(r.shard)
          .arg(m.name)
          .arg(r.attempt)
          .arg(m.value)
          .arg(m.n)
          .opt(m.std_error)
          .run();
    }
    Query(db,
          "UPDATE evaluation_shards SET status = 'COMPLETED', attempt = ?1, result_attempt = ?1, "
          "worker = coalesce(?2, worker), updated_ns = ?3 WHERE evaluation_id = ?4 AND shard = ?5")
        .arg(r.attempt)
        .opt_text(r.worker)
        .arg(now_ns())
        .arg(r.evaluation_id)
        .arg(r.shard)
        .run();
    if (!cache_key.empty()) {
      Query(db,
            "INSERT OR IGNORE INTO evaluation_cache (cache_key, evaluation_id, shard, created_ns) VALUES (?, ?, ?, ?)")
          .arg(cache_key)
          .arg(r.evaluation_id)
          .arg(r.shard)
          .arg(now_ns())
          .run();
    }
    tx.commit();
    return true;
  }

  void put_cache(const CacheEntry& e) override {
    if (e.cache_key.empty() || e.evaluation_id.empty()) throw StoreError("a cache entry needs a key and an evaluation");
    Db& db = *db_;
    Transaction tx(db);
    Query(db,
          "INSERT OR REPLACE INTO evaluation_cache (cache_key, evaluation_id, shard, created_ns) VALUES (?, ?, ?, ?)")
        .arg(e.cache_key)
        .arg(e.evaluation_id)
        .opt(e.shard)
        .arg(now_ns())
        .run();
    tx.commit();
  }

  std::optional<CacheEntry> cache_lookup(const std::string& cache_key) override {
    Query q(*db_, "SELECT cache_key, evaluation_id, shard FROM evaluation_cache WHERE cache_key = ?");
    q.arg(cache_key);
    if (!q.next()) return std::nullopt;
    CacheEntry e{q.text(0), q.text(1), std::nullopt};
    if (auto s = q.opt_i64(2)) e.shard = static_cast<int32_t>(*s);
    return e;
  }

  std::optional<EvaluationView> evaluation(const std::string& evaluation_id) override {
    static const std::string by_id = std::string(kEvaluationColumns) + "WHERE evaluation_id = ?";
    EvaluationView v;
    {
      Query q(*db_, by_id.c_str());
      q.arg(evaluation_id);
      if (!q.next()) return std::nullopt;
      v.run = read_evaluation(q);
    }
    static const std::string shards = std::string(kShardColumns) + "WHERE evaluation_id = ? ORDER BY shard";
    Query s(*db_, shards.c_str());
    s.arg(evaluation_id);
    while (s.next()) {
      v.shards.push_back(read_shard(s));
      if (v.shards.back().status == "COMPLETED" || v.shards.back().status == "CACHED") ++v.shards_completed;
    }
    Query m(*db_,
            "SELECT metric, score, n, std_error FROM evaluation_scores WHERE evaluation_id = ? AND metric <> '' "
            "ORDER BY metric");
    m.arg(evaluation_id);
    while (m.next()) v.metrics.push_back(read_metric(m, 0));
    return v;
  }

  std::vector<ItemResult> items(const std::string& evaluation_id, std::optional<int32_t> shard) override {
    Query q(*db_,
            "SELECT item, shard, attempt, coalesce(item_hash, ''), scores_json, coalesce(response_hash, ''), "
            "coalesce(latency_ms, 0), coalesce(error, ''), coalesce(clusters_json, '') FROM evaluation_items WHERE "
            "evaluation_id = ?1 AND "
            "(?2 IS NULL OR shard = ?2) ORDER BY item");
    q.arg(evaluation_id).opt(shard);
    std::vector<ItemResult> out;
    while (q.next()) {
      ItemResult it;
      it.item = q.i64(0);
      it.shard = static_cast<int32_t>(q.i64(1));
      it.attempt = static_cast<int32_t>(q.i64(2));
      it.item_hash = q.text(3);
      json::Value scores;
      json::ParseError err;
      if (json::parse(q.text(4), &scores, &err)) {
        for (const auto& [k, v] : scores.members) it.scores.emplace_back(k, json_number(v));
      }
      it.response_hash = q.text(5);
      it.latency_ms = q.f64(6);
      it.error = q.text(7);
      if (json::Value c; !q.text(8).empty() && json::parse(q.text(8), &c, &err)) {
        for (const auto& [k, v] : c.members) {
          if (v.type == json::Value::Type::kString) it.clusters.emplace_back(k, v.text);
        }
      }
      out.push_back(std::move(it));
    }
    return out;
  }

  std::vector<MetricValue> shard_metrics(const std::string& evaluation_id, int32_t shard) override {
    Query q(*db_,
            "SELECT metric, value, n, std_error FROM evaluation_shard_metrics WHERE evaluation_id = ? AND shard = ? "
            "ORDER BY metric");
    q.arg(evaluation_id).arg(shard);
    std::vector<MetricValue> out;
    while (q.next()) out.push_back(read_metric(q, 0));
    return out;
  }

  std::vector<EvaluationRecord> evaluations(const EvaluationFilter& f) override {
    static const std::string sql =
        std::string(kEvaluationColumns) +
        "WHERE (?1 = '' OR (model_id = ?1 AND model_version = ?2)) AND (?3 = '' OR benchmark = ?3) AND "
        "(?4 = '' OR benchmark_version = ?4) ORDER BY evaluation_id";
    Query q(*db_, sql.c_str());
    q.arg(f.model_id).arg(f.model_version).arg(f.benchmark).arg(f.benchmark_version);
    std::vector<EvaluationRecord> out;
    while (q.next()) out.push_back(read_evaluation(q));
    return out;
  }

  std::optional<ModelVersionView> model_version(const std::string& model_id, const std::string& version) override {
    ModelVersionView v;
    {
      Query q(
          *db_,
          "SELECT model_id, model_version, coalesce(checkpoint_id, ''), coalesce(run_id, ''), coalesce(status, ''), "
          "coalesce(created_ns, 0) FROM model_versions WHERE model_id = ? AND model_version = ?");
      q.arg(model_id).arg(version);
      if (!q.next()) return std::nullopt;
      v.version = {q.text(0), q.text(1), q.text(2), q.text(3), q.text(4), q.i64(5)};
    }
    EvaluationFilter f;
    f.model_id = model_id;
    f.model_version = version;
    v.evaluations = evaluations(f);
    return v;
  }

  std::optional<CheckpointRecord> checkpoint(const std::string& checkpoint_id) override {
    Query q(*db_,
            "SELECT checkpoint_id, run_id, step, coalesce(sha256, ''), coalesce(parent_checkpoint_id, ''), "
            "coalesce(uri, '') FROM checkpoints WHERE checkpoint_id = ? ORDER BY sha256 IS NULL, run_id LIMIT 1");
    q.arg(checkpoint_id);
    if (!q.next()) return std::nullopt;
    return CheckpointRecord{q.text(0), q.text(1), q.opt_i64(2), q.text(3), q.text(4), q.text(5)};
  }

  std::vector<PendingCheckpoint> unregistered_checkpoints(int64_t limit) override {
    Query q(*db_,
            "SELECT c.checkpoint_id, c.run_id, c.step, c.sha256, coalesce(c.parent_checkpoint_id, ''), "
            "coalesce(c.uri, ''), coalesce(r.model_id, '') FROM checkpoints c LEFT JOIN runs r ON r.run_id = c.run_id "
            "WHERE c.registered_ns IS NULL AND c.sha256 IS NOT NULL AND c.sha256 <> '' AND (c.ok IS NULL OR c.ok <> 0) "
            "ORDER BY c.time_ns, c.run_id, c.checkpoint_id LIMIT ?");
    q.arg(limit);
    std::vector<PendingCheckpoint> out;
    while (q.next()) {
      out.push_back(PendingCheckpoint{
          CheckpointRecord{q.text(0), q.text(1), q.opt_i64(2), q.text(3), q.text(4), q.text(5)}, q.text(6)});
    }
    return out;
  }

  void mark_checkpoint_registered(const std::string& run_id, const std::string& checkpoint_id) override {
    Db& db = *db_;
    Transaction tx(db);
    Query(db, "UPDATE checkpoints SET registered_ns = ? WHERE run_id = ? AND checkpoint_id = ?")
        .arg(now_ns())
        .arg(run_id)
        .arg(checkpoint_id)
        .run();
    tx.commit();
  }

  std::optional<DatasetVersionRecord> dataset_version(const std::string& dataset_id,
                                                      const std::string& version) override {
    Query q(*db_,
            "SELECT dataset_id, dataset_version, coalesce(content_hash, ''), coalesce(items, 0) FROM dataset_versions "
            "WHERE dataset_id = ? AND dataset_version = ?");
    q.arg(dataset_id).arg(version);
    if (!q.next()) return std::nullopt;
    return DatasetVersionRecord{q.text(0), q.text(1), q.text(2), q.i64(3)};
  }

  void write_gate_rows(const std::vector<GateRow>& rows) override {
    Db& db = *db_;
    Transaction tx(db);
    for (const auto& r : rows) {
      Query(db,
            "INSERT OR REPLACE INTO quality_gates (gate_id, evaluation_id, benchmark, threshold, passed, metric, "
            "observed, decided_ns, decision_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
          .arg(r.gate_id)
          .arg(r.evaluation_id)
          .opt_text(r.benchmark)
          .opt(r.threshold)
          .opt(r.passed)
          .opt_text(r.metric)
          .opt(r.observed)
          .arg(r.decided_ns ? r.decided_ns : now_ns())
          .opt_text(r.decision_json)
          .run();
    }
    tx.commit();
  }

  std::vector<GateRow> gate_rows(const std::string& gate_id) override {
    Query q(*db_,
            "SELECT gate_id, evaluation_id, coalesce(benchmark, ''), threshold, passed, coalesce(metric, ''), "
            "observed, coalesce(decided_ns, 0), coalesce(decision_json, '') FROM quality_gates WHERE gate_id = ?1 OR "
            "substr(gate_id, 1, "
            "length(?1) + 1) = ?1 || '/' ORDER BY decided_ns, gate_id");
    q.arg(gate_id);
    return read_gate_rows(q);
  }

  std::vector<GateRow> gate_rows_of_evaluation(const std::string& evaluation_id) override {
    Query q(*db_,
            "SELECT gate_id, evaluation_id, coalesce(benchmark, ''), threshold, passed, coalesce(metric, ''), "
            "observed, coalesce(decided_ns, 0), coalesce(decision_json, '') FROM quality_gates WHERE evaluation_id = ? "
            "ORDER BY decided_ns, "
            "gate_id");
    q.arg(evaluation_id);
    return read_gate_rows(q);
  }

  void write_transitions(const std::vector<TransitionRecord>& records) override {
    Db& db = *db_;
    Transaction tx(db);
    for (const auto& t : records) {
      Query(db,
            "INSERT OR REPLACE INTO model_version_transitions (model_id, model_version, seq, from_status, "
            "to_status, actor, decided_ns, gate_id, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
          .arg(t.model_id)
          .arg(t.model_version)
          .arg(t.seq)
          .arg(t.from_status)
          .arg(t.to_status)
          .arg(t.actor)
          .arg(t.decided_ns ? t.decided_ns : now_ns())
          .opt_text(t.gate_id)
          .opt_text(t.reason)
          .run();
    }
    tx.commit();
  }

  std::vector<TransitionRecord> transitions(const std::string& model_id, const std::string& version) override {
    Query q(*db_,
            "SELECT model_id, model_version, seq, from_status, to_status, actor, decided_ns, coalesce(gate_id, ''), "
            "coalesce(reason, '') FROM model_version_transitions WHERE model_id = ?1 AND (?2 = '' OR "
            "model_version = ?2) ORDER BY seq, model_version");
    q.arg(model_id).arg(version);
    std::vector<TransitionRecord> out;
    while (q.next()) {
      TransitionRecord t;
      t.model_id = q.text(0);
      t.model_version = q.text(1);
      t.seq = q.i64(2);
      t.from_status = q.text(3);
      t.to_status = q.text(4);
      t.actor = q.text(5);
      t.decided_ns = q.i64(6);
      t.gate_id = q.text(7);
      t.reason = q.text(8);
      out.push_back(std::move(t));
    }
    return out;
  }

 private:
  static std::vector<GateRow> read_gate_rows(Query& q) {
    std::vector<GateRow> out;
    while (q.next()) {
      GateRow r;
      r.gate_id = q.text(0);
      r.evaluation_id = q.text(1);
      r.benchmark = q.text(2);
      if (!q.is_null(3)) r.threshold = q.f64(3);
      if (!q.is_null(4)) r.passed = q.i64(4) != 0;
      r.metric = q.text(5);
      if (!q.is_null(6)) r.observed = q.f64(6);
      r.decided_ns = q.i64(7);
      r.decision_json = q.text(8);
      out.push_back(std::move(r));
    }
    return out;
  }

  std::shared_ptr<Db> db_;
};

}  // namespace

}  // namespace runlens::store

namespace runlens::store::sqlite {

namespace {

std::optional<std::string> location_error(const std::string& path) {
  if (path.empty()) return "no path";
  if (path.find_first_of("?#") != std::string::npos) return "'?' and '#' are not allowed (sqlite URLs take no options)";
  return std::nullopt;
}

Store open_location(const std::string& path, const OpenOptions& options) { return open(path, options); }

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

// A file that starts as every SQLite database does.
std::optional<std::string> probe(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  char magic[16] = {};
  in.read(magic, sizeof magic);
  if (in.gcount() != sizeof magic || std::memcmp(magic, "SQLite format 3", sizeof magic) != 0) return std::nullopt;
  return path;
}

const Backend kBackend{
    "sqlite", "sqlite:///ABSOLUTE/PATH.db or sqlite://RELATIVE/PATH.db", location_error, open_location, exists, probe};

}  // namespace

const Backend& backend() { return kBackend; }

Store open(const std::string& path, OpenMode mode, int target_version) {
  return open(path, OpenOptions{.mode = mode}, target_version);
}

Store open(const std::string& path, const OpenOptions& options, int target_version) {
  auto db = open_db(path, options.mode, target_version, options.build_whole);
  Store s;
  s.graph = std::make_unique<SqliteRunGraph>(db);
  s.metrics = std::make_unique<SqliteMetricRows>(db);
  s.evals = std::make_unique<SqliteEvalStore>(db);
  s.schema_version = read_version(*db);
  if (db->building()) {
    s.read_url = std::string(kBackend.scheme) + "://" + db->path();
    s.finish_build = [db] { db->place(); };
  }
  return s;
}

int schema_version(const std::string& path) {
  Db db(path, OpenMode::kReadOnly);
  return read_version(db);
}

}  // namespace runlens::store::sqlite
