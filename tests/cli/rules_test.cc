// Root-cause rules from the command line: `runlens validate` reports rule-file
// errors at their file:line:col; the rules directory is found relative to the
// pipeline file (or through ${RUNLENS_RULES}); the embedded default pipeline
// uses the rules compiled in, from any working directory.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli/child_process.h"

namespace {

using runlens::testing::read_file;

const std::string kBin = RUNLENS_BINARY;
const std::string kSrc = RUNLENS_SOURCE_DIR;

runlens::testing::ShellResult sh(const std::string& cmd) { return runlens::testing::shell(cmd); }

std::string tmpdir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("runlens-rules-cli-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

const char* kPipeline =
    "sources:\n"
    "  telemetry: {type: file, paths: [x.jsonl]}\n"
    "operators:\n"
    "  join: {type: rank_join, inputs: [telemetry]}\n"
    "  diagnose:\n"
    "    type: root_cause\n"
    "    inputs: [telemetry, join]\n"
    "    rules: ${RUNLENS_RULES:-my-rules}\n"
    "sinks:\n"
    "  out: {type: jsonl, inputs: [diagnose], path: out.jsonl}\n";

const char* kBadRule =
    "name: slow\n"
    "symptoms: [straggler]\n"
    "priority: 1\n"
    "tree:\n"
    "  if: temp_c >= 88 and tmp_c > 1\n"
    "  then: {cause: hardware_throttle, owner: infrastructure, recommendation: cool it}\n"
    "  else: {cause: unknown, owner: infrastrucure, recommendation: look}\n";

}  // namespace

TEST_CASE("validate reports rule-file errors at file:line:col, every one") {
  std::string dir = tmpdir("validate");
  write(dir + "/p/pipeline.yaml", kPipeline);
  write(dir + "/p/my-rules/slow.yaml", kBadRule);
  auto r = sh("cd / && " + kBin + " validate " + dir + "/p/pipeline.yaml");
  CHECK(r.code == 2);
  CAPTURE(r.output);
  CHECK(r.output.find(dir +
                      "/p/my-rules/slow.yaml:5:24: error: invalid condition: unknown signal 'tmp_c' (did you mean "
                      "'temp_c'?) (in rules.slow.tree.if)") != std::string::npos);
  CHECK(r.output.find(dir + "/p/my-rules/slow.yaml:7:33: error: unknown owner 'infrastrucure' (did you mean "
                            "'infrastructure'?)") != std::string::npos);

  // A directory that is not there is reported at the pipeline's `rules:`.
  auto missing = sh(kBin + " validate " + dir + "/p/pipeline.yaml --set RUNLENS_RULES=" + dir + "/nowhere");
  CHECK(missing.code == 2);
  CHECK(missing.output.find(dir + "/p/pipeline.yaml:8:12: error: rules directory not found: " + dir + "/nowhere") !=
        std::string::npos);

  // Fixed, it validates from any working directory.
  write(dir + "/p/my-rules/slow.yaml",
        "name: slow\nsymptoms: [straggler]\npriority: 1\ntree: {cause: unknown, owner: infrastructure, recommendation: "
        "look}\n");
  CHECK(sh("cd / && " + kBin + " validate " + dir + "/p/pipeline.yaml").code == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the shipped pipeline finds configs/rules from any working directory; the embedded one needs no file") {
  CHECK(sh("cd / && " + kBin + " validate " + kSrc + "/pipelines/training-health.yaml").code == 0);
  std::string dir = tmpdir("anywhere");
  auto r = sh("cd " + dir + " && " + kBin + " replay " + kSrc +
              "/tests/golden/straggler/input.jsonl --quiet --out out " + "--set RUNLENS_PUBLISH=ipc://" + dir + "/pub");
  CHECK(r.code == 0);
  CHECK(read_file(dir + "/out/alerts.jsonl") == read_file(kSrc + "/tests/golden/straggler/expected_alerts.jsonl"));
  CHECK(read_file(dir + "/out/alerts.jsonl").find("\"kind\":\"diagnosis\"") != std::string::npos);
  // The pipeline file from disk gives the same alerts as its embedded copy.
  auto file =
      sh("cd " + dir + " && " + kBin + " replay " + kSrc + "/tests/golden/straggler/input.jsonl --quiet --out out2 " +
         "--pipeline " + kSrc + "/pipelines/training-health.yaml --set RUNLENS_PUBLISH=ipc://" + dir + "/pub2");
  CHECK(file.code == 0);
  CHECK(read_file(dir + "/out2/alerts.jsonl") == read_file(dir + "/out/alerts.jsonl"));
  std::filesystem::remove_all(dir);
}
