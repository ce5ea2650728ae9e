// One exporter thread and one ZeroMQ context per process, shared by every
// Emitter in it (docs/sdk.md, "Threads").
//
// A process that runs many emitters (a launcher that reports for several
// ranks, a test harness, a simulator) would otherwise pay three threads per
// emitter (its exporter plus ZeroMQ's I/O and reaper threads) and a wake-up
// of each of them every flush_interval. The hub wakes once per tick for all
// of them: the emitters' ticks are aligned to one grid per flush_interval,
// offset by a phase of the process so that processes do not tick together.
//
// Lifetime: the first emitter of a process starts the hub; the close of the
// last one stops its thread and terminates the ZeroMQ context, which is what
// waits (within the lingers the emitters set from their close timeouts) for
// the batches still queued to reach the collector. An emitter closed while
// others live leaves its socket lingering in the shared context, delivered by
// ZeroMQ's I/O thread while the process runs. After fork() the child starts a
// hub of its own; the parent's, copied without its threads, is never touched.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace runlens::sdk {

using SteadyClock = std::chrono::steady_clock;

// What the hub drives: one emitter's exporter work, called one call at a
// time: on the hub's thread until it is detached, then by the thread that
// detached it (the emitter's close).
class HubClient {
 public:
  static constexpr SteadyClock::time_point kDone = SteadyClock::time_point::max();
  virtual ~HubClient() = default;
  // Does what is due (ships batches, a heartbeat, the close) without blocking;
  // returns when it wants to be called again, or kDone once it has shut down.
  virtual SteadyClock::time_point Service(SteadyClock::time_point now) noexcept = 0;

 private:
  friend class Hub;
  std::atomic<bool> woken_{false};
  SteadyClock::time_point due_{};  // hub thread only
};

class Hub {
 public:
  // Joins the process's hub, starting one if there is none (or if the one
  // there was inherited through fork). nullptr, with `error` set, when no
  // context or thread could be made. Every successful Join is paired with
  // one Leave.
  static Hub* Join(std::string& error) noexcept;
  // The last Leave of a hub stops it: joins its thread and terminates the
  // context (which blocks while closed sockets linger on queued batches).
  static void Leave(Hub* hub) noexcept;

  void* context() const noexcept { return context_; }
  // Whether this process is the one that started the hub (false in a fork child).
  bool ours() const noexcept { return pid_ == getpid(); }

  // Starts servicing `client` (at once).
  void Add(HubClient* client) noexcept;
  // `client` has work now. Never blocks: callable from emit().
  void Wake(HubClient* client) noexcept;
  // Stops servicing `client`: once this returns the hub never touches it
  // again, and the caller may call its Service itself (a close does, on the
  // closing thread). Waits only while a pass of the hub's thread that may
  // still reach `client` is under way.
  void Detach(HubClient* client) noexcept;

  // The next tick of the grid of `interval` after `now`.
  SteadyClock::time_point NextTick(SteadyClock::time_point now, std::chrono::milliseconds interval) const noexcept;
  // The tick of the grid of `interval` that `t` falls in (a count of intervals).
  int64_t TickOf(SteadyClock::time_point t, std::chrono::milliseconds interval) const noexcept;

 private:
  Hub() = default;
  ~Hub();
  bool Start(std::string& error) noexcept;
  void Run() noexcept;

  pid_t pid_ = 0;
  void* context_ = nullptr;
  SteadyClock::duration phase_{};  // this process's offset on every grid
  int members_ = 0;                // guarded by the registry's mutex (hub.cc)

  std::mutex mu_;
  std::condition_variable cv_;         // work or stop for the thread
  std::condition_variable passed_cv_;  // a pass over the clients ended
  std::vector<HubClient*> clients_;    // guarded by mu_
  uint64_t pass_ = 0;                  // guarded by mu_: passes started
  bool in_pass_ = false;               // guarded by mu_: the thread is servicing its copy of clients_
  std::atomic<bool> wake_{false};
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace runlens::sdk
