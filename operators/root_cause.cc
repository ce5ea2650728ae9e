#include "operators/root_cause.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "default_rules.h"
#include "operators/median.h"
#include "operators/placement.h"
#include "operators/run_deadlines.h"
#include "operators/run_state.h"

namespace runlens::ops {

namespace {

using rules::Agg;
using rules::Scope;

// --- signals -----------------------------------------------------------------------------

enum class Source : uint8_t { kStep, kHardware, kSymptom, kAttr };

// Step signals: their index in StepRow::v.
enum StepSignal : int {
  kStepMs,
  kWorkP50,
  kWorkMax,
  kWorkP99,
  kStragglerRatio,
  kTokensPerS,
  kMfu,
  kDataWaitRatio,
  kCommunicationRatio,
  kComputeRatio,
  kLoss,
  kLr,
  kGradNorm,
  kReportedRatio,
  kStepSignals
};
enum SymptomSignal : int { kOnset, kSymptomStep, kSymptomValue, kRankRatio };

struct SignalDef {
  const char* name;
  Source source;
  int index;             // StepSignal or SymptomSignal
  const char* attr;      // hardware: the asof_join attr; attr: the symptom alert's attr
  const char* own_attr;  // hardware: the attr a hardware alert carries itself
};

constexpr SignalDef kSignals[] = {
    {"step_ms", Source::kStep, kStepMs, nullptr, nullptr},
    {"work_p50", Source::kStep, kWorkP50, nullptr, nullptr},
    {"work_max", Source::kStep, kWorkMax, nullptr, nullptr},
    {"work_p99", Source::kStep, kWorkP99, nullptr, nullptr},
    {"straggler_ratio", Source::kStep, kStragglerRatio, nullptr, nullptr},
    {"tokens_per_s", Source::kStep, kTokensPerS, nullptr, nullptr},
    {"mfu", Source::kStep, kMfu, nullptr, nullptr},
    {"data_wait_ratio", Source::kStep, kDataWaitRatio, nullptr, nullptr},
    {"communication_ratio", Source::kStep, kCommunicationRatio, nullptr, nullptr},
    {"compute_ratio", Source::kStep, kComputeRatio, nullptr, nullptr},
    {"loss", Source::kStep, kLoss, nullptr, nullptr},
    {"lr", Source::kStep, kLr, nullptr, nullptr},
    {"grad_norm", Source::kStep, kGradNorm, nullptr, nullptr},
    {"reported_ratio", Source::kStep, kReportedRatio, nullptr, nullptr},
    {"temp_c", Source::kHardware, 0, "gpu_temp_c", "temp_c"},
    {"sm_clock_mhz", Source::kHardware, 0, "gpu_sm_clock_mhz", "sm_clock_mhz"},
    {"peer_temp_c", Source::kHardware, 0, "gpu_peer_temp_c", nullptr},
    {"peer_sm_clock_mhz", Source::kHardware, 0, "gpu_peer_sm_clock_mhz", nullptr},
    {"clock_baseline_mhz", Source::kHardware, 0, nullptr, "clock_baseline_mhz"},
    {"util_pct", Source::kHardware, 0, "gpu_util_pct", "util_pct"},
    {"power_w", Source::kHardware, 0, "gpu_power_w", "power_w"},
    {"power_limit_w", Source::kHardware, 0, "gpu_power_limit_w", "power_limit_w"},
    {"throttle_reasons", Source::kHardware, 0, "gpu_throttle_reasons", "throttle_reasons"},
    {"mem_used_bytes", Source::kHardware, 0, "gpu_mem_used_bytes", "mem_used_bytes"},
    {"mem_total_bytes", Source::kHardware, 0, "gpu_mem_total_bytes", "mem_total_bytes"},
    {"cpu_pct", Source::kHardware, 0, "node_cpu_pct", "cpu_pct"},
    {"net_rx_bps", Source::kHardware, 0, "node_net_rx_bps", nullptr},
    {"net_tx_bps", Source::kHardware, 0, "node_net_tx_bps", nullptr},
    {"tcp_retransmits_per_s", Source::kHardware, 0, "node_tcp_retransmits_per_s", nullptr},
    {"rdma_errors_per_s", Source::kHardware, 0, "node_rdma_errors_per_s", nullptr},
    // The node's CPU split and its ranks' work ratio, as host_bottleneck read them.
    {"cpu_user_pct", Source::kHardware, 0, nullptr, "cpu_user_pct"},
    {"cpu_system_pct", Source::kHardware, 0, nullptr, "cpu_system_pct"},
    {"cpu_iowait_pct", Source::kHardware, 0, nullptr, "cpu_iowait_pct"},
    {"cpu_steal_pct", Source::kHardware, 0, nullptr, "cpu_steal_pct"},
    {"host_work_ratio", Source::kHardware, 0, nullptr, "work_ratio"},
    {"onset", Source::kSymptom, kOnset, nullptr, nullptr},
    {"step", Source::kSymptom, kSymptomStep, nullptr, nullptr},
    {"symptom_value", Source::kSymptom, kSymptomValue, nullptr, nullptr},
    {"rank_ratio", Source::kSymptom, kRankRatio, nullptr, nullptr},
    // job_slowdown's attrs: the job's step time before and after, and how many ranks changed.
    {"before_ms", Source::kAttr, 0, "before_ms", nullptr},
    {"after_ms", Source::kAttr, 0, "after_ms", nullptr},
    {"ranks", Source::kAttr, 0, "ranks", nullptr},
};
constexpr int kSignalCount = static_cast<int>(std::size(kSignals));

// Alert kinds that name a node, not one GPU of it (here() matches the node).
bool node_level(std::string_view kind) {
  return kind == alert_kind::kHostBottleneck || kind == alert_kind::kNodeUnreachable;
}

class Vocab final : public rules::Vocabulary {
 public:
  Vocab() {
    for (const auto& k : rules::alert_kinds()) add_kind(k);
    for (const auto& k : rules::event_kinds()) add_kind(k);
  }
  std::optional<int> signal(std::string_view name) const override {
    for (int i = 0; i < kSignalCount; ++i) {
      if (name == kSignals[i].name) return i;
    }
    return std::nullopt;
  }
  std::optional<int> kind(std::string_view name) const override {
    for (size_t i = 0; i < kinds_.size(); ++i) {
      if (name == kinds_[i]) return static_cast<int>(i);
    }
    return std::nullopt;
  }
  std::vector<std::string> signal_names() const override {
    std::vector<std::string> v;
    for (const auto& s : kSignals) v.emplace_back(s.name);
    return v;
  }
  std::vector<std::string> kind_names() const override { return kinds_; }
  const std::string& kind_name(int id) const { return kinds_[static_cast<size_t>(id)]; }
  // The id of a kind named by an alert or event, or -1 (an unlisted event word).
  int kind_id(Symbol name) const {
    auto k = kind(name.str());
    return k ? *k : -1;
  }

 private:
  void add_kind(const std::string& k) {
    if (std::find(kinds_.begin(), kinds_.end(), k) == kinds_.end()) kinds_.push_back(k);
  }
  std::vector<std::string> kinds_;
};

const Vocab& vocab() {
  static const Vocab v;
  return v;
}

// --- per-run state -------------------------------------------------------------------------

struct StepRow {
  int64_t step = 0;
  std::array<double, kStepSignals> v;
  template <class Io>
  void fields(Io& io) {
    io(step, v);
  }
};

// An alert or event of the run: what present(), count(), here() and changed() read.
struct Seen {
  int kind = -1;
  bool is_event = false;
  int64_t step = 0;
  int64_t time = 0;
  std::optional<int32_t> rank;
  Symbol node;
  std::optional<int32_t> gpu;
  Symbol key;          // config_change: the key
  std::string detail;  // events: for evidence
  template <class Io>
  void fields(Io& io) {
    io(kind, is_event, step, time, rank, node, gpu, key, detail);
  }
};

struct Symptom {
  std::shared_ptr<const Alert> alert;
  int64_t step = 0;
  int64_t onset = 0;
  int64_t rank = 0;  // RuleSet::symptom_rank
  int tree = -1;
  template <class Io>
  void fields(Io& io) {
    io(alert, step, onset, rank, tree);
  }
};

struct Incident {
  uint64_t id = 0;
  std::vector<Symptom> symptoms;
  int64_t onset = 0, last_step = 0;
  int64_t eval_step = 0, deadline = 0;
  uint64_t generation = 0;
  bool pending = false;
  bool emitted = false;
  // The window closed once: the onset is settled (a later symptom adds
  // evidence, and may change the cause, but does not move the onset).
  bool judged = false;
  std::string alert_id, cause, owner, symptom;
  int revision = 0;  // of the last diagnosis published (when emitted)
  // The last diagnosis published: a re-evaluation is published again only
  // when something a consumer sees differs from it.
  std::shared_ptr<const Alert> published;

  template <class Io>
  void fields(Io& io) {
    io(id, symptoms, onset, last_step, eval_step, deadline, generation, pending, emitted, judged, alert_id, cause,
       owner, symptom, revision, published);
  }

  // The symptom that picks the tree: highest rank, then earliest.
  const Symptom& primary() const {
    const Symptom* best = &symptoms.front();
    for (const auto& s : symptoms) {
      if (s.rank > best->rank) best = &s;
    }
    return *best;
  }
};

struct RunState {
  std::deque<StepRow> steps;
  std::deque<Seen> seen;
  std::list<Incident> incidents;
  int64_t last_step = 0;
  template <class Io>
  void fields(Io& io) {
    io(steps, seen, incidents, last_step);
  }
};

constexpr size_t kMaxSeen = 2048;
constexpr size_t kMaxIncidents = 64;
constexpr size_t kMaxEvidence = 24;
constexpr int kMinBaseline = 3;

std::optional<double> attr_of(const Alert& a, std::string_view name) {
  for (const auto& [k, v] : a.attrs) {
    if (k == name) return v;
  }
  return std::nullopt;
}

// Values of the window of one incident, for the rule tree.
class Window final : public rules::Environment {
 public:
  Window(const RunState& run, const Incident& inc, const Symptom& primary, int64_t start, int64_t end)
      : run_(run), inc_(inc), primary_(primary), start_(start), end_(end) {}

  std::optional<double> signal(int id, Agg agg) const override {
    const SignalDef& def = kSignals[id];
    switch (def.source) {
      case Source::kStep:
        return step_signal(def.index, agg);
      case Source::kHardware: {
        if (agg == Agg::kBaseline || agg == Agg::kDelta || agg == Agg::kRatio) return std::nullopt;
        return hardware(def);
      }
      case Source::kSymptom: {
        if (agg == Agg::kBaseline || agg == Agg::kDelta || agg == Agg::kRatio) return std::nullopt;
        if (def.index == kOnset) return static_cast<double>(inc_.onset);
        if (def.index == kSymptomStep) return static_cast<double>(primary_.step);
        if (def.index == kRankRatio) return rank_ratio();
        if (primary_.alert->value) return *primary_.alert->value;
        return std::nullopt;
      }
      case Source::kAttr:
        if (agg == Agg::kBaseline || agg == Agg::kDelta || agg == Agg::kRatio) return std::nullopt;
        return attr(def.attr);
    }
    return std::nullopt;
  }

  int64_t count(int kind, Scope scope) const override {
    int64_t n = 0;
    for (const Seen& s : run_.seen) {
      if (s.kind == kind && in_window(s) && (scope == Scope::kRun || here(s))) ++n;
    }
    return n;
  }

  std::optional<int64_t> first_step(int kind) const override {
    std::optional<int64_t> first;
    for (const Seen& s : run_.seen) {
      if (s.kind == kind && in_window(s) && (!first || s.step < *first)) first = s.step;
    }
    return first;
  }

  int64_t changed(std::string_view key) const override {
    static const int kConfigChange = *vocab().kind(event_kind::kConfigChange);
    int64_t n = 0;
    for (const Seen& s : run_.seen) {
      if (s.kind == kConfigChange && s.is_event && s.key.str() == key && s.step >= start_ && s.step <= primary_.step)
        ++n;
    }
    return n;
  }

  std::optional<double> attr(std::string_view name) const override {
    if (auto v = attr_of(*primary_.alert, name)) return v;
    for (const auto& s : inc_.symptoms) {
      if (auto v = attr_of(*s.alert, name)) return v;
    }
    return std::nullopt;
  }

  // The step signal's baseline (median before the onset), for evidence.
  std::optional<double> baseline(int index) const { return step_signal(index, Agg::kBaseline); }

  bool in_window(const Seen& s) const { return s.step >= start_ && s.step <= end_; }

 private:
  bool here(const Seen& s) const {
    const Alert& p = *primary_.alert;
    if (!p.node.empty() && !s.node.empty()) {
      if (s.node != p.node) return false;
      bool node_wide = s.kind >= 0 && node_level(vocab().kind_name(s.kind));
      return node_wide || !p.gpu || !s.gpu || *p.gpu == *s.gpu;
    }
    return p.rank && s.rank && *p.rank == *s.rank;
  }

  // The straggler alert's own number (its value: the rank's work time / the
  // median rank's at the alert's step), so that the diagnosis says what the
  // alert said: the incident's symptom when it is a straggler, else its first
  // straggler.
  std::optional<double> rank_ratio() const {
    auto of = [](const Symptom& s) -> std::optional<double> {
      if (s.alert->kind != alert_kind::kStraggler || !s.alert->value) return std::nullopt;
      return *s.alert->value;
    };
    if (auto v = of(primary_)) return v;
    for (const auto& s : inc_.symptoms) {
      if (auto v = of(s)) return v;
    }
    return std::nullopt;
  }

  std::optional<double> hardware(const SignalDef& def) const {
    auto find = [&](const Alert& a) -> std::optional<double> {
      if (def.attr) {
        if (auto v = attr_of(a, def.attr)) return v;
      }
      if (def.own_attr) {
        if (auto v = attr_of(a, def.own_attr)) return v;
      }
      return std::nullopt;
    };
    if (auto v = find(*primary_.alert)) return v;
    // Other symptoms of the incident, highest rank first.
    std::vector<const Symptom*> order;
    for (const auto& s : inc_.symptoms) order.push_back(&s);
    std::stable_sort(order.begin(), order.end(), [](const Symptom* a, const Symptom* b) { return a->rank > b->rank; });
    for (const Symptom* s : order) {
      if (auto v = find(*s->alert)) return v;
    }
    return std::nullopt;
  }

  std::optional<double> step_signal(int index, Agg agg) const {
    auto value = [&](const StepRow& r) { return r.v[static_cast<size_t>(index)]; };
    auto collect = [&](int64_t lo, int64_t hi) {
      std::vector<double> v;
      for (const StepRow& r : run_.steps) {
        if (r.step >= lo && r.step <= hi && !std::isnan(value(r))) v.push_back(value(r));
      }
      return v;
    };
    auto at = [&]() -> std::optional<double> {
      // The latest step at or before the symptom's, else the first after it.
      const StepRow* best = nullptr;
      for (const StepRow& r : run_.steps) {
        if (r.step < start_ || r.step > end_ || std::isnan(value(r))) continue;
        if (r.step <= primary_.step)
          best = &r;
        else if (!best) {
          best = &r;
          break;
        }
      }
      return best ? std::optional<double>(value(*best)) : std::nullopt;
    };
    auto base = [&]() -> std::optional<double> {
      auto v = collect(start_, inc_.onset - 1);
      if (static_cast<int>(v.size()) < kMinBaseline) return std::nullopt;
      return median_in_place(v);
    };
    switch (agg) {
      case Agg::kAt:
      case Agg::kPresent:
        return at();
      case Agg::kBaseline:
        return base();
      case Agg::kDelta: {
        auto a = at(), b = base();
        if (!a || !b) return std::nullopt;
        return *a - *b;
      }
      case Agg::kRatio: {
        auto a = at(), b = base();
        if (!a || !b || *b == 0) return std::nullopt;
        return *a / *b;
      }
      case Agg::kRecent: {
        auto v = collect(inc_.onset, end_);
        if (v.empty()) return std::nullopt;
        return median_in_place(v);
      }
      case Agg::kMax:
      case Agg::kMin: {
        auto v = collect(start_, end_);
        if (v.empty()) return std::nullopt;
        return agg == Agg::kMax ? *std::max_element(v.begin(), v.end()) : *std::min_element(v.begin(), v.end());
      }
    }
    return std::nullopt;
  }

  const RunState& run_;
  const Incident& inc_;
  const Symptom& primary_;
  int64_t start_, end_;
};

std::string where_words(const Alert& a) {
  if (a.rank) {
    std::string w = "rank " + std::to_string(*a.rank);
    if (!a.node.empty()) w += " (" + node_gpu_words(a.node, a.gpu) + ")";
    return w;
  }
  if (!a.node.empty()) return node_gpu_words(a.node, a.gpu);
  return "the run";
}

// The ranks an alert names in its rank_N attrs (job_slowdown: each rank's own
// after / before), in their order: "13 (+30 %), 20 (+23 %)"; "none" without.
std::string named_ranks(const Alert& a) {
  std::string out;
  for (const auto& [k, v] : a.attrs) {
    if (k.rfind("rank_", 0) != 0 || k.size() == 5 || k.find_first_not_of("0123456789", 5) != std::string::npos)
      continue;
    out += (out.empty() ? "" : ", ") + k.substr(5) + " (" + (v >= 1 ? "+" : "") + fmt_num(100 * (v - 1)) + " %)";
  }
  return out.empty() ? "none" : out;
}

std::string event_detail(const Occurrence& e) {
  std::string d;
  auto value_text = [](const Value& v) {
    if (v.kind == Value::Kind::kNumber) return fmt_num(v.number, NumberStyle::kDecimals);
    if (v.kind == Value::Kind::kString) return v.text;
    return std::string("?");
  };
  if (e.has(Occurrence::F::key)) {
    d = e.key.string();
    if (e.has(Occurrence::F::old) || e.has(Occurrence::F::new_))
      d += " " + value_text(e.old) + " -> " + value_text(e.new_);
  }
  if (e.has(Occurrence::F::code)) d += (d.empty() ? "" : "; ") + std::string("code ") + std::to_string(e.code);
  if (e.has(Occurrence::F::message)) d += (d.empty() ? "" : "; ") + e.message;
  if (e.has(Occurrence::F::rank)) d += (d.empty() ? "" : "; ") + std::string("rank ") + std::to_string(e.rank);
  if (!e.node.empty())
    d += (d.empty() ? "" : "; ") +
         node_gpu_words(e.node, e.has(Occurrence::F::gpu) ? std::optional<int32_t>(e.gpu) : std::nullopt);
  return d.empty() ? e.kind.string() : d;
}

class RootCause final : public PerRunOperator<RootCause, RunState> {
 public:
  // Version 3: the kind ids and tree indices it holds moved (issue 12's alert kinds and rule files).
  // Version 4: an incident keeps the diagnosis it published (diagnose now, refine later).
  // Version 5: alerts keep their revision and ends_ns (a symptom's closing revision closes the diagnosis).
  static constexpr runtime::state::StateType kState{"root_cause", 5};
  explicit RootCause(const RootCauseOptions& o) : o_(o), rules_(*o.rules) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_, timers_, next_id_);
  }
  // Restores into an instance with the same rules: the state names rule
  // trees and event kinds by index, which are checked here.
  void restore(std::string_view snapshot) override {
    PerRunOperator::restore(snapshot);
    auto bad = [](const std::string& why) {
      throw runtime::state::StateError("state snapshot: root_cause state " + why);
    };
    int kinds = static_cast<int>(vocab().kind_names().size());
    for (const auto& [run, st] : runs_) {
      for (const Seen& s : st.seen) {
        if (s.is_event && (s.kind < 0 || s.kind >= kinds)) bad("names event kind " + std::to_string(s.kind));
      }
      for (const Incident& inc : st.incidents) {
        if (inc.symptoms.empty()) bad("holds an incident without symptoms");
        for (const Symptom& s : inc.symptoms) {
          if (!s.alert) bad("holds a symptom without its alert");
          if (s.tree < 0 || static_cast<size_t>(s.tree) >= rules_.trees.size())
            bad("names rule tree " + std::to_string(s.tree) + " of " + std::to_string(rules_.trees.size()) +
                " (restore it with the rules it was taken with)");
        }
      }
    }
  }

  void advance(int64_t t, Emitter& out) { fire_until(t, out); }

  // Steps start again: judge what is pending on what came before, then
  // forget the steps and incidents; what was seen stays.
  void on_restart(Symbol run, const Record& r, Emitter& out) {
    if (run.empty()) return;
    auto it = runs_.find(run);
    if (it == runs_.end()) return;
    for (auto& inc : it->second.incidents) {
      if (inc.pending) evaluate(run, it->second, inc, r.time_ns, out);
    }
    it->second.steps.clear();
    it->second.incidents.clear();
    it->second.last_step = 0;
  }

  void handle(const Record& r, Emitter& out) {
    switch (r.kind()) {
      case Kind::kStepStats:
        on_stats(r, out);
        break;
      case Kind::kAlert:
        on_alert(r, out);
        break;
      case Kind::kEvent:
        on_event(r, out);
        // A job that stops closes its windows: what is pending is judged now.
        if (stops_run(r.as<Occurrence>())) close_windows(r.as<Occurrence>().run_id, r.time_ns, out);
        break;
      case Kind::kRunEnd: {
        close_windows(r.as<RunEnd>().run_id, r.time_ns, out);
        runs_.erase(r.as<RunEnd>().run_id);
        break;
      }
      default:
        break;
    }
  }

 private:
  void on_stats(const Record& r, Emitter& out) {
    const StepStats& s = r.step_stats();
    RunState& st = runs_[s.run_id];
    StepRow row;
    row.step = s.step;
    row.v.fill(NAN);
    auto opt = [](const std::optional<double>& v) { return v ? *v : NAN; };
    row.v[kStepMs] = s.step_ms;
    row.v[kWorkP50] = s.work_p50;
    row.v[kWorkMax] = s.work_max;
    row.v[kWorkP99] = s.work_p99;
    row.v[kStragglerRatio] = s.straggler_ratio;
    row.v[kTokensPerS] = opt(s.tokens_per_s);
    row.v[kMfu] = opt(s.mfu);
    row.v[kDataWaitRatio] = opt(s.data_wait_ratio);
    row.v[kCommunicationRatio] = opt(s.communication_ratio);
    row.v[kComputeRatio] = s.step_ms > 0 ? s.work_p50 / s.step_ms : NAN;
    row.v[kLoss] = opt(s.loss);
    row.v[kLr] = opt(s.lr);
    row.v[kGradNorm] = opt(s.grad_norm);
    row.v[kReportedRatio] = s.world_size > 0 ? static_cast<double>(s.reported) / s.world_size : NAN;
    if (s.reported == 0) {
      for (int i : {kStepMs, kWorkP50, kWorkMax, kWorkP99, kStragglerRatio, kComputeRatio})
        row.v[static_cast<size_t>(i)] = NAN;
    }
    // Keep steps in order (a restart may repeat numbers: it clears the ring).
    if (!st.steps.empty() && st.steps.back().step >= s.step) {
      auto pos = std::lower_bound(st.steps.begin(), st.steps.end(), s.step,
                                  [](const StepRow& a, int64_t step) { return a.step < step; });
      if (pos != st.steps.end() && pos->step == s.step)
        *pos = row;
      else
        st.steps.insert(pos, row);
    } else {
      st.steps.push_back(row);
    }
    while (static_cast<int64_t>(st.steps.size()) > o_.history_steps) st.steps.pop_front();
    st.last_step = std::max(st.last_step, s.step);
    for (auto& inc : st.incidents) {
      if (inc.pending && inc.eval_step <= s.step) evaluate(s.run_id, st, inc, r.time_ns, out);
    }
    prune(st);
  }

  void close_windows(Symbol run, int64_t at, Emitter& out) {
    auto it = runs_.find(run);
    if (it == runs_.end()) return;
    for (auto& inc : it->second.incidents) {
      if (inc.pending) evaluate(it->first, it->second, inc, at, out);
    }
  }

  // A later revision of a symptom already held (asof_join's refined context):
  // it replaces the earlier one, and is no new occurrence. True when it was one.
  bool revise_symptom(Symbol run_id, RunState& st, const std::shared_ptr<const Alert>& alert, int64_t at,
                      Emitter& out) {
    if (alert->revision <= 0) return false;
    for (auto& inc : st.incidents) {
      for (auto& s : inc.symptoms) {
        if (s.alert->alert_id != alert->alert_id) continue;
        // A closing revision wins a tie (one that passed asof_join after the
        // run's end was not renumbered past a refinement).
        if (s.alert->ends_ns || (s.alert->revision >= alert->revision && !alert->ends_ns) ||
            s.alert->revision > alert->revision)
          return true;
        s.alert = alert;
        // A diagnosed incident is judged again now; a pending one when its window closes.
        if (!inc.pending && inc.emitted) evaluate(run_id, st, inc, at, out, false);
        return true;
      }
    }
    return false;
  }

  void on_alert(const Record& r, Emitter& out) {
    auto alert = std::get<std::shared_ptr<const Alert>>(r.body);
    const Alert& a = *alert;
    if (a.run_id.empty() || a.kind == alert_kind::kDiagnosis) return;
    RunState& st = runs_[a.run_id];
    if (revise_symptom(a.run_id, st, alert, r.time_ns, out)) return;
    if (a.revision > 0) return;  // seen already, as its revision 0
    int64_t step = a.step ? *a.step : st.last_step;
    Seen seen;
    seen.kind = vocab().kind(a.kind).value_or(-1);
    seen.step = step;
    seen.time = a.time_ns;
    seen.rank = a.rank;
    seen.node = a.node;
    seen.gpu = a.gpu;
    remember(st, std::move(seen));
    int tree = rules_.tree_for(a.kind);
    if (tree < 0) return;
    Symptom s;
    s.alert = alert;
    s.step = step;
    auto onset = attr_of(a, "onset_step");
    s.onset = onset && *onset <= static_cast<double>(step) ? static_cast<int64_t>(*onset) : step;
    s.rank = rules_.symptom_rank(a.kind);
    s.tree = tree;
    st.last_step = std::max(st.last_step, step);
    int64_t after = rules_.trees[static_cast<size_t>(tree)].after_steps.value_or(o_.after_steps);

    Incident* inc = nullptr;
    for (auto& i : st.incidents) {
      if (step > i.last_step + o_.merge_steps && !open_at_node(i, a.node)) continue;
      if (joins(i, a)) {
        inc = &i;
        break;
      }
    }
    bool opened = !inc;
    if (!inc) {
      if (st.incidents.size() >= kMaxIncidents) st.incidents.pop_front();
      st.incidents.emplace_back();
      inc = &st.incidents.back();
      inc->id = next_id_++;
      inc->onset = s.onset;
      inc->last_step = step;
    }
    if (!inc->judged) inc->onset = std::min(inc->onset, s.onset);
    inc->last_step = std::max(inc->last_step, step);
    inc->symptoms.push_back(std::move(s));
    inc->eval_step = inc->pending ? std::max(inc->eval_step, step + after) : step + after;
    inc->deadline = std::max(inc->pending ? inc->deadline : INT64_MIN, r.time_ns + o_.max_wait_ns);
    inc->pending = true;
    ++inc->generation;
    timers_.schedule(inc->deadline, a.run_id, {inc->id, inc->generation});
    // Diagnose now: the symptom's own evidence is complete, so the first
    // diagnosis goes out with what has been delivered; the window refines it.
    if (opened) evaluate(a.run_id, st, *inc, r.time_ns, out, false);
  }

  // Whether the incident holds a node-level symptom of `node` that has not
  // closed (a host that stays saturated): the symptoms it causes there later
  // are still its, however long after the last one they come.
  static bool open_at_node(const Incident& inc, Symbol node) {
    if (node.empty()) return false;
    for (const auto& s : inc.symptoms) {
      const Alert& b = *s.alert;
      if (node_level(b.kind) && b.node == node && !b.ends_ns) return true;
    }
    return false;
  }
  static bool holds_open_node_symptom(const Incident& inc) {
    for (const auto& s : inc.symptoms) {
      if (node_level(s.alert->kind) && !s.alert->node.empty() && !s.alert->ends_ns) return true;
    }
    return false;
  }

  // A run-wide symptom joins any incident; a local one joins an incident with a
  // local symptom at the same place (same_place), or one of run-wide symptoms only.
  static bool joins(const Incident& inc, const Alert& a) {
    if (!a.rank && a.node.empty()) return true;
    bool any_local = false;
    for (const auto& s : inc.symptoms) {
      const Alert& b = *s.alert;
      if (!b.rank && b.node.empty()) continue;
      any_local = true;
      if (same_place(a, b)) return true;
    }
    return !any_local;
  }

  // The same GPU (or node, for a node-level kind or where a GPU is not named), or the same rank.
  static bool same_place(const Alert& a, const Alert& b) {
    if (!a.node.empty() && a.node == b.node) {
      return !a.gpu || !b.gpu || *a.gpu == *b.gpu || node_level(a.kind) || node_level(b.kind);
    }
    return a.rank && b.rank && *a.rank == *b.rank;
  }

  void on_event(const Record& r, Emitter& out) {
    const Occurrence& e = r.as<Occurrence>();
    if (e.run_id.empty()) return;
    auto it = runs_.find(e.run_id);
    if (e.kind == restart_kind()) return;  // on_restart's
    int kind = vocab().kind_id(e.kind);
    if (kind < 0) return;  // not a kind conditions can name
    RunState& st = it == runs_.end() ? runs_[e.run_id] : it->second;
    Seen s;
    s.kind = kind;
    s.is_event = true;
    s.step = e.has(Occurrence::F::step) ? e.step : st.last_step;
    s.time = r.time_ns;
    if (e.has(Occurrence::F::rank)) s.rank = e.rank;
    s.node = e.node;
    if (e.has(Occurrence::F::gpu)) s.gpu = e.gpu;
    s.key = e.key;
    s.detail = event_detail(e);
    remember(st, std::move(s));
  }

  void remember(RunState& st, Seen s) {
    st.seen.push_back(std::move(s));
    while (st.seen.size() > kMaxSeen) st.seen.pop_front();
  }

  void prune(RunState& st) {
    int64_t horizon = st.last_step - o_.history_steps;
    while (!st.seen.empty() && st.seen.front().step < horizon) st.seen.pop_front();
    for (auto it = st.incidents.begin(); it != st.incidents.end();) {
      bool closed = !it->pending && st.last_step > it->last_step + o_.merge_steps && !holds_open_node_symptom(*it);
      it = closed ? st.incidents.erase(it) : std::next(it);
    }
  }

  void fire_until(int64_t t, Emitter& out) {
    timers_.fire_until(t, [&](int64_t deadline, Symbol run_id, const std::pair<uint64_t, uint64_t>& key) {
      auto run = runs_.find(run_id);
      if (run == runs_.end()) return;
      for (auto& inc : run->second.incidents) {
        if (inc.id == key.first && inc.pending && inc.generation == key.second) {
          evaluate(run_id, run->second, inc, deadline, out);
          break;
        }
      }
    });
  }

  // Judges the incident over what has been delivered and publishes the
  // diagnosis when it is the first or differs from the last published in
  // anything a consumer sees. `closes` ends the incident's window (its
  // after_steps, max_wait, the run's end); without it the incident stays pending.
  void evaluate(Symbol run_id, RunState& st, Incident& inc, int64_t at, Emitter& out, bool closes = true) {
    if (closes) {
      inc.pending = false;
      inc.judged = true;
    }
    const Symptom& primary = inc.primary();
    const rules::RuleTree& tree = rules_.trees[static_cast<size_t>(primary.tree)];
    int64_t before = tree.before_steps.value_or(o_.before_steps);
    int64_t last = 0;
    for (const auto& s : inc.symptoms) last = std::max(last, s.step);
    int64_t start = inc.onset - before;
    int64_t end = std::max(last + tree.after_steps.value_or(o_.after_steps), st.last_step);
    Window w(st, inc, primary, start, end);
    rules::Decision d = tree.decide(w);
    const rules::Leaf& leaf = *d.leaf;
    const Alert& p = *primary.alert;

    Alert a;
    a.kind = alert_kind::kDiagnosis;
    a.severity = Severity::kInfo;
    a.time_ns = at;
    a.tenant = p.tenant;
    a.run_id = run_id;
    a.step = primary.step;
    a.rank = p.rank;
    a.node = p.node;
    a.gpu = p.gpu;
    a.symptom = p.kind;
    a.cause = leaf.cause;
    a.owner = leaf.owner;
    std::function<std::string(std::string_view)> lookup = [&](std::string_view name) -> std::string {
      if (size_t bar = name.find('|'); bar != std::string_view::npos) {
        std::string first = lookup(name.substr(0, bar));
        return first != "unknown" ? first : lookup(name.substr(bar + 1));
      }
      if (name == "where") return where_words(p);
      if (name == "run") return run_id.string();
      if (name == "rank") return p.rank ? std::to_string(*p.rank) : "unknown";
      if (name == "node") return p.node.empty() ? "unknown" : p.node.string();
      if (name == "gpu") return p.gpu ? std::to_string(*p.gpu) : "unknown";
      if (name == "step") return std::to_string(primary.step);
      if (name == "onset") return std::to_string(inc.onset);
      if (name == "symptom") return p.kind;
      if (name == "named_ranks") return named_ranks(p);
      auto id = vocab().signal(name);
      if (!id) return "{" + std::string(name) + "}";
      auto v = w.signal(*id, Agg::kAt);
      return v ? fmt_num(*v, NumberStyle::kDecimals) : "unknown";
    };
    std::string summary = leaf.summary.empty() ? p.kind + " at step " + std::to_string(primary.step)
                                               : rules::render_template(leaf.summary, lookup);
    a.summary = "LIKELY CAUSE: " + leaf.cause + " (owner " + leaf.owner + "): " + summary;
    a.recommendation = rules::render_template(leaf.recommendation, lookup);

    // Evidence: the symptoms, the events of the window, the leaf's signals, the path.
    std::vector<const Symptom*> symptoms;
    for (const auto& s : inc.symptoms) symptoms.push_back(&s);
    std::stable_sort(symptoms.begin(), symptoms.end(), [](const Symptom* x, const Symptom* y) {
      return std::tie(x->step, x->alert->kind) < std::tie(y->step, y->alert->kind);
    });
    for (const Symptom* s : symptoms)
      a.evidence.push_back({s->alert->kind, s->step, s->alert->summary, s->alert->alert_id});
    // Every symptom it explains closed: the diagnosis closes (its latest end).
    std::optional<int64_t> ends;
    for (const Symptom* s : symptoms) {
      if (!s->alert->ends_ns) {
        ends.reset();
        break;
      }
      ends = std::max(ends.value_or(INT64_MIN), *s->alert->ends_ns);
    }
    a.ends_ns = ends;
    for (const Seen& s : st.seen) {
      if (s.is_event && w.in_window(s)) a.evidence.push_back({vocab().kind_name(s.kind), s.step, s.detail, {}});
    }
    a.attrs.push_back({"onset_step", static_cast<double>(inc.onset)});
    a.attrs.push_back({"symptoms", static_cast<double>(inc.symptoms.size())});
    for (int id : leaf.evidence) {
      const SignalDef& def = kSignals[id];
      auto v = w.signal(id, Agg::kAt);
      if (!v) continue;
      std::string detail = std::string(def.name) + " " + fmt_num(*v, NumberStyle::kDecimals);
      if (def.source == Source::kStep) {
        if (auto b = w.baseline(def.index))
          detail += " against a baseline of " + fmt_num(*b, NumberStyle::kDecimals) + " before step " +
                    std::to_string(inc.onset);
      } else if (def.source == Source::kHardware) {
        detail += " (" + where_words(p) + ")";
      }
      a.evidence.push_back({"signal", primary.step, detail, {}});
      a.attrs.push_back({def.name, *v});
    }
    for (const auto& step : d.path) {
      std::string value = !step.value ? "unknown" : step.taken ? "true" : "false";
      a.evidence.push_back({"rule", std::nullopt, tree.name + ": " + step.condition->expr.text() + " is " + value, {}});
    }
    if (a.evidence.size() > kMaxEvidence) a.evidence.resize(kMaxEvidence);

    if (!inc.emitted) inc.alert_id = make_alert_id(a, inc.onset);
    a.alert_id = inc.alert_id;
    if (inc.emitted && inc.published) {
      // Unchanged for a consumer: the time of judging is no news.
      Alert same = a;
      same.time_ns = inc.published->time_ns;
      same.revision = inc.published->revision;
      if (same == *inc.published) return;
    }
    a.revision = inc.emitted ? inc.revision + 1 : 0;
    inc.emitted = true;
    inc.revision = a.revision;
    inc.cause = leaf.cause;
    inc.owner = leaf.owner;
    inc.symptom = p.kind;
    auto published = std::make_shared<const Alert>(std::move(a));
    inc.published = published;
    out.emit(alert_record(*published));
  }

  RootCauseOptions o_;
  const rules::RuleSet& rules_;
  RunDeadlines<std::pair<uint64_t, uint64_t>> timers_;  // by (incident, generation)
  uint64_t next_id_ = 1;
};

std::string describe_options(const RootCauseOptions& o) {
  std::string trees;
  for (const auto& t : o.rules->trees) trees += (trees.empty() ? "" : ",") + t.name;
  return "trees=" + trees + " window=-" + std::to_string(o.before_steps) + "/+" + std::to_string(o.after_steps) +
         " steps merge=" + std::to_string(o.merge_steps) + " steps";
}

}  // namespace

const rules::Vocabulary& root_cause_vocabulary() { return vocab(); }

std::shared_ptr<const rules::RuleSet> builtin_rules() {
  static const std::shared_ptr<const rules::RuleSet> set = [] {
    std::vector<rules::RuleFile> files;
    for (const auto& f : kEmbeddedRules)
      files.push_back({std::string("<built-in configs/rules/") + f.name + ">", f.text});
    return std::make_shared<const rules::RuleSet>(rules::parse_rules(files, vocab()));
  }();
  return set;
}

std::shared_ptr<const rules::RuleSet> load_rules(const std::string& spec, const runtime::SourceLocation& where) {
  namespace fs = std::filesystem;
  if (spec == "builtin") return builtin_rules();
  fs::path p(spec);
  if (p.is_relative()) {
    // The embedded default pipeline has no directory: it was built with the rules beside it.
    if (where.file.empty() || where.file.front() == '<') return builtin_rules();
    p = fs::path(where.file).parent_path() / p;
  }
  std::vector<rules::RuleFile> files = rules::read_rule_dir(p.lexically_normal().string(), where);
  // A pipeline's components are built twice as it loads, once to check them
  // (engine/engine.cc) and once to run, and the second parse of
  // configs/rules was about 4 ms of a command's start (a replay of one line:
  // 36 -> 32 ms): the files as last parsed, byte for byte, give the set
  // parsed then (immutable, so shared).
  static std::mutex mu;
  static std::vector<rules::RuleFile> last_files;
  static std::shared_ptr<const rules::RuleSet> last_set;
  auto same = [](const std::vector<rules::RuleFile>& a, const std::vector<rules::RuleFile>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const rules::RuleFile& x, const rules::RuleFile& y) {
      return x.name == y.name && x.text == y.text;
    });
  };
  {
    std::lock_guard lock(mu);
    if (last_set && same(files, last_files)) return last_set;
  }
  auto set = std::make_shared<const rules::RuleSet>(rules::parse_rules(files, vocab()));
  std::lock_guard lock(mu);
  last_files = std::move(files);
  last_set = set;
  return set;
}

std::unique_ptr<OperatorDef> MakeRootCause(const RootCauseOptions& options) {
  RUNLENS_CHECK(options.rules != nullptr, "root_cause needs a rule set");
  return std::make_unique<PerRunDef<RootCause, RootCauseOptions>>(options, &describe_options);
}

void RegisterRootCause(Registry& registry) {
  ComponentInfo info;
  info.type = "root_cause";
  info.role = Role::kOperator;
  info.doc =
      "Groups symptom alerts into incidents (same run, same node or rank or run-wide, within `merge_steps`), "
      "evaluates the decision tree of the incident's symptom (configs/rules/*.yaml, docs/rules.md) over step_stats, "
      "context attrs, alerts and events around it, and emits one `diagnosis` per incident: at once with its first "
      "symptom (revision 0), and again (same alert_id, revision + 1) when the evaluation after `after_steps` steps "
      "(or `max_wait`, or the run's end or failure) or later evidence changes what a consumer sees.";
  const RootCauseOptions defaults;  // each default is written once, in RootCauseOptions
  info.params = {
      {.name = "rules",
       .type = ParamType::kString,
       .default_value = "builtin",
       .doc = "Directory of rule files: relative to the pipeline file, or absolute; `builtin` (and a relative path in "
              "the embedded default pipeline) means the rules compiled into runlens."},
      {.name = "before_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.before_steps),
       .doc = "Steps before the onset that form the baseline.",
       .min = 1,
       .max = 4096},
      {.name = "after_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.after_steps),
       .doc = "Steps after a symptom to wait for before judging it again (its window).",
       .min = 0,
       .max = 4096},
      {.name = "merge_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.merge_steps),
       .doc = "Steps after an incident's last symptom during which new symptoms join it.",
       .min = 0,
       .max = 1e6},
      {.name = "max_wait",
       .type = ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.max_wait_ns),
       .doc = "Event time after a symptom at which it is judged again even if its steps have not come (a hung run).",
       .min = 0.001},
      {.name = "history_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.history_steps),
       .doc = "Steps of step_stats kept per run.",
       .min = 8,
       .max = 1e5},
  };
  info.accepts = mask(Kind::kStepStats) | mask(Kind::kAlert) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    RootCauseOptions o;
    o.before_steps = ctx.params->get_int("before_steps");
    o.after_steps = ctx.params->get_int("after_steps");
    o.merge_steps = ctx.params->get_int("merge_steps");
    o.max_wait_ns = ctx.params->get_duration_ns("max_wait");
    o.history_steps = ctx.params->get_int("history_steps");
    if (o.history_steps < o.before_steps + o.after_steps) {
      ctx.fail("history_steps", "history_steps (" + std::to_string(o.history_steps) +
                                    ") must hold the window: at least before_steps + after_steps (" +
                                    std::to_string(o.before_steps + o.after_steps) + ")");
    }
    o.rules = load_rules(ctx.params->get_string("rules"), ctx.params->where("rules"));
    return MakeRootCause(o);
  });
}

}  // namespace runlens::ops
