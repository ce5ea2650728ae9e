// runlens record: what arrives on a ZeroMQ endpoint, to a recording, until Ctrl-C.
#include <chrono>
#include <cstdio>
#include <memory>
#include <zmq.hpp>

#include "cli/commands.h"
#include "formats/capnp_codec.h"
#include "formats/recording.h"

namespace runlens::cli {

namespace {

int record(const std::string& bind, const std::string& connect, const std::string& out) {
  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::pull);
  sock.set(zmq::sockopt::linger, 0);
  std::string endpoint = bind.empty() ? connect : bind;
  try {
    if (!bind.empty())
      sock.bind(bind);
    else
      sock.connect(connect);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "runlens record: cannot %s %s: %s\n", bind.empty() ? "connect to" : "bind", endpoint.c_str(),
                 e.what());
    return kExitFailure;
  }
  recording::Writer writer;
  std::string error;
  if (!writer.open(out, &error)) {
    std::fprintf(stderr, "runlens record: %s\n", error.c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "recording %s to %s until Ctrl-C\n", endpoint.c_str(), out.c_str());
  uint64_t frames = 0, events = 0, rejected = 0;
  std::vector<Record> rows;
  std::vector<capnpc::EventIssue> issues;
  while (!stop_requested()) {
    zmq::message_t msg;
    zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      if (zmq::poll(items, 1, std::chrono::milliseconds(100)) == 0) continue;
    } catch (const zmq::error_t&) {
      continue;
    }
    if (!sock.recv(msg, zmq::recv_flags::dontwait)) continue;
    // Keep the frame as it came, so a replay sees exactly what the live run saw;
    // frames that are not runlens batches are not recorded.
    rows.clear();
    issues.clear();
    if (!capnpc::decode_batch(msg.data(), msg.size(), &rows, &issues, &error)) {
      ++rejected;
      std::fprintf(stderr, "runlens record: frame %llu not recorded: %s\n",
                   static_cast<unsigned long long>(frames + rejected), error.c_str());
      continue;
    }
    std::string bytes(static_cast<const char*>(msg.data()), msg.size());
    if (!writer.write_encoded(bytes, static_cast<uint32_t>(rows.size() + issues.size()), &error)) {
      std::fprintf(stderr, "runlens record: %s\n", error.c_str());
      return kExitFailure;
    }
    ++frames;
    events += rows.size();
  }
  if (!writer.close(&error)) {
    std::fprintf(stderr, "runlens record: %s\n", error.c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "recorded %llu frames, %llu events to %s\n", static_cast<unsigned long long>(frames),
               static_cast<unsigned long long>(events), out.c_str());
  return kExitOk;
}

struct RecordFlags {
  std::string bind, connect, out;
};

}  // namespace

Command add_record(CLI::App& app) {
  auto f = std::make_shared<RecordFlags>();
  auto* sub = app.add_subcommand("record", "Record what arrives on a ZeroMQ endpoint to a recording, until Ctrl-C");
  auto* rb = sub->add_option("--bind", f->bind, "Endpoint to bind (senders connect)");
  auto* rc = sub->add_option("--connect", f->connect, "Endpoint to connect to");
  rb->excludes(rc);
  sub->add_option("--out", f->out, "Recording file")->required();
  return {sub, [f] {
            if (f->bind.empty() == f->connect.empty()) {
              std::fprintf(stderr, "runlens record: give exactly one of --bind and --connect\n");
              return kExitUsage;
            }
            return record(f->bind, f->connect, f->out);
          }};
}

}  // namespace runlens::cli
