// Failure scenarios end to end: a run synthesized in process (cli/synth/synth.h,
// with detail telemetry), replayed through the default pipeline as `runlens
// replay` would (tests/pipelines/replay_run.h), and its alerts read back.
//
// Every scenario asserts the alert kind, the rank / node / GPU it names and
// its onset step within kOnsetTolerance steps of the injected fault's first
// step (or, where an alert carries no onset, that it is raised within
// kDetectionSteps steps of it).
#pragma once

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/synth/synth.h"
#include "formats/jsonl_codec.h"
#include "schema/vocabulary.h"
#include "tests/pipelines/replay_run.h"

namespace runlens::testing {

constexpr int64_t kOnsetTolerance = 2;   // steps between the fault's first step and the alert's onset
constexpr int64_t kDetectionSteps = 10;  // steps between the fault's first step and the alert

// 32 ranks on 4 nodes of 8 GPUs, 150 steps of ~2 s, GPU and node samples every
// 2 steps, a checkpoint every 25 steps.
inline synth::Options scenario_options(uint64_t seed = 21) {
  synth::Options o;
  o.run_id = "scenario";
  o.ranks = 32;
  o.gpus_per_node = 8;
  o.steps = 150;
  o.seed = seed;
  o.gpu_every = 2;
  o.detail = true;
  o.checkpoint_every = 25;
  return o;
}

struct ScenarioResult {
  // The final revision of each alert_id, in the order of first publication
  // (what a consumer keeps: the store, a pager); `published` holds every
  // publication, revisions included, as alerts.jsonl has them.
  std::vector<Alert> alerts, published;
  ReplayResult replay;

  std::vector<Alert> of(const std::string& kind) const {
    std::vector<Alert> a;
    for (const auto& x : alerts) {
      if (x.kind == kind) a.push_back(x);
    }
    return a;
  }
  // Warning and critical alerts of the detectors (not the diagnoses that
  // explain them), as "kind@step: summary" for failure messages.
  std::vector<std::string> serious() const {
    std::vector<std::string> s;
    for (const auto& a : alerts) {
      if (a.severity != Severity::kInfo && a.kind != "diagnosis")
        s.push_back(a.kind + "@" + (a.step ? std::to_string(*a.step) : "?") + ": " + a.summary);
    }
    return s;
  }
};

// The alert kinds of the alert contract (schema/vocabulary.h; docs/alerts.md
// holds their table, checked by tests/cli/cli_test.cc): the detectors must not
// invent others.
inline const std::set<std::string>& contract_kinds() {
  static const std::set<std::string> kinds = [] {
    std::set<std::string> k;
    for (const Term& t : alert_kind::kAll) k.emplace(t.name);
    return k;
  }();
  return kinds;
}

inline ScenarioResult run_scenario(synth::Options o, const std::vector<std::string>& faults) {
  for (const auto& f : faults) {
    synth::Fault fault;
    std::string why;
    REQUIRE_MESSAGE(synth::parse_fault(f, &fault, &why), why);
    o.faults.push_back(fault);
  }
  std::string dir = fresh_dir("scenario");
  std::string path = dir + "/run.jsonl";
  {
    std::ofstream out(path, std::ios::binary);
    synth::generate(o, [&](std::vector<Record>& batch) {
      for (const auto& r : batch) out << jsonl::encode_record(r) << "\n";
    });
  }
  ScenarioResult r;
  r.replay = replay({path});
  std::filesystem::remove_all(dir);
  CHECK(r.replay.dead_letters.empty());
  for (const auto& line : lines_of(r.replay.alerts)) {
    Alert a;
    std::string why;
    REQUIRE_MESSAGE(jsonl::decode_alert(line, &a, &why), why);
    CHECK_MESSAGE(contract_kinds().count(a.kind) == 1, "alert kind '" << a.kind << "' is not in the alert contract");
    r.published.push_back(a);
    // Alert contract v2: each publication of an alert_id is the previous revision + 1, 0 first.
    auto same =
        std::find_if(r.alerts.begin(), r.alerts.end(), [&](const Alert& b) { return b.alert_id == a.alert_id; });
    if (same == r.alerts.end()) {
      CHECK_MESSAGE(a.revision == 0, a.kind << " " << a.alert_id << " first published as revision " << a.revision);
      r.alerts.push_back(a);
    } else {
      CHECK_MESSAGE(a.revision == same->revision + 1,
                    a.kind << " " << a.alert_id << ": revision " << a.revision << " after " << same->revision);
      *same = a;
    }
  }
  return r;
}

inline double attr_of(const Alert& a, const std::string& key) {
  for (const auto& [k, v] : a.attrs) {
    if (k == key) return v;
  }
  return -1;
}

// Checks an alert's onset (attrs.onset_step) against the fault's first step.
inline void check_onset(const Alert& a, int64_t fault_step) {
  CAPTURE(a.summary);
  double onset = attr_of(a, "onset_step");
  CHECK(onset >= fault_step);
  CHECK(onset <= fault_step + kOnsetTolerance);
  REQUIRE(a.step.has_value());
  CHECK(*a.step >= fault_step);
  CHECK(*a.step <= fault_step + kDetectionSteps);
}

// Checks the rank, node and GPU an alert names (rank r on gpu-node-(r/8), GPU r%8).
inline void check_rank(const Alert& a, int32_t rank) {
  CAPTURE(a.summary);
  REQUIRE(a.rank.has_value());
  CHECK(*a.rank == rank);
  CHECK(a.node.str() == "gpu-node-" + std::to_string(rank / 8));
  REQUIRE(a.gpu.has_value());
  CHECK(*a.gpu == rank % 8);
}

}  // namespace runlens::testing
