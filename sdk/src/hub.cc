#include "hub.h"

#include <pthread.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <system_error>

namespace runlens::sdk {
namespace {

// The process's current hub. A hub whose members all left is taken out of
// here before it stops, so a Join meanwhile starts a fresh one.
struct Registry {
  std::mutex mu;
  Hub* current = nullptr;
};

Registry& registry() {
  // Never destroyed: emitters may be closed from static destructors.
  static Registry* r = [] {
    auto* made = new Registry;
    // A fork while another thread joins or leaves must not leave the child
    // a registry locked by a thread it does not have.
    pthread_atfork([] { registry().mu.lock(); }, [] { registry().mu.unlock(); }, [] { registry().mu.unlock(); });
    return made;
  }();
  return *r;
}

}  // namespace

Hub* Hub::Join(std::string& error) noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  // A hub copied into a fork child has no thread here and a context that
  // belongs to the parent: it is left alone (leaked), never stopped.
  if (r.current != nullptr && !r.current->ours()) r.current = nullptr;
  if (r.current == nullptr) {
    Hub* hub = nullptr;
    try {
      hub = new Hub;
    } catch (...) {
      error = "cannot start the exporter: out of memory";
      return nullptr;
    }
    if (!hub->Start(error)) {
      delete hub;
      return nullptr;
    }
    r.current = hub;
  }
  ++r.current->members_;
  return r.current;
}

void Hub::Leave(Hub* hub) noexcept {
  if (hub == nullptr) return;
  Registry& r = registry();
  {
    std::lock_guard lock(r.mu);
    if (--hub->members_ > 0) return;
    if (r.current == hub) r.current = nullptr;
  }
  if (hub->ours()) delete hub;  // a parent's hub in a fork child is leaked, never stopped
}

bool Hub::Start(std::string& error) noexcept {
  pid_ = getpid();
  // The phase: a process's place on every grid, so that processes on one
  // host tick apart while the emitters of one process tick together.
  phase_ = std::chrono::microseconds(std::hash<pid_t>{}(pid_) % 1000003u);
  context_ = zmq_ctx_new();
  if (context_ == nullptr) {
    error = std::string("zmq_ctx_new: ") + zmq_strerror(errno);
    return false;
  }
  // One socket per emitter: allow as many as the build of libzmq can.
  const int limit = zmq_ctx_get(context_, ZMQ_SOCKET_LIMIT);
  if (limit > 0) zmq_ctx_set(context_, ZMQ_MAX_SOCKETS, std::min(limit, 65535));
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error& e) {
    error = std::string("cannot start the exporter thread: ") + e.what();
    zmq_ctx_term(context_);
    context_ = nullptr;
    return false;
  }
  return true;
}

Hub::~Hub() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  // Every member closed its socket (with a linger bounded by its close
  // timeout): this waits for what those sockets still queue.
  if (context_ != nullptr) zmq_ctx_term(context_);
}

void Hub::Add(HubClient* client) noexcept {
  {
    std::lock_guard lock(mu_);
    client->due_ = SteadyClock::time_point::min();
    clients_.push_back(client);
  }
  Wake(client);
}

void Hub::Wake(HubClient* client) noexcept {
  client->woken_.store(true, std::memory_order_release);
  wake_.store(true, std::memory_order_release);
  cv_.notify_one();
}

void Hub::Detach(HubClient* client) noexcept {
  std::unique_lock lock(mu_);
  std::erase(clients_, client);
  // A pass started before the erase works on a copy that may hold `client`.
  if (in_pass_) {
    const uint64_t pass = pass_;
    passed_cv_.wait(lock, [this, pass] { return !in_pass_ || pass_ != pass; });
  }
}

SteadyClock::time_point Hub::NextTick(SteadyClock::time_point now, std::chrono::milliseconds interval) const noexcept {
  const SteadyClock::duration step = interval;
  return SteadyClock::time_point((TickOf(now, interval) + 1) * step + phase_);
}

int64_t Hub::TickOf(SteadyClock::time_point t, std::chrono::milliseconds interval) const noexcept {
  const SteadyClock::duration step = interval;
  return (t.time_since_epoch() - phase_) / step;
}

void Hub::Run() noexcept {
  std::vector<HubClient*> clients;
  std::unique_lock lock(mu_);
  while (!stop_) {
    wake_.store(false, std::memory_order_relaxed);
    clients = clients_;  // capacity kept: no allocation once grown
    ++pass_;
    in_pass_ = true;
    lock.unlock();
    auto next = SteadyClock::time_point::max();
    size_t done = 0;
    for (HubClient* client : clients) {
      const auto now = SteadyClock::now();
      const bool woken = client->woken_.exchange(false, std::memory_order_acq_rel);
      if (woken || client->due_ <= now) client->due_ = client->Service(now);
      // A client shuts down on its closing thread (Detach); one that shut
      // down here anyway is serviced no more.
      if (client->due_ == HubClient::kDone) {
        clients[done++] = client;
        continue;
      }
      next = std::min(next, client->due_);
    }
    lock.lock();
    for (size_t i = 0; i < done; ++i) std::erase(clients_, clients[i]);
    in_pass_ = false;
    passed_cv_.notify_all();
    if (stop_) break;
    // A wake between the copy above and this wait is seen by the predicate;
    // one that lands between the predicate and the sleep costs at most the
    // sleep, which is never past the next tick anyone asked for.
    const auto woken = [this] { return stop_ || wake_.load(std::memory_order_acquire); };
    if (next == SteadyClock::time_point::max()) {
      cv_.wait(lock, woken);  // no client: until one is added
    } else {
      cv_.wait_until(lock, next, woken);
    }
  }
}

}  // namespace runlens::sdk
