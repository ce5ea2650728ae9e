// The `alertmanager` sink: alerts posted to Alertmanager's v2 API
// (POST {url}/api/v2/alerts) from a thread of its own, so the pipeline never
// waits on it (docs/integrations.md, "Alertmanager").
//
// Alertmanager identifies an alert by its label set, so the labels are what
// does not change over an incident (alertname = kind, severity, alert_id,
// run_id, job_id, node, gpu, rank, owner); what a revision may change goes
// into annotations. Each alert is held while it is active and re-sent every
// resend_interval; it is sent with endsAt when its closing revision arrives
// (ends_ns), when its run ends, or (an event-like kind, alert_closes() false)
// `hold` after it was first offered. A symptom carries the owner its kind
// implies until a diagnosis that explains it (its evidence's alert_id) names
// another: the old label set is then resolved and the alert re-sent with the
// diagnosis's owner. A failed post is retried with exponential backoff; the
// held alerts are bounded by `queue`, and when it is full the least severe
// go first (info, then warning, critical last), counted by severity.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "runtime/counters.h"
#include "schema/alert.h"

namespace runlens::connectors {

struct AlertmanagerOptions {
  std::string url;                              // base URL, e.g. http://127.0.0.1:9093
  int64_t resend_ns = 60'000'000'000;           // re-send active alerts this often (wall time)
  int64_t timeout_ns = 5'000'000'000;           // of one post (connect, read, write)
  int64_t backoff_initial_ns = 500'000'000;     // first retry after a failed post
  int64_t backoff_max_ns = 30'000'000'000;      // retries back off up to this
  int64_t flush_ns = 10'000'000'000;            // at the end, how long to try to deliver what is held
  int64_t hold_ns = 15LL * 60 * 1'000'000'000;  // event-like kinds resolve this long after they were offered
  int64_t queue = 10000;                        // alerts held at most
  std::string link = "http://127.0.0.1:8080/runs/{run_id}";  // the run's page; {run_id}, {alert_id}
};

// Splits "http://host:port/prefix" into the scheme-host-port part and the path
// prefix (no trailing '/'); false (and `why`) when it is not an http(s) URL.
bool split_http_url(const std::string& url, std::string* origin, std::string* prefix, std::string* why);

// RFC 3339 in UTC with milliseconds: "2026-12-01T19:41:28.123Z".
std::string rfc3339(int64_t unix_ns);

class AlertmanagerDelivery {
 public:
  // `counters` may be null (tests). The thread starts with start().
  AlertmanagerDelivery(AlertmanagerOptions o, runtime::DeliveryCounters* counters);
  ~AlertmanagerDelivery();
  AlertmanagerDelivery(const AlertmanagerDelivery&) = delete;
  AlertmanagerDelivery& operator=(const AlertmanagerDelivery&) = delete;

  void start();
  // Never blocks on the network: takes the lock, updates what is held, wakes the thread.
  void offer(const Alert& a);
  void run_start(Symbol run, Symbol job);
  // Resolves every alert of the run still active, at the run's end (event time).
  void run_end(Symbol run, int64_t time_ns);
  // Waits up to `bound_ns` for what is held to be delivered, then stops the
  // thread; returns how many alerts (label sets) were left undelivered.
  size_t flush(int64_t bound_ns);

  // What is held: label sets, and those waiting to be (re-)sent.
  size_t held() const;
  size_t pending() const;
  // The JSON body a post of everything pending would carry (tests, docs).
  std::string pending_json() const;

 private:
  struct Entry {
    std::shared_ptr<const Alert> alert;
    std::string owner;
    std::optional<int64_t> ends_ns;  // endsAt (unix ns) once resolved
    int64_t hold_until_ns = 0;       // event-like: resolved at this time (0: none)
    bool dirty = true;               // to be sent
    bool retired = false;            // an old label set (owner) resolved
    uint64_t version = 0;            // bumped on every change
    uint64_t seq = 0;                // insertion order, for eviction
    int64_t next_send_ns = 0;        // steady clock: when to re-send
  };
  using OrderKey = std::tuple<int, uint64_t, std::string>;  // severity, seq, key

  void loop();
  bool insert(const std::string& key, Entry e);  // false when dropped (full, less severe)
  void erase(std::map<std::string, Entry>::iterator it);
  void retire_owner(const std::string& id, const std::string& owner, int64_t now_ns);
  std::string body(const std::vector<const Entry*>& entries) const;
  void encode(std::string* out, const Entry& e) const;
  // Marks what is due (re-sends, expired holds); the keys to send now.
  std::vector<std::string> due(int64_t steady_now, int64_t wall_now);
  size_t pending_locked() const;

  AlertmanagerOptions o_;
  std::string origin_, path_;
  runtime::DeliveryCounters* counters_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::map<std::string, Entry> entries_;  // by alert_id (retired label sets: alert_id + "\x1f" + owner)
  std::set<OrderKey> order_;              // eviction order: least severe, oldest first
  std::unordered_map<std::string, std::string> explained_owner_;  // alert_id -> the owner a diagnosis named
  std::unordered_map<Symbol, Symbol> jobs_;                       // run -> job_id
  uint64_t seq_ = 0;
  int64_t retry_at_ns_ = 0, backoff_ns_ = 0;
  bool stop_ = false, posting_ = false;
  std::thread thread_;
};

}  // namespace runlens::connectors
