// `runlens validate` builds every component, sources and sinks included: what
// `replay` or `run` would reject, it rejects first, at file:line:col, and
// without side effects. `runlens graph` labels each node with the describe()
// line of its built component.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli/child_process.h"

namespace {

using runlens::testing::scratch_dir;
using runlens::testing::write_text;

const std::string kBin = RUNLENS_BINARY;
const std::string kSrc = RUNLENS_SOURCE_DIR;

runlens::testing::ShellResult sh(const std::string& args) { return runlens::testing::shell(kBin + " " + args); }

// A pipeline whose source and sink parameters are the lines given.
std::string pipeline(const std::string& source_params, const std::string& sink_params) {
  return "sources:\n"
         "  telemetry:\n"
         "    type: zmq\n" +
         source_params +
         "operators:\n"
         "  join: {type: rank_join, inputs: [telemetry]}\n"
         "sinks:\n"
         "  store:\n"
         "    type: timeline\n"
         "    inputs: [telemetry, join]\n"
         "    store: sqlite://${RUNLENS_OUT}/runlens.db\n" +
         sink_params;
}

}  // namespace

TEST_CASE("validate rejects a bad sink parameter at its file:line:col, as replay does") {
  std::string dir = scratch_dir("sink");
  std::string path =
      write_text(dir, "bad-sink.yaml", pipeline("    bind: tcp://127.0.0.1:5555\n", "    rollups: [1m:30d, 10s:1x]\n"));
  const std::string expected = path +
                               ":12:14: error: expected durations such as 10s, 1m, 1h or 30d in '10s:1x' "
                               "(in sinks.store)";
  auto v = sh("validate " + path + " --set RUNLENS_OUT=" + dir + "/out");
  CHECK(v.code == 2);
  CHECK(v.output == expected + "\n");
  // Building was side-effect free: no store, no timeline file, no output directory.
  CHECK(!std::filesystem::exists(dir + "/out"));
  // replay rejects it the same way, before it writes anything.
  auto r =
      sh("replay " + kSrc + "/tests/golden/healthy/input.jsonl --quiet --pipeline " + path + " --out " + dir + "/out");
  CHECK(r.code == 2);
  CHECK(r.output.find(expected) != std::string::npos);
  CHECK(!std::filesystem::exists(dir + "/out/runlens.db"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("validate rejects a bad source parameter at its file:line:col") {
  std::string dir = scratch_dir("source");
  // Both bind and connect: reported at bind.
  std::string both =
      write_text(dir, "both.yaml", pipeline("    bind: tcp://127.0.0.1:5555\n    connect: tcp://127.0.0.1:5557\n", ""));
  auto b = sh("validate " + both + " --set RUNLENS_OUT=" + dir + "/out");
  CHECK(b.code == 2);
  CHECK(b.output == both + ":4:11: error: give exactly one of 'bind' and 'connect' (in sources.telemetry)\n");
  // An endpoint bind() would refuse at run time; no socket is bound by validate.
  std::string endpoint = write_text(dir, "endpoint.yaml", pipeline("    bind: 127.0.0.1:5555\n", ""));
  auto e = sh("validate " + endpoint + " --set RUNLENS_OUT=" + dir + "/out");
  CHECK(e.code == 2);
  CHECK(e.output == endpoint +
                        ":4:11: error: invalid endpoint '127.0.0.1:5555' (expected TRANSPORT://ADDRESS, e.g. "
                        "tcp://127.0.0.1:5555 or ipc:///tmp/x) (in sources.telemetry)\n");
  // A source and a sink wrong at once: both reported, in pipeline order.
  std::string two = write_text(dir, "two.yaml", pipeline("    bind: tcp://127.0.0.1\n", "    rollups: [10s]\n"));
  auto t = sh("validate " + two + " --set RUNLENS_OUT=" + dir + "/out");
  CHECK(t.code == 2);
  CHECK(t.output == two +
                        ":4:11: error: invalid endpoint 'tcp://127.0.0.1' (a tcp address ends in :PORT, e.g. "
                        "tcp://127.0.0.1:5555) (in sources.telemetry)\n" +
                        two +
                        ":12:14: error: expected RESOLUTION:RETENTION (e.g. 1m:30d), got '10s' (in sinks.store)\n");
  CHECK(!std::filesystem::exists(dir + "/out"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("graph labels each node with its component's describe() line, then its parameters") {
  auto r = sh("graph");
  CHECK(r.code == 0);
  CHECK(r.output.find(
            "  \"join\" [shape=box, label=\"join\\n(rank_join)\\ntimeout=30s max_pending_steps=4096\\n"
            "alert_missing=true, max_pending_steps=4096, max_step_jump=1000, stall_fraction=0.5, timeout=30s\"];\n") !=
        std::string::npos);
  CHECK(r.output.find("  \"telemetry\" [shape=invhouse, label=\"telemetry\\n(zmq)\\nbind=tcp://127.0.0.1:5555 "
                      "pull\\n") != std::string::npos);
  // A value given on the command line shows in both lines.
  auto s = sh("graph --set RUNLENS_LISTEN=tcp://127.0.0.1:7000");
  CHECK(s.output.find(
            "label=\"telemetry\\n(zmq)\\nbind=tcp://127.0.0.1:7000 pull\\nbacklog=4096, bind=tcp://127.0.0.1:7000,") !=
        std::string::npos);
}

TEST_CASE("validate: evaluation suites (a top-level suite: key) are checked with file:line:col for each problem") {
  auto ok = sh("validate " + kSrc + "/configs/eval/digits-heldout.yaml " + kSrc + "/configs/eval/code-pass-at-k.yaml");
  CHECK_MESSAGE(ok.code == 0, ok.output);
  CHECK(ok.output.find("digits-heldout.yaml: ok (suite digits-heldout-v1, 4 metrics)") != std::string::npos);
  std::string dir = scratch_dir("suite");
  std::string bad = write_text(dir, "bad.yaml",
                               "suite: s\n"
                               "benchmark: b\n"
                               "version: \"1\"\n"
                               "evaluator: e\n"
                               "dataset: {id: d, version: \"1\", sha256: abc, items: 10}\n"
                               "prompt: {template: \"{x}\", version: p}\n"
                               "metrics: [acuracy]\n"
                               "partition_size: 0\n"
                               "priority: P2\n"
                               "workers: {pool: cpu, memory: 1GiB}\n"
                               "on_checkpoint: digits\n");
  auto r = sh("validate " + bad);
  CHECK(r.code == 2);
  CHECK(r.output.find(bad + ":5:") != std::string::npos);
  CHECK(r.output.find("expected a SHA-256 content hash") != std::string::npos);
  CHECK(r.output.find(bad + ":7:11: ") != std::string::npos);
  CHECK(r.output.find("unknown metric 'acuracy' (did you mean 'accuracy'?)") != std::string::npos);
  CHECK(r.output.find(bad + ":8:17: ") != std::string::npos);
  CHECK(r.output.find(bad + ":11:16: ") != std::string::npos);
  CHECK(r.output.find("expected a list of model id patterns") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("validate accepts the shipped gate policies and reports a broken one at file:line:col") {
  auto ok = sh("validate " + kSrc + "/configs/gates/digits-release.yaml " + kSrc + "/configs/gates/safety.yaml");
  CHECK(ok.code == 0);
  CHECK(ok.output.find("digits-release.yaml: ok (gate digits-release version 1, 2 metrics)") != std::string::npos);
  CHECK(ok.output.find("safety.yaml: ok (gate safety-release version 1, 3 metrics)") != std::string::npos);
  std::string dir = scratch_dir("validate-gate");
  // A gate policy may name the suite it gates: `gate:` decides, not `suite:`.
  std::string path = write_text(dir, "gate.yaml",
                                "gate: g\n"
                                "version: \"1\"\n"
                                "suite: digits-heldout-v1\n"
                                "dimensions:\n"
                                "  quality:\n"
                                "    - {metric: acuracy, margin: 0.02}\n"
                                "  safety:\n"
                                "    - {metric: harmful_response_rate, cap: 2}\n");
  auto bad = sh("validate " + path);
  CHECK(bad.code == 2);
  CHECK(bad.output.find(path + ":6:16: error: unknown metric 'acuracy' (did you mean 'accuracy'?)") !=
        std::string::npos);
  CHECK(bad.output.find(path + ":8:44: error: out of range: must be between 0 and 1, got 2") != std::string::npos);
  std::filesystem::remove_all(dir);
}
