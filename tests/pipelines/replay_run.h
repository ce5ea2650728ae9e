// Runs the default pipeline over files the way `runlens replay` does, in
// process, into a fresh output directory, and reads back what it wrote.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tests/read_file.h"
#include "tests/scratch_dirs.h"

namespace runlens::testing {

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

inline std::string fresh_dir(const std::string& name) {
  static std::atomic<int> counter{0};
  return make_scratch_dir(std::filesystem::temp_directory_path() /
                          ("runlens-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" + name));
}

struct ReplayResult {
  std::string alerts;                     // alerts.jsonl, as written
  std::vector<std::string> dead_letters;  // dead_letter.jsonl lines, sorted
  RunSummary summary;
};

inline ReplayResult replay(const std::vector<std::string>& inputs, int threads = 2, int64_t batch = 0,
                           const std::string& pipeline = "") {
  std::string out = fresh_dir("replay");
  std::map<std::string, std::string> vars{{"RUNLENS_OUT", out}, {"RUNLENS_PUBLISH", "ipc://" + out + "/alerts.sock"}};
  auto spec = load_pipeline(pipeline, vars);
  spec.settings.overflow = runtime::OverflowPolicy::kBlock;
  EngineOptions eo;
  eo.threads = threads;
  eo.replay_inputs = inputs;
  eo.batch_size = batch;
  eo.out_dir = out;
  Engine engine(std::move(spec), eo);
  ReplayResult r;
  r.summary = engine.run();
  r.alerts = read_file(out + "/alerts.jsonl");
  r.dead_letters = lines_of(read_file(out + "/dead_letter.jsonl"));
  std::sort(r.dead_letters.begin(), r.dead_letters.end());
  std::filesystem::remove_all(out);
  return r;
}

}  // namespace runlens::testing
