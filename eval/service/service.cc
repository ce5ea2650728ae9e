#include "eval/service/service.h"

#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "eval/cache_key.h"
#include "eval/service/clusters.h"
#include "eval/service/config_files.h"
#include "eval/service/records.h"
#include "formats/sha256.h"
#include "runtime/status.h"

namespace runlens::eval::service {

namespace fs = std::filesystem;

namespace {

std::string join(const std::set<std::string>& parts, const char* sep = ", ") {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

void split_into(const std::string& text, std::set<std::string>* out) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(", ", start);
    std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!part.empty()) out->insert(part);
    if (end == std::string::npos) break;
    start = end + 2;
  }
}

std::string_view store_shard_status(ShardState s) {
  switch (s) {
    case ShardState::kQueued:
      return "QUEUED";
    case ShardState::kRunning:
      return "RUNNING";
    case ShardState::kDone:
      return "COMPLETED";
    case ShardState::kCached:
      return "CACHED";
    case ShardState::kFailed:
      return "FAILED";
  }
  return "QUEUED";
}

// A MODEL:VERSION part from free text: characters outside [A-Za-z0-9._-] become '-'.
std::string id_part(const std::string& text) {
  std::string out = text.substr(0, 128);
  for (char& c : out) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      c = '-';
  }
  while (!out.empty() && (out[0] == '.' || out[0] == '_' || out[0] == '-')) out.erase(0, 1);
  return out.empty() ? "x" : out;
}

}  // namespace

struct EvalService::LoadedSuite {
  Suite suite;
  // The dataset file's hash, remembered with the size and time it was read at.
  std::string hashed_sha256;
  uintmax_t hashed_size = 0;
  fs::file_time_type hashed_mtime{};
  bool hashed = false;
  // Clustered items: the dataset fields the loaded policies of this suite
  // cluster by, and each item's value of them, read with the hash.
  std::vector<std::string> cluster_fields;
  ClusterIds clusters;
  std::string clusters_problem;  // why they could not be read; "" when they were
};

struct EvalService::WorkerInfo {
  wire::Hello hello;
  std::string identity;
  bool alive = true;
  int64_t last_heartbeat_ms = 0;
};

struct EvalService::Open {
  EvaluationRun run;
  Suite suite;
  std::vector<Shard> shards;
  std::vector<std::string> shard_keys;
  std::vector<std::string> names;  // stat names (records.h)
  Aggregator agg;
  wire::Assign tmpl;
  std::vector<ShardState> written;  // what the store says, per shard
  std::vector<int> written_attempt;
  std::vector<int> attempt;  // the last attempt issued
  std::vector<std::string> worker;
  std::set<std::string> versions, commits;
  std::map<std::string, std::set<std::string>> libraries;
  std::string cached_source;    // the first evaluation a cached shard came from
  std::string run_id;           // the checkpoint's training run (lineage)
  int64_t metrics_written = 0;  // accepted shards when the metrics were last written

  store::EvaluationRecord record() const {
    store::EvaluationRecord r = to_record(run);
    r.run_id = run_id;
    return r;
  }

  Open(EvaluationRun r, Suite s, std::vector<Shard> sh)
      : run(std::move(r)),
        suite(std::move(s)),
        shards(std::move(sh)),
        agg(run.evaluation_id, suite.metrics, shards, suite.judge ? &*suite.judge : nullptr) {}

  void add_provenance(const std::string& version, const std::string& commit, const wire::Libraries& libs) {
    split_into(version, &versions);
    split_into(commit, &commits);
    for (const auto& [k, v] : libs) split_into(v, &libraries[k]);
  }
  void add_provenance(const store::EvaluationRecord& r) {
    wire::Libraries libs(r.library_versions.begin(), r.library_versions.end());
    add_provenance(r.worker_version, r.code_commit, libs);
  }
  // Writes the merged provenance into run; true when it changed.
  bool apply_provenance() {
    std::string v = join(versions), c = join(commits);
    std::map<std::string, std::string> libs;
    for (const auto& [k, set] : libraries) libs[k] = join(set);
    bool changed = v != run.worker_version || c != run.code_commit || libs != run.library_versions;
    run.worker_version = v;
    run.code_commit = c;
    run.library_versions = libs;
    return changed;
  }
};

EvalService::EvalService(ServiceOptions options) : options_(std::move(options)) {
  if (!options_.clock) {
    options_.clock = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  scheduler_ = Scheduler(SchedulerOptions{options_.heartbeat_timeout_ms});
}

EvalService::~EvalService() { stop(); }

int64_t EvalService::now() const { return options_.clock(); }

void EvalService::note(const std::string& evaluation_id, const std::string& text) {
  notes_[evaluation_id].push_back("t=" + std::to_string(now()) + "ms " + text);
}

// --- suites --------------------------------------------------------------------------

void EvalService::load_suites() {
  const std::vector<std::string> files = yaml_files(options_.suite_paths, "suite", &suite_problems_);
  for (const auto& f : files) {
    try {
      Suite s = load_suite(f);
      bool dup = false;
      for (const auto& l : suites_) {
        if (l->suite.name == s.name) {
          suite_problems_.push_back(f + ": suite '" + s.name + "' is also defined in " + l->suite.file +
                                    " (the first one is used)");
          dup = true;
        }
      }
      if (dup) continue;
      auto l = std::make_unique<LoadedSuite>();
      l->suite = std::move(s);
      suites_.push_back(std::move(l));
    } catch (const runtime::ConfigError& e) {
      for (const auto& d : e.diagnostics()) suite_problems_.push_back(d.str());
    }
  }
}

const EvalService::LoadedSuite* EvalService::find_loaded(const std::string& name) const {
  for (const auto& l : suites_) {
    if (l->suite.name == name) return l.get();
  }
  return nullptr;
}

void EvalService::add_dataset_clusters(const std::string& suite, const std::string& dataset_hash,
                                       ClusterIds* into) const {
  const LoadedSuite* l = find_loaded(suite);
  if (!l || !l->hashed || l->hashed_sha256 != dataset_hash) return;
  for (const auto& [field, ids] : l->clusters) {
    for (const auto& [item, id] : ids) (*into)[field].emplace(item, id);
  }
}

std::string EvalService::clusters_problem(const std::string& suite) const {
  const LoadedSuite* l = find_loaded(suite);
  return l ? l->clusters_problem : std::string();
}

const Suite* EvalService::find_suite(const std::string& name) const {
  for (const auto& l : suites_) {
    if (l->suite.name == name) return &l->suite;
  }
  return nullptr;
}

std::string EvalService::check_dataset(LoadedSuite& l) {
  Suite& s = l.suite;
  const std::string path = s.dataset_path();
  const std::string what = "dataset " + s.dataset.id + " version " + s.dataset.version;
  if (path.empty()) {
    return what + " has no path in " + s.file + ": the service cannot check its content hash " + "(give dataset.path)";
  }
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return what + " is missing: no file " + path + " (named by suite " + s.name + " in " + s.file + ")";
  }
  uintmax_t size = fs::file_size(path, ec);
  fs::file_time_type mtime = fs::last_write_time(path, ec);
  if (!l.hashed || size != l.hashed_size || mtime != l.hashed_mtime) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return what + " cannot be read: " + path;
    sha256::Hasher h;
    std::vector<char> buf(1 << 16);
    int64_t lines = 0;
    bool in_line = false;
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      std::streamsize n = in.gcount();
      if (n <= 0) break;
      h.update(buf.data(), static_cast<size_t>(n));
      for (std::streamsize i = 0; i < n; ++i) {
        if (buf[i] == '\n') {
          if (in_line) ++lines;
          in_line = false;
        } else if (buf[i] != '\r' && buf[i] != ' ') {
          in_line = true;
        }
      }
    }
    if (in_line) ++lines;
    l.hashed_sha256 = sha256::to_hex(h.digest());
    l.hashed_size = size;
    l.hashed_mtime = mtime;
    l.hashed = true;
    l.clusters_problem = read_cluster_ids(path, l.cluster_fields, &l.clusters);
    if (!s.dataset.items) {
      // Items resolved from the file: one per non-empty line of a JSON-lines file.
      if (fs::path(path).extension() == ".jsonl") {
        int64_t n = lines - s.dataset.first_item;
        if (n < 1) return what + ": " + path + " has " + std::to_string(lines) + " items, none after first_item";
        s.dataset.items = n;
      }
    }
  }
  if (std::string m = dataset_hash_mismatch(s, l.hashed_sha256); !m.empty()) return m;
  if (!s.dataset.items) {
    return what + ": the suite " + s.name + " leaves dataset.items out and the service counts items only in " +
           "JSON-lines (.jsonl) files; give dataset.items";
  }
  return {};
}

// --- start and stop ------------------------------------------------------------------

bool EvalService::start(std::string* error) {
  load_suites();
  load_gates();
  for (auto& l : suites_) {
    for (const auto& g : gates_) {
      if (!g.suite.empty() && g.suite != l->suite.name) continue;
      for (const auto& m : g.metrics) {
        if (!m.cluster.empty() &&
            std::find(l->cluster_fields.begin(), l->cluster_fields.end(), m.cluster) == l->cluster_fields.end())
          l->cluster_fields.push_back(m.cluster);
      }
    }
  }
  try {
    store_ = std::make_unique<store::Store>(store::open_store(options_.store_url));
  } catch (const store::StoreError& e) {
    *error = e.what();
    return false;
  }
  zmq_ctx_ = zmq_ctx_new();
  router_ = zmq_socket(zmq_ctx_, ZMQ_ROUTER);
  int one = 1, zero = 0;
  int64_t max_msg = int64_t{512} << 20;
  zmq_setsockopt(router_, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
  zmq_setsockopt(router_, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(router_, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg);
  if (zmq_bind(router_, options_.endpoint.c_str()) != 0) {
    *error = "cannot bind the workers endpoint " + options_.endpoint + ": " + zmq_strerror(zmq_errno());
    zmq_close(router_);
    zmq_ctx_term(zmq_ctx_);
    router_ = zmq_ctx_ = nullptr;
    return false;
  }
  char buf[256];
  size_t len = sizeof buf;
  if (zmq_getsockopt(router_, ZMQ_LAST_ENDPOINT, buf, &len) == 0) endpoint_ = buf;
  if (!alerts_.bind(zmq_ctx_, options_.alerts_pub, error)) {
    zmq_close(router_);
    zmq_ctx_term(zmq_ctx_);
    router_ = zmq_ctx_ = nullptr;
    return false;
  }
  alerts_.set_jsonl(options_.alerts_out);
  {
    std::lock_guard<std::mutex> lk(mu_);
    try {
      resume();
    } catch (const store::StoreError& e) {
      resume_notes_.push_back(std::string("resuming stopped: ") + e.what());
    }
    last_expire_ms_ = last_poll_ms_ = now();
    need_dispatch_ = true;
  }
  thread_ = std::thread([this] { run(); });
  return true;
}

void EvalService::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  alerts_.close();
  if (router_) zmq_close(router_);
  if (zmq_ctx_) zmq_ctx_term(zmq_ctx_);
  router_ = zmq_ctx_ = nullptr;
}

std::vector<std::string> EvalService::resume_notes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return resume_notes_;
}

// --- the service thread --------------------------------------------------------------

void EvalService::run() {
  zmq_msg_t id, body;
  while (!stop_) {
    zmq_pollitem_t item{router_, 0, ZMQ_POLLIN, 0};
    zmq_poll(&item, 1, options_.poll_ms);
    std::lock_guard<std::mutex> lk(mu_);
    for (int n = 0; n < 4096; ++n) {
      zmq_msg_init(&id);
      if (zmq_msg_recv(&id, router_, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        break;
      }
      std::string identity(static_cast<const char*>(zmq_msg_data(&id)), zmq_msg_size(&id));
      zmq_msg_close(&id);
      int more = 0;
      size_t ml = sizeof more;
      zmq_getsockopt(router_, ZMQ_RCVMORE, &more, &ml);
      if (!more) continue;
      zmq_msg_init(&body);
      if (zmq_msg_recv(&body, router_, 0) < 0) {
        zmq_msg_close(&body);
        continue;
      }
      zmq_getsockopt(router_, ZMQ_RCVMORE, &more, &ml);
      int extra = 0;
      while (more) {  // one frame per message: the rest is dropped, and said so
        zmq_msg_t rest;
        zmq_msg_init(&rest);
        zmq_msg_recv(&rest, router_, 0);
        zmq_msg_close(&rest);
        ++extra;
        zmq_getsockopt(router_, ZMQ_RCVMORE, &more, &ml);
      }
      std::string_view bytes(static_cast<const char*>(zmq_msg_data(&body)), zmq_msg_size(&body));
      counters_.messages++;
      if (extra) {
        counters_.bad_messages++;
        send(identity,
             wire::encode(wire::Error{
                 "a message is one ZeroMQ frame; this one had " + std::to_string(extra + 1) + " (ignored)", ""}));
      } else {
        try {
          handle(identity, bytes);
        } catch (const std::exception& e) {
          // The store failing (locked past its timeout, disk full) must not end the service.
          counters_.bad_messages++;
          std::fprintf(stderr, "runlens serve: evaluation service: %s\n", e.what());
        }
      }
      zmq_msg_close(&body);
    }
    try {
      tick();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "runlens serve: evaluation service: %s\n", e.what());
    }
  }
}

void EvalService::send(const std::string& identity, const std::string& payload) {
  if (zmq_send(router_, identity.data(), identity.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return;
  zmq_send(router_, payload.data(), payload.size(), ZMQ_DONTWAIT);
}

void EvalService::handle(const std::string& identity, std::string_view bytes) {
  wire::DecodeError err;
  auto msg = wire::decode_worker_message(bytes, &err);
  if (!msg) {
    counters_.bad_messages++;
    send(identity, wire::encode(wire::Error{err.error, err.about}));
    return;
  }
  if (auto* h = std::get_if<wire::Hello>(&*msg)) return on_hello(identity, *h);
  if (auto* h = std::get_if<wire::Heartbeat>(&*msg)) return on_heartbeat(identity, *h);
  if (auto* r = std::get_if<wire::Result>(&*msg)) return on_result(identity, *r);
  if (auto* f = std::get_if<wire::Fail>(&*msg)) return on_fail(*f);
  if (auto* b = std::get_if<wire::Bye>(&*msg)) return on_bye(*b);
}

void EvalService::on_hello(const std::string& identity, const wire::Hello& m) {
  if (m.protocol != wire::kProtocolVersion) {
    send(identity, wire::encode(wire::Error{"protocol version " + std::to_string(m.protocol) +
                                                " is not supported (this service speaks version " +
                                                std::to_string(wire::kProtocolVersion) + ")",
                                            "hello"}));
    return;
  }
  WorkerSpec spec{m.worker, m.pool == "gpu" ? Pool::kGpu : Pool::kCpu, m.memory_mib, m.slots, m.evaluators};
  scheduler_.add_worker(spec, now());
  auto& w = workers_[m.worker];
  if (!w) w = std::make_unique<WorkerInfo>();
  w->hello = m;
  w->identity = identity;
  w->alive = true;
  w->last_heartbeat_ms = now();
  send(identity,
       wire::encode(wire::Welcome{wire::kProtocolVersion, options_.heartbeat_ms, options_.heartbeat_timeout_ms}));
  sync_all();  // a worker registering again loses the leases it had
  need_dispatch_ = true;
}

void EvalService::on_heartbeat(const std::string& identity, const wire::Heartbeat& m) {
  auto it = workers_.find(m.worker);
  const bool known = it != workers_.end() && it->second->alive;
  if (!known || !scheduler_.heartbeat(m.worker, now(), m.has_loaded ? &m.loaded : nullptr)) {
    send(identity, wire::encode(wire::Reregister{"worker " + m.worker +
                                                 (it == workers_.end() ? " is not known to this service (it restarted?)"
                                                                       : " was declared lost (missed heartbeats)") +
                                                 ": send hello again"}));
    return;
  }
  it->second->identity = identity;
  it->second->last_heartbeat_ms = now();
}

void EvalService::on_result(const std::string& identity, wire::Result& m) {
  wire::Ack ack{m.evaluation_id, m.shard, m.attempt, wire::AckOutcome::kRejected, ""};
  auto reply = [&](wire::AckOutcome o, std::string reason) {
    ack.outcome = o;
    ack.reason = std::move(reason);
    if (o == wire::AckOutcome::kAccepted) counters_.accepted++;
    if (o == wire::AckOutcome::kDuplicate) counters_.duplicates++;
    if (o == wire::AckOutcome::kRejected) counters_.rejected++;
    send(identity, wire::encode(ack));
  };
  if (auto w = workers_.find(m.worker); w != workers_.end()) w->second->last_heartbeat_ms = now();
  auto it = open_.find(m.evaluation_id);
  if (it == open_.end()) {
    auto v = store_->evals->evaluation(m.evaluation_id);
    if (v && store::is_terminal_status(v->run.status))
      return reply(wire::AckOutcome::kDuplicate,
                   "evaluation " + m.evaluation_id + " is " + v->run.status + " already: nothing changed");
    return reply(wire::AckOutcome::kRejected, "no open evaluation " + m.evaluation_id);
  }
  Open& o = *it->second;
  const std::string& id = o.run.evaluation_id;
  const int nshards = static_cast<int>(o.shards.size());
  if (m.shard < 0 || m.shard >= nshards)
    return reply(wire::AckOutcome::kRejected, "evaluation " + id + " has shards 0 to " + std::to_string(nshards - 1));
  const ShardState st = scheduler_.shard_state(id, m.shard);
  if (st == ShardState::kDone || st == ShardState::kCached) {
    scheduler_.complete(id, m.shard, m.attempt, m.worker, now());  // frees the worker's slot, logs the duplicate
    need_dispatch_ = true;
    return reply(wire::AckOutcome::kDuplicate, "shard " + std::to_string(m.shard) + " of " + id + " is done already");
  }
  if (!scheduler_.can_accept(id, m.shard, m.attempt)) {
    scheduler_.complete(id, m.shard, m.attempt, m.worker, now());  // logs the rejection
    return reply(wire::AckOutcome::kRejected, "shard " + std::to_string(m.shard) + " of " + id + " is " +
                                                  std::string(shard_state_name(st)) + " and attempt " +
                                                  std::to_string(m.attempt) + " was not issued");
  }
  auto reject_and_retry = [&](const std::string& why) {
    scheduler_.fail(id, m.shard, m.attempt, m.worker, "result rejected: " + why, now());
    sync(o, m.shard);
    need_dispatch_ = true;
    reply(wire::AckOutcome::kRejected, why);
  };
  if (!m.items.empty() && m.stats_per_item != o.agg.stride()) {
    return reject_and_retry("each item must carry " + std::to_string(o.agg.stride()) +
                            " statistics (the assignment's stride), got " + std::to_string(m.stats_per_item));
  }
  eval::ShardResult r;
  r.evaluation_id = id;
  r.partition = m.shard;
  r.attempt = m.attempt;
  r.worker = m.worker;
  r.items.reserve(m.items.size());
  for (const auto& it2 : m.items) r.items.push_back(it2.item);
  r.stats = std::move(m.stats);
  // Validated whole first: nothing is applied or written unless all of it is valid.
  std::vector<MetricResult> shard_metrics;
  AcceptOutcome v = o.agg.check(r, &shard_metrics);
  if (v.outcome != Acceptance::kAccepted) return reject_and_retry(v.reason);

  store::ShardResult sr;
  sr.evaluation_id = id;
  sr.shard = m.shard;
  sr.attempt = m.attempt;
  sr.worker = m.worker;
  sr.items.resize(m.items.size());
  const size_t stride = static_cast<size_t>(o.agg.stride());
  const LoadedSuite* ls = find_loaded(o.suite.name);
  for (size_t i = 0; i < m.items.size(); ++i) {
    store::ItemResult& out = sr.items[i];
    wire::ResultItem& in = m.items[i];
    out.item = in.item;
    out.item_hash = std::move(in.item_hash);
    out.response_hash = std::move(in.response_hash);
    out.latency_ms = in.latency_ms;
    out.error = std::move(in.error);
    out.scores.reserve(stride);
    for (size_t j = 0; j < stride; ++j) out.scores.emplace_back(o.names[j], r.stats[i * stride + j]);
    if (ls) {
      for (const auto& [field, ids] : ls->clusters) {
        if (auto c = ids.find(in.item); c != ids.end()) out.clusters.emplace_back(field, c->second);
      }
    }
  }
  sr.metrics = to_values(shard_metrics);
  bool written = false;
  try {
    written = store_->evals->write_shard_result(sr);
  } catch (const store::StoreError& e) {
    return reject_and_retry(std::string("the store could not write it: ") + e.what());
  }
  if (!written) {
    // The store holds a result for this shard that could not be read back at the restart (and a shard keeps
    // one result): the shard cannot finish here; it fails, named, rather than run forever.
    scheduler_.fail(id, m.shard, m.attempt, m.worker,
                    "the store holds an earlier result for this shard that cannot be read back or replaced", now(),
                    /*retryable=*/false);
    need_dispatch_ = true;
    reply(wire::AckOutcome::kDuplicate, "the store holds a result for shard " + std::to_string(m.shard));
    sync(o, m.shard);
    return;
  }
  AcceptOutcome a = o.agg.accept(r);
  RUNLENS_CHECK(a.outcome == Acceptance::kAccepted, "a result check() accepted: " + a.reason);
  scheduler_.complete(id, m.shard, m.attempt, m.worker, now());
  o.written[m.shard] = ShardState::kDone;
  o.written_attempt[m.shard] = m.attempt;
  counters_.items += static_cast<int64_t>(m.items.size());
  o.add_provenance(m.provenance.worker_version, m.provenance.code_commit, m.provenance.libraries);
  o.apply_provenance();
  need_dispatch_ = true;
  reply(wire::AckOutcome::kAccepted, "");
  sync(o, kStatusOnly);  // may finish the evaluation (and erase it)
}

void EvalService::on_fail(const wire::Fail& m) {
  counters_.failed++;
  auto it = open_.find(m.evaluation_id);
  if (it == open_.end()) return;
  scheduler_.fail(m.evaluation_id, m.shard, m.attempt, m.worker, m.reason, now(), m.retryable);
  need_dispatch_ = true;
  if (m.shard >= 0 && m.shard < static_cast<int>(it->second->shards.size())) sync(*it->second, m.shard);
}

void EvalService::on_bye(const wire::Bye& m) {
  scheduler_.remove_worker(m.worker, now(), "said bye");
  if (auto it = workers_.find(m.worker); it != workers_.end()) it->second->alive = false;
  sync_all();
  need_dispatch_ = true;
}

void EvalService::tick() {
  const int64_t t = now();
  if (t - last_expire_ms_ >= 100) {
    last_expire_ms_ = t;
    auto lost = scheduler_.expire(t);
    for (const auto& w : lost) {
      if (auto it = workers_.find(w); it != workers_.end()) it->second->alive = false;
    }
    if (!lost.empty()) {
      sync_all();
      need_dispatch_ = true;
    }
  }
  if (options_.checkpoint_poll_ms > 0 && t - last_poll_ms_ >= options_.checkpoint_poll_ms) {
    last_poll_ms_ = t;
    poll_checkpoints();
  }
  if (need_dispatch_) dispatch();
}

void EvalService::dispatch() {
  need_dispatch_ = false;
  std::vector<Assignment> as = scheduler_.schedule(now());
  std::set<std::string> touched;
  bool lost_any = false;
  for (const Assignment& a : as) {
    auto it = open_.find(a.evaluation_id);
    RUNLENS_CHECK(it != open_.end(), "the scheduler assigned a shard of an evaluation that is not open");
    Open& o = *it->second;
    o.attempt[a.partition] = a.attempt;
    o.worker[a.partition] = a.worker;
    touched.insert(a.evaluation_id);
    // The lease is in the store before the worker hears of it: after a crash, the next attempt is numbered
    // past this one, so a late result of it is told apart.
    store_->evals->set_shard_status(a.evaluation_id, a.partition, "RUNNING", a.attempt, a.worker);
    o.written[a.partition] = ShardState::kRunning;
    o.written_attempt[a.partition] = a.attempt;
    auto w = workers_.find(a.worker);
    wire::Assign m = o.tmpl;
    m.shard = a.partition;
    m.attempt = a.attempt;
    m.begin = a.items.begin;
    m.end = a.items.end;
    const std::string payload = wire::encode(m);
    bool sent = false;
    if (w != workers_.end()) {
      const std::string& ident = w->second->identity;
      sent = zmq_send(router_, ident.data(), ident.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
             zmq_send(router_, payload.data(), payload.size(), ZMQ_DONTWAIT) >= 0;
    }
    if (!sent) {
      // The worker is gone (or not reading): it is lost at once, its leases (this one too) retried elsewhere,
      // rather than handed more work it cannot receive. Its next heartbeat is answered reregister.
      scheduler_.remove_worker(a.worker, now(),
                               std::string("the assignment could not be sent to it: ") + zmq_strerror(zmq_errno()));
      if (w != workers_.end()) w->second->alive = false;
      need_dispatch_ = true;
      lost_any = true;
    } else {
      counters_.assigned++;
    }
  }
  if (lost_any) return sync_all();
  for (const auto& id : touched) {
    if (auto it = open_.find(id); it != open_.end()) sync(*it->second, kStatusOnly);
  }
}

void EvalService::sync_all() {
  std::vector<std::string> ids;
  for (const auto& [id, o] : open_) ids.push_back(id);
  for (const auto& id : ids) {
    if (auto it = open_.find(id); it != open_.end()) sync(*it->second);
  }
}

// Writes the shard states the scheduler changed, then the evaluation's status.
void EvalService::sync(Open& o, int only) {
  const std::string id = o.run.evaluation_id;
  const int n = static_cast<int>(o.shards.size());
  int from = 0, to = 0;
  if (only == kAllShards) {
    to = n;
  } else if (only >= 0 && only < n) {
    from = only;
    to = only + 1;
  }
  for (int i = from; i < to; ++i) {
    const ShardState st = scheduler_.shard_state(id, i);
    if (st == o.written[i] && o.attempt[i] == o.written_attempt[i]) continue;
    if (st == ShardState::kDone || st == ShardState::kCached) {
      o.written[i] = st;  // written with the result
      continue;
    }
    const std::string worker = st == ShardState::kRunning ? o.worker[i] : std::string();
    store_->evals->set_shard_status(id, i, std::string(store_shard_status(st)), o.attempt[i], worker);
    o.written[i] = st;
    o.written_attempt[i] = o.attempt[i];
  }
  const EvalStatus s = scheduler_.status(id);
  if (is_terminal(s)) return finish(o);
  if (s != o.run.status) {
    o.run.status = s;
    store_->evals->write_evaluation(o.record());
  }
  if (o.agg.counters().accepted != o.metrics_written) {
    // Metrics over the items covered so far, as they grow.
    o.metrics_written = o.agg.counters().accepted;
    store_->evals->set_metrics(id, to_values(o.agg.metrics()));
  }
}

void EvalService::finish(Open& o) {
  const std::string id = o.run.evaluation_id;
  EvaluationRun& run = o.run;
  run.status = scheduler_.status(id);
  run.completed_at = rfc3339_now();
  o.apply_provenance();
  if (run.status == EvalStatus::kCached && run.cached_from.empty()) run.cached_from = o.cached_source;
  store::EvaluationRecord rec = o.record();
  std::string why = store::check_writable(rec);
  if (!why.empty()) {
    // Results without their provenance cannot be kept as such: the evaluation fails, saying why.
    note(id, "cannot be written " + std::string(eval_status_name(run.status)) + ": " + why);
    failures_[id] = why;
    run.status = EvalStatus::kFailed;
    rec = o.record();
  }
  // The end status last: a client that polls for it reads the final
  // metrics and finds the cache entry (written after it, a reader could see
  // COMPLETED with three shards' accuracy of four, and no cache hit). A
  // cache entry is taken only for an evaluation COMPLETED or CACHED.
  store_->evals->set_metrics(id, to_values(o.agg.metrics()));
  if (run.status == EvalStatus::kCompleted || run.status == EvalStatus::kCached) {
    store_->evals->put_cache(store::CacheEntry{run.cache_key, id, std::nullopt});
  }
  store_->evals->write_evaluation(rec);
  open_.erase(id);  // `o` is gone from here on
  auto_gate(id);
}

// --- submissions ---------------------------------------------------------------------

std::string EvalService::new_evaluation_id(const std::string& cache_key) {
  const std::string base = "ev-" + cache_key.substr(0, 12) + "-";
  for (int n = 1;; ++n) {
    std::string id = base + std::to_string(n);
    if (!open_.count(id) && !notes_.count(id) && !scheduler_.has_evaluation(id) && !store_->evals->evaluation(id))
      return id;
  }
}

void EvalService::fail_at_once(EvaluationRun run, const std::string& run_id, const Suite& suite,
                               const std::string& reason) {
  run.status = EvalStatus::kFailed;
  run.completed_at = rfc3339_now();
  store::EvaluationRecord rec = to_record(run);
  rec.run_id = run_id;
  store_->evals->write_evaluation(rec);
  if (suite.dataset.items) {
    std::vector<store::ShardRecord> rows;
    for (const Shard& s :
         plan_shards(run.evaluation_id, *suite.dataset.items, suite.partition_size, suite.dataset.first_item)) {
      rows.push_back(store::ShardRecord{run.evaluation_id, s.partition, std::to_string(s.partition), s.items.begin,
                                        s.items.end, "FAILED", 0, "", "", std::nullopt});
    }
    store_->evals->add_shards(rows);
  }
  failures_[run.evaluation_id] = reason;
  note(run.evaluation_id, "evaluation " + run.evaluation_id + " FAILED before any shard ran: " + reason);
}

SubmitOutcome EvalService::submit(const SubmitRequest& request) {
  std::lock_guard<std::mutex> lk(mu_);
  SubmitOutcome out;
  out.suite = request.suite;
  auto ck = store_->evals->checkpoint(request.checkpoint_id);
  if (!ck || ck->content_hash.empty()) {
    out.http_status = 404;
    out.error = "checkpoint '" + request.checkpoint_id +
                "' is not registered (register it first: POST /v1/checkpoints with its sha256)";
    return out;
  }
  try {
    return submit_locked(request, *ck);
  } catch (const store::StoreError& e) {
    out.http_status = 503;
    out.error = e.what();
    return out;
  } catch (const std::invalid_argument& e) {  // a shard plan the core refuses (more than 10^7 shards)
    out.http_status = 400;
    out.error = e.what();
    return out;
  }
}

SubmitOutcome EvalService::submit_locked(const SubmitRequest& request, const store::CheckpointRecord& ck) {
  SubmitOutcome out;
  out.suite = request.suite;
  LoadedSuite* loaded = nullptr;
  for (auto& l : suites_) {
    if (l->suite.name == request.suite) loaded = l.get();
  }
  if (!loaded) {
    std::string names;
    for (auto& l : suites_) names += (names.empty() ? "" : ", ") + l->suite.name;
    out.http_status = 404;
    out.error = "unknown benchmark suite '" + request.suite + "' (loaded: " + (names.empty() ? "none" : names) + ")";
    return out;
  }
  std::string why;
  auto mv = parse_model_version(request.model_version, &why);
  if (!mv) {
    out.http_status = 400;
    out.error = why;
    return out;
  }
  const std::string problem = check_dataset(*loaded);
  Suite suite = loaded->suite;
  if (request.priority) suite.priority = *request.priority;
  if (request.deadline_s) suite.deadline_s = *request.deadline_s;

  try {
    store_->evals->register_model_version(
        store::ModelVersionRecord{mv->model, mv->version, ck.checkpoint_id, ck.run_id, "registered", 0});
  } catch (const store::StoreError& e) {
    out.http_status = 409;
    out.error = e.what();
    return out;
  }

  EvaluationRun run;
  run.model_id = mv->model;
  run.model_version = mv->version;
  run.checkpoint_id = ck.checkpoint_id;
  run.checkpoint_hash = ck.content_hash;
  run.dataset_id = suite.dataset.id;
  run.dataset_version = suite.dataset.version;
  run.dataset_hash = suite.dataset.sha256;
  run.benchmark = suite.benchmark;
  run.benchmark_version = suite.version;
  run.suite = suite.name;
  run.prompt_template_version = suite.prompt.version;
  run.prompt_template_hash = suite.prompt.sha256;
  run.evaluator_version = suite.evaluator_version;
  if (suite.judge) {
    run.uses_judge = true;
    run.judge_model = suite.judge->model;
    run.judge_model_version = suite.judge->model_version;
    run.judge_prompt_version = suite.judge->prompt_version;
    run.judge_prompt_hash = suite.judge->prompt_sha256;
    run.rubric_version = suite.judge->rubric_version;
  }
  run.temperature = suite_temperature(suite);
  run.decoding_json = suite.decoding_json;
  run.started_at = rfc3339_now();
  // The key needs the item range: a suite whose items are unknown gets a key over none.
  Suite keyed = suite;
  if (!keyed.dataset.items) keyed.dataset.items = 0;
  CacheKeyInputs inputs = cache_key_inputs(keyed, mv->str(), ck.content_hash);
  run.cache_key = cache_key(inputs);
  run.evaluation_id = new_evaluation_id(run.cache_key);
  // The run row carries the checkpoint's training run (lineage).
  out.evaluation_id = run.evaluation_id;

  if (!problem.empty()) {
    fail_at_once(run, ck.run_id, suite, problem);
    out.status = "FAILED";
    out.error = problem;
    return out;
  }
  try {
    store_->evals->register_dataset_version(
        store::DatasetVersionRecord{suite.dataset.id, suite.dataset.version, suite.dataset.sha256,
                                    suite.dataset.first_item + *suite.dataset.items});
  } catch (const store::StoreError& e) {
    note(run.evaluation_id, std::string("dataset version not registered: ") + e.what());
  }
  try {
    store_->evals->register_benchmark_version(store::BenchmarkVersionRecord{suite.benchmark, suite.version, ""});
  } catch (const store::StoreError& e) {
    note(run.evaluation_id, std::string("benchmark version not registered: ") + e.what());
  }

  std::vector<Shard> shards =
      plan_shards(run.evaluation_id, *suite.dataset.items, suite.partition_size, suite.dataset.first_item);

  // The whole evaluation from the cache: no worker time.
  if (auto hit = store_->evals->cache_lookup(run.cache_key)) {
    auto src = store_->evals->evaluation(hit->evaluation_id);
    if (src && (src->run.status == "COMPLETED" || src->run.status == "CACHED") && src->shards.size() == shards.size()) {
      EvaluationRun cached = run;
      cached.status = EvalStatus::kCached;
      cached.cached_from = src->run.cached_from.empty() ? src->run.evaluation_id : src->run.cached_from;
      cached.worker_version = src->run.worker_version;
      cached.code_commit = src->run.code_commit;
      cached.library_versions.clear();
      cached.library_versions.insert(src->run.library_versions.begin(), src->run.library_versions.end());
      cached.completed_at = rfc3339_now();
      store::EvaluationRecord rec = to_record(cached);
      rec.run_id = ck.run_id;
      store_->evals->write_evaluation(rec);
      std::vector<store::ShardRecord> rows;
      for (size_t i = 0; i < shards.size(); ++i) {
        rows.push_back(store::ShardRecord{cached.evaluation_id, static_cast<int32_t>(i), std::to_string(i),
                                          shards[i].items.begin, shards[i].items.end, "CACHED", 0, "",
                                          shard_cache_key(inputs, shards[i].items), std::nullopt});
      }
      store_->evals->add_shards(rows);
      store_->evals->set_metrics(cached.evaluation_id, src->metrics);
      note(cached.evaluation_id, "evaluation " + cached.evaluation_id + " is CACHED: cache key " + run.cache_key +
                                     " was computed by " + cached.cached_from + "; no worker ran");
      out.status = "CACHED";
      out.cached_from = cached.cached_from;
      auto_gate(cached.evaluation_id);
      return out;
    }
  }

  store::EvaluationRecord rec = to_record(run);
  rec.run_id = ck.run_id;
  store_->evals->write_evaluation(rec);
  auto o = std::make_unique<Open>(run, suite, shards);
  o->run_id = ck.run_id;
  o->names = stat_names(suite);
  o->written.assign(shards.size(), ShardState::kQueued);
  o->written_attempt.assign(shards.size(), 0);
  o->attempt.assign(shards.size(), 0);
  o->worker.assign(shards.size(), "");
  std::vector<store::ShardRecord> rows;
  for (size_t i = 0; i < shards.size(); ++i) {
    o->shard_keys.push_back(shard_cache_key(inputs, shards[i].items));
    rows.push_back(store::ShardRecord{run.evaluation_id, static_cast<int32_t>(i), std::to_string(i),
                                      shards[i].items.begin, shards[i].items.end, "QUEUED", 0, "", o->shard_keys[i],
                                      std::nullopt});
  }
  store_->evals->add_shards(rows);
  o->tmpl.evaluation_id = run.evaluation_id;
  o->tmpl.model_version = mv->str();
  o->tmpl.checkpoint = wire::CheckpointRef{ck.checkpoint_id, ck.uri, ck.content_hash};
  o->tmpl.suite = wire::suite_info(suite);
  o->tmpl.metrics = wire::metric_infos(suite);
  o->tmpl.stride = o->agg.stride();

  // Shards from the cache, each on its own.
  EvaluationSpec spec = make_evaluation_spec(suite, run.evaluation_id, ck.checkpoint_id, now());
  spec.cached.assign(shards.size(), false);
  int cached = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    auto hit = store_->evals->cache_lookup(o->shard_keys[i]);
    if (!hit) continue;
    std::string w;
    if (refeed_stored_shard(*o, static_cast<int>(i), hit->evaluation_id, hit->shard.value_or(0), true, &w)) {
      spec.cached[i] = true;
      o->written[i] = ShardState::kCached;
      ++cached;
      if (o->cached_source.empty()) o->cached_source = hit->evaluation_id;
    } else {
      note(run.evaluation_id, "shard " + std::to_string(i) + " not served from the cache: " + w);
    }
  }
  scheduler_.submit(std::move(spec), now());
  Open& ref = *o;
  open_[run.evaluation_id] = std::move(o);
  out.status = cached == static_cast<int>(shards.size()) ? "CACHED" : "QUEUED";
  if (cached == static_cast<int>(shards.size())) out.cached_from = ref.cached_source;
  sync(ref);
  need_dispatch_ = true;
  return out;
}

bool EvalService::refeed_stored_shard(Open& o, int shard, const std::string& source_eval, int source_shard, bool copy,
                                      std::string* why) {
  const std::string& id = o.run.evaluation_id;
  auto src = store_->evals->evaluation(source_eval);
  if (!src) {
    *why = "its source evaluation " + source_eval + " is gone";
    return false;
  }
  const store::ShardRecord* row = nullptr;
  for (const auto& s : src->shards) {
    if (s.shard == source_shard) row = &s;
  }
  const ItemRange range = o.shards[shard].items;
  if (!row || (row->status != "COMPLETED" && row->status != "CACHED") || row->item_begin != range.begin ||
      row->item_end != range.end) {
    *why = "shard " + std::to_string(source_shard) + " of " + source_eval + " holds no result for items " + range.str();
    return false;
  }
  std::vector<store::ItemResult> items = store_->evals->items(source_eval, source_shard);
  eval::ShardResult r;
  r.evaluation_id = id;
  r.partition = shard;
  r.attempt = 1;
  r.worker = copy ? "cache" : "store";
  const size_t stride = o.names.size();
  r.items.reserve(items.size());
  r.stats.resize(items.size() * stride);
  for (size_t i = 0; i < items.size(); ++i) {
    r.items.push_back(items[i].item);
    if (!stats_of(items[i], o.names, &r.stats[i * stride])) {
      *why = "item " + std::to_string(items[i].item) + " of " + source_eval + " lacks the statistics the metrics need";
      return false;
    }
  }
  AcceptOutcome v = o.agg.check(r);
  if (v.outcome != Acceptance::kAccepted) {
    *why = v.reason;
    return false;
  }
  if (copy) {
    store::ShardResult sr;
    sr.evaluation_id = id;
    sr.shard = shard;
    sr.attempt = 0;  // attempt 0: copied from the cache, never a worker's attempt
    sr.worker = "";
    sr.items = std::move(items);
    sr.metrics = store_->evals->shard_metrics(source_eval, source_shard);
    store_->evals->write_shard_result(sr);
    store_->evals->set_shard_status(id, shard, "CACHED", 0, "");
  }
  o.agg.accept(r);
  o.add_provenance(src->run);
  return true;
}

// --- restart -------------------------------------------------------------------------

void EvalService::resume() {
  std::vector<store::EvaluationRecord> all = store_->evals->evaluations(store::EvaluationFilter{});
  for (const store::EvaluationRecord& rec : all) {
    if (store::is_terminal_status(rec.status)) continue;
    const std::string& id = rec.evaluation_id;
    auto fail = [&](const std::string& reason) {
      store_->evals->set_evaluation_status(id, "FAILED", rfc3339_now());
      failures_[id] = reason;
      note(id, "evaluation " + id + " FAILED when the service restarted: " + reason);
      resume_notes_.push_back(id + ": FAILED: " + reason);
    };
    LoadedSuite* loaded = nullptr;
    for (auto& l : suites_) {
      if (l->suite.name == rec.suite) loaded = l.get();
    }
    if (!loaded) {
      fail("its suite " + rec.suite + " is no longer loaded");
      continue;
    }
    if (std::string p = check_dataset(*loaded); !p.empty()) {
      fail(p);
      continue;
    }
    const Suite& suite = loaded->suite;
    CacheKeyInputs inputs = cache_key_inputs(suite, rec.model_id + ":" + rec.model_version, rec.checkpoint_hash);
    const std::string key = cache_key(inputs);
    if (key != rec.cache_key) {
      fail("its suite " + rec.suite + " changed since it was submitted (cache key now " + key + ", was " +
           rec.cache_key + ")");
      continue;
    }
    auto view = store_->evals->evaluation(id);
    std::vector<Shard> shards = plan_shards(id, *suite.dataset.items, suite.partition_size, suite.dataset.first_item);
    if (view && view->shards.size() < shards.size()) {
      // Stopped between writing the evaluation and its shards: plan the missing ones (rows there are kept).
      std::vector<store::ShardRecord> rows;
      for (size_t i = 0; i < shards.size(); ++i) {
        rows.push_back(store::ShardRecord{id, static_cast<int32_t>(i), std::to_string(i), shards[i].items.begin,
                                          shards[i].items.end, "QUEUED", 0, "",
                                          shard_cache_key(inputs, shards[i].items), std::nullopt});
      }
      store_->evals->add_shards(rows);
      view = store_->evals->evaluation(id);
    }
    if (!view || view->shards.size() != shards.size()) {
      fail("its stored shards no longer match the suite's shard plan");
      continue;
    }
    auto ck = store_->evals->checkpoint(rec.checkpoint_id);
    EvaluationRun run = from_record(rec);
    auto o = std::make_unique<Open>(run, suite, shards);
    o->run_id = rec.run_id;
    o->names = stat_names(suite);
    o->written.assign(shards.size(), ShardState::kQueued);
    o->written_attempt.assign(shards.size(), 0);
    o->attempt.assign(shards.size(), 0);
    o->worker.assign(shards.size(), "");
    o->add_provenance(rec);
    for (size_t i = 0; i < shards.size(); ++i) o->shard_keys.push_back(shard_cache_key(inputs, shards[i].items));
    o->tmpl.evaluation_id = id;
    o->tmpl.model_version = rec.model_id + ":" + rec.model_version;
    o->tmpl.checkpoint = wire::CheckpointRef{rec.checkpoint_id, ck ? ck->uri : "", rec.checkpoint_hash};
    o->tmpl.suite = wire::suite_info(suite);
    o->tmpl.metrics = wire::metric_infos(suite);
    o->tmpl.stride = o->agg.stride();
    EvaluationSpec spec = make_evaluation_spec(suite, id, rec.checkpoint_id, now());
    spec.cached.assign(shards.size(), false);
    spec.done.assign(shards.size(), false);
    spec.failed.assign(shards.size(), false);
    spec.prior_attempts.assign(shards.size(), 0);
    int done = 0, failed = 0, again = 0;
    for (const store::ShardRecord& row : view->shards) {
      const int i = row.shard;
      if (i < 0 || i >= static_cast<int>(shards.size())) continue;
      spec.prior_attempts[i] = std::max(row.attempt, row.result_attempt.value_or(0));
      o->attempt[i] = o->written_attempt[i] = spec.prior_attempts[i];
      if (row.status == "COMPLETED" || row.status == "CACHED") {
        std::string why;
        if (refeed_stored_shard(*o, i, id, i, false, &why)) {
          (row.status == "CACHED" ? spec.cached : spec.done)[i] = true;
          o->written[i] = row.status == "CACHED" ? ShardState::kCached : ShardState::kDone;
          ++done;
          continue;
        }
        note(id, "shard " + std::to_string(i) + " is run again: its stored result cannot be read back: " + why);
      }
      if (row.status == "FAILED") {  // attempts used up, or not retryable: a restart does not mend it
        spec.failed[i] = true;
        o->written[i] = ShardState::kFailed;
        ++failed;
        continue;
      }
      ++again;
      o->written[i] = row.status == "RUNNING" ? ShardState::kRunning : ShardState::kQueued;
    }
    scheduler_.submit(std::move(spec), now());
    const std::string failed_text = failed ? ", " + std::to_string(failed) + " failed" : std::string();
    note(id, "resumed after a restart: " + std::to_string(done) + " shards done before it" + failed_text + ", " +
                 std::to_string(again) + " queued again (attempt numbers continue)");
    resume_notes_.push_back(id + ": resumed, " + std::to_string(done) + " shards done" + failed_text + ", " +
                            std::to_string(again) + " queued again");
    Open& ref = *o;
    open_[id] = std::move(o);
    sync(ref);
  }
}

// --- checkpoints ---------------------------------------------------------------------

CheckpointOutcome EvalService::register_checkpoint(const CheckpointRequest& request) {
  std::lock_guard<std::mutex> lk(mu_);
  try {
    return register_checkpoint_locked(request);
  } catch (const store::StoreError& e) {
    CheckpointOutcome out;
    out.http_status = 503;
    out.error = e.what();
    return out;
  }
}

CheckpointOutcome EvalService::register_checkpoint_locked(const CheckpointRequest& request) {
  CheckpointOutcome out;
  const store::CheckpointRecord& c = request.checkpoint;
  if (c.checkpoint_id.empty()) {
    out.http_status = 400;
    out.error = "a checkpoint needs a checkpointId";
    return out;
  }
  if (!sha256::is_hex_digest(c.content_hash)) {
    out.http_status = 400;
    out.error =
        "checkpoint " + c.checkpoint_id + ": sha256 must be 64 lowercase hex digits, got '" + c.content_hash + "'";
    return out;
  }
  std::string why;
  auto mv = parse_model_version(request.model_version, &why);
  if (!mv) {
    out.http_status = 400;
    out.error = why;
    return out;
  }
  try {
    out.registered = store_->evals->register_checkpoint(c);
    store_->evals->register_model_version(
        store::ModelVersionRecord{mv->model, mv->version, c.checkpoint_id, c.run_id, "registered", 0});
  } catch (const store::StoreError& e) {
    out.http_status = 409;
    out.error = e.what();
    return out;
  }
  counters_.checkpoints_registered++;
  auto ck = store_->evals->checkpoint(c.checkpoint_id);
  if (!ck) return out;
  store::EvaluationFilter f;
  f.model_id = mv->model;
  f.model_version = mv->version;
  std::vector<store::EvaluationRecord> existing = store_->evals->evaluations(f);
  for (auto& l : suites_) {
    if (!l->suite.triggered_by(mv->model)) continue;
    const store::EvaluationRecord* had = nullptr;
    for (const auto& e : existing) {
      if (e.suite == l->suite.name && e.checkpoint_id == c.checkpoint_id) had = &e;
    }
    if (had) {  // registering again creates nothing new
      out.evaluations.push_back(SubmitOutcome{200, "", had->evaluation_id, had->status, had->cached_from, had->suite});
      continue;
    }
    SubmitRequest req{mv->str(), c.checkpoint_id, l->suite.name, std::nullopt, std::nullopt};
    SubmitOutcome s = submit_locked(req, *ck);
    out.evaluations.push_back(std::move(s));
  }
  return out;
}

void EvalService::poll_checkpoints() {
  std::vector<store::PendingCheckpoint> pending = store_->evals->unregistered_checkpoints(64);
  for (const auto& p : pending) {
    CheckpointRequest req;
    req.checkpoint = p.checkpoint;
    const std::string model = id_part(p.model_id.empty() ? p.checkpoint.run_id : p.model_id);
    req.model_version = model + ":" + id_part(p.checkpoint.checkpoint_id);
    CheckpointOutcome o = register_checkpoint_locked(req);
    if (!o.error.empty()) {
      std::fprintf(stderr, "runlens serve: checkpoint %s of run %s not registered: %s\n",
                   p.checkpoint.checkpoint_id.c_str(), p.checkpoint.run_id.c_str(), o.error.c_str());
    }
    for (const auto& e : o.evaluations) {
      if (!e.error.empty() && e.evaluation_id.empty())
        std::fprintf(stderr, "runlens serve: checkpoint %s: suite %s: %s\n", p.checkpoint.checkpoint_id.c_str(),
                     e.suite.c_str(), e.error.c_str());
    }
    store_->evals->mark_checkpoint_registered(p.checkpoint.run_id, p.checkpoint.checkpoint_id);
  }
}

// --- reads ---------------------------------------------------------------------------

std::optional<std::vector<std::string>> EvalService::why(const std::string& evaluation_id) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> out;
  bool known = false;
  if (auto it = notes_.find(evaluation_id); it != notes_.end()) {
    out = it->second;
    known = true;
  }
  if (scheduler_.has_evaluation(evaluation_id)) {
    for (auto& l : scheduler_.why(evaluation_id)) out.push_back(std::move(l));
    known = true;
  }
  if (!known) return std::nullopt;
  return out;
}

std::string EvalService::failure(const std::string& evaluation_id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = failures_.find(evaluation_id);
  return it == failures_.end() ? std::string() : it->second;
}

bool EvalService::is_open(const std::string& evaluation_id) {
  std::lock_guard<std::mutex> lk(mu_);
  return open_.count(evaluation_id) > 0;
}

std::vector<SuiteRow> EvalService::suites() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<SuiteRow> out;
  for (const auto& l : suites_) {
    const Suite& s = l->suite;
    out.push_back(SuiteRow{s.name, s.file, s.benchmark, s.version, s.evaluator_version, s.dataset.id, s.dataset.version,
                           s.dataset.items.value_or(0), s.partition_size, std::string(priority_name(s.priority)),
                           s.on_checkpoint});
  }
  return out;
}

std::vector<WorkerRow> EvalService::workers() {
  std::lock_guard<std::mutex> lk(mu_);
  std::map<std::string, int> running;
  for (const auto& [id, o] : open_) {
    for (size_t i = 0; i < o->shards.size(); ++i) {
      if (o->written[i] == ShardState::kRunning) running[o->worker[i]]++;
    }
  }
  std::vector<WorkerRow> out;
  const int64_t t = now();
  for (const auto& [id, w] : workers_) {
    const wire::Hello& h = w->hello;
    out.push_back(WorkerRow{id, h.pool, h.worker_version, h.code_commit, h.memory_mib, h.slots,
                            w->alive ? running[id] : 0, w->alive, t - w->last_heartbeat_ms, h.evaluators, h.libraries});
  }
  return out;
}

ServiceCounters EvalService::counters() {
  std::lock_guard<std::mutex> lk(mu_);
  return counters_;
}

}  // namespace runlens::eval::service
