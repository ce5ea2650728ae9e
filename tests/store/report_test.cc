// `runlens report`: the researcher failure page of spec section 24 from the
// store, as text and JSON; with a diagnosis in the store it gives the cause,
// owner and recommendation, without one it says the cause is unknown and
// lists the evidence.
#include "reports/report.h"

#include <tuple>

#include "store/store.h"
#include "tests/cli/child_process.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

ShellResult sh(const std::string& args) { return shell(std::string(RUNLENS_BINARY) + " " + args); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// The NaN run replayed through the core operators only: no diagnosis operator.
const std::string& undiagnosed_db() {
  static const std::string db = [] {
    std::string dir = fresh_dir("report-undiagnosed");
    replay_into({scenarios().dir + "/diverge.jsonl"}, dir + "/out", dir + "/runlens.db", 2, store_pipeline(dir));
    return dir + "/runlens.db";
  }();
  static const struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{std::filesystem::path(db).parent_path().string()};
  return db;
}

TEST_CASE("report: a run that failed with NaN, without a diagnosis") {
  auto page = report::failure_page({url_of(undiagnosed_db()), "diverge"});
  REQUIRE(page);
  const std::string& t = *page;
  for (const char* part : {"TRAINING RUN diverge",
                           "STATUS\nFAILED",
                           "Failure:\nNaN loss detected at step 160",
                           "MODEL",
                           "llama-x-7b",
                           "GPUs:\n16 (4 nodes)",
                           "Loss\n",
                           "Gradient norm\n",
                           "Learning rate\n",
                           "INFRASTRUCTURE",
                           "GPU Util",
                           "MFU",
                           "GPU errors     none",
                           "NCCL errors    none",
                           "OOM            none",
                           "LIKELY CAUSE\n────────────────────────────────────\nUnknown.",
                           "Evidence:",
                           "RELATED EVENTS",
                           "150        learning rate changed",
                           "160        non-finite",
                           "RECOMMENDATION"}) {
    CHECK_MESSAGE(has(t, part), "missing '" << part << "' in\n" << t);
  }
  // The series runs from before the LR change into the NaN, as on the spec's page.
  auto loss = t.substr(t.find("Loss\n") + 5);
  loss = loss.substr(0, loss.find('\n'));
  CHECK(has(loss, " → NaN"));
  auto lr = t.substr(t.find("Learning rate\n") + 14);
  lr = lr.substr(0, lr.find('\n'));
  CHECK(has(lr, "↑"));

  auto json_page = report::failure_page({url_of(undiagnosed_db()), "diverge", true});
  REQUIRE(json_page);
  auto v = parse_json(*json_page);
  CHECK(v.find("status")->text == "FAILED");
  CHECK(v.find("failure")->find("kind")->text == "nan_loss");
  CHECK(v.find("failure")->find("step")->integer == 160);
  CHECK(v.find("likelyCause")->find("source")->text == "unknown");
  CHECK(!v.find("likelyCause")->find("evidence")->items.empty());
  CHECK(v.find("training")->find("loss")->items.back().find("value")->text == "NaN");
  CHECK(v.find("gpus")->integer == 16);
}

TEST_CASE("report: a diagnosis in the store gives the likely cause, owner and recommendation") {
  std::string dir = fresh_dir("report-diagnosis");
  std::string db = dir + "/runlens.db";
  std::filesystem::copy_file(undiagnosed_db(), db);
  {
    // What a diagnosis operator writes through the timeline sink.
    Alert d;
    d.alert_id = "d1a9d1a9d1a9d1a9";
    d.kind = "diagnosis";
    d.severity = Severity::kCritical;
    d.run_id = Symbol::intern("diverge");
    d.step = 160;
    d.time_ns = 1767226000000000000;
    d.symptom = "nan_loss";
    d.cause = "training_instability";
    d.owner = "training";
    d.summary = "loss diverged after the learning rate rose 20x at step 150";
    d.recommendation = "Inspect the LR scheduler, the checkpoint restore state and the mixed precision configuration.";
    d.evidence = {{"lr_change", 150, "learning rate x20", {}}, {"grad_spike", 150, "gradient norm 41x", {}}};
    store::GraphBatch b;
    store::StoredAlert sa;
    sa.alert = d;
    jsonl::encode_alert(d, &sa.json);
    b.alerts.push_back(sa);
    store::open_store(url_of(db)).graph->write(b);
  }
  auto page = report::failure_page({url_of(db), "diverge"});
  REQUIRE(page);
  CHECK(has(*page, "LIKELY CAUSE\n────────────────────────────────────\nTraining instability. Owner: training."));
  CHECK(has(*page, "loss diverged after the learning rate rose 20x at step 150"));
  CHECK(has(*page, "150  learning rate x20"));
  CHECK(has(*page, "RECOMMENDATION\n────────────────────────────────────\nInspect the LR scheduler"));
  auto v = parse_json(*report::failure_page({url_of(db), "diverge", true}));
  CHECK(v.find("likelyCause")->find("source")->text == "diagnosis");
  CHECK(v.find("likelyCause")->find("owner")->text == "training");
  std::filesystem::remove_all(dir);
}

TEST_CASE("report: with the shipped pipeline, the diagnosis operator's cause is the likely cause") {
  store::Store s = store::open_store(url_of(scenarios().db));
  store::AlertFilter f;
  f.run_id = "diverge";
  f.kind = "diagnosis";
  auto diagnoses = s.graph->alerts(f);
  if (diagnoses.empty()) return;  // a pipeline without a diagnosis operator: covered above
  auto v = parse_json(*report::failure_page({url_of(scenarios().db), "diverge", true}));
  const auto* cause = v.find("likelyCause");
  CHECK(cause->find("source")->text == "diagnosis");
  bool known = false;
  for (const auto& d : diagnoses) known |= d.alert.cause == cause->find("cause")->text;
  CHECK(known);
  CHECK(!v.find("recommendation")->items.empty());
}

TEST_CASE("report: a straggler run is an incident, with the straggler in the infrastructure summary") {
  auto page = report::failure_page({url_of(scenarios().db), "straggle"});
  REQUIRE(page);
  CHECK(has(*page, "STATUS\nCOMPLETED\nIncident:\nStraggler detected at step"));
  CHECK(has(*page, "Stragglers     rank 5 (gpu-node-1 GPU 1)"));
  CHECK_FALSE(report::failure_page({url_of(scenarios().db), "no-such-run"}));
}

// The golden thermal case through the shipped pipeline: its diagnosis is
// published three times (revisions), the page lists it once, and the GPU's
// alert is named by its kind (its value is a temperature, not a ratio).
TEST_CASE("report: revisions are one related event; a GPU alert is named by its kind") {
  std::string dir = fresh_dir("report-thermal");
  auto r = sh("replay " RUNLENS_SOURCE_DIR "/tests/golden/thermal_straggler/input.jsonl --out " + dir);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  auto page = report::failure_page({url_of(dir + "/runlens.db"), "golden-thermal"});
  REQUIRE(page);
  CHECK(has(*page, "GPU errors     rank 5 (gpu-node-1 GPU 1) thermal_throttle at step "));
  CHECK(has(*page, "Stragglers     rank 5 (gpu-node-1 GPU 1) 2.04x (threshold 1.5)"));
  auto v = parse_json(*report::failure_page({url_of(dir + "/runlens.db"), "golden-thermal", true}));
  int diagnoses = 0;
  std::string last;
  for (const auto& e : v.find("relatedEvents")->items) {
    if (e.find("kind")->text != "diagnosis") continue;
    ++diagnoses;
    last = e.find("summary")->text;
  }
  CHECK(diagnoses == 1);
  CHECK(has(last, "thermally throttled"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("report and serve on the command line: exit codes and formats") {
  const std::string url = url_of(scenarios().db);
  auto text = sh("report --store " + url + " --run diverge");
  CHECK(text.code == 0);
  CHECK(has(text.output, "NaN loss detected at step 160"));
  auto json = sh("report --store " + url + " --run diverge --format json");
  CHECK(json.code == 0);
  CHECK(parse_json(json.output).find("runId")->text == "diverge");
  CHECK(sh("report --store " + url + " --run nope").code == 2);
  CHECK(sh("report --store sqlite:///nonexistent/runlens.db --run diverge").code == 2);
  CHECK(sh("report --store " + url + " --run diverge --format yaml").code == 2);
  auto serve = sh("serve --store sqlite:///nonexistent/runlens.db --port 0");
  CHECK(serve.code == 2);
  CHECK(has(serve.output, "no store at sqlite:///nonexistent/runlens.db"));
}

TEST_CASE("report: a stalled job and a lost node are listed as missing ranks") {
  std::string dir = fresh_dir("report-stall");
  std::string db = dir + "/runlens.db";
  std::filesystem::copy_file(undiagnosed_db(), db);
  {
    // What rank_join writes through the timeline sink when most ranks, or a node's, stop.
    store::GraphBatch b;
    for (auto [kind, id, summary] : {std::tuple{"job_stalled", "5a11ed5a11ed5a11", "JOB STALLED: 12 of 16 ranks"},
                                     std::tuple{"node_unreachable", "0de0de0de0de0de0", "NODE UNREACHABLE: node-2"}}) {
      Alert a;
      a.alert_id = id;
      a.kind = kind;
      a.severity = Severity::kCritical;
      a.run_id = Symbol::intern("diverge");
      a.step = 170;
      a.time_ns = 1767226000000000000;
      a.summary = summary;
      store::StoredAlert sa;
      sa.alert = a;
      jsonl::encode_alert(a, &sa.json);
      b.alerts.push_back(sa);
    }
    store::open_store(url_of(db)).graph->write(b);
  }
  auto page = report::failure_page({url_of(db), "diverge"});
  REQUIRE(page);
  // The line shows the first of the two (in the store's order) and counts the other.
  const size_t at = page->find("Missing ranks  ");
  REQUIRE_MESSAGE(at != std::string::npos, *page);
  const std::string row = page->substr(at, page->find('\n', at) - at);
  CHECK_MESSAGE((row == "Missing ranks  JOB STALLED: 12 of 16 ranks (+1 more)" ||
                 row == "Missing ranks  NODE UNREACHABLE: node-2 (+1 more)"),
                row);
  auto v = parse_json(*report::failure_page({url_of(db), "diverge", true}));
  const json::Value* infra = v.find("infrastructure");
  REQUIRE(infra);
  REQUIRE(infra->find("missingRanks"));
  CHECK(infra->find("missingRanks")->items.size() == 2);
  std::filesystem::remove_all(dir);
}
