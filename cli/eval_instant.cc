#include "cli/eval_instant.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <zmq.hpp>

#include "cli/commands.h"
#include "eval/metric.h"

namespace runlens::cli {

namespace wire = eval::wire;

std::string instant_stats(const wire::Assign& a, std::vector<double>* stats) {
  struct Col {
    eval::Aggregation kind;
    bool binary;
    double lo, hi;
  };
  std::vector<Col> cols;
  int stride = 0;
  for (const auto& m : a.metrics) {
    const eval::MetricDef* def = eval::find_metric(m.name);
    if (!def) return "metric " + m.name + " is unknown to this worker";
    const int n = eval::stats_per_item(def->aggregation);
    if (n != m.stats)
      return "metric " + m.name + ": the service expects " + std::to_string(m.stats) +
             " statistics per item, this worker reports " + std::to_string(n);
    double lo = def->lo, hi = def->hi;
    if (def->uses_judge) {
      if (!a.suite.judge) return "metric " + m.name + " needs the suite's judge block";
      lo = a.suite.judge->scale_lo, hi = a.suite.judge->scale_hi;
    }
    cols.push_back({def->aggregation, def->binary, lo, hi});
    stride += n;
  }
  if (stride != a.stride)
    return "stride " + std::to_string(a.stride) + " is not the sum of the metrics' stats (" + std::to_string(stride) +
           ")";
  stats->reserve(stats->size() + static_cast<size_t>((a.end - a.begin) * stride));
  for (int64_t item = a.begin; item < a.end; ++item) {
    for (const Col& c : cols) {
      switch (c.kind) {
        case eval::Aggregation::kMean:
          stats->push_back(c.binary ? static_cast<double>(item & 1)
                                    : c.lo + (c.hi - c.lo) * static_cast<double>(item % 5) / 4);
          break;
        case eval::Aggregation::kTokenWeighted: {
          const double count = static_cast<double>(1 + item % 8);
          stats->push_back(-1.5 * count);  // log-likelihood: 1.5 nats per token
          stats->push_back(count);
          break;
        }
        case eval::Aggregation::kCorpusBleu: {
          const double hyp = static_cast<double>(4 + item % 3);
          for (int n = 0; n < 4; ++n)
            stats->push_back(static_cast<double>(static_cast<int64_t>(hyp - n) / 2));  // matches
          for (int n = 0; n < 4; ++n) stats->push_back(hyp - n);  // totals: max(0, hyp - n), hyp >= 4
          stats->push_back(hyp);
          stats->push_back(hyp + 1);  // reference length
          break;
        }
        case eval::Aggregation::kPassAtK:
          stats->push_back(10);
          stats->push_back(static_cast<double>(item % 11));
          break;
        case eval::Aggregation::kClassification:
          stats->push_back(static_cast<double>(item % 3));
          stats->push_back(static_cast<double>((item + (item & 1)) % 3));
          break;
        case eval::Aggregation::kRate:  // every other item in scope, a third of those with the outcome
          stats->push_back(static_cast<double>(item & 1));
          stats->push_back(static_cast<double>((item & 1) && item % 3 == 1));
          break;
      }
    }
  }
  return {};
}

namespace {

void log(const InstantWorkerOptions& o, const std::string& text) {
  std::fprintf(stderr, "runlens eval worker %s: %s\n", o.worker_id.c_str(), text.c_str());
}

}  // namespace

int run_instant_worker(const InstantWorkerOptions& o, const std::function<bool()>& stop) {
  using Clock = std::chrono::steady_clock;
  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  sock.set(zmq::sockopt::linger, 2000);
  try {
    sock.connect(o.endpoint);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "runlens eval worker: cannot connect to %s: %s\n", o.endpoint.c_str(), e.what());
    return kExitUsage;
  }
  wire::Hello hello;
  hello.worker = o.worker_id;
  hello.pool = o.pool;
  hello.memory_mib = o.memory_mib;
  hello.slots = o.slots;
  hello.worker_version = "runlens-eval-worker-instant/1";
  hello.code_commit = "unknown";
  hello.libraries = {{"runlens", "0.1.0"}};
  const std::string hello_bytes = wire::encode(hello);
  wire::Heartbeat beat;
  beat.worker = o.worker_id;
  beat.has_loaded = true;
  const std::string beat_bytes = wire::encode(beat);
  auto send = [&](const std::string& bytes) {
    while (true) {
      try {
        return sock.send(zmq::buffer(bytes), zmq::send_flags::none).has_value();
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;  // a signal (the stop request) interrupted it: send it all the same
      }
    }
  };

  send(hello_bytes);
  auto last_hello = Clock::now();
  bool welcomed = false;
  auto heartbeat = std::chrono::milliseconds(1000);
  auto next_beat = Clock::now() + heartbeat;
  int64_t shards = 0, items = 0;
  wire::Result result;
  result.worker = o.worker_id;
  result.provenance.worker_version = hello.worker_version;
  result.provenance.code_commit = hello.code_commit;
  result.provenance.libraries = hello.libraries;
  zmq::message_t msg;
  auto recv = [&](zmq::message_t& m) {
    try {
      return sock.recv(m, zmq::recv_flags::dontwait).has_value();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      return false;
    }
  };
  log(o, "connecting to " + o.endpoint);
  while (!stop()) {
    zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - Clock::now());
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(std::clamp<int64_t>(wait.count(), 0, 100)));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      continue;  // SIGTERM or SIGINT: stop() says so
    }
    while (recv(msg)) {
      wire::DecodeError err;
      auto decoded = wire::decode_service_message(msg.to_string_view(), &err);
      if (!decoded) {
        log(o, "ignored a message it cannot read: " + err.error);
        continue;
      }
      if (auto* a = std::get_if<wire::Assign>(&*decoded)) {
        result.evaluation_id = a->evaluation_id;
        result.shard = a->shard;
        result.attempt = a->attempt;
        result.stats.clear();
        std::string why = instant_stats(*a, &result.stats);
        if (!why.empty()) {
          wire::Fail f{o.worker_id, a->evaluation_id, a->shard, a->attempt, why, false};
          send(wire::encode(f));
          log(o, "shard " + std::to_string(a->shard) + " of " + a->evaluation_id + " failed: " + why);
          continue;
        }
        result.items.resize(static_cast<size_t>(a->end - a->begin));
        for (int64_t i = a->begin; i < a->end; ++i) result.items[static_cast<size_t>(i - a->begin)].item = i;
        result.stats_per_item = a->stride;
        send(wire::encode(result));
        ++shards, items += a->end - a->begin;
      } else if (auto* w = std::get_if<wire::Welcome>(&*decoded)) {
        welcomed = true;
        heartbeat = std::chrono::milliseconds(std::clamp<int64_t>(w->heartbeat_ms, 10, 600000));
        next_beat = Clock::now() + heartbeat;
        log(o, "welcomed by " + o.endpoint);
      } else if (auto* r = std::get_if<wire::Reregister>(&*decoded)) {
        log(o, "service asks to register again: " + r->reason);
        welcomed = false;
        send(hello_bytes);
        last_hello = Clock::now();
      } else if (auto* ack = std::get_if<wire::Ack>(&*decoded)) {
        if (ack->outcome != wire::AckOutcome::kAccepted)
          log(o, "shard " + std::to_string(ack->shard) + " of " + ack->evaluation_id + ": " +
                     std::string(wire::ack_outcome_name(ack->outcome)) + ": " + ack->reason);
      } else if (auto* e = std::get_if<wire::Error>(&*decoded)) {
        log(o, "service error about " + e->about + ": " + e->error);
      }
    }
    const auto now = Clock::now();
    if (now >= next_beat) {
      if (welcomed) {
        send(beat_bytes);
      } else if (now - last_hello >= std::chrono::seconds(2)) {
        send(hello_bytes);  // the service was not there yet
        last_hello = now;
      }
      next_beat = now + heartbeat;
    }
  }
  wire::Bye bye{o.worker_id};
  send(wire::encode(bye));
  log(o, "bye after " + std::to_string(shards) + " shards, " + std::to_string(items) + " items");
  return kExitOk;
}

}  // namespace runlens::cli
