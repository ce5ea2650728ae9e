// Syncs a file on a thread of its own whenever asked, one sync at a time, so
// that whoever writes the file does not wait for the disk, and a last sync
// waits only for what was written after the last one here.
//
// Asks that come while a sync runs are covered by one more sync after it.
// stop() (and the destructor) waits for a sync in flight and starts none: the
// owner makes the file durable itself, and takes stop()'s error as its own
// sync's. The kernel reports a failed write-back once to each open file that
// has not seen it, so a failure a sync here saw would not reach a sync
// through a file the owner opens later.
//
// Threading: request() and syncs() from any thread; the constructor, stop()
// and the destructor are the owner's.
#pragma once

#include <memory>
#include <string>

namespace runlens::store::sqlite {

class BackgroundSync {
 public:
  // Opens `path` (read-only: a sync needs no more); where it cannot be
  // opened, request() does nothing.
  explicit BackgroundSync(const std::string& path);
  ~BackgroundSync();
  BackgroundSync(const BackgroundSync&) = delete;
  BackgroundSync& operator=(const BackgroundSync&) = delete;

  // Asks for a sync of everything written so far; returns at once. The
  // thread starts at the first ask.
  void request();
  // Waits for a sync in flight and ends the thread; asks after it do
  // nothing. Returns the errno of the first sync that failed, 0 if none.
  int stop();
  // Syncs begun so far (for tests): each began after every ask before it.
  int syncs() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace runlens::store::sqlite
