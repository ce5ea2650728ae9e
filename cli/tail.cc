// runlens tail: the live alert stream as JSON lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <zmq.hpp>

#include "cli/commands.h"

namespace runlens::cli {

namespace {

int tail(const std::string& connect, const std::vector<std::string>& kinds, int64_t max_count) {
  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::sub);
  sock.set(zmq::sockopt::linger, 0);
  if (kinds.empty()) sock.set(zmq::sockopt::subscribe, "");
  for (const auto& k : kinds) sock.set(zmq::sockopt::subscribe, k);
  try {
    sock.connect(connect);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "runlens tail: cannot connect to %s: %s\n", connect.c_str(), e.what());
    return kExitFailure;
  }
  int64_t n = 0;
  while (!stop_requested() && (max_count <= 0 || n < max_count)) {
    zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      if (zmq::poll(items, 1, std::chrono::milliseconds(100)) == 0) continue;
    } catch (const zmq::error_t&) {
      continue;
    }
    zmq::message_t topic, body;
    if (!sock.recv(topic, zmq::recv_flags::dontwait)) continue;
    if (!topic.more()) continue;
    if (!sock.recv(body, zmq::recv_flags::none)) continue;
    // A topic prefix matches longer kinds too (e.g. "straggler" vs "straggler_x"): filter exactly.
    std::string kind(static_cast<const char*>(topic.data()), topic.size());
    if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) continue;
    std::fwrite(body.data(), 1, body.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    ++n;
  }
  return kExitOk;
}

struct TailFlags {
  std::string connect = "tcp://127.0.0.1:5556";
  std::vector<std::string> kinds;
  int64_t count = 0;
};

}  // namespace

Command add_tail(CLI::App& app) {
  auto f = std::make_shared<TailFlags>();
  auto* sub = app.add_subcommand("tail", "Print the live alert stream as JSON lines");
  sub->add_option("--connect", f->connect, "Alert stream endpoint")->capture_default_str();
  sub->add_option("--kind", f->kinds, "Only alerts of this kind (repeatable)");
  sub->add_option("--count", f->count, "Exit after this many alerts");
  return {sub, [f] { return tail(f->connect, f->kinds, f->count); }};
}

}  // namespace runlens::cli
