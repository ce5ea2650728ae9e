// What the evaluation service tests share: a temp directory with a real
// SQLite store, JSON-lines datasets and suite files written for the test,
// and a worker speaking the protocol over a real ZeroMQ DEALER socket.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "eval/service/service.h"
#include "eval/wire/wire.h"
#include "formats/sha256.h"
#include "store/store.h"

namespace runlens::testing {

inline std::string temp_dir(const std::string& name) {
  std::string d =
      std::filesystem::temp_directory_path().string() + "/runlens-evalsvc-" + name + "-" + std::to_string(getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline std::string sha_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return sha256::hex(data);
}

// A JSON-lines dataset of n items; returns its SHA-256.
inline std::string write_dataset(const std::string& path, int n) {
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < n; ++i) out << "{\"x\":" << i << ",\"label\":" << i % 3 << "}\n";
  out.close();
  return sha_of_file(path);
}

struct SuiteSpec {
  std::string name = "toy-v1";
  std::string dataset_path;
  std::string sha256;
  int items = 40;
  int partition = 10;
  int max_attempts = 3;
  std::string evaluator = "toy-eval-v1";
  std::string on_checkpoint;  // YAML list text, e.g. "[toy-*]"
  std::string priority = "P2";
};

inline std::string suite_yaml(const SuiteSpec& s) {
  std::string y = "suite: " + s.name + "\nbenchmark: toy-bench\nversion: \"1\"\nevaluator: " + s.evaluator +
                  "\ndataset:\n  id: toy-data\n  version: \"1\"\n  sha256: " + s.sha256 +
                  "\n  path: " + s.dataset_path + "\n";
  if (s.items > 0) y += "  items: " + std::to_string(s.items) + "\n";
  y += "prompt: {template: \"{x}\", version: v1}\nmetrics:\n  - accuracy\n  - f1: {average: macro}\n"
       "decoding: {temperature: 0}\npartition_size: " +
       std::to_string(s.partition) + "\npriority: " + s.priority + "\nmax_attempts: " + std::to_string(s.max_attempts) +
       "\nworkers: {pool: cpu, memory: 64MiB}\n";
  if (!s.on_checkpoint.empty()) y += "on_checkpoint: " + s.on_checkpoint + "\n";
  return y;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The suite most service tests gate: DIR/suites/toy.yaml over a 40-item
// DIR/toy.jsonl, evaluating every toy-* model version; DIR/gates/ is created
// empty for the test's policies.
inline SuiteSpec write_toy_suite(const std::string& dir) {
  std::filesystem::create_directories(dir + "/suites");
  std::filesystem::create_directories(dir + "/gates");
  SuiteSpec spec;
  spec.dataset_path = dir + "/toy.jsonl";
  spec.sha256 = write_dataset(spec.dataset_path, 40);
  spec.on_checkpoint = "[toy-*]";
  write_file(dir + "/suites/toy.yaml", suite_yaml(spec));
  return spec;
}

// The toy metrics' statistics: accuracy, then f1's (label, prediction).
inline std::vector<double> toy_stats(int64_t item) {
  const double label = static_cast<double>(item % 3);
  const double pred = item % 4 == 0 ? static_cast<double>((item + 1) % 3) : label;
  return {pred == label ? 1.0 : 0.0, label, pred};
}

class TestWorker {
 public:
  TestWorker(const std::string& endpoint, std::string id, std::vector<std::string> evaluators = {}, int slots = 1,
             std::string version = "test-worker/1")
      : id_(std::move(id)), evaluators_(std::move(evaluators)), slots_(slots), version_(std::move(version)) {
    ctx_ = zmq_ctx_new();
    sock_ = zmq_socket(ctx_, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock_, ZMQ_LINGER, &zero, sizeof zero);
    REQUIRE(zmq_connect(sock_, endpoint.c_str()) == 0);
  }
  ~TestWorker() {
    zmq_close(sock_);
    zmq_ctx_term(ctx_);
  }
  const std::string& id() const { return id_; }

  void send_raw(const std::string& bytes) { zmq_send(sock_, bytes.data(), bytes.size(), 0); }
  void send(const eval::wire::WorkerMessage& m) { send_raw(eval::wire::encode(m)); }

  void hello() {
    eval::wire::Hello h;
    h.worker = id_;
    h.memory_mib = 1024;
    h.slots = slots_;
    h.worker_version = version_;
    h.code_commit = "c0ffee";
    h.libraries = {{"python", "3.11"}};
    h.evaluators = evaluators_;
    send(h);
    auto m =
        next(3000, [](const eval::wire::ServiceMessage& m) { return !std::holds_alternative<eval::wire::Assign>(m); });
    REQUIRE(m.has_value());
    REQUIRE_MESSAGE(std::holds_alternative<eval::wire::Welcome>(*m), eval::wire::encode(*m));
  }
  void heartbeat() { send(eval::wire::Heartbeat{id_, false, {}}); }

  // The next message that satisfies `want` within `ms` (others are kept for later),
  // heartbeating meanwhile unless silent.
  std::optional<eval::wire::ServiceMessage> next(int ms,
                                                 const std::function<bool(const eval::wire::ServiceMessage&)>& want) {
    for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
      if (want(*it)) {
        auto m = *it;
        inbox_.erase(it);
        return m;
      }
    }
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    auto beat = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() < until) {
      if (!silent && std::chrono::steady_clock::now() >= beat) {
        heartbeat();
        beat = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      }
      zmq_pollitem_t item{sock_, 0, ZMQ_POLLIN, 0};
      if (zmq_poll(&item, 1, 10) <= 0) continue;
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      if (zmq_msg_recv(&msg, sock_, 0) < 0) {
        zmq_msg_close(&msg);
        continue;
      }
      std::string bytes(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      zmq_msg_close(&msg);
      eval::wire::DecodeError err;
      auto m = eval::wire::decode_service_message(bytes, &err);
      REQUIRE_MESSAGE(m.has_value(), err.error << " in " << bytes);
      if (want(*m)) return m;
      inbox_.push_back(*m);
    }
    return std::nullopt;
  }

  std::optional<eval::wire::Assign> assignment(int ms = 3000) {
    auto m = next(ms, [](const auto& m) { return std::holds_alternative<eval::wire::Assign>(m); });
    if (!m) return std::nullopt;
    return std::get<eval::wire::Assign>(*m);
  }
  std::optional<eval::wire::Ack> ack(int ms = 3000) {
    auto m = next(ms, [](const auto& m) { return std::holds_alternative<eval::wire::Ack>(m); });
    if (!m) return std::nullopt;
    return std::get<eval::wire::Ack>(*m);
  }
  std::optional<eval::wire::Error> error(int ms = 3000) {
    auto m = next(ms, [](const auto& m) { return std::holds_alternative<eval::wire::Error>(m); });
    if (!m) return std::nullopt;
    return std::get<eval::wire::Error>(*m);
  }

  // A correct result for the assignment.
  eval::wire::Result result(const eval::wire::Assign& a) const {
    eval::wire::Result r;
    r.worker = id_;
    r.evaluation_id = a.evaluation_id;
    r.shard = a.shard;
    r.attempt = a.attempt;
    for (int64_t i = a.begin; i < a.end; ++i) {
      r.items.push_back({i, sha256::hex("item " + std::to_string(i)), sha256::hex("response"), 1.0, ""});
      for (double v : toy_stats(i)) r.stats.push_back(v);
    }
    r.stats_per_item = 3;
    r.provenance = {version_, "c0ffee", {{"python", "3.11"}}};
    return r;
  }

  // Answers every assignment correctly until `done()` or `ms` pass; the acks' outcomes, in order.
  std::vector<std::string> serve(const std::function<bool()>& done, int ms = 10000) {
    std::vector<std::string> outcomes;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!done() && std::chrono::steady_clock::now() < until) {
      auto a = assignment(50);
      if (!a) continue;
      assigned.push_back(*a);
      send(result(*a));
      auto k = ack();
      REQUIRE(k.has_value());
      outcomes.emplace_back(eval::wire::ack_outcome_name(k->outcome));
    }
    return outcomes;
  }

  bool silent = false;
  std::vector<eval::wire::Assign> assigned;

 private:
  std::string id_;
  std::vector<std::string> evaluators_;
  int slots_;
  std::string version_;
  void* ctx_ = nullptr;
  void* sock_ = nullptr;
  std::deque<eval::wire::ServiceMessage> inbox_;
};

inline std::optional<store::EvaluationView> read_evaluation(const std::string& url, const std::string& id) {
  store::Store s = store::open_store(url, {store::OpenMode::kReadOnly});
  return s.evals->evaluation(id);
}

inline std::string status_of(const std::string& url, const std::string& id) {
  auto v = read_evaluation(url, id);
  return v ? v->run.status : std::string("(none)");
}

inline bool wait_status(const std::string& url, const std::string& id, const std::string& status, int ms = 5000) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (status_of(url, id) == status) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

inline bool wait_until(const std::function<bool()>& cond, int ms = 5000) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

inline store::CheckpointRecord checkpoint_record(const std::string& id, char hash_char,
                                                 const std::string& run = "run-1") {
  return store::CheckpointRecord{id, run, 100, std::string(64, hash_char), "", "file:///ckpt/" + id + ".pt"};
}

}  // namespace runlens::testing
