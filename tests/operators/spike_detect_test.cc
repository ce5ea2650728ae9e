#include "operators/spike_detect.h"

#include <cmath>
#include <functional>
#include <random>

#include "tests/operators/telemetry_rows.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

struct TrainPoint {
  double loss, grad_norm, lr;
};

struct SpikeCase {
  const char* name;
  std::function<TrainPoint(int64_t, double)> at;        // step, unit noise -> values
  std::vector<std::pair<const char*, int64_t>> expect;  // alert kind and step
};

// Warm-up over 50 steps, then cosine decay over 400: the schedule the detector must not flag.
double schedule(int64_t s) {
  double warm = std::min(1.0, static_cast<double>(s) / 50.0);
  return 3e-4 * warm * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * static_cast<double>(s) / 401.0)));
}
TrainPoint normal(int64_t s, double n) { return {3.5 * std::pow(0.997, s) + 0.02 * n, 0.8 + 0.05 * n, schedule(s)}; }

std::vector<Record> train_rows(const std::function<TrainPoint(int64_t, double)>& at, int64_t steps = 400) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise;
  std::vector<Record> rows{run_start("r1", 8)};
  for (int64_t s = 1; s <= steps; ++s) {
    TrainPoint p = at(s, noise(rng));
    rows.push_back(train_lr("r1", s, p.loss, p.grad_norm, p.lr, kT0 + s * 2 * kSec));
  }
  return rows;
}

std::vector<Record> events_of(const OperatorRun& run) {
  std::vector<Record> e;
  for (const auto& r : run.out) {
    if (r.kind() == Kind::kEvent) e.push_back(r);
  }
  return e;
}

}  // namespace

TEST_CASE("spike_detect: loss and gradient spikes against a robust baseline") {
  const SpikeCase cases[] = {
      {"healthy: noise, decay, warm-up and cosine", normal, {}},
      {"gradient spike",
       [](int64_t s, double n) {
         auto p = normal(s, n);
         if (s == 200) p.grad_norm = 47.2;
         return p;
       },
       {{"grad_spike", 200}}},
      {"loss spike",
       [](int64_t s, double n) {
         auto p = normal(s, n);
         if (s == 200) p.loss *= 4;
         return p;
       },
       {{"loss_spike", 200}}},
      {"grad then loss, as before a NaN",
       [](int64_t s, double n) {
         auto p = normal(s, n);
         if (s >= 206) p.grad_norm = 40;
         if (s >= 208) p.loss = 7.2;
         if (s >= 210) p.loss = NAN;
         return p;
       },
       {{"grad_spike", 206}, {"loss_spike", 208}}},
      {"a spike persists: one incident",
       [](int64_t s, double n) {
         auto p = normal(s, n);
         if (s >= 200) p.grad_norm = 30;
         return p;
       },
       {{"grad_spike", 200}}},
      {"spikes far apart: re-armed",
       [](int64_t s, double n) {
         auto p = normal(s, n);
         if (s == 100 || s == 300) p.grad_norm = 10;
         return p;
       },
       {{"grad_spike", 100}, {"grad_spike", 300}}},
      {"a 2x gradient bump is not a spike",
       [](int64_t s, double n) {
         auto p = normal(s, n);
         if (s == 200) p.grad_norm = 1.6;
         return p;
       },
       {}},
      {"too early to judge",
       [](int64_t s, double n) {
         auto p = normal(s, n);
         if (s == 10) p.grad_norm = 40;
         return p;
       },
       {}},
      {"NaN and Inf are nan_detect's",
       [](int64_t s, double n) {
         auto p = normal(s, n);
         if (s == 200) p.loss = NAN, p.grad_norm = INFINITY;
         return p;
       },
       {}},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    OperatorRun run;
    run_operator(*make_operator("spike_detect"), train_rows(c.at), &run);
    auto alerts = run.alerts();
    REQUIRE(alerts.size() == c.expect.size());
    for (size_t i = 0; i < alerts.size(); ++i) {
      CAPTURE(alerts[i].summary);
      CHECK(alerts[i].kind == c.expect[i].first);
      CHECK(*alerts[i].step == c.expect[i].second);
      CHECK(*alerts[i].rank == 0);
      CHECK(alerts[i].node.str() == "node-0");
      CHECK(*alerts[i].value > *alerts[i].threshold);
    }
    CHECK(events_of(run).empty());
  }
}

TEST_CASE("spike_detect infers LR changes a smooth schedule does not make") {
  struct LrCase {
    const char* name;
    std::function<double(int64_t)> lr;
    bool explicit_event;  // the run reports the change itself at step 250
    std::vector<int64_t> expect_inferred;
  };
  const LrCase cases[] = {
      {"warm-up and cosine", schedule, false, {}},
      {"doubled at step 250", [](int64_t s) { return schedule(s) * (s >= 250 ? 2 : 1); }, false, {250}},
      {"x0.1 step decay at 150 and 300",
       [](int64_t s) { return schedule(s) * (s >= 150 ? 0.1 : 1) * (s >= 300 ? 0.1 : 1); },
       false,
       {150, 300}},
      {"reported by a config_change event", [](int64_t s) { return schedule(s) * (s >= 250 ? 2 : 1); }, true, {}},
      {"constant", [](int64_t) { return 1e-4; }, false, {}},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    auto rows = train_rows([&](int64_t s, double n) {
      auto p = normal(s, n);
      p.lr = c.lr(s);
      if (s == 256) p.grad_norm = 47;
      return p;
    });
    if (c.explicit_event) {
      rows.push_back(event_row("config_change", kT0 + 499 * kSec,
                               EventFields().run("r1").step(250).key("lr").change(c.lr(249), c.lr(250))));
    }
    OperatorRun run;
    run_operator(*make_operator("spike_detect"), rows, &run);
    auto events = events_of(run);
    REQUIRE(events.size() == c.expect_inferred.size());
    for (size_t i = 0; i < events.size(); ++i) {
      const Occurrence& e = events[i].as<Occurrence>();
      CHECK(e.kind.str() == "config_change");
      CHECK(e.key.str() == "lr");
      CHECK(e.step == c.expect_inferred[i]);
      CHECK(e.old.number == doctest::Approx(c.lr(c.expect_inferred[i] - 1)));
      CHECK(e.new_.number == doctest::Approx(c.lr(c.expect_inferred[i])));
      CHECK(e.message.find("inferred from the lr series") == 0);
      CHECK(events[i].time_ns == kT0 + c.expect_inferred[i] * 2 * kSec);
    }
    // The gradient spike at 256 names the latest LR change within the window.
    auto spikes = run.alerts("grad_spike");
    REQUIRE(spikes.size() == 1);
    bool changed = c.explicit_event;
    for (int64_t s : c.expect_inferred) changed |= s <= 256 && 256 - s <= 100;
    CHECK(std::isnan(attr(spikes[0], "lr_change_step")) == !changed);
  }
}

TEST_CASE("spike_detect reads the lowest rank's train events only") {
  std::vector<Record> rows{run_start("r1", 8)};
  for (int64_t s = 1; s <= 100; ++s) {
    for (int32_t rank : {3, 0}) {
      Record r = train_lr("r1", s, 2.0, rank == 3 && s == 60 ? 50 : 0.8, 1e-4, kT0 + s * kSec + rank);
      Train t = r.as<Train>();
      t.rank = rank;
      t.set_present(Train::F::rank);
      r.body = t;
      rows.push_back(r);
    }
  }
  OperatorRun run;
  run_operator(*make_operator("spike_detect"), rows, &run);
  CHECK(run.alerts().empty());
}

TEST_CASE("spike_detect: median and MAD against a brute-force reference") {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> d(0, 1);
  for (int n : {1, 2, 3, 10, 51, 100}) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(d(rng));
    auto sorted = v;
    std::sort(sorted.begin(), sorted.end());
    double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    std::vector<double> dev;
    for (double x : v) dev.push_back(std::fabs(x - median));
    std::sort(dev.begin(), dev.end());
    double mad = n % 2 ? dev[n / 2] : (dev[n / 2 - 1] + dev[n / 2]) / 2;
    auto s = ops::robust_stats(v);
    CHECK(s.median == doctest::Approx(median));
    CHECK(s.mad == doctest::Approx(mad));
  }
  CHECK(ops::lr_discontinuity(1, 1, 2, 2, 3, 3) == doctest::Approx(0));    // linear warm-up
  CHECK(ops::lr_discontinuity(1, 1, 2, 2, 6, 3) == doctest::Approx(1.5));  // doubled
  CHECK(ops::lr_discontinuity(1, 1, 2, 3, 3, 5) == doctest::Approx(0));    // gaps in the steps
}
