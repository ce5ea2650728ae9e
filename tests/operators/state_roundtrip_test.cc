// Snapshot and restore of every stateful operator (docs/state.md): run part of
// a realistic input, snapshot each partition, restore into fresh instances
// opened from the same definition, run the rest: the output is byte-equal to
// an uninterrupted run. Inputs are synthetic runs (cli/synth) with the faults
// that make each operator raise what it raises, a restart event, and the rows
// the operators upstream derive (joined steps, step aggregates, alerts).
// Cuts: evenly spaced, just before and after each of the first alerts (in
// the middle of an incident), just after the first rows of each input kind
// past the middle (a step waiting for its ranks, a step aggregate waiting for
// its train event, an alert held for samples or an incident for its window),
// and around the restart; each with one partition and with three.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/synth/synth.h"
#include "formats/jsonl_codec.h"
#include "operators/run_deadlines.h"
#include "runtime/state/snapshot.h"
#include "schema/state_codecs.h"
#include "tests/operators/operator_run.h"

namespace runlens::testing {
namespace {

std::vector<Record> sorted(std::vector<Record> rows) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Record& a, const Record& b) { return compare_canonical(a, b) < 0; });
  return rows;
}

// A rank entry as the state codec wrote it before gpu_model and node_type.
struct ForgedPlacement {
  int32_t rank;
  Symbol node;
  int32_t gpu;
  template <class Io>
  void fields(Io& io) {
    io(rank, node, gpu);
  }
};

// A synthetic run of 32 ranks, 150 steps, with detail telemetry and `faults`,
// and a restart of the run after the step at 85 % of its last (130 of 150,
// or before an OOM that ends the run).
std::vector<Record> fleet(const std::vector<std::string>& faults) {
  synth::Options o;
  o.run_id = "roundtrip";
  o.ranks = 32;
  o.gpus_per_node = 8;
  o.steps = 150;
  o.seed = 9;
  o.gpu_every = 2;
  o.detail = true;
  o.checkpoint_every = 25;
  for (const auto& f : faults) {
    synth::Fault fault;
    std::string why;
    REQUIRE_MESSAGE(synth::parse_fault(f, &fault, &why), why);
    o.faults.push_back(fault);
  }
  std::vector<Record> rows;
  synth::generate(o, [&](std::vector<Record>& batch) {
    for (auto& r : batch) rows.push_back(std::move(r));
  });
  int64_t last = 0, restart_at = 0;
  for (const Record& r : rows) {
    if (r.kind() == Kind::kStep) last = std::max(last, r.as<Step>().step);
  }
  for (const Record& r : rows) {
    if (r.kind() == Kind::kStep && r.as<Step>().step == last * 85 / 100)
      restart_at = std::max(restart_at, r.time_ns + 1);
  }
  REQUIRE(restart_at > 0);
  rows.push_back(event("restart", o.run_id, restart_at));
  return sorted(std::move(rows));
}

// What a partition's instance emits, each row in full (the state encoding,
// which holds every field of every body), in canonical order.
std::vector<std::string> encoded(std::vector<Record> rows) {
  std::vector<std::string> out;
  for (const Record& r : sorted(std::move(rows))) {
    runtime::state::Writer w;
    runtime::state::encode(w, r);
    out.push_back(jsonl::encode_record(r) + "\n" + w.take());
  }
  return out;
}

uint32_t accepted(const ops::OperatorDef& def, const std::string& type) {
  static const auto registry = make_builtin_registry();
  return def.accepts(registry->find(type)->accepts);
}

// Runs `def` over `rows` (sorted) on `parts` partitions as the executor does
// (operator_run.h: a watermark after each distinct time). With `cut_time`,
// every partition is snapshot after the watermark that releases the rows
// before it, and the rest of the input goes to fresh instances restored from
// those snapshots. Returns the outputs of all partitions, encoded.
std::vector<std::string> run(const ops::OperatorDef& def, const std::vector<Record>& rows, int parts,
                             std::optional<int64_t> cut_time = std::nullopt) {
  std::vector<Record> all;
  for (int p = 0; p < parts; ++p) {
    std::vector<const Record*> mine;
    for (const Record& r : rows) {
      auto key = def.key(r);
      if (parts == 1 || !key || static_cast<int>(*key % static_cast<uint64_t>(parts)) == p) mine.push_back(&r);
    }
    OperatorRun result;
    runtime::OperatorContext ctx{"op", p, parts, &result.dead, &result.counters};
    auto op = def.open(ctx);
    int64_t floor = runtime::kBeginningOfTime;
    bool restored = !cut_time;
    size_t i = 0;
    while (i < mine.size()) {
      int64_t t = mine[i]->time_ns;
      if (!restored && t >= *cut_time) {
        std::string snap = op->snapshot();
        op = def.open(ctx);
        op->restore(snap);
        CHECK(op->snapshot() == snap);  // the encoding is deterministic, and nothing was lost
        restored = true;
      }
      runtime::Emitter<Record> out(&result.out, floor);
      while (i < mine.size() && mine[i]->time_ns == t) op->process(*mine[i++], out);
      op->on_watermark(t + 1, out);
      floor = t + 1;
    }
    if (!restored) {
      std::string snap = op->snapshot();
      op = def.open(ctx);
      op->restore(snap);
    }
    runtime::Emitter<Record> out(&result.out, floor);
    op->on_watermark(runtime::kEndOfTime, out);
    op->finish(out);
    for (auto& r : result.out) all.push_back(std::move(r));
  }
  return encoded(std::move(all));
}

std::vector<Record> outputs_of(const std::string& type, const std::vector<Record>& rows) {
  auto def = make_operator(type);
  std::vector<Record> in;
  uint32_t mask = accepted(*def, type);
  for (const Record& r : rows) {
    if (mask & (1u << static_cast<unsigned>(r.kind()))) in.push_back(r);
  }
  OperatorRun result;
  run_operator(*def, in, &result);
  return result.out;
}

// The rows an operator of the default pipeline may see: the telemetry, the
// joined steps and their aggregates and, for operators that read alerts,
// what the detectors emit.
std::vector<Record> pool(const std::vector<Record>& telemetry, bool with_alerts) {
  std::vector<Record> rows = telemetry;
  for (auto& r : outputs_of("rank_join", rows)) rows.push_back(std::move(r));
  for (auto& r : outputs_of("step_stats", rows)) rows.push_back(std::move(r));
  if (with_alerts) {
    std::vector<Record> derived;
    for (const char* type : {"straggler", "nan_detect", "spike_detect", "throughput_regression", "data_starvation",
                             "comm_bottleneck", "checkpoint_health", "oom_detect", "gpu_health", "host_bottleneck"}) {
      for (auto& r : outputs_of(type, rows)) derived.push_back(std::move(r));
    }
    for (auto& r : derived) rows.push_back(std::move(r));
  }
  return sorted(std::move(rows));
}

struct Case {
  std::string type;
  std::vector<std::string> faults;
  std::vector<std::string> raises;  // alert kinds the uninterrupted run must emit
  bool reads_alerts = false;
};

const Case kCases[] = {
    {"rank_join", {"missing_rank:rank=5,from=60"}, {"rank_missing"}},
    {"straggler", {"straggler:rank=3,from=40"}, {"straggler"}},
    {"job_slowdown", {"slowdown:rank=13,from=80,to=120"}, {"job_slowdown"}},
    {"step_stats", {"straggler:rank=3,from=40"}, {}},
    {"nan_detect", {"nan:step=110"}, {"nan_loss"}},
    {"train_marks", {"lr_change:step=100,factor=20", "nan:step=110"}, {}},
    {"spike_detect", {"lr_change:step=100,factor=20", "nan:step=110"}, {"loss_spike"}},
    {"throughput_regression", {"config_slowdown:step=70"}, {"mfu_drop"}},
    {"data_starvation", {"slow_shard:shard=5,from=60"}, {"data_starvation"}},
    {"comm_bottleneck", {"network:from=60,rank=9"}, {"comm_bottleneck"}},
    {"checkpoint_health", {"slow_checkpoint:from=50", "checkpoint_failure:step=70"}, {"checkpoint_failure"}},
    {"oom_detect", {"oom:rank=11,step=80"}, {"oom"}},
    {"gpu_health",
     {"thermal:rank=13,from=60", "xid:rank=20,step=70", "ecc:rank=3,from=70", "pcie_replay:rank=6,from=90"},
     {"thermal_throttle", "xid_error", "ecc_uncorrected"}},
    {"host_bottleneck", {"host_cpu:rank=17,from=60"}, {"host_bottleneck"}},
    {"asof_join", {"thermal:rank=13,from=60", "straggler:rank=3,from=40"}, {"thermal_throttle", "straggler"}, true},
    {"root_cause", {"thermal:rank=13,from=60", "oom:rank=11,step=120"}, {"diagnosis"}, true},
};

// Where to cut: the distinct times of the input at which a cut is interesting.
std::vector<int64_t> cuts(const std::vector<Record>& in, const std::vector<Record>& out) {
  std::vector<int64_t> times;
  for (const Record& r : in) {
    if (times.empty() || times.back() != r.time_ns) times.push_back(r.time_ns);
  }
  std::set<int64_t> at;
  for (int k = 1; k < 8; ++k) at.insert(times[times.size() * static_cast<size_t>(k) / 8]);
  // The group that holds time t, and the one after it.
  auto around = [&](int64_t t) {
    auto it = std::lower_bound(times.begin(), times.end(), t);
    if (it != times.end()) at.insert(*it);
    if (it != times.end() && std::next(it) != times.end()) at.insert(*std::next(it));
  };
  // Around the first three rows of each kind it emits (alerts, marks, ...).
  std::map<Kind, int> emitted;
  for (const Record& r : out) {
    if (emitted[r.kind()]++ < 3) around(r.time_ns);
  }
  int64_t middle = times[times.size() / 2];
  std::set<Kind> kinds;
  for (const Record& r : in) {
    if (r.time_ns >= middle && kinds.insert(r.kind()).second) around(r.time_ns + 1);
    if (r.kind() == Kind::kEvent && r.as<Occurrence>().kind.str() == "restart") around(r.time_ns - 1);
  }
  return {at.begin(), at.end()};
}

}  // namespace

TEST_CASE("state round trip: every stateful operator continues from a snapshot exactly") {
  for (const Case& c : kCases) {
    CAPTURE(c.type);
    std::vector<Record> rows = pool(fleet(c.faults), c.reads_alerts);
    auto def = make_operator(c.type);
    std::vector<Record> in;
    uint32_t mask = accepted(*def, c.type);
    for (const Record& r : rows) {
      if (mask & (1u << static_cast<unsigned>(r.kind()))) in.push_back(r);
    }
    OperatorRun reference;
    run_operator(*def, in, &reference);
    std::set<std::string> raised;
    for (const Alert& a : reference.alerts()) raised.insert(a.kind);
    for (const auto& kind : c.raises) CHECK_MESSAGE(raised.count(kind), c.type << " did not raise " << kind);
    CHECK(!reference.out.empty());

    std::vector<int64_t> at = cuts(in, reference.out);
    for (int parts : {1, 3}) {
      CAPTURE(parts);
      std::vector<std::string> whole = run(*def, in, parts);
      if (parts == 1) CHECK(whole == encoded(reference.out));
      for (int64_t t : at) {
        CAPTURE(t);
        std::vector<std::string> got = run(*def, in, parts, t);
        size_t i = 0;
        while (i < got.size() && i < whole.size() && got[i] == whole[i]) ++i;
        CHECK_MESSAGE(got == whole, "restored at "
                                        << t << ": " << got.size() << " rows, uninterrupted " << whole.size()
                                        << "; first difference at row " << i << ": "
                                        << (i < got.size() ? got[i].substr(0, got[i].find('\n')) : "-") << " vs "
                                        << (i < whole.size() ? whole[i].substr(0, whole[i].find('\n')) : "-"));
      }
    }
  }
}

TEST_CASE("state round trip: rank_join continues a stall, a lost node and a step anomaly exactly") {
  // Three runs: 40 of 64 ranks hang from step 30 (job_stalled), node-2 of a
  // 32-rank run is lost from step 25 (node_unreachable), rank 9 of a 16-rank
  // run counts from 10^6 at steps 20..24 (step_anomaly).
  std::vector<Record> rows;
  auto job = [&](const std::string& run, int32_t world, auto gone, auto step_of) {
    rows.push_back(run_start(run, world));
    int64_t t = kT0 + kSec;
    for (int64_t s = 1; s <= 45; ++s) {
      t += 2 * kSec;
      for (int32_t r = 0; r < world; ++r) {
        if (!gone(r, s)) rows.push_back(step(run, r, step_of(r, s), 1900, t + r));
      }
    }
  };
  auto same = [](int32_t, int64_t s) { return s; };
  job(
      "stall", 64, [](int32_t r, int64_t s) { return r >= 24 && s >= 30; }, same);
  job(
      "node", 32, [](int32_t r, int64_t s) { return r >= 16 && r < 24 && s >= 25; }, same);
  job(
      "odd", 16, [](int32_t, int64_t) { return false; },
      [](int32_t r, int64_t s) { return r == 9 && s >= 20 && s < 25 ? 1'000'000 + s : s; });
  std::vector<Record> in = sorted(std::move(rows));
  auto def = make_operator("rank_join", "timeout: 5s");
  OperatorRun reference;
  run_operator(*def, in, &reference);
  std::set<std::string> raised;
  for (const Alert& a : reference.alerts()) raised.insert(a.kind);
  CHECK(raised == std::set<std::string>{"job_stalled", "node_unreachable", "step_anomaly"});
  std::vector<int64_t> at = cuts(in, reference.out);
  for (int parts : {1, 3}) {
    CAPTURE(parts);
    std::vector<std::string> whole = run(*def, in, parts);
    if (parts == 1) CHECK(whole == encoded(reference.out));
    for (int64_t t : at) {
      CAPTURE(t);
      CHECK(run(*def, in, parts, t) == whole);
    }
  }
}

TEST_CASE("state round trip: a snapshot restores only into its own operator type and version") {
  auto nan = make_operator("nan_detect");
  auto straggler = make_operator("straggler");
  OperatorRun result;
  runtime::OperatorContext ctx{"op", 0, 1, &result.dead, &result.counters};
  std::string snap = nan->open(ctx)->snapshot();
  auto op = straggler->open(ctx);
  try {
    op->restore(snap);
    FAIL("restored nan_detect state into straggler");
  } catch (const runtime::state::StateError& e) {
    CHECK(std::string(e.what()) == "state snapshot: holds 'nan_detect' state, not 'straggler'");
  }
  try {
    op->restore(runtime::state::seal({"straggler", 4}, ""));
    FAIL("restored a newer version");
  } catch (const runtime::state::StateError& e) {
    CHECK(std::string(e.what()) ==
          "state snapshot: 'straggler' state version 4 cannot be read (this build reads version 3)");
  }
  try {
    op->restore(runtime::state::seal({"straggler", 3}, "\x01"));
    FAIL("restored a payload of the wrong shape");
  } catch (const runtime::state::StateError& e) {
    CHECK(std::string(e.what()) == "state snapshot: straggler state at byte 17: expected a struct, found an integer");
  }
}

// The fleet's run_start with every rank entry's gpu_model and node_type set.
std::vector<Record> labelled(std::vector<Record> rows) {
  for (Record& r : rows) {
    if (r.kind() != Kind::kRunStart) continue;
    auto rs = std::make_shared<RunStart>(r.run_start());
    for (RankPlacement& p : rs->ranks) {
      p.gpu_model = Symbol::intern(p.rank % 2 ? "NVIDIA A100-SXM4-80GB" : "NVIDIA H100 80GB HBM3");
      p.node_type = Symbol::intern("p5.48xlarge");
    }
    r.body = std::shared_ptr<const RunStart>(std::move(rs));
  }
  return rows;
}

TEST_CASE("state round trip: rank entries keep gpu_model and node_type") {
  // The codecs of the types that hold rank entries, alone.
  auto rs = std::make_shared<RunStart>(labelled({run_start("codec", 4)})[0].run_start());
  auto info = std::make_shared<RunInfo>();
  info->start = *rs;
  info->placement = rs->ranks;
  StepRecord rec;
  rec.run_id = rs->run_id;
  rec.step = 7;
  rec.run = info;
  Record row;
  row.time_ns = kT0;
  row.body = std::shared_ptr<const RunStart>(rs);
  runtime::state::Writer w;
  w(*rs, *info, rec, row);
  RunStart rs2;
  RunInfo info2;
  StepRecord rec2;
  Record row2;
  runtime::state::Reader r(w.data(), "codec");
  r(rs2, info2, rec2, row2);
  r.expect_end();
  CHECK(rs2 == *rs);
  REQUIRE(info2.placement.size() == 4);
  CHECK(info2.placement == rs->ranks);
  CHECK(info2.placement[1].gpu_model.str() == "NVIDIA A100-SXM4-80GB");
  CHECK(info2.placement[2].node_type.str() == "p5.48xlarge");
  REQUIRE(rec2.run);
  CHECK(rec2.run->placement == rs->ranks);
  REQUIRE(row2.kind() == Kind::kRunStart);
  CHECK(row2.run_start().ranks == rs->ranks);
  // A rank entry of the layout before gpu_model and node_type (3 fields) is refused, not misread.
  runtime::state::Writer old;
  old(std::vector<ForgedPlacement>{{0, Symbol::intern("node-0"), 0}});
  runtime::state::Reader ro(old.data(), "codec");
  std::vector<RankPlacement> back;
  try {
    ro(back);
    FAIL("read a rank entry of the old layout");
  } catch (const runtime::state::StateError& e) {
    CHECK(std::string(e.what()).find("a struct has 3 fields where 5 were expected") != std::string::npos);
  }

  // Every operator whose state holds rank entries (a run_start, a run's rank
  // map, a joined step or a row that carries one) keeps the new fields across
  // a snapshot, and is at the version that introduced them: a snapshot of the
  // old layout is refused by its header. The others' states do not hold them.
  const std::map<std::string, uint32_t> holds = {{"asof_join", 5},    {"gpu_health", 3}, {"host_bottleneck", 3},
                                                 {"nan_detect", 3},   {"oom_detect", 4}, {"rank_join", 5},
                                                 {"spike_detect", 3}, {"step_stats", 4}};
  for (const Case& c : kCases) {
    CAPTURE(c.type);
    std::vector<Record> rows = pool(labelled(fleet(c.faults)), c.reads_alerts);
    auto def = make_operator(c.type);
    std::vector<Record> in;
    uint32_t mask = accepted(*def, c.type);
    for (const Record& x : rows) {
      if (mask & (1u << static_cast<unsigned>(x.kind()))) in.push_back(x);
    }
    OperatorRun result;
    runtime::OperatorContext ctx{"op", 0, 1, &result.dead, &result.counters};
    auto op = def->open(ctx);
    runtime::Emitter<Record> out(&result.out, runtime::kBeginningOfTime);
    for (size_t i = 0; i < in.size() / 2; ++i) op->process(in[i], out);
    std::string snap = op->snapshot();
    bool carries = snap.find("NVIDIA A100-SXM4-80GB") != std::string::npos;
    CHECK_MESSAGE(carries == (holds.count(c.type) > 0), c.type << (carries ? " holds" : " does not hold")
                                                               << " rank entries: update the list and its version");
    if (!carries) continue;
    CHECK(snap.find("p5.48xlarge") != std::string::npos);
    CHECK(runtime::state::inspect(snap).version == holds.at(c.type));
    auto back = def->open(ctx);
    back->restore(snap);
    CHECK(back->snapshot() == snap);
  }
}

// The same fields as RunDeadlines' entries, to write what it never would.
struct ForgedDeadline {
  int64_t deadline;
  Symbol run;
  int64_t key;
  template <class Io>
  void fields(Io& io) {
    io(deadline, run, key);
  }
};

TEST_CASE("state round trip: pending deadlines fire in the same order after a restore, and a forged heap is rejected") {
  ops::RunDeadlines<int64_t> timers;
  Symbol a = Symbol::intern("run-a"), b = Symbol::intern("run-b");
  for (int64_t i = 0; i < 20; ++i) timers.schedule(1000 - 37 * (i % 7), i % 2 ? a : b, i);
  runtime::state::Writer w;
  runtime::state::encode(w, timers);
  ops::RunDeadlines<int64_t> back;
  runtime::state::Reader r(w.data(), "deadlines");
  runtime::state::decode(r, back);
  auto order = [](ops::RunDeadlines<int64_t>& t) {
    std::vector<std::string> fired;
    t.fire_until(runtime::kEndOfTime, [&](int64_t d, Symbol run, int64_t key) {
      fired.push_back(std::to_string(d) + " " + run.string() + " " + std::to_string(key));
    });
    return fired;
  };
  CHECK(order(back) == order(timers));
  CHECK(back.size() == 0);

  runtime::state::Writer forged;
  forged(std::vector<ForgedDeadline>{{5, a, 1}, {1, a, 2}});  // a min-heap has the earliest first
  runtime::state::Reader fr(forged.data(), "rank_join state");
  try {
    runtime::state::decode(fr, back);
    FAIL("restored deadlines that are not a heap");
  } catch (const runtime::state::StateError& e) {
    CHECK(std::string(e.what()) == "state snapshot: rank_join state at byte 30: the deadlines are not a heap");
  }
}

}  // namespace runlens::testing
