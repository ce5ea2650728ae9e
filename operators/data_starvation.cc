#include "operators/data_starvation.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <unordered_map>

#include "operators/median.h"
#include "operators/persistence.h"
#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {
namespace {

struct LatestData {
  Symbol shard;
  double storage_read_ms = NAN;
  int64_t step = -1;
  template <class Io>
  void fields(Io& io) {
    io(shard, storage_read_ms, step);
  }
};

struct RunState {
  Incident incident;
  std::map<int32_t, std::deque<int64_t>> starved;  // rank -> its starved steps in the window
  std::vector<LatestData> data;                    // by rank: its latest data event
  template <class Io>
  void fields(Io& io) {
    io(incident, starved, data);
  }
};

// A restart forgets the run (the binding's default).
class DataStarvation final : public PerRunOperator<DataStarvation, RunState> {
 public:
  // Version 2: an open incident keeps the alert it raised, for its closing revision (ends_ns).
  static constexpr runtime::state::StateType kState{"data_starvation", 2};
  explicit DataStarvation(const DataStarvationOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  void handle(const Record& r, Emitter& out) {
    switch (r.kind()) {
      case Kind::kStepRecord:
        on_step(r, out);
        break;
      case Kind::kData: {
        const DataSample& d = r.as<DataSample>();
        if (!indexable_rank(d.rank)) break;
        RunState& st = state(d.run_id);
        if (st.data.size() <= static_cast<size_t>(d.rank)) st.data.resize(static_cast<size_t>(d.rank) + 1);
        LatestData& l = st.data[static_cast<size_t>(d.rank)];
        if (d.has(DataSample::F::dataset_shard)) l.shard = d.dataset_shard;
        if (d.has(DataSample::F::storage_read_ms)) l.storage_read_ms = d.storage_read_ms;
        if (d.has(DataSample::F::step)) l.step = d.step;
        break;
      }
      case Kind::kRunEnd: {
        // The run's open incident closes with it.
        Symbol run = r.as<RunEnd>().run_id;
        if (auto it = runs_.find(run); it != runs_.end()) it->second.incident.close(r.time_ns, out);
        runs_.erase(run);
        break;
      }
      default:
        break;
    }
  }

 private:
  RunState& state(Symbol run) {
    auto [it, fresh] = runs_.try_emplace(run);
    if (fresh) it->second.incident = Incident(o_.persist_k, o_.persist_n);
    return it->second;
  }

  void on_step(const Record& r, Emitter& out) {
    const StepRecord& rec = r.step_record();
    if (rec.shed) return;  // incomplete by shedding: not judged
    RunState& st = state(rec.run_id);
    const Step* worst = nullptr;
    double worst_ratio = -1;
    for (const Step& s : rec.ranks) {
      // The common case, a fed rank, costs a multiplication and a comparison.
      if (!s.has(Step::F::data_wait_ms) || !(s.step_ms > 0) || !(s.data_wait_ms >= o_.ratio_threshold * s.step_ms))
        continue;
      double ratio = s.data_wait_ms / s.step_ms;
      if (ratio > worst_ratio) worst_ratio = ratio, worst = &s;
      st.starved[s.rank].push_back(rec.step);
    }
    for (auto it = st.starved.begin(); it != st.starved.end();) {
      auto& d = it->second;
      while (!d.empty() && d.front() <= rec.step - o_.persist_n) d.pop_front();
      it = d.empty() ? st.starved.erase(it) : std::next(it);
    }
    bool hit = worst && worst_ratio >= o_.ratio_threshold;
    Incident::Change change = st.incident.observe(rec.step, hit);
    if (change == Incident::Change::kClosed) st.incident.close(r.time_ns, out);
    if (change != Incident::Change::kOpened) return;

    // The starved ranks: persistently, or (when they take turns) at all.
    std::vector<int32_t> ranks;
    for (const auto& [rank, steps] : st.starved) {
      if (static_cast<int64_t>(steps.size()) >= o_.persist_k) ranks.push_back(rank);
    }
    if (ranks.empty()) {
      for (const auto& [rank, steps] : st.starved) ranks.push_back(rank);
    }
    double sum = 0;
    int n = 0;
    for (const Step& s : rec.ranks) {
      if (s.has(Step::F::data_wait_ms) && s.step_ms > 0 && std::isfinite(s.data_wait_ms))
        sum += s.data_wait_ms / s.step_ms, ++n;
    }
    int64_t onset = st.incident.onset();
    Alert a;
    a.kind = alert_kind::kDataStarvation;
    a.severity = Severity::kWarning;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = rec.run_id;
    a.step = rec.step;
    std::string where = locate_rank(a, rec.run.get(), worst->rank);
    a.value = worst_ratio;
    a.threshold = o_.ratio_threshold;
    std::string list;
    for (size_t i = 0; i < ranks.size() && i < 8; ++i) list += (i ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > 8) list += ", ... (" + std::to_string(ranks.size()) + " ranks)";
    a.summary = "DATA STARVATION: " + where + " waits " + fmt_num(worst->data_wait_ms) + " ms for data in a " +
                fmt_num(worst->step_ms) + " ms step (" + fmt_num(100 * worst_ratio) + " %) since step " +
                std::to_string(onset) + "; starved rank" + (ranks.size() == 1 ? " " : "s ") + list;
    a.attrs = {{"data_wait_ms", worst->data_wait_ms},
               {"step_ms", worst->step_ms},
               {"job_data_wait_ratio", n ? sum / n : 0},
               {"starved_ranks", static_cast<double>(ranks.size())},
               {"onset_step", static_cast<double>(onset)}};
    describe_storage(st, worst->rank, a);
    a.alert_id = make_alert_id(a, onset);
    st.incident.raise(std::move(a), out);
  }

  // Names the worst rank's dataset shard and whether its storage reads are slow.
  void describe_storage(const RunState& st, int32_t rank, Alert& a) const {
    if (static_cast<size_t>(rank) >= st.data.size()) return;
    const LatestData& mine = st.data[static_cast<size_t>(rank)];
    std::vector<double> reads;
    for (const LatestData& d : st.data) {
      if (std::isfinite(d.storage_read_ms)) reads.push_back(d.storage_read_ms);
    }
    double median = NAN;
    if (!reads.empty()) {
      auto mid = reads.begin() + static_cast<std::ptrdiff_t>(reads.size() / 2);
      select_nth(reads.begin(), mid, reads.end());
      median = *mid;
    }
    bool slow = std::isfinite(mine.storage_read_ms) && std::isfinite(median) && median > 0 &&
                mine.storage_read_ms >= o_.slow_storage_factor * median;
    std::string shard = mine.shard.empty() ? "" : "dataset shard " + mine.shard.string();
    if (std::isfinite(mine.storage_read_ms)) {
      a.attrs.push_back({"storage_read_ms", mine.storage_read_ms});
      if (std::isfinite(median)) a.attrs.push_back({"storage_read_median_ms", median});
    }
    if (slow) {
      a.summary += ": reading " + (shard.empty() ? std::string("its input") : shard) + ", whose storage reads take " +
                   fmt_num(mine.storage_read_ms) + " ms against a median of " + fmt_num(median) +
                   " ms across ranks (a slow shard or storage)";
    } else if (std::isfinite(mine.storage_read_ms)) {
      a.summary += ": " + (shard.empty() ? std::string("its") : shard + ",") + " storage reads normal (" +
                   fmt_num(mine.storage_read_ms) + " ms), so look at the loader or the host";
    } else if (!shard.empty()) {
      a.summary += ": reading " + shard;
    }
  }

  DataStarvationOptions o_;
};

std::string describe_options(const DataStarvationOptions& o) {
  return "ratio_threshold=" + fmt_num(o.ratio_threshold, "%g") + " persist=" + std::to_string(o.persist_k) + "/" +
         std::to_string(o.persist_n);
}

}  // namespace

std::unique_ptr<OperatorDef> MakeDataStarvation(const DataStarvationOptions& options) {
  return std::make_unique<PerRunDef<DataStarvation, DataStarvationOptions>>(options, &describe_options);
}

void RegisterDataStarvation(Registry& registry) {
  ComponentInfo info;
  info.type = "data_starvation";
  info.role = Role::kOperator;
  info.doc =
      "Per joined step, each rank's data_wait_ratio = data_wait_ms / step_ms; raises `data_starvation` when some "
      "rank is at or above `ratio_threshold` in `persist_k` of the last `persist_n` steps, naming the starved "
      "ranks (the worst with node and GPU) and, from `data` events, the dataset shard it reads and whether its "
      "storage reads are slow against the other ranks'.";
  const DataStarvationOptions defaults;  // each default is written once, in DataStarvationOptions
  info.params = {
      {.name = "ratio_threshold",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.ratio_threshold),
       .doc = "data_wait_ms / step_ms of a rank at or above which the step counts as starved.",
       .min = 0,
       .max = 1},
      {.name = "persist_k",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_k),
       .doc = "Starved steps needed within the window.",
       .min = 1,
       .max = 1e6},
      {.name = "persist_n",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_n),
       .doc = "Window length in steps; also the steps without that re-arm the run.",
       .min = 1,
       .max = 1e6},
      {.name = "slow_storage_factor",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.slow_storage_factor),
       .doc = "A rank's storage_read_ms this many times the run's median names its shard as slow.",
       .min = 1},
  };
  info.accepts = mask(Kind::kStepRecord) | mask(Kind::kData) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    DataStarvationOptions o;
    o.ratio_threshold = ctx.params->get_double("ratio_threshold");
    o.persist_k = ctx.params->get_int("persist_k");
    o.persist_n = ctx.params->get_int("persist_n");
    o.slow_storage_factor = ctx.params->get_double("slow_storage_factor");
    if (o.persist_k > o.persist_n) {
      ctx.fail("persist_k", "persist_k (" + std::to_string(o.persist_k) + ") must not exceed persist_n (" +
                                std::to_string(o.persist_n) + ")");
    }
    return MakeDataStarvation(o);
  });
}

}  // namespace runlens::ops
