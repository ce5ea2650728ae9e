// Directories a test program makes for its tests, removed when it exits
// (RUNLENS_KEEP_TEST_DIRS=1 keeps them, to look into a failure). Forked
// children leave with _exit, so only the test program itself removes them.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace runlens::testing {

class ScratchDirs {
 public:
  ~ScratchDirs() {
    if (std::getenv("RUNLENS_KEEP_TEST_DIRS") != nullptr) return;
    std::error_code ec;
    for (const auto& p : paths_) std::filesystem::remove_all(p, ec);
  }
  void add(const std::filesystem::path& p) { paths_.push_back(p); }

 private:
  std::vector<std::filesystem::path> paths_;
};

// Removes `dir` (with what is in it) when the test program exits.
inline void remove_at_exit(const std::filesystem::path& dir) {
  static ScratchDirs dirs;
  dirs.add(dir);
}

// Makes `dir` anew, empty (what was there is removed), to be removed when the
// test program exits. Returns its path.
inline std::string make_scratch_dir(const std::filesystem::path& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  remove_at_exit(dir);
  return dir.string();
}

}  // namespace runlens::testing
