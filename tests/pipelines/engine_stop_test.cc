// Engine::stop() from another thread, as `runlens run`'s signal watcher
// calls it: at any moment, before run() has built the graph, while it builds
// it and while it runs. A live pipeline (its ZeroMQ source bound to a socket
// nobody sends to) ends only by stop(). Under ThreadSanitizer (tools/dev
// tsan) a stop() that reads the executor run() is still setting up is a
// reported race.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/engine.h"
#include "tests/pipelines/replay_run.h"

namespace {

using namespace runlens;

Engine live_engine(const std::string& dir) {
  auto spec = load_pipeline("", {{"RUNLENS_OUT", dir},
                                 {"RUNLENS_LISTEN", "ipc://" + dir + "/in.sock"},
                                 {"RUNLENS_PUBLISH", "ipc://" + dir + "/pub"}});
  EngineOptions eo;
  eo.threads = 2;
  eo.out_dir = dir;
  return Engine(std::move(spec), eo);
}

}  // namespace

TEST_CASE("engine: stop() from another thread ends a live run, whenever it comes") {
  // The stopper starts before run() and calls stop() until run() has
  // returned: with no pause (-1) and every millisecond (0), so that its
  // calls overlap run()'s set-up; then only from 200 ms on, when the graph
  // is running. A stop() that is lost leaves run() waiting for input, and
  // ctest's time-out fails the test.
  for (int delay_ms : {-1, 0, 200}) {
    CAPTURE(delay_ms);
    std::string dir = testing::fresh_dir("engine-stop");
    Engine engine = live_engine(dir);
    std::atomic<bool> returned{false};
    std::thread stopper([&] {
      if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      while (!returned.load()) {
        engine.stop();
        if (delay_ms >= 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    RunSummary summary = engine.run();
    returned.store(true);
    stopper.join();
    CHECK(summary.source_rows == 0);
    CHECK(summary.dead_letters == 0);
    std::filesystem::remove_all(dir);
  }
}
