// A forced shed through the default pipeline: a queue far smaller than the
// batches the source pushes makes every inbox shed, rank_join's included.
// What was shed must never look like a hung rank: no rank_missing,
// job_stalled or node_unreachable, and the telemetry_shed alerts carry
// exactly what rank_join's inbox dropped, by priority.
#include <cstdlib>
#include <set>

#include "cli/synth/synth.h"
#include "formats/jsonl_codec.h"
#include "tests/pipelines/replay_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

std::string write_scenario(const std::string& path) {
  synth::Options o;
  o.run_id = "shed";
  o.ranks = 32;
  o.steps = 120;  // 1.9 s a step: about four minutes of event time
  o.gpus_per_node = 8;
  o.seed = 5;
  o.gpu_every = 10;
  std::ofstream out(path, std::ios::binary);
  synth::generate(o, [&](std::vector<Record>& batch) {
    for (const auto& r : batch) out << jsonl::encode_record(r) << "\n";
  });
  return path;
}

// The number after "key": in a JSONL line (0 when absent).
double number_after(const std::string& line, const std::string& key) {
  auto at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return 0;
  return std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

}  // namespace

TEST_CASE(
    "forced shed through the default operators: no rank_missing, job_stalled or node_unreachable; "
    "telemetry_shed counts what rank_join's inbox dropped") {
  std::string dir = fresh_dir("forced-shed");
  std::string input = write_scenario(dir + "/in.jsonl");
  for (int threads : {1, 3}) {
    CAPTURE(threads);
    std::string out = fresh_dir("forced-shed-out");
    std::map<std::string, std::string> vars{{"RUNLENS_OUT", out}, {"RUNLENS_PUBLISH", "ipc://" + out + "/alerts.sock"}};
    auto spec = load_pipeline("", vars);
    spec.settings.overflow = runtime::OverflowPolicy::kShed;
    spec.settings.queue_capacity = 200;  // a batch of 1024 rows never fits: most of it is shed at once
    spec.settings.backpressure_ns = 0;
    EngineOptions eo;
    eo.threads = threads;
    eo.replay_inputs = {input};
    eo.batch_size = 1024;
    eo.out_dir = out;
    Engine engine(std::move(spec), eo);
    RunSummary summary = engine.run();
    std::array<uint64_t, 4> join_dropped{};
    for (const auto& c : summary.counters) {
      if (c.node == "join") join_dropped = c.dropped;
    }
    REQUIRE(join_dropped[1] > 0);  // or nothing was forced
    auto lines = lines_of(read_file(out + "/alerts.jsonl"));
    std::array<double, 4> reported{};
    double rows = 0;
    std::set<std::string> ids;
    for (const auto& l : lines) {
      CAPTURE(l);
      CHECK(l.find("\"kind\":\"rank_missing\"") == std::string::npos);
      CHECK(l.find("\"kind\":\"job_stalled\"") == std::string::npos);
      CHECK(l.find("\"kind\":\"node_unreachable\"") == std::string::npos);
      if (l.find("\"kind\":\"telemetry_shed\"") == std::string::npos) continue;
      CHECK(l.find("\"severity\":\"info\"") != std::string::npos);
      CHECK(l.find("\"run_id\":\"shed\"") != std::string::npos);
      for (int p = 0; p < 4; ++p) reported[static_cast<size_t>(p)] += number_after(l, "shed_p" + std::to_string(p));
      rows += number_after(l, "rows");
      auto at = l.find("\"alert_id\":\"");
      REQUIRE(at != std::string::npos);
      ids.insert(l.substr(at + 12, 16));
    }
    // One per minute of event time at most (four or five minutes), each its own alert.
    CHECK(ids.size() >= 1);
    CHECK(ids.size() <= 5);
    for (int p = 0; p < 4; ++p) {
      CAPTURE(p);
      CHECK(reported[static_cast<size_t>(p)] == static_cast<double>(join_dropped[static_cast<size_t>(p)]));
    }
    CHECK(rows == static_cast<double>(join_dropped[0] + join_dropped[1] + join_dropped[2] + join_dropped[3]));
    std::filesystem::remove_all(out);
  }
  std::filesystem::remove_all(dir);
}
