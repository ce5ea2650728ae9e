// Persistence and re-arming, the shape every detector here shares: an
// observation counts as a "hit" (a slow step, a throttled sample), an incident
// opens when at least k of the last n observations are hits, raises one alert,
// and closes (re-arms) after n observations without a hit. Observations are
// numbered by the caller (a step, or a per-device sample count), so gaps in
// the numbering count as observations without a hit. Each hit may carry a
// tag (e.g. the event time of a sample) that names the onset.
#pragma once

#include <cstdint>
#include <deque>

namespace runlens::ops {

class Incident {
 public:
  Incident() = default;
  Incident(int64_t k, int64_t n) : k_(k), n_(n) {}

  // Records observation `seq` (non-decreasing). Returns true exactly when this
  // observation opens an incident: the caller raises its alert then.
  bool observe(int64_t seq, bool hit, int64_t tag) {
    while (!hits_.empty() && hits_.front().seq <= seq - n_) hits_.pop_front();
    if (hit && (hits_.empty() || hits_.back().seq != seq)) hits_.push_back({seq, tag});
    if (active_) {
      if (hits_.empty()) active_ = false;  // n observations without a hit: re-armed
      return false;
    }
    if (static_cast<int64_t>(hits_.size()) >= k_) {
      active_ = true;
      return true;
    }
    return false;
  }
  bool observe(int64_t seq, bool hit) { return observe(seq, hit, seq); }
  bool active() const { return active_; }
  // The first hit of the current window: the incident's onset, and its tag.
  int64_t onset() const { return hits_.empty() ? -1 : hits_.front().seq; }
  int64_t onset_tag() const { return hits_.empty() ? -1 : hits_.front().tag; }
  int64_t hits() const { return static_cast<int64_t>(hits_.size()); }
  // Forgets everything (a restart).
  void reset() {
    hits_.clear();
    active_ = false;
  }

  template <class Io>
  void fields(Io& io) {
    io(k_, n_, hits_, active_);
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
  std::deque<Hit> hits_;
  bool active_ = false;
};

}  // namespace runlens::ops
