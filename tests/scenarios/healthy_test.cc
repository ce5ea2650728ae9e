// Healthy runs with realistic noise (jitter, one-step GC pauses, warm-up and
// cosine LR, normal checkpoints, corrected ECC errors and PCIe replays
// trickling in, counter resets) raise no warning or critical alert from any
// detector, whatever the seed and shape.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("scenario: healthy runs raise no warning or critical alert") {
  struct Shape {
    int32_t ranks, gpus_per_node;
    int64_t steps, gpu_every;
    double gc_pause_rate;
    bool detail;
  };
  const Shape shapes[] = {
      {32, 8, 300, 2, 0.002, true},  {32, 8, 200, 1, 0.01, true},    {8, 4, 400, 5, 0.01, true},
      {64, 8, 150, 10, 0.002, true}, {16, 4, 200, 20, 0.002, false},
  };
  for (uint64_t seed : {1, 2, 3}) {
    for (const auto& s : shapes) {
      synth::Options o = scenario_options(seed);
      o.ranks = s.ranks, o.gpus_per_node = s.gpus_per_node, o.steps = s.steps, o.gpu_every = s.gpu_every;
      o.gc_pause_rate = s.gc_pause_rate, o.detail = s.detail;
      CAPTURE(seed);
      CAPTURE(s.ranks);
      CAPTURE(s.steps);
      auto r = run_scenario(o, {});
      CHECK_MESSAGE(r.serious().empty(), (r.serious().empty() ? "" : r.serious().front()));
    }
  }
}

TEST_CASE("scenario: detail telemetry does not change the step and train values") {
  synth::Options plain = scenario_options(4);
  plain.detail = false;
  synth::Options rich = scenario_options(4);
  auto steps_of = [](const synth::Options& o) {
    std::vector<std::string> lines;
    synth::generate(o, [&](std::vector<Record>& batch) {
      for (const auto& r : batch) {
        if (r.kind() == Kind::kTrain) lines.push_back(jsonl::encode_record(r));
        if (r.kind() == Kind::kStep) {
          Step s = r.as<Step>();
          for (auto f : {Step::F::dataset_shard, Step::F::mem_allocated_bytes, Step::F::mem_reserved_bytes,
                         Step::F::mem_peak_bytes})
            s.clear(f);
          Record x = r;
          x.body = s;
          lines.push_back(jsonl::encode_record(x));
        }
      }
    });
    return lines;
  };
  // Checkpoints shift event times; compare the values with time removed.
  auto strip_time = [](std::vector<std::string> v) {
    for (auto& l : v) l = l.substr(l.find(",\"", l.find("time_ns")));
    return v;
  };
  CHECK(strip_time(steps_of(plain)) == strip_time(steps_of(rich)));
}
