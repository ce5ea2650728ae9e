// runlens send: pushes a recording's frames (or JSONL, encoded into batches)
// to a ZeroMQ endpoint at a controlled rate, or as fast as the socket takes
// them. A load generator and a demo tool (docs/cli.md).
#include "cli/send.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <zmq.hpp>

#include "cli/commands.h"
#include "connectors/zmq_endpoint.h"
#include "formats/capnp_codec.h"
#include "formats/input_reader.h"
#include "formats/recording.h"

namespace runlens::cli {

TokenBucket::TokenBucket(double rate, double burst_s) : rate_(rate), capacity_(std::max(1.0, rate * burst_s)) {}

void TokenBucket::refill(int64_t now_ns, uint64_t events) {
  if (!started_) {
    started_ = true;
    last_ns_ = now_ns;
    tokens_ = 0;
    return;
  }
  if (now_ns <= last_ns_) return;
  double cap = std::max(capacity_, static_cast<double>(events));
  tokens_ = std::min(cap, tokens_ + rate_ * static_cast<double>(now_ns - last_ns_) / 1e9);
  last_ns_ = now_ns;
}

int64_t TokenBucket::wait_ns(int64_t now_ns, uint64_t events) {
  refill(now_ns, events);
  double missing = static_cast<double>(events) - tokens_;
  if (missing <= 1e-6) return 0;
  double ns = std::ceil(missing * 1e9 / rate_ - 1e-3);
  return static_cast<int64_t>(std::clamp(ns, 1.0, 1e15));  // the caller sleeps in slices anyway
}

void TokenBucket::take(int64_t now_ns, uint64_t events) {
  refill(now_ns, events);
  tokens_ -= static_cast<double>(events);
}

std::optional<double> parse_rate(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double scale = 1;
  std::string number = text;
  switch (text.back()) {
    case 'k':
    case 'K':
      scale = 1e3;
      break;
    case 'M':
      scale = 1e6;
      break;
    case 'G':
      scale = 1e9;
      break;
    default:
      break;
  }
  if (scale != 1) number.pop_back();
  if (number.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(number.c_str(), &end);
  if (errno != 0 || end != number.c_str() + number.size() || !std::isfinite(v) || v <= 0) return std::nullopt;
  v *= scale;
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

namespace {

struct SendFlags {
  std::string input, to, rate_text;
  bool burst = false, json = false, strict = false;
  int64_t loops = 1, hwm = 1000, batch = 256;
  double report_every = 0, linger_s = 30;
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The frames of one pass over the input: a recording's as stored, or JSONL
// rows encoded `batch` to a frame (the SDK's default batch_size), in file order.
class Frames {
 public:
  bool open(const SendFlags& f, std::string* error, uint64_t* damaged) {
    std::FILE* probe = std::fopen(f.input.c_str(), "rb");
    if (!probe) return *error = "cannot open " + f.input + ": " + std::strerror(errno), false;
    char magic[sizeof recording::kMagic] = {};
    size_t got = std::fread(magic, 1, sizeof magic, probe);
    std::fclose(probe);
    // As InputReader: a recording is recognised by its magic, also a cut-off one.
    if (got >= 4 && std::memcmp(magic, recording::kMagic, got) == 0) {
      recording_ = std::make_unique<recording::FrameReader>();
      return recording_->open(f.input, error);
    }
    return encode_jsonl(f, error, damaged);
  }

  void rewind() {
    if (recording_) recording_->rewind();
    next_ = 0;
  }

  // The next frame's bytes and events; false at the end of the pass.
  bool next(const char** data, size_t* size, uint32_t* events, std::vector<std::string>* damage) {
    if (recording_) {
      recording::FrameReader::Frame fr;
      if (!recording_->next(&fr, damage)) return false;
      *data = fr.data;
      *size = fr.size;
      *events = fr.events;
      return true;
    }
    if (next_ >= encoded_.size()) return false;
    *data = encoded_[next_].first.data();
    *size = encoded_[next_].first.size();
    *events = encoded_[next_].second;
    ++next_;
    return true;
  }

  const char* format() const { return recording_ ? "recording" : "jsonl"; }

 private:
  struct PrintDeadLetters : runtime::DeadLetterSink {
    uint64_t count = 0;
    void write(const runtime::DeadLetter& d) override {
      ++count;
      std::fprintf(stderr, "runlens send: %s: %s (not sent)\n", d.position.c_str(), d.reason.c_str());
    }
  };

  bool encode_jsonl(const SendFlags& f, std::string* error, uint64_t* damaged) {
    auto reader = InputReader::open(f.input, error);
    if (!reader) return false;
    PrintDeadLetters dl;
    std::vector<Record> rows;
    std::vector<uint64_t> positions;
    size_t batch = static_cast<size_t>(f.batch);
    bool more = true;
    while (more) {
      more = reader->next(&rows, &positions, batch, dl, "send");
      size_t done = 0;
      while (rows.size() - done >= batch || (!more && done < rows.size())) {
        size_t n = std::min(batch, rows.size() - done);
        uint32_t events = 0;
        for (size_t i = done; i < done + n; ++i) events += static_cast<int>(rows[i].kind()) < kContractKinds;
        if (events > 0) encoded_.emplace_back(capnpc::encode_batch(rows.data() + done, n), events);
        done += n;
      }
      rows.erase(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(done));
      positions.clear();
    }
    *damaged += dl.count;
    return true;
  }

  std::unique_ptr<recording::FrameReader> recording_;
  std::vector<std::pair<std::string, uint32_t>> encoded_;
  size_t next_ = 0;
};

struct Totals {
  uint64_t frames = 0, events = 0, damaged = 0;
  int64_t loops_done = 0;
  // From the first frame to the last handed to the socket; at the end, to the
  // socket closed, its queue flushed (flush_ns of it).
  int64_t start_ns = 0, last_ns = 0, blocked_ns = 0, flush_ns = 0;
  double elapsed_s() const { return static_cast<double>(last_ns - start_ns) / 1e9; }
  double rate() const { return elapsed_s() > 0 ? static_cast<double>(events) / elapsed_s() : 0; }
};

// Hands one frame to the socket, waiting (in slices, so that Ctrl-C is seen)
// while the socket cannot take it: its queue is at the high-water mark, or no
// receiver is connected yet. `waiting` is called at each slice with the time
// blocked so far. False if interrupted first.
bool send_frame(zmq::socket_t& sock, const char* data, size_t size, Totals* t,
                const std::function<void(int64_t)>& waiting) {
  zmq::message_t msg(data, size);
  int64_t blocked_from = 0;
  for (;;) {
    try {
      if (sock.send(msg, zmq::send_flags::dontwait)) break;
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
    if (blocked_from == 0) blocked_from = now_ns();
    if (stop_requested()) {
      t->blocked_ns += now_ns() - blocked_from;
      return false;
    }
    waiting(now_ns() - blocked_from);
    zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLOUT, 0}};
    try {
      zmq::poll(items, 1, std::chrono::milliseconds(50));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
  if (blocked_from != 0) t->blocked_ns += now_ns() - blocked_from;
  return true;
}

void print_report(const char* what, const Totals& t, double target) {
  std::fprintf(stderr, "%s %llu frames, %llu events in %.3f s: %.0f events/s", what,
               static_cast<unsigned long long>(t.frames), static_cast<unsigned long long>(t.events), t.elapsed_s(),
               t.rate());
  if (target > 0) std::fprintf(stderr, " (target %.0f)", target);
  std::fprintf(stderr, ", blocked on the socket %.3f s", static_cast<double>(t.blocked_ns) / 1e9);
  if (t.flush_ns > 0)
    std::fprintf(stderr, ", flushing its queue at the end %.3f s", static_cast<double>(t.flush_ns) / 1e9);
  std::fprintf(stderr, "\n");
}

int send(const SendFlags& f) {
  std::string why;
  if (!connectors::check_zmq_endpoint(f.to, &why)) {
    std::fprintf(stderr, "runlens send: --to: %s\n", why.c_str());
    return kExitUsage;
  }
  double rate = 0;
  if (!f.rate_text.empty()) {
    auto r = parse_rate(f.rate_text);
    if (!r) {
      std::fprintf(stderr,
                   "runlens send: invalid --rate '%s' (events per second: a positive number, optionally with k, M "
                   "or G, e.g. 250000 or 1M)\n",
                   f.rate_text.c_str());
      return kExitUsage;
    }
    rate = *r;
  }
  Totals t;
  Frames frames;
  std::string error;
  if (!frames.open(f, &error, &t.damaged)) {
    std::fprintf(stderr, "runlens send: %s\n", error.c_str());
    return kExitUsage;
  }

  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::push);
  sock.set(zmq::sockopt::sndhwm, static_cast<int>(f.hwm));
  // Queue only to a connected receiver: with none (yet), sending waits, and
  // that time is counted as blocked rather than hidden in a queue.
  sock.set(zmq::sockopt::immediate, true);
  try {
    sock.connect(f.to);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "runlens send: cannot connect to %s: %s\n", f.to.c_str(), e.what());
    return kExitUsage;
  }
  char pace[64] = "as a burst";
  if (rate > 0) std::snprintf(pace, sizeof pace, "%.6g events/s", rate);
  std::fprintf(stderr, "sending %s (%s) to %s, %s\n", f.input.c_str(), frames.format(), f.to.c_str(), pace);

  TokenBucket bucket(rate > 0 ? rate : 1);
  std::vector<std::string> damage;
  bool interrupted = false;
  t.start_ns = t.last_ns = now_ns();
  int64_t report_ns = f.report_every > 0 ? static_cast<int64_t>(f.report_every * 1e9) : 0;
  // --report-every: the last interval, also while waiting on the pace or the socket.
  Totals at_report = t;
  auto maybe_report = [&](int64_t now, int64_t blocked_now) {
    if (report_ns == 0 || now < at_report.last_ns + report_ns) return;
    Totals window = t;
    window.start_ns = at_report.last_ns;
    window.last_ns = now;
    window.frames -= at_report.frames;
    window.events -= at_report.events;
    window.blocked_ns += blocked_now - at_report.blocked_ns;
    std::fprintf(stderr, "[%.1f s] ", static_cast<double>(now - t.start_ns) / 1e9);
    print_report("last interval:", window, rate);
    at_report = t;
    at_report.last_ns = now;
    at_report.blocked_ns += blocked_now;
  };
  auto waiting = [&](int64_t blocked_now) { maybe_report(now_ns(), blocked_now); };
  for (int64_t loop = 0; !interrupted && (f.loops == 0 || loop < f.loops); ++loop) {
    frames.rewind();
    const char* data;
    size_t size;
    uint32_t events;
    bool any = false;
    while (!interrupted) {
      damage.clear();
      bool got = frames.next(&data, &size, &events, &damage);
      if (loop == 0) {
        for (const auto& d : damage) std::fprintf(stderr, "runlens send: %s (not sent)\n", d.c_str());
        t.damaged += damage.size();
      }
      if (!got) break;
      any = true;
      if (rate > 0) {
        for (;;) {
          int64_t w = bucket.wait_ns(now_ns(), events);
          if (w == 0) break;
          if (stop_requested()) break;
          std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(w, 50'000'000)));
          maybe_report(now_ns(), 0);
        }
      }
      if (stop_requested() || !send_frame(sock, data, size, &t, waiting)) {
        interrupted = true;
        break;
      }
      t.last_ns = now_ns();
      if (rate > 0) bucket.take(t.last_ns, events);
      ++t.frames;
      t.events += events;
      maybe_report(t.last_ns, 0);
    }
    if (!interrupted) ++t.loops_done;
    if (!any) break;  // nothing to send: do not spin on an empty input with --loops 0
  }
  if (interrupted) t.last_ns = now_ns();

  // What the socket has queued still goes, for up to --linger seconds (at
  // most 1 s after Ctrl-C: stopping is prompt).
  double linger_s = interrupted ? std::min(f.linger_s, 1.0) : f.linger_s;
  sock.set(zmq::sockopt::linger, static_cast<int>(linger_s * 1000));
  // Closing waits for that; Ctrl-C during the wait abandons it (and what is
  // still queued), with the counts reported as they are.
  std::atomic<bool> closed_all{false};
  std::thread closer([&] {
    sock.close();
    ctx.close();
    closed_all.store(true);
  });
  bool abandoned = false;
  const int64_t flush_began = now_ns();
  bool said_waiting = false;
  while (!closed_all.load()) {
    if (!interrupted && stop_requested()) {
      abandoned = interrupted = true;
      break;
    }
    // A receiver that does not read holds the close for up to --linger: say
    // why nothing ends (once, after a second of it).
    if (!said_waiting && now_ns() - flush_began > 1'000'000'000) {
      said_waiting = true;
      std::fprintf(stderr,
                   "runlens send: %llu frames handed to the socket; waiting up to %.0f s (--linger) for the receiver "
                   "to take what it still holds (Ctrl-C drops it)\n",
                   static_cast<unsigned long long>(t.frames), linger_s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (abandoned)
    closer.detach();
  else
    closer.join();
  int64_t closed = now_ns();
  t.flush_ns = std::max<int64_t>(1, closed - t.last_ns);
  t.last_ns = closed;

  print_report(interrupted ? "interrupted: sent" : "sent", t, rate);
  if (abandoned)
    std::fprintf(stderr, "runlens send: interrupted while flushing; what the socket still held was dropped\n");
  if (t.damaged > 0) {
    std::fprintf(stderr, "runlens send: %llu damaged frames or lines of %s were not sent\n",
                 static_cast<unsigned long long>(t.damaged), f.input.c_str());
  }
  if (f.json) {
    std::printf(
        "{\"frames\":%llu,\"events\":%llu,\"elapsed_s\":%.6f,\"events_per_s\":%.1f,\"target_events_per_s\":%.1f,"
        "\"blocked_s\":%.6f,\"flush_s\":%.6f,\"loops\":%lld,\"damaged\":%llu,\"interrupted\":%s}\n",
        static_cast<unsigned long long>(t.frames), static_cast<unsigned long long>(t.events), t.elapsed_s(), t.rate(),
        rate, static_cast<double>(t.blocked_ns) / 1e9, static_cast<double>(t.flush_ns) / 1e9,
        static_cast<long long>(t.loops_done), static_cast<unsigned long long>(t.damaged),
        interrupted ? "true" : "false");
    std::fflush(stdout);
  }
  int code = f.strict && t.damaged > 0 ? kExitDeadLetters : kExitOk;
  if (abandoned) {
    // The closing thread still uses the socket and context on this stack.
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(code);
  }
  return code;
}

}  // namespace

Command add_send(CLI::App& app) {
  auto f = std::make_shared<SendFlags>();
  auto* sub = app.add_subcommand(
      "send", "Push a recording's frames (or JSONL, as batches) to a ZeroMQ endpoint at a controlled rate");
  sub->add_option("FILE", f->input, "A recording (frames sent unchanged) or JSONL telemetry (encoded into batches)")
      ->required();
  sub->add_option("--to", f->to, "Endpoint to connect a PUSH socket to, e.g. tcp://127.0.0.1:5555")->required();
  auto* rate = sub->add_option("--rate", f->rate_text, "Events per second (e.g. 250000, 1M), paced per frame");
  auto* burst = sub->add_flag("--burst", f->burst, "As fast as the socket takes them (the default)");
  rate->excludes(burst);
  sub->add_option("--loops", f->loops, "Passes over the input (0: until Ctrl-C)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_option("--hwm", f->hwm, "ZeroMQ send high-water mark, in frames")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_option("--batch", f->batch, "JSONL input: events per frame (the SDK's default batch_size)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--report-every", f->report_every, "Also report every S seconds (0: only at the end)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  sub->add_option("--linger", f->linger_s, "Seconds to wait at the end for queued frames to go")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  sub->add_flag("--json", f->json, "Also print the final counts as one JSON line on stdout");
  sub->add_flag("--strict", f->strict, "Exit 3 when damaged frames or lines were skipped");
  return {sub, [f] { return send(*f); }};
}

}  // namespace runlens::cli
