#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <zmq.hpp>

#include "connectors/sources/producer_ledger.h"
#include "connectors/sources/sources.h"
#include "connectors/zmq_endpoint.h"
#include "formats/capnp_codec.h"
#include "formats/recording.h"

namespace runlens::connectors {
namespace {

class ZmqSource final : public runtime::SourceDef<Record> {
 public:
  explicit ZmqSource(ZmqSourceOptions o) : o_(std::move(o)) {}

  void run(runtime::SourceOutput<Record>& out) override {
    zmq::context_t ctx(1);
    zmq::socket_t sock(ctx, o_.subscribe ? zmq::socket_type::sub : zmq::socket_type::pull);
    sock.set(zmq::sockopt::rcvhwm, static_cast<int>(o_.rcvhwm));
    sock.set(zmq::sockopt::linger, 0);
    sock.set(zmq::sockopt::backlog, static_cast<int>(o_.backlog));  // the kernel caps it at net.core.somaxconn
    // Frames larger than this are refused by ZeroMQ itself; we still check below.
    sock.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(o_.max_frame_bytes) + 1);
    if (o_.subscribe) sock.set(zmq::sockopt::subscribe, o_.topic);
    const std::string& endpoint = o_.bind.empty() ? o_.connect : o_.bind;
    try {
      if (!o_.bind.empty())
        sock.bind(o_.bind);
      else
        sock.connect(o_.connect);
    } catch (const zmq::error_t& e) {
      throw runtime::ConfigError({runtime::Diagnostic{
          {},
          "sources." + out.node_id(),
          std::string("cannot ") + (o_.bind.empty() ? "connect to " : "bind ") + endpoint + ": " + e.what()}});
    }
    // Optionally keep every frame as it came, so a replay of the recording
    // sees exactly what this live pipeline saw.
    recording::Writer recorder;
    if (!o_.record.empty()) {
      std::string error;
      if (!recorder.open(o_.record, &error)) {
        throw runtime::ConfigError({runtime::Diagnostic{{}, "sources." + out.node_id(), error}});
      }
    }
    std::vector<Record> rows;
    std::vector<capnpc::EventIssue> issues;
    capnpc::BatchProgress progress;
    ProducerLedger ledger;
    uint64_t frame_no = 0;
    while (!out.stopping() && !interrupted_.load()) {
      // 10 ms: idle() also moves the watermark up to the wall clock less
      // join_grace when no batch comes (runtime/executor.h, join_cap); a
      // deferred watermark goes out at its due time, not a poll later.
      if (!wait_readable(sock,
                         std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(10), out.watermark_due()))) {
        out.idle();
        continue;
      }
      // Drain what is there, a bounded number of frames per pass.
      for (int k = 0; k < 256; ++k) {
        zmq::message_t msg;
        auto got = sock.recv(msg, zmq::recv_flags::dontwait);
        if (!got) break;
        ++frame_no;
        std::string where = endpoint + "#frame " + std::to_string(frame_no);
        if (o_.subscribe && msg.more()) continue;  // topic frame of a multipart message
        if (static_cast<int64_t>(msg.size()) > o_.max_frame_bytes) {
          dead(out, where,
               "oversized frame: " + std::to_string(msg.size()) + " bytes (max_frame_bytes " +
                   std::to_string(o_.max_frame_bytes) + ")");
          continue;
        }
        rows.clear();
        issues.clear();
        std::string error;
        if (!capnpc::decode_batch(msg.data(), msg.size(), &rows, &issues, &error, &progress)) {
          dead(out, where, error);
          continue;
        }
        for (const auto& i : issues) dead(out, where + " event " + std::to_string(i.index), i.reason);
        if (!o_.record.empty()) {
          std::string error;
          std::string bytes(static_cast<const char*>(msg.data()), msg.size());
          if (!recorder.write_encoded(bytes, static_cast<uint32_t>(rows.size() + issues.size()), &error)) {
            dead(out, where, "not recorded: " + error);
          }
        }
        int64_t horizon = drop_future(out, rows, where);
        if (progress.producer.empty()) {
          out.push(rows, [&](size_t i) { return where; });
          continue;
        }
        // A producer's promise is bounded by the same horizon as its events.
        ledger.observe(progress, rows, out.counters());
        runtime::Progress p{progress.producer, progress.seq, std::min(progress.watermark_ns, horizon), progress.final};
        out.push(
            rows, [&](size_t i) { return where; }, &p);
      }
    }
  }

  void interrupt() override { interrupted_.store(true); }
  bool live() const override { return true; }

  // Whether a message can be read, waiting at most `timeout` (nanoseconds:
  // zmq_poll counts milliseconds, and a watermark deferred for 250 us must
  // not wait a whole one). Waits on the socket's ZMQ_FD, which signals that
  // its events may have changed; ZMQ_EVENTS says what they are.
  static bool wait_readable(zmq::socket_t& sock, std::chrono::nanoseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const int fd = sock.get(zmq::sockopt::fd);
    while (true) {
      if (sock.get(zmq::sockopt::events) & ZMQ_POLLIN) return true;
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds::zero()) return false;
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      pollfd p{fd, POLLIN, 0};
      if (::ppoll(&p, 1, &ts, nullptr) < 0 && errno != EINTR) {
        throw zmq::error_t();  // errno names it
      }
    }
  }

  std::string describe() const override {
    return (o_.bind.empty() ? "connect=" + o_.connect : "bind=" + o_.bind) + (o_.subscribe ? " sub" : " pull");
  }

 private:
  static void dead(runtime::SourceOutput<Record>& out, const std::string& where, const std::string& why) {
    runtime::DeadLetter d;
    d.component = out.node_id();
    d.position = where;
    d.reason = why;
    out.dead_letters().write(d);
    out.counters().add(out.counters().dead_lettered, 1);
  }

  // One event stamped far in the future (a bad clock) would move the
  // watermark past everything else and make it all late. Live event times are
  // wall-clock times, so reject those beyond max_future of this host's clock.
  // Returns that horizon.
  int64_t drop_future(runtime::SourceOutput<Record>& out, std::vector<Record>& rows, const std::string& where) {
    int64_t now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    size_t kept = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].time_ns > now + o_.max_future_ns) {
        dead(out, where,
             "event time " + std::to_string(rows[i].time_ns) + " is " +
                 std::to_string((rows[i].time_ns - now) / 1'000'000'000) +
                 " s ahead of this host's clock (max_future " + std::to_string(o_.max_future_ns / 1'000'000'000) +
                 " s)");
        continue;
      }
      if (kept != i) rows[kept] = std::move(rows[i]);
      ++kept;
    }
    rows.resize(kept);
    return now + o_.max_future_ns;
  }

  ZmqSourceOptions o_;
  std::atomic<bool> interrupted_{false};
};

}  // namespace

std::unique_ptr<runtime::SourceDef<Record>> MakeZmqSource(ZmqSourceOptions options) {
  return std::make_unique<ZmqSource>(std::move(options));
}

void RegisterZmqSource(Registry& registry) {
  runtime::ComponentInfo info;
  info.type = "zmq";
  info.role = runtime::Role::kSource;
  info.doc =
      "Receives Cap'n Proto telemetry batches over ZeroMQ from many senders at once (PULL, or SUB). A malformed or "
      "oversized frame is dead-lettered with its reason.";
  const ZmqSourceOptions defaults;  // each default is written once, in ZmqSourceOptions
  info.params = {
      {.name = "bind",
       .type = runtime::ParamType::kString,
       .default_value = defaults.bind,
       .doc = "Endpoint to bind, e.g. tcp://127.0.0.1:5555 (or use connect)."},
      {.name = "connect",
       .type = runtime::ParamType::kString,
       .default_value = defaults.connect,
       .doc = "Endpoint to connect to (instead of bind)."},
      {.name = "socket",
       .type = runtime::ParamType::kString,
       .default_value = defaults.subscribe ? "sub" : "pull",
       .doc = "pull (senders PUSH) or sub (senders PUB).",
       .choices = {"pull", "sub"}},
      {.name = "topic",
       .type = runtime::ParamType::kString,
       .default_value = defaults.topic,
       .doc = "With socket: sub, the topic prefix to subscribe to."},
      {.name = "max_frame_bytes",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(defaults.max_frame_bytes),
       .doc = "Largest frame accepted; larger ones are dead-lettered.",
       .min = 64},
      {.name = "rcvhwm",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(defaults.rcvhwm),
       .doc = "ZeroMQ receive high-water mark, in messages.",
       .min = 1},
      {.name = "backlog",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(defaults.backlog),
       .doc = "Connections that may wait to be accepted (bind only; the kernel caps it at net.core.somaxconn). A job's "
              "ranks connect at once: past the backlog their first batches arrive a second late, behind the watermark.",
       .min = 1,
       .max = 65535},
      {.name = "record",
       .type = runtime::ParamType::kString,
       .default_value = defaults.record,
       .doc = "If set, a recording file that gets every frame received, as received."},
      {.name = "max_future",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.max_future_ns),
       .doc = "Events stamped further ahead of this host's clock are dead-lettered (a bad clock would otherwise make "
              "everything else late).",
       .min = 0},
  };
  info.emits = kAllContractKinds;
  registry.add_source(std::move(info), [](const runtime::BuildContext& ctx) {
    ZmqSourceOptions o;
    o.bind = ctx.params->get_string("bind");
    o.connect = ctx.params->get_string("connect");
    if (o.bind.empty() == o.connect.empty()) ctx.fail("bind", "give exactly one of 'bind' and 'connect'");
    std::string why;
    const char* endpoint_param = o.bind.empty() ? "connect" : "bind";
    if (!check_zmq_endpoint(o.bind.empty() ? o.connect : o.bind, &why)) ctx.fail(endpoint_param, why);
    o.subscribe = ctx.params->get_string("socket") == "sub";
    o.topic = ctx.params->get_string("topic");
    o.max_frame_bytes = ctx.params->get_int("max_frame_bytes");
    o.rcvhwm = ctx.params->get_int("rcvhwm");
    o.backlog = ctx.params->get_int("backlog");
    o.max_future_ns = ctx.params->get_duration_ns("max_future");
    o.record = ctx.params->get_string("record");
    return MakeZmqSource(std::move(o));
  });
}

}  // namespace runlens::connectors
