#include "store/sqlite/fresh_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>

#include "sqlite_fresh_image.h"
#include "store/sqlite/sqlite_store.h"

namespace runlens::store::sqlite {

static_assert(kFreshImageVersion == kSchemaVersion, "the generated image is not of the current schema");

namespace {

// The image into `fd`: its length (the zeros are holes), its spans, synced.
bool write_image(int fd) {
  if (ftruncate(fd, kFreshImageBytes) != 0) return false;
  const unsigned char* data = kFreshImageData;
  for (const auto& span : kFreshImageSpans) {
    const uint32_t offset = span[0], size = span[1];
    for (uint32_t done = 0; done < size;) {
      const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(offset) + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<uint32_t>(n);
    }
    data += size;
  }
  return fdatasync(fd) == 0;
}

}  // namespace

bool free_file_path(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return false;
  struct stat st {};
  return lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

bool place_fresh_image(const std::string& path) {
  if (!free_file_path(path)) return false;
  static std::atomic<unsigned> next{0};
  const std::string beside = path + ".new-" + std::to_string(getpid()) + "-" + std::to_string(next++);
  // 0644 less the umask: what SQLite creates a database file with.
  const int fd = ::open(beside.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool written = write_image(fd);
  const bool closed = ::close(fd) == 0;
  // link(), unlike rename(), fails where a file appeared meanwhile: that one is kept.
  const bool placed = written && closed && ::link(beside.c_str(), path.c_str()) == 0;
  ::unlink(beside.c_str());
  return placed;
}

}  // namespace runlens::store::sqlite
