// What the runlens SDK costs the training loop (docs/performance-sdk.md).
//
//   BM_EmitStep                 mean cost of emit(Step) as Google Benchmark times it,
//                               on the normal path (a collector drains the rings)
//   BM_EmitLatency/collector    p50/p99 of single emit(Step) calls on the normal path
//   BM_EmitLatency/full         the same when nobody listens and every ring is full,
//                               so every call is a drop (counted)
//   BM_LoopOverhead/fresh       a loop of fixed synthetic work plus one emit(Step) per
//                               iteration against the same loop without the emit,
//                               side by side, with NO collector listening; the
//                               emitter's buffers have room (events are encoded and
//                               queued by the exporter thread while the loop runs)
//   BM_LoopOverhead/saturated   the same once the rings and ZeroMQ's queue are full
//                               (the steady state of a run whose collector is gone)
//
// Per-call timing: steady_clock::now() before and after each call (vDSO
// clock_gettime on this machine's TSC clocksource). The timer's own cost is
// the median of back-to-back now() pairs, measured in the same run; it is
// subtracted from every sample. Both raw and corrected figures are reported.
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "runlens/sdk.h"

namespace {

using Clock = std::chrono::steady_clock;
using runlens::sdk::Emitter;
using runlens::sdk::EmitterOptions;

// A collector that receives and discards, on its own thread.
class SinkCollector {
 public:
  SinkCollector() : context_(zmq_ctx_new()), socket_(zmq_socket(context_, ZMQ_PULL)) {
    const int unlimited = 0;
    zmq_setsockopt(socket_, ZMQ_RCVHWM, &unlimited, sizeof unlimited);
    zmq_bind(socket_, "tcp://127.0.0.1:*");
    char endpoint[256];
    size_t size = sizeof endpoint;
    zmq_getsockopt(socket_, ZMQ_LAST_ENDPOINT, endpoint, &size);
    endpoint_ = endpoint;
    thread_ = std::thread([this] { Loop(); });
  }
  ~SinkCollector() {
    stop_.store(true);
    thread_.join();
    zmq_close(socket_);
    zmq_ctx_term(context_);
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void Loop() {
    std::vector<char> buffer(1 << 22);
    zmq_pollitem_t item{socket_, 0, ZMQ_POLLIN, 0};
    while (!stop_.load()) {
      if (zmq_poll(&item, 1, 50) <= 0) continue;
      while (zmq_recv(socket_, buffer.data(), buffer.size(), ZMQ_DONTWAIT) >= 0) {
      }
    }
  }
  void* context_;
  void* socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A loopback port nobody listens on.
std::string DeadEndpoint() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

EmitterOptions Options(std::string endpoint) {
  EmitterOptions o;
  o.endpoint = std::move(endpoint);
  o.run_id = "bench";
  o.rank = 1;  // no run_start / run_end: only the events the loop emits
  o.world_size = 8;
  o.node = "node-0";
  return o;
}

// A typical step event: every timing field, tokens, a shard name.
runlens::sdk::Step TypicalStep() {
  runlens::sdk::Step s;
  s.step_ms = 812.5;
  s.forward_ms = 250.0;
  s.backward_ms = 480.0;
  s.optimizer_ms = 40.0;
  s.comm_ms = 35.0;
  s.data_wait_ms = 7.5;
  s.tokens = 1 << 20;
  s.samples = 256;
  s.seq_len = 4096;
  s.dataset_shard = "web-shard-00042";
  return s;
}

// Waits (untimed) until the exporter has shipped `target` events.
void WaitSent(const Emitter& em, uint64_t target) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (em.stats().sent < target && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Emits until nothing more is taken even after the exporter had time to move
// what it could into ZeroMQ's queue: from then on every emit is a drop.
void Saturate(Emitter& em) {
  runlens::sdk::Step step = TypicalStep();
  for (;;) {
    uint64_t taken = 0;
    int refused = 0;
    while (refused < 10'000) {
      if (em.emit(step)) {
        ++taken;
        refused = 0;
      } else {
        ++refused;
      }
    }
    if (taken == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int64_t Percentile(std::vector<int64_t>& v, double q) {
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

int64_t TimerOverheadNs() {
  std::vector<int64_t> d(1'000'000);
  for (auto& x : d) {
    const auto t0 = Clock::now();
    const auto t1 = Clock::now();
    x = (t1 - t0).count();
  }
  return Percentile(d, 0.5);
}

constexpr int kBurst = 4096;  // half the default P1 ring: never fills it

void BM_EmitStep(benchmark::State& state) {
  SinkCollector sink;
  Emitter em(Options(sink.endpoint()));
  runlens::sdk::Step step = TypicalStep();
  uint64_t taken = 0;
  for (auto _ : state) {
    ++step.step;
    taken += em.emit(step);
    if (step.step % kBurst == 0) {
      state.PauseTiming();
      WaitSent(em, taken);
      state.ResumeTiming();
    }
  }
  em.close();
  state.counters["dropped"] = static_cast<double>(em.stats().dropped[1]);
}
BENCHMARK(BM_EmitStep);

void BM_EmitLatency(benchmark::State& state) {
  const bool full = state.range(0) == 1;
  constexpr size_t kSamples = 1'000'000;
  std::vector<int64_t> samples(kSamples);
  const int64_t overhead = TimerOverheadNs();
  std::unique_ptr<SinkCollector> sink;
  if (!full) sink = std::make_unique<SinkCollector>();
  Emitter em(Options(full ? DeadEndpoint() : sink->endpoint()));
  runlens::sdk::Step step = TypicalStep();
  if (full) Saturate(em);
  uint64_t refused = 0;
  for (auto _ : state) {
    uint64_t taken = full ? 0 : em.stats().sent;
    for (size_t i = 0; i < kSamples; ++i) {
      ++step.step;
      const auto t0 = Clock::now();
      const bool ok = em.emit(step);
      const auto t1 = Clock::now();
      samples[i] = (t1 - t0).count();
      taken += ok;
      refused += !ok;
      if (!full && (i + 1) % kBurst == 0) WaitSent(em, taken);
    }
  }
  em.close(std::chrono::milliseconds(full ? 0 : 2000));
  auto corrected = samples;
  for (auto& x : corrected) x = std::max<int64_t>(x - overhead, 0);
  state.counters["timer_overhead_ns"] = static_cast<double>(overhead);
  state.counters["raw_p50_ns"] = static_cast<double>(Percentile(samples, 0.50));
  state.counters["raw_p99_ns"] = static_cast<double>(Percentile(samples, 0.99));
  state.counters["p50_ns"] = static_cast<double>(Percentile(corrected, 0.50));
  state.counters["p99_ns"] = static_cast<double>(Percentile(corrected, 0.99));
  state.counters["p999_ns"] = static_cast<double>(Percentile(corrected, 0.999));
  state.counters["max_ns"] = static_cast<double>(*std::max_element(corrected.begin(), corrected.end()));
  state.counters["calls"] = static_cast<double>(kSamples);
  state.counters["refused"] = static_cast<double>(refused);  // dropped at once (ring full)
}
BENCHMARK(BM_EmitLatency)->ArgName("full")->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

// Fixed synthetic work: a dependent chain of multiply-adds the compiler cannot
// shorten (about 10 µs here).
double Work(double x) {
  for (int i = 0; i < 2800; ++i) {
    x = x * 0.999999 + 1e-7;
    benchmark::DoNotOptimize(x);
  }
  return x;
}

void BM_LoopOverhead(benchmark::State& state) {
  const bool saturated = state.range(0) == 1;
  constexpr int kIterations = 500;  // per rep
  constexpr int kReps = 101;        // pairs of reps, interleaved
  const std::string endpoint = DeadEndpoint();
  std::vector<double> without_ns, with_ns, ratios;
  std::unique_ptr<Emitter> shared;
  uint64_t refused_in_loop = 0;  // emits that returned false (dropped at once)
  if (saturated) {
    shared = std::make_unique<Emitter>(Options(endpoint));
    Saturate(*shared);
  }
  double sink = 1.0;
  auto run = [&](Emitter* em) {
    runlens::sdk::Step step = TypicalStep();
    const auto t0 = Clock::now();
    for (int i = 0; i < kIterations; ++i) {
      sink = Work(sink);
      if (em != nullptr) {
        step.step = i;
        step.step_ms = sink;
        refused_in_loop += !em->emit(step);
      }
    }
    return static_cast<double>((Clock::now() - t0).count()) / kIterations;
  };
  for (auto _ : state) {
    for (int rep = 0; rep < kReps; ++rep) {
      std::unique_ptr<Emitter> fresh;
      if (!saturated) fresh = std::make_unique<Emitter>(Options(endpoint));  // untimed
      Emitter* em = saturated ? shared.get() : fresh.get();
      double a, b;
      if (rep % 2 == 0) {  // alternate the order so drift hits both sides alike
        a = run(nullptr);
        b = run(em);
      } else {
        b = run(em);
        a = run(nullptr);
      }
      without_ns.push_back(a);
      with_ns.push_back(b);
      ratios.push_back(b / a);
      if (fresh) fresh->close(std::chrono::milliseconds(0));
    }
  }
  if (shared) shared->close(std::chrono::milliseconds(0));
  benchmark::DoNotOptimize(sink);
  std::vector<double> sorted = without_ns;
  std::sort(sorted.begin(), sorted.end());
  const double q1 = sorted[sorted.size() / 4], q3 = sorted[sorted.size() * 3 / 4];
  state.counters["without_median_ns_per_iter"] = Median(without_ns);
  state.counters["with_median_ns_per_iter"] = Median(with_ns);
  state.counters["ratio_of_medians"] = Median(with_ns) / Median(without_ns);
  state.counters["median_pair_ratio"] = Median(ratios);
  // How much the loop alone varies between reps: the noise a difference must beat.
  state.counters["without_iqr_pct"] = 100.0 * (q3 - q1) / Median(without_ns);
  state.counters["emits"] = static_cast<double>(kReps) * kIterations;
  state.counters["emits_refused"] = static_cast<double>(refused_in_loop);
}
BENCHMARK(BM_LoopOverhead)->ArgName("saturated")->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
