// Whole-pipeline golden tests: tests/golden/<case>/input.jsonl through the
// default pipeline must give expected_alerts.jsonl byte for byte (and the
// expected dead letters). RUNLENS_UPDATE_GOLDEN=1 rewrites the expectations.
#include <cstdlib>
#include <filesystem>

#include "formats/jsonl_codec.h"
#include "tests/pipelines/replay_run.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

const std::string kGolden = std::string(RUNLENS_SOURCE_DIR) + "/tests/golden/";

void check_case(const std::string& name) {
  CAPTURE(name);
  std::string dir = kGolden + name;
  auto result = replay({dir + "/input.jsonl"});
  // Positions name the input file: make them independent of where the checkout is.
  std::string dead;
  for (std::string l : result.dead_letters) {
    for (size_t at; (at = l.find(kGolden)) != std::string::npos;) l.replace(at, kGolden.size(), "tests/golden/");
    dead += l + "\n";
  }
  if (std::getenv("RUNLENS_UPDATE_GOLDEN")) {
    std::ofstream(dir + "/expected_alerts.jsonl", std::ios::binary) << result.alerts;
    if (!dead.empty()) std::ofstream(dir + "/expected_dead_letters.jsonl", std::ios::binary) << dead;
    MESSAGE("updated " << dir);
    return;
  }
  REQUIRE(std::filesystem::exists(dir + "/expected_alerts.jsonl"));
  CHECK(result.alerts == read_file(dir + "/expected_alerts.jsonl"));
  std::string expected_dead = std::filesystem::exists(dir + "/expected_dead_letters.jsonl")
                                  ? read_file(dir + "/expected_dead_letters.jsonl")
                                  : "";
  CHECK(dead == expected_dead);
}

// The symptom alerts of a file (diagnoses are checked by check_diagnosis).
std::vector<Alert> parse_alerts(const std::string& text) {
  std::vector<Alert> out;
  for (const auto& line : lines_of(text)) {
    Alert a;
    std::string why;
    REQUIRE_MESSAGE(jsonl::decode_alert(line, &a, &why), why);
    if (a.kind != "diagnosis") out.push_back(a);
  }
  return out;
}

// A fault case holds exactly one diagnosis (one alert_id, published at once
// with its symptom as revision 0, then revision 1, 2, ... where the window
// changed it): of its symptom, at the symptom's place and step, with the
// cause and owner the rules give that fault on its final revision.
void check_diagnosis(const std::string& name, const std::string& symptom, const std::string& cause,
                     const std::string& owner, int64_t onset) {
  CAPTURE(name);
  std::vector<Alert> diagnoses, symptoms;
  for (const auto& line : lines_of(read_file(kGolden + name + "/expected_alerts.jsonl"))) {
    Alert a;
    std::string why;
    REQUIRE_MESSAGE(jsonl::decode_alert(line, &a, &why), why);
    (a.kind == "diagnosis" ? diagnoses : symptoms).push_back(a);
  }
  REQUIRE(!diagnoses.empty());
  for (size_t i = 0; i < diagnoses.size(); ++i) {
    CHECK(diagnoses[i].alert_id == diagnoses[0].alert_id);
    CHECK(diagnoses[i].revision == static_cast<int32_t>(i));
  }
  const Alert& d = diagnoses.back();
  CHECK(d.symptom == symptom);
  CHECK(d.cause == cause);
  CHECK(d.owner == owner);
  CHECK(d.severity == Severity::kInfo);  // the symptom pages; the diagnosis explains it
  bool onset_ok = false;
  for (const auto& [k, v] : d.attrs) onset_ok |= k == "onset_step" && v == onset;
  CHECK(onset_ok);
  auto s = std::find_if(symptoms.begin(), symptoms.end(), [&](const Alert& a) { return a.kind == symptom; });
  REQUIRE(s != symptoms.end());
  CHECK(d.run_id == s->run_id);
  CHECK(d.step == s->step);
  CHECK(d.rank == s->rank);
  CHECK(d.node == s->node);
  CHECK(d.gpu == s->gpu);
  CHECK(diagnoses[0].time_ns == s->time_ns);  // diagnosed at once, with its symptom
  CHECK(d.time_ns >= s->time_ns);
}

}  // namespace

TEST_CASE("golden: every case matches its expected alerts") {
  for (const char* name :
       {"straggler", "nan_loss", "rank_missing", "healthy", "bad_input", "thermal_straggler", "lr_nan"}) {
    check_case(name);
  }
}

// The golden files pin exact bytes; these pin what the bytes must mean, so a
// careless regeneration cannot bless a wrong answer.
TEST_CASE("golden: the expected alerts say what the scenario injected") {
  auto straggler = parse_alerts(read_file(kGolden + "straggler/expected_alerts.jsonl"));
  REQUIRE(straggler.size() == 4);
  // The run's end closes both (their closing revisions, at the run_end's time).
  for (size_t i : {0, 1}) {
    CAPTURE(i);
    CHECK(!straggler[i].ends_ns.has_value());
    CHECK(straggler[i + 2].alert_id == straggler[i].alert_id);
    CHECK(straggler[i + 2].revision == straggler[i].revision + 1);
    REQUIRE(straggler[i + 2].ends_ns.has_value());
    CHECK(*straggler[i + 2].ends_ns > straggler[1].time_ns);
  }
  CHECK(*straggler[2].ends_ns == *straggler[3].ends_ns);
  CHECK(straggler[0].kind == "straggler");
  CHECK(*straggler[0].rank == 5);
  CHECK(straggler[0].node.str() == "gpu-node-1");
  CHECK(*straggler[0].gpu == 1);
  CHECK(*straggler[0].step == 32);
  // asof_join's context: the straggler's GPU and node (normal here).
  bool context = false;
  for (const auto& [k, v] : straggler[0].attrs) context |= k == "gpu_sm_clock_mhz" && v == 1980;
  CHECK(context);
  // A 2x straggler in a synchronous job halves the job's tokens/s, from its onset.
  CHECK(straggler[1].kind == "throughput_drop");
  CHECK(!straggler[1].rank.has_value());
  CHECK(*straggler[1].step == 35);
  bool onset_30 = false;
  for (const auto& [k, v] : straggler[1].attrs) onset_30 |= k == "onset_step" && v == 30;
  CHECK(onset_30);

  auto nan = parse_alerts(read_file(kGolden + "nan_loss/expected_alerts.jsonl"));
  REQUIRE(nan.size() == 1);
  CHECK(nan[0].kind == "nan_loss");
  CHECK(*nan[0].step == 40);
  CHECK(nan[0].severity == Severity::kCritical);

  auto missing = parse_alerts(read_file(kGolden + "rank_missing/expected_alerts.jsonl"));
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].kind == "rank_missing");
  CHECK(*missing[0].rank == 9);
  CHECK(missing[0].node.str() == "gpu-node-2");
  CHECK(*missing[0].step == 50);

  CHECK(read_file(kGolden + "healthy/expected_alerts.jsonl").empty());

  // One diagnosis per fault case (docs/rules.md): a straggler with normal GPU,
  // host and network telemetry is localized but unexplained; a NaN with no
  // configuration change is instability; a rank that stops reporting is a
  // hardware fault.
  check_diagnosis("straggler", "straggler", "unknown", "infrastructure", 30);
  check_diagnosis("nan_loss", "nan_loss", "training_instability", "training", 40);
  check_diagnosis("rank_missing", "rank_missing", "hardware_fault", "infrastructure", 50);
  check_diagnosis("bad_input", "nan_loss", "training_instability", "training", 40);

  // Bad lines cost nothing else: the NaN alert of the underlying run is still raised.
  auto bad = parse_alerts(read_file(kGolden + "bad_input/expected_alerts.jsonl"));
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].kind == "nan_loss");
  CHECK(*bad[0].step == 40);
}

// The spec's two canonical chains, as the demo shows them (examples/demo/README.md).
TEST_CASE("golden: the canonical chains are diagnosed end to end") {
  auto diagnoses_of = [](const std::string& name) {
    std::vector<Alert> out;
    for (const auto& line : lines_of(read_file(kGolden + name + "/expected_alerts.jsonl"))) {
      Alert a;
      std::string why;
      REQUIRE_MESSAGE(jsonl::decode_alert(line, &a, &why), why);
      if (a.kind == "diagnosis") out.push_back(a);
    }
    return out;
  };
  // Section 26: rank -> node -> GPU -> temperature up -> clock down -> thermal throttle.
  check_diagnosis("thermal_straggler", "straggler", "hardware_throttle", "infrastructure", 30);
  auto thermal = parse_alerts(read_file(kGolden + "thermal_straggler/expected_alerts.jsonl"));
  auto throttle =
      std::find_if(thermal.begin(), thermal.end(), [](const Alert& a) { return a.kind == "thermal_throttle"; });
  REQUIRE(throttle != thermal.end());
  CHECK(*throttle->rank == 5);
  CHECK(throttle->node.str() == "gpu-node-1");
  CHECK(*throttle->gpu == 1);
  auto d = diagnoses_of("thermal_straggler").back();
  CHECK(d.summary.find("thermally throttled") != std::string::npos);
  CHECK(d.summary.find("990 MHz against 1980 MHz") != std::string::npos);

  // Sections 10 and 24-25: the LR jumps, the gradient norm and the loss spike, the loss goes NaN.
  auto lr = parse_alerts(read_file(kGolden + "lr_nan/expected_alerts.jsonl"));
  std::vector<std::string> kinds;
  for (const auto& a : lr) kinds.push_back(a.kind);
  CHECK(kinds == std::vector<std::string>{"grad_spike", "loss_spike", "nan_loss"});
  CHECK(*lr[0].step == 30);
  CHECK(*lr[1].step == 30);
  CHECK(*lr[2].step == 40);
  auto chain = diagnoses_of("lr_nan");
  REQUIRE(chain.size() == 3);  // with the first spike, then as each symptom adds to it
  for (size_t i = 0; i < chain.size(); ++i) {
    CAPTURE(i);
    CHECK(chain[i].alert_id == chain[0].alert_id);
    CHECK(chain[i].revision == static_cast<int32_t>(i));
    CHECK(chain[i].cause == "config_change");
    CHECK(chain[i].owner == "training");
  }
  CHECK(chain[0].time_ns == lr[0].time_ns);
  CHECK(chain.back().symptom == "nan_loss");
  CHECK(*chain.back().step == 40);
  CHECK(chain.back().summary.find("after the learning rate changed") != std::string::npos);
}

TEST_CASE("golden: every class of bad input is dead-lettered with its line and reason") {
  auto result = replay({kGolden + "bad_input/input.jsonl"});
  struct Expect {
    const char* line;
    const char* reason;
  };
  const Expect expected[] = {
      {":101\"", "malformed JSON"},                                 // truncated line
      {":202\"", "field 'rank': expected an integer, got string"},  // wrong type
      {":303\"", "missing required field 'rank'"},                  // missing required field
      {":404\"", "unknown type 'teleport'"},                        // unknown type
      {":505\"", "malformed JSON"},                                 // not JSON
      {":606\"", "late: event time 1000"},                          // far behind the watermark
      {":707\"", "field 'time_ns': expected an integer, got string"},
      {":808\"", "expected a JSON object, got array"},
      {":909\"", "malformed JSON"},
  };
  REQUIRE(result.dead_letters.size() == std::size(expected));
  for (const auto& e : expected) {
    CAPTURE(e.line);
    auto it = std::find_if(result.dead_letters.begin(), result.dead_letters.end(),
                           [&](const std::string& l) { return l.find(e.line) != std::string::npos; });
    REQUIRE(it != result.dead_letters.end());
    CHECK(it->find(e.reason) != std::string::npos);
  }
  CHECK(result.summary.dead_letters == std::size(expected));
}
