#include "store/sqlite/background_sync.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace runlens::store::sqlite {

struct BackgroundSync::State {
  int fd = -1;
  std::mutex mu;
  std::condition_variable wake;
  bool wanted = false;  // asked for since the thread last began a sync
  bool stop = false;
  int begun = 0;  // syncs begun, under mu
  int error = 0;  // the first failed sync's errno, under mu
  std::thread thread;

  void run() {
    std::unique_lock l(mu);
    for (;;) {
      wake.wait(l, [&] { return wanted || stop; });
      if (stop) return;
      wanted = false;
      ++begun;
      l.unlock();
      const int e = ::fdatasync(fd) == 0 ? 0 : errno;
      l.lock();
      if (error == 0) error = e;
    }
  }
};

BackgroundSync::BackgroundSync(const std::string& path) : s_(std::make_unique<State>()) {
  s_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

BackgroundSync::~BackgroundSync() { stop(); }

int BackgroundSync::stop() {
  {
    std::lock_guard l(s_->mu);
    s_->stop = true;
  }
  s_->wake.notify_one();
  if (s_->thread.joinable()) s_->thread.join();
  std::lock_guard l(s_->mu);
  if (s_->fd >= 0) ::close(std::exchange(s_->fd, -1));
  return s_->error;
}

void BackgroundSync::request() {
  std::lock_guard l(s_->mu);
  if (s_->fd < 0 || s_->stop) return;
  if (!s_->thread.joinable()) {
    try {
      s_->thread = std::thread([s = s_.get()] { s->run(); });
    } catch (const std::system_error&) {  // no thread to spare: the owner's last sync does it all
      ::close(s_->fd);
      s_->fd = -1;
      return;
    }
  }
  if (!s_->wanted) {
    s_->wanted = true;
    s_->wake.notify_one();
  }
}

int BackgroundSync::syncs() const {
  std::lock_guard l(s_->mu);
  return s_->begun;
}

}  // namespace runlens::store::sqlite
