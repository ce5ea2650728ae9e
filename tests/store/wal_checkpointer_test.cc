// The store's log is checkpointed on a thread of its own
// (store/sqlite/wal_checkpointer.h): the log stays bounded while a writer
// commits, no committed row is lost, and closing checkpoints the rest.
#include "store/sqlite/wal_checkpointer.h"

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <thread>

namespace runlens::store::sqlite {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("runlens-wal-" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

sqlite3* open_wal(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                          nullptr) == SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  REQUIRE(sqlite3_exec(db, "PRAGMA page_size = 16384; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;", nullptr,
                       nullptr, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, data BLOB NOT NULL)", nullptr,
                       nullptr, nullptr) == SQLITE_OK);
  return db;
}

int64_t count(sqlite3* db, const char* sql) {
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return n;
}

// Commits `commits` transactions of `rows` 4 KiB blobs each, from row id `first`.
void write_rows(sqlite3* db, int64_t first, int commits, int rows, const std::string& blob) {
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "INSERT INTO t (id, data) VALUES (?, ?)", -1, &st, nullptr) == SQLITE_OK);
  int64_t id = first;
  for (int c = 0; c < commits; ++c) {
    REQUIRE(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK);
    for (int r = 0; r < rows; ++r) {
      sqlite3_bind_int64(st, 1, id++);
      sqlite3_bind_blob(st, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
      REQUIRE(sqlite3_step(st) == SQLITE_DONE);
      sqlite3_reset(st);
    }
    REQUIRE(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  sqlite3_finalize(st);
}

std::optional<uintmax_t> size_of(const fs::path& p) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  if (ec) return std::nullopt;
  return n;
}

TEST_CASE("wal checkpointer: the log stays bounded while the writer commits, and nothing committed is lost") {
  TempDir dir;
  const std::string path = (dir.path / "s.db").string();
  const fs::path wal = path + "-wal";
  sqlite3* db = open_wal(path);
  const std::string blob(4096, 'x');
  uintmax_t largest_log = 0;
  int64_t background = 0;
  {
    WalCheckpointer::Options o;
    o.background_bytes = int64_t{1} << 20;
    o.blocking_bytes = int64_t{16} << 20;
    WalCheckpointer ck(db, path, o);
    // 200 commits of 64 KiB of rows each, 12.5 MiB, a millisecond apart (the
    // store's writer waits for its batches); SQLite's own checkpoint is off
    // (the hook is the checkpointer's now).
    for (int i = 0; i < 200; ++i) {
      write_rows(db, int64_t{i} * 16, 1, 16, blob);
      if (auto n = size_of(wal)) largest_log = std::max(largest_log, *n);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      // Every 3 MiB (three of the thread's thresholds) the writer waits for
      // the thread to have finished the rounds the commits asked for: on a
      // loaded host (ThreadSanitizer, ctest -j) it may not get a core within
      // the writer's millisecond gaps (the log reached 11 MB), and a round
      // that a loaded disk slows had looked finished when the count of rounds
      // held still for 30 ms (14.8 MB, a fresh clone's `tools/dev test`).
      // This is about the bound the thread keeps when it gets its turn.
      if (i % 48 == 47) {
        for (int w = 0; w < 1000 && !ck.idle(); ++w) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        CHECK(ck.idle());
      }
    }
    // The thread gets its turn: wait for it to have run.
    for (int i = 0; i < 200 && ck.background_checkpoints() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    background = ck.background_checkpoints();
    CHECK(ck.blocking_checkpoints() == 0);
  }
  CHECK(background > 0);
  // Without checkpoints the log would hold all 12.5 MiB (and more, with the
  // b-tree's pages): it was started over along the way.
  CHECK(largest_log < (uintmax_t{10} << 20));
  CHECK(count(db, "SELECT count(*) FROM t") == 3200);
  REQUIRE(sqlite3_close(db) == SQLITE_OK);
  // Closing the last connection checkpointed the rest and removed the log.
  CHECK_FALSE(size_of(wal).has_value());
  sqlite3* again = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &again, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  CHECK(count(again, "SELECT count(*) FROM t") == 3200);
  CHECK(count(again, "SELECT sum(length(data)) FROM t") == 3200 * 4096);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(again, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "ok");
  sqlite3_finalize(st);
  sqlite3_close(again);
}

TEST_CASE("wal checkpointer: a reader holding an old snapshot keeps its view; the writer checkpoints at the bound") {
  TempDir dir;
  const std::string path = (dir.path / "s.db").string();
  sqlite3* db = open_wal(path);
  const std::string blob(4096, 'y');
  write_rows(db, 0, 1, 10, blob);
  // A reader in the middle of a read transaction: the log cannot be started
  // over past its snapshot, so it grows; the writer's backstop still runs.
  sqlite3* reader = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &reader, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_exec(reader, "BEGIN", nullptr, nullptr, nullptr) == SQLITE_OK);
  CHECK(count(reader, "SELECT count(*) FROM t") == 10);
  {
    WalCheckpointer::Options o;
    o.background_bytes = int64_t{256} << 10;
    o.blocking_bytes = int64_t{2} << 20;
    WalCheckpointer ck(db, path, o);
    write_rows(db, 10, 100, 8, blob);  // 3.1 MiB
    CHECK(ck.blocking_checkpoints() > 0);
    CHECK(count(reader, "SELECT count(*) FROM t") == 10);  // its snapshot
    CHECK(count(db, "SELECT count(*) FROM t") == 810);
  }
  REQUIRE(sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
  CHECK(count(reader, "SELECT count(*) FROM t") == 810);
  sqlite3_close(reader);
  REQUIRE(sqlite3_close(db) == SQLITE_OK);
}

TEST_CASE("wal checkpointer: a store it cannot open for its checkpoints is an error, not a crash") {
  TempDir dir;
  const std::string path = (dir.path / "s.db").string();
  sqlite3* db = open_wal(path);
  CHECK_THROWS_WITH_AS(WalCheckpointer(db, (dir.path / "missing" / "x.db").string()),
                       doctest::Contains("for its checkpoints"), std::exception);
  write_rows(db, 0, 1, 4, std::string(100, 'z'));  // the writer is untouched
  CHECK(count(db, "SELECT count(*) FROM t") == 4);
  sqlite3_close(db);
}

}  // namespace
}  // namespace runlens::store::sqlite
