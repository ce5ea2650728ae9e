// Checkpoints a store's write-ahead log on a thread of its own, so that the
// writer never waits for the copy into the database file or its fsyncs.
//
// SQLite's automatic checkpoint runs inside the commit that crosses its
// threshold, on the writing connection: the store's writer (and, behind its
// queue, the pipeline) stopped for the copy and two fsyncs every 16 MiB of
// log, and a replay's last commit paid for the rest at close. Here the
// writing connection only appends to the log; `WalCheckpointer` is told how
// long the log is after each commit (SQLite's WAL hook) and, past
// `background_bytes`, wakes its thread, which checkpoints PASSIVE through a
// connection of its own: it copies what is committed and blocks no reader
// or writer. The writer starts the log over when a transaction begins after
// a checkpoint has copied all of it.
//
// A log that still grows past `blocking_bytes` (the thread cannot keep up,
// or a reader keeps the log from being started over) is checkpointed by the
// writing connection itself, as SQLite's own hook would: the log stays
// bounded whatever happens.
//
// Threading: attach() and the destructor are the writing connection's owner's;
// the hook runs on whatever thread commits through that connection; the
// checkpoint thread touches only its own connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

struct sqlite3;

namespace runlens::store::sqlite {

class WalCheckpointer {
 public:
  struct Options {
    int64_t background_bytes = int64_t{4} << 20;  // log length that wakes the thread
    int64_t blocking_bytes = int64_t{64} << 20;   // log length the writer checkpoints at itself
  };
  // Installs the WAL hook on `writer` (which must be in WAL mode) and opens a
  // second connection to `path`; throws StoreError when that cannot be opened.
  WalCheckpointer(sqlite3* writer, const std::string& path, Options o);
  WalCheckpointer(sqlite3* writer, const std::string& path) : WalCheckpointer(writer, path, Options{}) {}
  // Stops the thread (after the checkpoint it is running, if any), closes its
  // connection and gives `writer` back SQLite's own automatic checkpoint, so
  // that closing `writer` checkpoints what is left.
  ~WalCheckpointer();
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // Checkpoints the thread has run to the end (for tests and counters).
  int64_t background_checkpoints() const;
  // Times the writer checkpointed itself because the log passed blocking_bytes.
  int64_t blocking_checkpoints() const;
  // No checkpoint asked for and none running: what the commits so far asked
  // the thread to copy is copied (all of the log, unless a reader held it).
  bool idle() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace runlens::store::sqlite
