// The same input gives byte-identical alerts whatever the thread count, batch
// size, arrival order within the allowed lateness, and input format.
#include <cmath>
#include <initializer_list>
#include <random>

#include "cli/synth/synth.h"
#include "formats/jsonl_codec.h"
#include "formats/recording.h"
#include "tests/pipelines/replay_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

// The rows of synthetic run `o` with `faults` (runlens synth's --fault syntax).
std::vector<Record> generate(synth::Options o, std::initializer_list<const char*> faults) {
  for (const char* f : faults) {
    synth::Fault fault;
    std::string why;
    REQUIRE(synth::parse_fault(f, &fault, &why));
    o.faults.push_back(fault);
  }
  std::vector<Record> rows;
  synth::generate(o, [&](std::vector<Record>& batch) {
    for (auto& r : batch) rows.push_back(std::move(r));
  });
  return rows;
}

// One run with a straggler, a rank that goes missing and a NaN.
std::vector<Record> scenario() {
  synth::Options o{.run_id = "inv",
                   .ranks = 24,
                   .steps = 90,
                   .gpus_per_node = 4,
                   .seed = 11,
                   .gc_pause_rate = 0.01,
                   .gpu_every = 15};
  return generate(o, {"straggler:rank=7,from=20,to=60", "missing_rank:rank=17,from=70", "nan:step=80"});
}

double attr_value(const Alert& a, const std::string& key) {
  for (const auto& [k, v] : a.attrs) {
    if (k == key) return v;
  }
  return NAN;
}

std::string write_jsonl(const std::vector<Record>& rows, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& r : rows) out << jsonl::encode_record(r) << "\n";
  return path;
}

}  // namespace

TEST_CASE("invariance: threads, batch size, arrival order and format do not change the alerts") {
  std::string dir = fresh_dir("invariance");
  auto rows = scenario();
  std::string base_path = write_jsonl(rows, dir + "/in.jsonl");
  ReplayResult base = replay({base_path}, 1, 4096);
  auto alerts = lines_of(base.alerts);
  // The scenario's three faults all show, and the straggler's cost to throughput
  // (diagnoses that explain them aside); the straggler and the throughput drop
  // end before the run does (their closing revisions, ends_ns).
  size_t closing = 0;
  alerts.erase(std::remove_if(alerts.begin(), alerts.end(),
                              [&](const std::string& l) {
                                if (l.find("\"ends_ns\":") != std::string::npos &&
                                    l.find("\"kind\":\"diagnosis\"") == std::string::npos) {
                                  ++closing;
                                  return true;
                                }
                                return l.find("\"kind\":\"diagnosis\"") != std::string::npos;
                              }),
               alerts.end());
  REQUIRE(alerts.size() == 4);
  CHECK(closing == 2);
  CHECK(base.alerts.find("\"kind\":\"straggler\"") != std::string::npos);
  CHECK(base.alerts.find("\"kind\":\"throughput_drop\"") != std::string::npos);
  CHECK(base.alerts.find("\"kind\":\"rank_missing\"") != std::string::npos);
  CHECK(base.alerts.find("\"kind\":\"nan_loss\"") != std::string::npos);

  SUBCASE("thread count and batch size") {
    for (int threads : {1, 2, 4}) {
      for (int64_t batch : {1, 7, 4096, 16384}) {
        CAPTURE(threads);
        CAPTURE(batch);
        CHECK(replay({base_path}, threads, batch).alerts == base.alerts);
      }
    }
  }

  SUBCASE("arrival order within the allowed lateness") {
    // Each event is delayed by a random amount below the 5 s lateness, then
    // the file is written in delayed-arrival order.
    for (uint64_t seed : {1, 2, 3}) {
      std::mt19937_64 rng(seed);
      std::uniform_int_distribution<int64_t> delay(0, 4'000'000'000);
      std::vector<std::pair<int64_t, size_t>> order;
      for (size_t i = 0; i < rows.size(); ++i) order.push_back({rows[i].time_ns + delay(rng), i});
      std::sort(order.begin(), order.end());
      std::vector<Record> shuffled;
      for (const auto& [arrival, i] : order) shuffled.push_back(rows[i]);
      CHECK(std::is_sorted(shuffled.begin(), shuffled.end(),
                           [](const Record& a, const Record& b) { return a.time_ns < b.time_ns; }) == false);
      std::string path = write_jsonl(shuffled, dir + "/shuffled" + std::to_string(seed) + ".jsonl");
      CAPTURE(seed);
      auto result = replay({path}, 2, 64);
      CHECK(result.dead_letters.empty());
      CHECK(result.alerts == base.alerts);
    }
  }

  SUBCASE("JSONL and recording give the same alerts") {
    recording::Writer w;
    std::string why;
    REQUIRE(w.open(dir + "/in.rlrec", &why));
    for (size_t i = 0; i < rows.size(); i += 500) {
      std::vector<Record> chunk(rows.begin() + i, rows.begin() + std::min(rows.size(), i + 500));
      REQUIRE(w.write(chunk, &why));
    }
    REQUIRE(w.close(&why));
    CHECK(replay({dir + "/in.rlrec"}, 2).alerts == base.alerts);
  }

  SUBCASE("one run split over two files replays as one") {
    std::vector<Record> a, b;
    for (size_t i = 0; i < rows.size(); ++i) (i % 2 ? a : b).push_back(rows[i]);
    CHECK(replay({write_jsonl(a, dir + "/a.jsonl"), write_jsonl(b, dir + "/b.jsonl")}, 2).alerts == base.alerts);
  }
  std::filesystem::remove_all(dir);
}

// The detectors keyed by node (gpu_health, host_bottleneck) and by run, over a
// run with detail telemetry and faults of every shape: the same alerts whatever
// the thread count (= partitions), batch size and arrival order.
TEST_CASE("invariance: detectors partitioned by node or run give the same alerts") {
  synth::Options o;
  o.run_id = "inv-detail";
  o.ranks = 24;
  o.steps = 100;
  o.gpus_per_node = 4;
  o.seed = 12;
  o.gpu_every = 2;
  o.detail = true;
  o.checkpoint_every = 20;
  std::vector<Record> rows =
      generate(o, {"thermal:rank=5,from=30", "host_cpu:rank=14,from=40,to=70", "xid:rank=21,step=60",
                   "lr_change:step=80,factor=10", "checkpoint_failure:step=50", "ecc:rank=2,from=20"});
  std::string dir = fresh_dir("invariance-detail");
  std::string path = write_jsonl(rows, dir + "/in.jsonl");
  ReplayResult base = replay({path}, 1, 4096);
  for (const char* kind : {"thermal_throttle", "straggler", "host_bottleneck", "data_starvation", "xid_error",
                           "rank_missing", "grad_spike", "checkpoint_failure", "ecc_uncorrected"}) {
    CAPTURE(kind);
    CHECK(base.alerts.find("\"kind\":\"" + std::string(kind) + "\"") != std::string::npos);
  }
  // Alert now, refine later: the streams compared carry revisions (asof_join's
  // nearer samples, root_cause's judgements after the window), and their
  // sequence is the same too.
  CHECK(base.alerts.find("\"revision\":1,\"kind\":\"diagnosis\"") != std::string::npos);
  for (int threads : {2, 3, 4}) {
    for (int64_t batch : {1, 64}) {
      CAPTURE(threads);
      CAPTURE(batch);
      CHECK(replay({path}, threads, batch).alerts == base.alerts);
    }
  }
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<int64_t> delay(0, 4'000'000'000);
  std::vector<std::pair<int64_t, size_t>> order;
  for (size_t i = 0; i < rows.size(); ++i) order.push_back({rows[i].time_ns + delay(rng), i});
  std::sort(order.begin(), order.end());
  std::vector<Record> shuffled;
  for (const auto& [arrival, i] : order) shuffled.push_back(rows[i]);
  auto result = replay({write_jsonl(shuffled, dir + "/shuffled.jsonl")}, 3, 64);
  CHECK(result.dead_letters.empty());
  CHECK(result.alerts == base.alerts);
  std::filesystem::remove_all(dir);
}

// Alert now, refine later, end to end: rank 13's GPU turns hot at step 40, but
// its last GPU sample before the straggler alert (step 42) is 28 s old and
// normal. The straggler goes out at once with that sample (revision 0) and so
// does its diagnosis (cause unknown); the next sample, 2 ms after the alert
// and hot, refines the straggler (revision 1, same alert_id and time) and
// with it the diagnosis (revision 1: hardware_throttle); the thermal_throttle
// alert that follows adds evidence (revision 2). The whole sequence is the
// same whatever the thread count and batch size.
TEST_CASE("invariance: a straggler refined by a later, nearer GPU sample, and its diagnosis, revision by revision") {
  synth::Options o{.run_id = "rev", .ranks = 24, .steps = 90, .gpus_per_node = 4, .seed = 11, .gpu_every = 7};
  std::vector<Record> rows = generate(o, {"straggler:rank=7,from=20,to=60", "thermal:rank=13,from=40"});
  std::string dir = fresh_dir("invariance-revisions");
  std::string path = write_jsonl(rows, dir + "/in.jsonl");
  ReplayResult base = replay({path}, 1, 4096);
  // Rank 13's alerts, in the order published.
  std::vector<Alert> seq;
  for (const auto& line : lines_of(base.alerts)) {
    Alert a;
    std::string why;
    REQUIRE_MESSAGE(jsonl::decode_alert(line, &a, &why), why);
    if (a.rank == 13) seq.push_back(a);
  }
  auto is = [&](size_t i, const char* kind, int32_t revision) {
    REQUIRE(i < seq.size());
    CAPTURE(i);
    CHECK(seq[i].kind == kind);
    CHECK(seq[i].revision == revision);
  };
  REQUIRE(seq.size() == 7);
  is(0, "straggler", 0);
  is(1, "diagnosis", 0);
  is(2, "straggler", 1);
  is(3, "diagnosis", 1);
  is(4, "thermal_throttle", 0);
  is(5, "diagnosis", 2);
  // The run's end closes the straggler: its closing revision, after asof_join's refinement.
  is(6, "straggler", 2);
  CHECK(seq[6].alert_id == seq[0].alert_id);
  CHECK(seq[6].ends_ns.has_value());
  CHECK(attr_value(seq[6], "gpu_temp_c") > 85);  // the context of the revision it closes
  CHECK(attr_value(seq[0], "gpu_temp_c") < 75);
  CHECK(attr_value(seq[0], "gpu_sample_offset_s") < -20);
  CHECK(attr_value(seq[2], "gpu_temp_c") > 85);
  CHECK(seq[2].alert_id == seq[0].alert_id);
  CHECK(seq[2].time_ns == seq[0].time_ns);  // the alert keeps its own time
  CHECK(seq[1].cause == "unknown");
  CHECK(seq[1].time_ns == seq[0].time_ns);  // diagnosed at once
  CHECK(seq[3].cause == "hardware_throttle");
  CHECK(seq[5].cause == "hardware_throttle");
  CHECK(seq[5].alert_id == seq[1].alert_id);
  for (int threads : {1, 2, 4}) {
    for (int64_t batch : {1, 7, 4096, 16384}) {
      CAPTURE(threads);
      CAPTURE(batch);
      CHECK(replay({path}, threads, batch).alerts == base.alerts);
    }
  }
  std::filesystem::remove_all(dir);
}

// A run several of the default batches long (docs/pipelines.md, batch_size:
// 16384 rows), GPU samples every step: the default, a quarter of it (the
// default before), a size that splits steps and the queue's own capacity
// exceeded (a batch larger than queue_capacity waits for an empty queue) give
// the same alerts whatever the thread count.
TEST_CASE("invariance: batch sizes around the default, over a run many batches long") {
  synth::Options o{.run_id = "long", .ranks = 64, .steps = 400, .gpus_per_node = 8, .seed = 5, .gpu_every = 1};
  std::vector<Record> rows = generate(o, {"straggler:rank=21,from=150", "nan:step=380"});
  REQUIRE(rows.size() > 3 * 16384);
  std::string dir = fresh_dir("invariance-batches");
  std::string path = write_jsonl(rows, dir + "/in.jsonl");
  ReplayResult base = replay({path}, 1, 0);  // 0: the pipeline's batch_size
  CHECK(base.alerts.find("\"kind\":\"straggler\"") != std::string::npos);
  CHECK(base.alerts.find("\"kind\":\"nan_loss\"") != std::string::npos);
  CHECK(base.dead_letters.empty());
  for (int threads : {1, 2}) {
    for (int64_t batch : {int64_t{4096}, int64_t{1000}, int64_t{16384}, int64_t{40000}}) {
      CAPTURE(threads);
      CAPTURE(batch);
      CHECK(replay({path}, threads, batch).alerts == base.alerts);
    }
  }
  std::filesystem::remove_all(dir);
}
