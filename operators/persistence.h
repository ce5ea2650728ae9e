// Persistence and re-arming, the shape every detector here shares: an
// observation counts as a "hit" (a slow step, a throttled sample), an incident
// opens when at least k of the last n observations are hits, raises one alert,
// and closes (re-arms) after n observations without a hit. Observations are
// numbered by the caller (a step, or a per-device sample count), so gaps in
// the numbering count as observations without a hit. Each hit may carry a
// tag (e.g. the event time of a sample) that names the onset.
//
// The incident keeps the alert it raised (raise()); when it closes, close()
// publishes that alert's closing revision (alert contract v2: revision + 1,
// ends_ns set), so a consumer such as Alertmanager sees it resolved. A
// detector that forgets an open incident (its run ended) closes it first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "schema/alert.h"
#include "schema/row.h"

namespace runlens::ops {

class Incident {
 public:
  enum class Change : uint8_t { kNone, kOpened, kClosed };

  Incident() = default;
  Incident(int64_t k, int64_t n) : k_(k), n_(n) {}

  // Records observation `seq` (non-decreasing). kOpened exactly when this
  // observation opens an incident (the caller raises its alert then), kClosed
  // when it closes one (n observations without a hit: re-armed; the caller
  // calls close()).
  Change observe(int64_t seq, bool hit, int64_t tag) {
    size_t old = 0;
    while (old < hits_.size() && hits_[old].seq <= seq - n_) ++old;
    hits_.erase(hits_.begin(), hits_.begin() + static_cast<std::ptrdiff_t>(old));
    if (hit && (hits_.empty() || hits_.back().seq != seq)) hits_.push_back({seq, tag});
    if (active_) {
      if (!hits_.empty()) return Change::kNone;
      active_ = false;
      return Change::kClosed;
    }
    if (static_cast<int64_t>(hits_.size()) >= k_) {
      active_ = true;
      return Change::kOpened;
    }
    return Change::kNone;
  }
  Change observe(int64_t seq, bool hit) { return observe(seq, hit, seq); }
  bool active() const { return active_; }

  // Publishes `a`, the alert of the incident just opened, and keeps it.
  void raise(Alert a, Emitter& out) {
    auto p = std::make_shared<const Alert>(std::move(a));
    alert_ = p;
    out.emit(alert_record(*p));
  }
  // Publishes the closing revision of the alert raised (when one is held)
  // with ends_ns = `end_ns`, and forgets it.
  void close(int64_t end_ns, Emitter& out) {
    if (!alert_) return;
    out.emit(closing_record(*alert_, end_ns));
    alert_.reset();
  }
  // The alert raised and not yet closed, or null.
  const Alert* open_alert() const { return alert_.get(); }
  // The first hit of the current window: the incident's onset, and its tag.
  int64_t onset() const { return hits_.empty() ? -1 : hits_.front().seq; }
  int64_t onset_tag() const { return hits_.empty() ? -1 : hits_.front().tag; }
  int64_t hits() const { return static_cast<int64_t>(hits_.size()); }
  // Forgets everything (a restart).
  void reset() {
    hits_.clear();
    active_ = false;
    alert_.reset();
  }

  template <class Io>
  void fields(Io& io) {
    io(k_, n_, hits_, active_, alert_);
  }

 private:
  struct Hit {
    int64_t seq, tag;
    template <class Io>
    void fields(Io& io) {
      io(seq, tag);
    }
  };
  int64_t k_ = 1, n_ = 1;
  // At most n hits, oldest first. A vector, not a deque: an empty deque
  // allocates (576 bytes here), and a detector keeps an incident per GPU and
  // kind, most of which never see a hit (8,196 deques, 4.1 MB, in a replay
  // of 1024 GPUs). The state codec writes both alike.
  std::vector<Hit> hits_;
  bool active_ = false;
  std::shared_ptr<const Alert> alert_;  // raised, not yet closed
};

}  // namespace runlens::ops
