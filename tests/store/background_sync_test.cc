// A store built whole is synced on a thread of its own while it is built
// (store/sqlite/background_sync.h): each ask is followed by a sync that began
// after it, asks made while a sync runs are folded into one more, a file that
// cannot be opened makes asks do nothing, stop() hands on a failed sync's
// error, and the destructor waits for the sync in flight.
#include "store/sqlite/background_sync.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/scratch_dirs.h"

namespace runlens::store::sqlite {
namespace {

namespace fs = std::filesystem;

// A 1 MiB file in a scratch directory (tests/scratch_dirs.h), removed when the program exits.
struct TempFile {
  fs::path path;
  TempFile() {
    static std::atomic<int> counter{0};
    const std::string dir = "runlens-bgsync-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    path = fs::path(runlens::testing::make_scratch_dir(fs::temp_directory_path() / dir)) / "file";
    append(1 << 20);
  }
  void append(size_t bytes) const {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << std::string(bytes, 'x');
  }
};

// Waits (up to `limit`) until `s` has begun more than `than` syncs; its count then.
int wait_past(const BackgroundSync& s, int than, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (s.syncs() <= than && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s.syncs();
}

TEST_CASE("background sync: every ask is followed by a sync that began after it") {
  TempFile f;
  BackgroundSync s(f.path.string());
  CHECK(s.syncs() == 0);  // no ask, no sync (and no thread)
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(s.syncs() == 0);
  int seen = 0;
  for (int i = 0; i < 5; ++i) {
    f.append(64 << 10);
    s.request();
    const int now = wait_past(s, seen);
    REQUIRE(now > seen);
    seen = now;
  }
  // Quiet again: no ask, no more syncs.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(s.syncs() == seen);
}

TEST_CASE("background sync: asks from two threads while syncs run fold into fewer syncs, none lost") {
  TempFile f;
  BackgroundSync s(f.path.string());
  constexpr int kAsks = 2000;
  std::atomic<int> lost{0};
  auto ask = [&] {
    for (int i = 0; i < kAsks; ++i) {
      if (i % 100 == 0) f.append(16 << 10);
      // A sync must begin after this ask: counted before it, the count must pass it.
      const int before = s.syncs();
      s.request();
      if (i % 250 == 249 && wait_past(s, before, std::chrono::seconds(5)) <= before) ++lost;
    }
  };
  std::thread a(ask), b(ask);
  a.join();
  b.join();
  CHECK(lost.load() == 0);
  const int before_last = s.syncs();
  s.request();
  CHECK(wait_past(s, before_last) > before_last);
  CHECK(s.syncs() < 2 * kAsks);  // folded: a sync takes far longer than an ask
}

TEST_CASE("background sync: a file that cannot be opened makes asks do nothing") {
  BackgroundSync s("/nonexistent-dir-runlens/store.db");
  for (int i = 0; i < 10; ++i) s.request();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(s.syncs() == 0);
}

TEST_CASE("background sync: stop() returns the first failed sync's error, and asks after it do nothing") {
  TempFile f;
  BackgroundSync ok(f.path.string());
  ok.request();
  REQUIRE(wait_past(ok, 0) == 1);
  CHECK(ok.stop() == 0);
  const int before = ok.syncs();
  ok.request();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(ok.syncs() == before);
  CHECK(ok.stop() == 0);  // again: the same answer

  // A device with no sync of its own: fdatasync fails (EINVAL), as a failed
  // write-back would, and stop() hands that on.
  BackgroundSync failing("/dev/null");
  failing.request();
  REQUIRE(wait_past(failing, 0) == 1);
  CHECK(failing.stop() == EINVAL);
}

TEST_CASE("background sync: destroyed right after asks, it waits for the sync in flight and starts none") {
  TempFile f;
  for (int i = 0; i < 50; ++i) {
    BackgroundSync s(f.path.string());
    f.append(4 << 10);
    s.request();
    s.request();
  }  // each destructor returns: a hang fails on ctest's time-out
  BackgroundSync never_asked(f.path.string());
  CHECK(never_asked.syncs() == 0);
}

}  // namespace
}  // namespace runlens::store::sqlite
