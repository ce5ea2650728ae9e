#include "cli/commands.h"

#include <atomic>
#include <csignal>

namespace runlens::cli {

namespace {

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal.store(sig); }

}  // namespace

void install_signal_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() { return g_signal.load() != 0; }

std::map<std::string, std::string> parse_sets(const std::vector<std::string>& sets) {
  std::map<std::string, std::string> vars;
  for (const auto& kv : sets) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw CLI::ValidationError("--set", "expected KEY=VALUE, got '" + kv + "'");
    vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return vars;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace runlens::cli
