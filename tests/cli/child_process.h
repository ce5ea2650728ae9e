// Runs the built runlens binary as a child process, for tests of the command
// line: to completion through the shell, or in the background (live runs,
// servers); and the scratch directories and files those tests read.
#pragma once

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/read_file.h"
#include "tests/scratch_dirs.h"

namespace runlens::testing {

// A fresh, empty directory for one test: $TMPDIR/runlens-test-PID-NAME.
inline std::string scratch_dir(const std::string& name) {
  return make_scratch_dir(std::filesystem::temp_directory_path() /
                          ("runlens-test-" + std::to_string(getpid()) + "-" + name));
}

// Writes `text` to DIR/NAME; returns the path.
inline std::string write_text(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// What a shell command printed (stdout and stderr together) and its exit code.
struct ShellResult {
  int code = -1;
  std::string output;
};

// Runs `command` through /bin/sh and waits for it.
inline ShellResult shell(const std::string& command) {
  ShellResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Starts `runlens ARGS...` with stdout and stderr going to `log`.
inline pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> argv{const_cast<char*>(RUNLENS_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(RUNLENS_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

// The child's exit code (128 + signal if killed), or -1 if it had to be killed after `seconds`.
inline int wait_exit(pid_t pid, int seconds = 60) {
  for (int i = 0; i < seconds * 20; ++i) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

inline bool wait_for(const std::function<bool()>& cond, int seconds = 30) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// A loopback TCP port free now (bound, read back, closed): for a server a
// test starts, or for a target that must be down.
inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace runlens::testing
