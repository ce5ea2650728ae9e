// The syntax of a ZeroMQ endpoint, checked when a pipeline is built (so that
// `runlens validate` rejects what bind/connect would reject at run time)
// without touching a socket.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>

namespace runlens::connectors {

// TRANSPORT://ADDRESS with a transport libzmq knows and a non-empty address;
// tcp addresses end in :PORT (digits or *). False, and `why` filled, if not.
inline bool check_zmq_endpoint(const std::string& endpoint, std::string* why) {
  static const char* const kTransports[] = {"tcp",  "ipc",  "inproc", "pgm", "epgm", "tipc",
                                            "vmci", "norm", "udp",    "ws",  "wss"};
  size_t sep = endpoint.find("://");
  std::string transport = sep == std::string::npos ? "" : endpoint.substr(0, sep);
  std::string address = sep == std::string::npos ? "" : endpoint.substr(sep + 3);
  bool known =
      std::any_of(std::begin(kTransports), std::end(kTransports), [&](const char* t) { return transport == t; });
  if (!known || address.empty()) {
    *why =
        "invalid endpoint '" + endpoint + "' (expected TRANSPORT://ADDRESS, e.g. tcp://127.0.0.1:5555 or ipc:///tmp/x)";
    return false;
  }
  if (transport == "tcp") {
    size_t colon = address.rfind(':');
    std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
    bool ok = port == "*" || (!port.empty() && std::all_of(port.begin(), port.end(), [](char c) {
                return std::isdigit(static_cast<unsigned char>(c));
              }));
    if (!ok) {
      *why = "invalid endpoint '" + endpoint + "' (a tcp address ends in :PORT, e.g. tcp://127.0.0.1:5555)";
      return false;
    }
  }
  return true;
}

}  // namespace runlens::connectors
