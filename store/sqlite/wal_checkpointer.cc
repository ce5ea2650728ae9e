#include "store/sqlite/wal_checkpointer.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "store/store.h"

namespace runlens::store::sqlite {

struct WalCheckpointer::State {
  sqlite3* writer = nullptr;
  sqlite3* own = nullptr;
  Options o;
  int64_t page_size = 4096;

  std::mutex mu;
  std::condition_variable wake;
  bool wanted = false;   // a checkpoint was asked for since the thread last began one
  bool running = false;  // the thread is checkpointing
  bool stop = false;
  std::atomic<int64_t> background{0}, blocking{0};
  std::thread thread;

  // SQLite's WAL hook: after every commit through `writer`, with the log's length in pages.
  static int on_commit(void* arg, sqlite3* db, const char* name, int pages) {
    auto* s = static_cast<State*>(arg);
    const int64_t bytes = static_cast<int64_t>(pages) * s->page_size;
    if (bytes >= s->o.blocking_bytes) {
      // The backstop: what SQLite's own hook does at its threshold.
      sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      s->blocking.fetch_add(1, std::memory_order_relaxed);
      return SQLITE_OK;
    }
    // Past the threshold every commit asks. Asks while the thread copies make
    // one more round when it is done: it keeps up with the writer, and once it
    // has copied the whole log, the writer's next transaction starts it over.
    if (bytes >= s->o.background_bytes) {
      std::lock_guard l(s->mu);
      if (!s->wanted) {
        s->wanted = true;
        s->wake.notify_one();
      }
    }
    return SQLITE_OK;
  }

  void run() {
    std::unique_lock l(mu);
    for (;;) {
      wake.wait(l, [&] { return wanted || stop; });
      if (stop) return;
      wanted = false;
      running = true;
      l.unlock();
      // Busy (another checkpoint running, a writer restarting the log) is not
      // an error: the next commit past the threshold asks again.
      if (sqlite3_wal_checkpoint_v2(own, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr) == SQLITE_OK)
        background.fetch_add(1, std::memory_order_relaxed);
      l.lock();
      running = false;
    }
  }
};

WalCheckpointer::WalCheckpointer(sqlite3* writer, const std::string& path, Options o) : s_(std::make_unique<State>()) {
  s_->writer = writer;
  s_->o = o;
  if (sqlite3_open_v2(path.c_str(), &s_->own, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    std::string why = s_->own ? sqlite3_errmsg(s_->own) : "out of memory";
    sqlite3_close(s_->own);
    throw StoreError("cannot open store " + path + " for its checkpoints: " + why);
  }
  sqlite3_busy_timeout(s_->own, 1000);
  // A connection learns that the file is in WAL mode (and opens the log) on
  // its first read; until then a checkpoint through it does nothing. The
  // schema cookie is read from the file's header: the schema is not parsed.
  if (sqlite3_exec(s_->own, "PRAGMA schema_version", nullptr, nullptr, nullptr) != SQLITE_OK) {
    std::string why = sqlite3_errmsg(s_->own);
    sqlite3_close(s_->own);
    throw StoreError("cannot read store " + path + " for its checkpoints: " + why);
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(writer, "PRAGMA page_size", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    s_->page_size = std::max<int64_t>(512, sqlite3_column_int64(st, 0));
  sqlite3_finalize(st);
  s_->thread = std::thread([s = s_.get()] { s->run(); });
  sqlite3_wal_hook(writer, &State::on_commit, s_.get());  // replaces SQLite's automatic checkpoint
}

WalCheckpointer::~WalCheckpointer() {
  sqlite3_wal_hook(s_->writer, nullptr, nullptr);
  {
    std::lock_guard l(s_->mu);
    s_->stop = true;
    s_->wake.notify_one();
  }
  s_->thread.join();
  sqlite3_close(s_->own);
  // SQLite's own checkpoint again, should the writer go on without this one;
  // closing the writer checkpoints what is left of the log either way.
  sqlite3_wal_autocheckpoint(s_->writer, static_cast<int>(s_->o.blocking_bytes / s_->page_size));
}

int64_t WalCheckpointer::background_checkpoints() const { return s_->background.load(std::memory_order_relaxed); }
bool WalCheckpointer::idle() const {
  std::lock_guard l(s_->mu);
  return !s_->wanted && !s_->running;
}
int64_t WalCheckpointer::blocking_checkpoints() const { return s_->blocking.load(std::memory_order_relaxed); }

}  // namespace runlens::store::sqlite
