// The collector's end of the SDK tests: a real ZeroMQ PULL socket bound to a
// loopback port chosen at run time, with its own context, and the next
// message it receives as Cap'n Proto words.
#pragma once

#include <capnp/common.h>
#include <doctest/doctest.h>
#include <zmq.h>

#include <cstring>
#include <string>
#include <vector>

namespace runlens::testing {

struct Pull {
  Pull() {
    ctx = zmq_ctx_new();
    sock = zmq_socket(ctx, ZMQ_PULL);
    REQUIRE(zmq_bind(sock, "tcp://127.0.0.1:*") == 0);
    char buf[256];
    size_t len = sizeof buf;
    zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, buf, &len);
    endpoint = buf;
  }
  ~Pull() {
    zmq_close(sock);
    zmq_ctx_term(ctx);
  }
  // The next message within 100 ms, copied into words (ZeroMQ's buffer need
  // not be word-aligned); false when none came.
  bool next(std::vector<capnp::word>& words) {
    zmq_pollitem_t item{sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 100) <= 0) return false;
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    REQUIRE(zmq_msg_recv(&msg, sock, 0) >= 0);
    words.assign(zmq_msg_size(&msg) / sizeof(capnp::word), capnp::word{});
    std::memcpy(words.data(), zmq_msg_data(&msg), words.size() * sizeof(capnp::word));
    zmq_msg_close(&msg);
    return true;
  }
  Pull(const Pull&) = delete;
  Pull& operator=(const Pull&) = delete;
  void* ctx;
  void* sock;
  std::string endpoint;
};

}  // namespace runlens::testing
