// runlens send: a recording's frames, or JSONL encoded into batches, pushed to
// a ZeroMQ endpoint at a controlled rate (docs/cli.md "runlens send"). The
// pacing is a token bucket over events, decided at frame granularity, and kept
// apart from clocks and sockets so that its schedule can be tested.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace runlens::cli {

// Tokens are events; they accrue at `rate` per second from the first frame
// on, up to a capacity of `burst_s` seconds' worth (at least the frame at hand,
// so a frame larger than the capacity still goes, once its events are earned).
// A frame goes once the bucket holds its events. So frame k leaves when the
// events of frames 0..k have been earned: the whole input takes events/rate,
// and no window holds more than rate * window + capacity events. Time the
// sender spends blocked (the socket full) is not made up beyond the capacity:
// the achieved rate then falls below `rate`, which is what it reports.
class TokenBucket {
 public:
  explicit TokenBucket(double rate, double burst_s = 0.02);
  // Nanoseconds from `now_ns` until a frame of `events` may go (0: now).
  int64_t wait_ns(int64_t now_ns, uint64_t events);
  // A frame of `events` went at `now_ns`.
  void take(int64_t now_ns, uint64_t events);
  double rate() const { return rate_; }

 private:
  void refill(int64_t now_ns, uint64_t events);

  double rate_, capacity_;
  double tokens_ = 0;
  int64_t last_ns_ = 0;
  bool started_ = false;
};

// --rate: events per second, a positive number with an optional k, M or G
// suffix ("250000", "1e6", "1.5M"). nullopt if it is not one.
std::optional<double> parse_rate(const std::string& text);

}  // namespace runlens::cli
