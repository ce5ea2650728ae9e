#include "operators/oom_detect.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <set>
#include <unordered_map>

#include "operators/median.h"
#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {
namespace {

struct DataSeen {
  int64_t step = -1;
  Symbol shard;
  template <class Io>
  void fields(Io& io) {
    io(step, shard);
  }
};

struct RunState {
  std::shared_ptr<const RunInfo> info;
  std::deque<std::shared_ptr<const StepRecord>> history;  // the last joined steps, oldest first
  std::vector<std::array<DataSeen, 2>> data;              // by rank: its last two data events with a shard
  std::set<std::pair<int32_t, int64_t>> raised;           // (rank, step)
  template <class Io>
  void fields(Io& io) {
    io(info, history, data, raised);
  }
};

double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  select_nth(v.begin(), mid, v.end());
  return *mid;
}

class OomDetect final : public PerRunOperator<OomDetect, RunState> {
 public:
  // Version 4: rank entries (run_start, rank maps) carry gpu_model and node_type.
  static constexpr runtime::state::StateType kState{"oom_detect", 4};
  explicit OomDetect(const OomDetectOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  // Step numbers may repeat after a restart: forget the history, keep the
  // rank map (and the OOMs already raised).
  void on_restart(Symbol run, const Record&, Emitter&) {
    auto it = runs_.find(run);
    if (it != runs_.end()) it->second.history.clear(), it->second.data.clear();
  }

  void handle(const Record& r, Emitter& out) {
    static const Symbol kOom = Symbol::intern(event_kind::kOom);
    switch (r.kind()) {
      case Kind::kRunStart:
        runs_[r.run_start().run_id].info = RunInfo::from(r.run_start());
        break;
      case Kind::kRunEnd:
        runs_.erase(r.as<RunEnd>().run_id);
        break;
      case Kind::kStepRecord: {
        auto rec = std::get<std::shared_ptr<const StepRecord>>(r.body);
        RunState& st = runs_[rec->run_id];
        st.history.push_back(std::move(rec));
        while (static_cast<int64_t>(st.history.size()) > o_.history_steps) st.history.pop_front();
        break;
      }
      case Kind::kData: {
        const DataSample& d = r.as<DataSample>();
        if (!d.has(DataSample::F::dataset_shard) || !indexable_rank(d.rank)) break;
        RunState& st = runs_[d.run_id];
        if (st.data.size() <= static_cast<size_t>(d.rank)) st.data.resize(static_cast<size_t>(d.rank) + 1);
        auto& seen = st.data[static_cast<size_t>(d.rank)];
        seen[1] = seen[0];
        seen[0] = DataSeen{d.has(DataSample::F::step) ? d.step : -1, d.dataset_shard};
        break;
      }
      case Kind::kEvent: {
        const Occurrence& e = r.as<Occurrence>();
        if (e.kind == kOom) on_oom(r, e, out);
        break;
      }
      default:
        break;
    }
  }

 private:
  void on_oom(const Record& r, const Occurrence& e, Emitter& out) {
    RunState& st = runs_[e.run_id];
    std::optional<int32_t> rank;
    if (e.has(Occurrence::F::rank)) {
      rank = e.rank;
    } else if (st.info && !e.node.empty() && e.has(Occurrence::F::gpu)) {
      for (const RankPlacement& p : st.info->placement) {
        if (p.node == e.node && p.gpu == e.gpu) rank = p.rank;
      }
    }
    // The rank's recent reports, newest first.
    std::vector<const Step*> mine;
    if (rank) {
      for (auto it = st.history.rbegin(); it != st.history.rend(); ++it) {
        if (const Step* s = rank_report(**it, *rank)) mine.push_back(s);
      }
    }
    std::optional<int64_t> step;
    if (e.has(Occurrence::F::step))
      step = e.step;
    else if (!mine.empty())
      step = mine.front()->step + 1;
    if (rank && step && !st.raised.insert({*rank, *step}).second) return;

    Alert a;
    a.kind = alert_kind::kOom;
    a.severity = Severity::kCritical;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = e.run_id;
    a.step = step;
    std::string who;
    if (rank) {
      who = locate_rank(a, st.info.get(), *rank);
    } else {
      a.node = e.node;
      if (e.has(Occurrence::F::gpu)) a.gpu = e.gpu;
      who = e.node.empty() ? "a rank" : node_gpu_words(a.node, a.gpu);
    }
    a.summary =
        "CUDA OOM: " + who + " ran out of memory" + (step ? " at step " + std::to_string(*step) : std::string());

    // The step that ran out, as far as its reports tell: its own report (rare:
    // the OOM came after it reported), else the rank's last one.
    const Step* at = nullptr;
    for (const Step* s : mine) {
      if (step && s->step == *step) at = s;
    }
    const Step* last = at ? at : (mine.empty() ? nullptr : mine.front());
    std::vector<std::string> facts;
    if (last) {
      std::vector<double> peaks, seqs;
      for (const Step* s : mine) {
        if (s->has(Step::F::mem_peak_bytes)) peaks.push_back(static_cast<double>(s->mem_peak_bytes));
        if (s->has(Step::F::seq_len)) seqs.push_back(static_cast<double>(s->seq_len));
      }
      std::string where = last->step == (step ? *step : -1) ? "" : " at step " + std::to_string(last->step);
      if (last->has(Step::F::mem_peak_bytes)) {
        double peak = static_cast<double>(last->mem_peak_bytes), med = median_of(peaks);
        facts.push_back(
            "memory peak " + fmt_num(peak / 1e9, "%.1f") + " GB" +
            (med > 0 && peak > 1.05 * med ? " (a spike: " + fmt_num(peak / med, "%.2f") + "x its median)" : "") +
            where);
        a.attrs.push_back({"mem_peak_bytes", peak});
        a.attrs.push_back({"mem_peak_median_bytes", med});
      }
      if (last->has(Step::F::mem_reserved_bytes))
        a.attrs.push_back({"mem_reserved_bytes", static_cast<double>(last->mem_reserved_bytes)});
      if (last->has(Step::F::seq_len)) {
        double seq = static_cast<double>(last->seq_len), med = median_of(seqs);
        facts.push_back(
            "sequence length " + std::to_string(last->seq_len) +
            (med > 0 && seq > med ? " (" + fmt_num(seq / med, "%.1f") + "x its median " + fmt_num(med) + ")" : "") +
            where);
        a.attrs.push_back({"seq_len", seq});
        a.attrs.push_back({"seq_len_median", med});
      }
      a.attrs.push_back({"last_step", static_cast<double>(last->step)});
    }
    Symbol shard = shard_of(st, rank, step, last);
    if (!shard.empty()) facts.push_back("dataset shard " + shard.string());
    for (size_t i = 0; i < facts.size(); ++i) a.summary += (i ? ", " : ": ") + facts[i];
    if (!e.message.empty()) a.summary += " (" + e.message + ")";
    a.alert_id = make_alert_id(a, step ? *step : r.time_ns);
    out.emit(alert_record(std::move(a)));
  }

  // The dataset shard of the OOM step: the rank's data event for that step,
  // else its last report's shard, else its latest data event's.
  static Symbol shard_of(const RunState& st, std::optional<int32_t> rank, std::optional<int64_t> step,
                         const Step* last) {
    if (!rank) return Symbol();
    const DataSeen* latest = nullptr;
    if (static_cast<size_t>(*rank) < st.data.size()) {
      for (const DataSeen& d : st.data[static_cast<size_t>(*rank)]) {
        if (d.shard.empty()) continue;
        if (step && d.step == *step) return d.shard;
        if (!latest) latest = &d;
      }
    }
    if (last && last->has(Step::F::dataset_shard)) return last->dataset_shard;
    return latest ? latest->shard : Symbol();
  }

  OomDetectOptions o_;
};

std::string describe_options(const OomDetectOptions& o) { return "history_steps=" + std::to_string(o.history_steps); }

}  // namespace

std::unique_ptr<OperatorDef> MakeOomDetect(const OomDetectOptions& options) {
  return std::make_unique<PerRunDef<OomDetect, OomDetectOptions>>(options, &describe_options);
}

void RegisterOomDetect(Registry& registry) {
  ComponentInfo info;
  info.type = "oom_detect";
  info.role = Role::kOperator;
  info.doc =
      "Raises `oom` (critical) for an `event` of kind oom, correlated to its rank (node, GPU), step, dataset shard "
      "(from the rank's data event for that step) and the rank's latest sequence length and peak memory against "
      "their medians over its last joined steps.";
  const OomDetectOptions defaults;  // each default is written once, in OomDetectOptions
  info.params = {
      {.name = "history_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.history_steps),
       .doc = "Joined steps of a run kept to describe a rank's recent memory and sequence lengths.",
       .min = 1,
       .max = 1e5},
  };
  info.accepts =
      mask(Kind::kRunStart) | mask(Kind::kStepRecord) | mask(Kind::kData) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    OomDetectOptions o;
    o.history_steps = ctx.params->get_int("history_steps");
    return MakeOomDetect(o);
  });
}

}  // namespace runlens::ops
