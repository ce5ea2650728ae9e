// The synthetic fleet's faults: every kind parses with its defaults, the
// detail faults refuse to run without a target, and the faults that were there
// before detail telemetry still write the golden inputs byte for byte.
#include "tests/scenarios/scenario_run.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("synth: every fault kind parses, with its defaults") {
  struct Case {
    const char* text;
    const char* kind;
    double factor;
    int64_t from, to;
  };
  const Case cases[] = {
      {"straggler:rank=13,from=100", "straggler", 2, 100, INT64_MAX},
      {"thermal:rank=13,from=60", "thermal", 2, 60, INT64_MAX},
      {"power_cap:rank=6,from=60,to=90", "power_cap", 1.3, 60, 90},
      {"host_cpu:rank=17,from=60", "host_cpu", 400, 60, INT64_MAX},
      {"slow_shard:shard=5,from=60", "slow_shard", 30, 60, INT64_MAX},
      {"network:from=60", "network", 8, 60, INT64_MAX},
      {"oom:rank=11,step=80", "oom", 2, 80, 80},
      {"xid:rank=20,step=70", "xid", 2, 70, 70},
      {"ecc:rank=3,from=70", "ecc", 2, 70, INT64_MAX},
      {"config_slowdown:step=70,factor=1.5", "config_slowdown", 1.5, 70, 70},
      {"slow_checkpoint:from=50", "slow_checkpoint", 15, 50, INT64_MAX},
      {"checkpoint_failure:step=75", "checkpoint_failure", 2, 75, 75},
      {"clock_low:rank=13,from=60", "clock_low", 1.6, 60, INT64_MAX},
      {"nvlink:rank=13,from=60,to=80", "nvlink", 8, 60, 80},
      {"pcie_replay:rank=13,from=60", "pcie_replay", 1, 60, INT64_MAX},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.text));
    synth::Fault f;
    std::string why;
    REQUIRE(synth::parse_fault(c.text, &f, &why));
    CHECK(f.kind == c.kind);
    CHECK(f.factor == c.factor);
    CHECK(f.from_step == c.from);
    CHECK(f.to_step == c.to);
  }
  synth::Fault f;
  std::string why;
  CHECK(synth::parse_fault("xid:rank=1,step=5,code=48", &f, &why));
  CHECK(f.code == 48);
  for (const char* bad : {"thermal:from=3", "slow_shard:from=3", "ecc:from=1", "meteor:rank=1", "oom:rank=x",
                          "clock_low:from=3", "nvlink:from=3", "pcie_replay:from=3"}) {
    CAPTURE(std::string(bad));
    CHECK_FALSE(synth::parse_fault(bad, &f, &why));
  }
}

TEST_CASE("synth: the faults from before detail telemetry write the golden inputs byte for byte") {
  struct Golden {
    const char* dir;
    int32_t ranks, gpus_per_node;
    int64_t steps;
    uint64_t seed;
    double gc_pause_rate;
    const char* run_id;
    const char* fault;
  };
  // tests/golden/README.md
  const Golden cases[] = {
      {"straggler", 16, 4, 80, 3, 0.002, "golden-straggler", "straggler:rank=5,from=30"},
      {"nan_loss", 16, 4, 60, 4, 0.002, "golden-nan", "nan:step=40"},
      {"rank_missing", 16, 4, 80, 5, 0.002, "golden-missing", "missing_rank:rank=9,from=50"},
      {"healthy", 32, 8, 120, 7, 0.01, "golden-healthy", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.dir));
    synth::Options o;
    o.ranks = c.ranks, o.gpus_per_node = c.gpus_per_node, o.steps = c.steps, o.seed = c.seed;
    o.gc_pause_rate = c.gc_pause_rate, o.gpu_every = 20, o.run_id = c.run_id;
    if (*c.fault) {
      synth::Fault f;
      std::string why;
      REQUIRE(synth::parse_fault(c.fault, &f, &why));
      o.faults.push_back(f);
    }
    std::string text;
    synth::generate(o, [&](std::vector<Record>& rows) {
      for (const auto& r : rows) text += jsonl::encode_record(r) + "\n";
    });
    CHECK(text == read_file(std::string(RUNLENS_SOURCE_DIR) + "/tests/golden/" + c.dir + "/input.jsonl"));
  }
}
