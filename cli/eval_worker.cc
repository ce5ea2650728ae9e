// runlens eval worker: one evaluation worker process (docs/eval-protocol.md).
// --runner python (the default) replaces this process with the Python
// worker, `/usr/bin/python3 -m runlens.eval.worker` with the same flags,
// which runs the real models (runlens.eval.evaluators); the runlens Python
// package is found next to the binary (build/python in a build tree).
// --runner instant scores without a model (cli/eval_instant.h).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "cli/eval.h"
#include "cli/eval_instant.h"
#include "eval/suite.h"

namespace runlens::cli {

namespace {

constexpr const char* kPython = "/usr/bin/python3";

struct WorkerFlags {
  InstantWorkerOptions o;
  std::string memory = "4GiB";
  std::string runner = "python";
};

// The directory holding runlens/eval/worker.py next to this binary, or "".
std::string python_package_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const auto& dir : {exe.parent_path() / "python", exe.parent_path() / ".." / "lib" / "runlens" / "python"}) {
    if (std::filesystem::exists(dir / "runlens" / "eval" / "worker.py", ec)) return dir.lexically_normal().string();
  }
  return {};
}

int exec_python(const WorkerFlags& f) {
  const std::string dir = python_package_dir();
  if (!dir.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    const std::string path = old && *old ? dir + ":" + old : dir;
    setenv("PYTHONPATH", path.c_str(), 1);
  }
  const std::string slots = std::to_string(f.o.slots);
  std::vector<std::string> args = {
      kPython,  "-m",    "runlens.eval.worker", "--connect", f.o.endpoint, "--slots", slots, "--memory", f.memory,
      "--pool", f.o.pool};
  if (!f.o.worker_id.empty()) args.insert(args.end(), {"--id", f.o.worker_id});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  execv(kPython, argv.data());
  std::fprintf(stderr, "runlens eval worker: cannot start %s for --runner python: %s\n", kPython, std::strerror(errno));
  return kExitFailure;
}

int worker(WorkerFlags& f) {
  const auto mib = eval::parse_memory_mib(f.memory);
  if (!mib) throw CLI::ValidationError("--memory", "expected a size like 4GiB or 512MiB, got '" + f.memory + "'");
  f.o.memory_mib = *mib;
  if (f.o.endpoint.rfind("tcp://", 0) != 0 && f.o.endpoint.rfind("ipc://", 0) != 0)
    throw CLI::ValidationError("--connect",
                               "expected a ZeroMQ endpoint such as tcp://127.0.0.1:5571, got '" + f.o.endpoint + "'");
  if (f.runner == "python") return exec_python(f);
  if (f.o.worker_id.empty()) f.o.worker_id = "instant-" + std::to_string(getpid());
  return run_instant_worker(f.o, stop_requested);
}

}  // namespace

Command add_eval_worker(CLI::App& group) {
  auto f = std::make_shared<WorkerFlags>();
  auto* sub = group.add_subcommand("worker", "Run an evaluation worker that connects to `runlens serve --workers`");
  sub->add_option("--connect", f->o.endpoint, "The service's worker endpoint, e.g. tcp://127.0.0.1:5571")->required();
  sub->add_option("--id", f->o.worker_id, "Worker id (default: HOST-PID, instant-PID for --runner instant)");
  sub->add_option("--slots", f->o.slots, "Shards computed at once")->capture_default_str()->check(CLI::Range(1, 256));
  sub->add_option("--memory", f->memory, "Memory offered to models, e.g. 4GiB or 512MiB")->capture_default_str();
  sub->add_option("--pool", f->o.pool, "Worker pool")->capture_default_str()->check(CLI::IsMember({"cpu", "gpu"}));
  sub->add_option("--runner", f->runner,
                  "python: run the real models (/usr/bin/python3 -m runlens.eval.worker); instant: score every item "
                  "at once without a model (benchmarks)")
      ->capture_default_str()
      ->check(CLI::IsMember({"python", "instant"}));
  return {sub, [f] { return worker(*f); }};
}

}  // namespace runlens::cli
