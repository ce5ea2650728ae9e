// The writer rule of docs/storage.md: the evaluation service writes the
// evaluation tables of a store while `runlens replay` (another process)
// writes a run into the same SQLite file; both finish, nothing is lost, and
// the run is the same as when replayed alone.
#include <atomic>
#include <cstdlib>
#include <thread>

#include "tests/eval_service/eval_fixture.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;
namespace wire = runlens::eval::wire;

TEST_CASE("eval service: evaluations written while `runlens replay` writes a run into the same store") {
  std::string dir = temp_dir("concurrent");
  synth::Options o = small_run("busy-run", 600, 7);
  std::string input = write_jsonl(dir + "/in.jsonl", synth_run(o, {}, 50));
  auto replay = [&](const std::string& name, const std::string& db, const std::string& flags = "") {
    return replay_process(input, dir, name, db, flags);
  };
  REQUIRE(replay("alone", dir + "/alone.db") == 0);

  const std::string db = dir + "/shared.db";
  const std::string url = store::store_url_of_file(db);
  std::string data = dir + "/toy.jsonl";
  SuiteSpec spec;
  spec.dataset_path = data;
  spec.sha256 = write_dataset(data, 40);
  std::filesystem::create_directories(dir + "/suites");
  write_file(dir + "/suites/toy.yaml", suite_yaml(spec));
  // Evaluations the replayed run's checkpoints create (the SDK path: checkpoint events -> the timeline sink's
  // checkpoints table -> the service's poll).
  SuiteSpec on_ckpt = spec;
  on_ckpt.name = "toy-auto";
  on_ckpt.items = 10;
  on_ckpt.on_checkpoint = "[llama-*]";
  write_file(dir + "/suites/toy-auto.yaml", suite_yaml(on_ckpt));
  eval::service::ServiceOptions so;
  so.store_url = url;
  so.suite_paths = {dir + "/suites"};
  so.endpoint = "tcp://127.0.0.1:0";
  so.checkpoint_poll_ms = 20;  // reads the checkpoints table the replay is writing, all along
  eval::service::EvalService svc(so);
  std::string error;
  REQUIRE_MESSAGE(svc.start(&error), error);
  svc.register_checkpoint({checkpoint_record("ck-a", 'a'), "toy-mlp:v0"});

  std::atomic<bool> replay_started{false}, replay_done{false};
  std::atomic<int> written{0};
  int while_replaying = 0;
  std::string failure;  // read after the join
  std::atomic<bool> gave_up{false};
  std::thread evals([&] {
    TestWorker w(svc.endpoint(), "w1");
    w.hello();
    for (int n = 1; n <= 400 && !replay_done; ++n) {
      auto out = svc.submit({"toy-mlp:v" + std::to_string(n), "ck-a", "toy-v1", std::nullopt, std::nullopt});
      if (!out.error.empty()) {
        failure = out.error;
        gave_up = true;
        return;
      }
      w.serve([&] { return status_of(url, out.evaluation_id) == "COMPLETED"; }, 20000);
      if (status_of(url, out.evaluation_id) != "COMPLETED") {
        failure = out.evaluation_id + " is " + status_of(url, out.evaluation_id);
        gave_up = true;
        return;
      }
      ++written;
      if (replay_started && !replay_done) ++while_replaying;
    }
  });
  // The replay starts once the service is evaluating, so that their writes interleave.
  CHECK(wait_until([&] { return written > 0 || gave_up; }, 20000));
  replay_started = true;
  // Paced (the run's 19 minutes in about 0.6 s), so that evaluations complete
  // while it writes however fast the machine replays: the store it leaves is
  // the same at any speed.
  int rc = replay("shared", db, "--speed 2000x");
  replay_done = true;
  evals.join();
  auto auto_evaluations = [&] {
    store::Store st = store::open_store(url, {store::OpenMode::kReadOnly});
    store::EvaluationFilter f;
    int n = 0;
    for (const auto& e : st.evals->evaluations(f)) n += e.suite == "toy-auto" && e.run_id == "busy-run";
    return n;
  };
  const int checkpoints = 600 / 50;
  CHECK(wait_until([&] { return auto_evaluations() == checkpoints; }, 5000));
  svc.stop();
  CHECK(rc == 0);
  CHECK(failure == "");
  CHECK(while_replaying > 0);
  MESSAGE(written.load() << " evaluations completed, " << while_replaying << " while the replay ran");
  SqliteFile alone(dir + "/alone.db"), shared(db);
  for (const char* t : {"runs", "step_stats", "timeline", "alerts", "rank_windows", "incidents"}) {
    std::string sql = std::string("SELECT * FROM ") + t + " ORDER BY 1, 2";
    CAPTURE(t);
    CHECK(shared.rows(sql) == alone.rows(sql));
  }
  const std::string ck =
      "SELECT run_id, checkpoint_id, step, time_ns, uri, sha256 FROM checkpoints WHERE run_id = "
      "'busy-run' ORDER BY 1, 2";
  CHECK(shared.rows(ck) == alone.rows(ck));
  CHECK(alone.count("checkpoints") == checkpoints);
  CHECK(shared.rows("SELECT count(*) FROM checkpoints WHERE run_id = 'busy-run' AND registered_ns IS NOT NULL") ==
        std::to_string(checkpoints) + "\n");
  CHECK(shared.rows("SELECT model_version FROM evaluation_runs WHERE suite = 'toy-auto' AND model_version LIKE "
                    "'busy-run-ckpt-50'") == "busy-run-ckpt-50\n");
  CHECK(shared.rows("SELECT DISTINCT model_id FROM evaluation_runs WHERE suite = 'toy-auto'") == "llama-x-7b\n");
  CHECK(shared.count("step_stats") > 0);
  CHECK(shared.rows("SELECT count(*) FROM evaluation_runs WHERE status = 'COMPLETED' AND model_id = 'toy-mlp'") ==
        std::to_string(written.load()) + "\n");
  CHECK(shared.rows("SELECT count(*) FROM evaluation_items e JOIN evaluation_runs r USING (evaluation_id) WHERE "
                    "r.model_id = 'toy-mlp'") == std::to_string(written.load() * 40) + "\n");
  std::filesystem::remove_all(dir);
}
