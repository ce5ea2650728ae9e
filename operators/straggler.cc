#include "operators/straggler.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "operators/median.h"
#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {

double straggler_work_ms(const Step& s) {
  double w = s.step_ms;
  if (s.has(Step::F::comm_ms) && std::isfinite(s.comm_ms)) w -= s.comm_ms;
  if (s.has(Step::F::data_wait_ms) && std::isfinite(s.data_wait_ms)) w -= s.data_wait_ms;
  return std::max(0.0, w);
}

namespace {
// lgamma() writes the global `signgam`, a data race when partitions on two
// threads call it (TSan found it); lgamma_r returns the same value and keeps
// the sign to itself.
double log_gamma(double x) {
  int sign = 0;
  return ::lgamma_r(x, &sign);
}
}  // namespace

int64_t straggler_required_hits(int64_t persist_k, int64_t n, int64_t ranks, double p, double false_alarm_rate) {
  if (false_alarm_rate <= 0 || n <= 0) return persist_k;
  p = std::clamp(p, 0.0, 1.0);
  // P(X = j) for X ~ Binomial(n, p), j = 0..n, then tails from the top.
  std::vector<double> pmf(static_cast<size_t>(n) + 1);
  for (int64_t j = 0; j <= n; ++j) {
    double c = std::exp(log_gamma(double(n) + 1) - log_gamma(double(j) + 1) - log_gamma(double(n - j) + 1));
    pmf[static_cast<size_t>(j)] = c * std::pow(p, double(j)) * std::pow(1 - p, double(n - j));
  }
  double tail = 0;
  std::vector<double> tail_at(static_cast<size_t>(n) + 2, 0.0);
  for (int64_t j = n; j >= 0; --j) tail_at[static_cast<size_t>(j)] = tail += pmf[static_cast<size_t>(j)];
  for (int64_t k = std::max<int64_t>(persist_k, 1); k < n; ++k) {
    if (double(ranks) * tail_at[static_cast<size_t>(k)] <= false_alarm_rate) return k;
  }
  return std::max(persist_k, n);
}

std::vector<std::vector<int32_t>> straggler_peer_groups(std::vector<std::pair<double, int32_t>> levels, double gap,
                                                        size_t min_group) {
  std::sort(levels.begin(), levels.end());
  const size_t n = levels.size();
  // Candidate cuts (before index i), largest gap first.
  std::vector<std::pair<double, size_t>> cuts;
  for (size_t i = 1; i < n; ++i) {
    double d = levels[i].first - levels[i - 1].first;
    if (d >= std::log(gap)) cuts.emplace_back(d, i);
  }
  std::sort(cuts.begin(), cuts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<size_t> bounds = {0, n};  // sorted segment boundaries
  for (const auto& [d, i] : cuts) {
    auto hi = std::upper_bound(bounds.begin(), bounds.end(), i);
    size_t lo = *std::prev(hi);
    if (i - lo >= min_group && *hi - i >= min_group) bounds.insert(hi, i);
  }
  std::vector<std::vector<int32_t>> groups;
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    std::vector<int32_t> g;
    for (size_t i = bounds[b]; i < bounds[b + 1]; ++i) g.push_back(levels[i].second);
    std::sort(g.begin(), g.end());
    groups.push_back(std::move(g));
  }
  return groups;
}

namespace {

struct RankHistory {
  std::deque<int64_t> slow_steps;  // steps in the window where the rank was slow
  bool flagged = false;
  std::shared_ptr<const Alert> alert;  // raised while flagged: closed when the rank re-arms
  double open_ratio = 0;               // the ratio the incident opened at, or last escalated to
  std::deque<int64_t> escalated;       // steps of the window at escalation_factor x open_ratio or more
  template <class Io>
  void fields(Io& io) {
    io(slow_steps, flagged, alert, open_ratio, escalated);
  }
};

struct RunState {
  std::map<int32_t, RankHistory> ranks;  // only ranks slow recently
  // Isolated slow rank-steps and judged rank-steps, decayed by step: the
  // run's rate of chance slowness (a prior of 1 in 1000 rank-steps first).
  double slow_ew = 1, judged_ew = 1000;
  // Peer groups: the warm-up's log work times by rank, until the groups are
  // settled; then each rank's group (absent: `default_group`, the largest).
  bool grouped = false;
  int64_t warm_steps = 0;
  std::map<int32_t, std::vector<double>> warm;
  std::map<int32_t, int32_t> group_of;
  int32_t groups = 1, default_group = 0;
  template <class Io>
  void fields(Io& io) {
    io(ranks, slow_ew, judged_ew, grouped, warm_steps, warm, group_of, groups, default_group);
  }
};

// "0-15, 24" for sorted ranks.
std::string rank_ranges(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

class Straggler final : public PerRunOperator<Straggler, RunState> {
 public:
  // Version 3: peer groups (the warm-up and each rank's group), escalation (the ratio an incident opened at).
  // Version 2: an open incident keeps the alert it raised, for its closing revision (ends_ns).
  static constexpr runtime::state::StateType kState{"straggler", 3};
  explicit Straggler(const StragglerOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  void handle(const Record& r, Emitter& out) {
    if (r.kind() == Kind::kRunEnd) {
      // The run's flagged ranks close with it (a run_end among its inputs: the source).
      Symbol run = r.as<RunEnd>().run_id;
      if (auto it = runs_.find(run); it != runs_.end()) {
        for (auto& [rank, h] : it->second.ranks) {
          if (h.alert) out.emit(closing_record(*h.alert, r.time_ns));
        }
        runs_.erase(run);
      }
      return;
    }
    if (r.kind() != Kind::kStepRecord) return;
    const StepRecord& rec = r.step_record();
    // Incomplete by shedding: the ranks it lacks may have been the fast ones.
    if (rec.shed || static_cast<int64_t>(rec.ranks.size()) < o_.min_ranks) return;
    work_.clear();
    for (const Step& s : rec.ranks) {
      if (std::isfinite(s.step_ms)) work_.push_back(straggler_work_ms(s));
    }
    if (static_cast<int64_t>(work_.size()) < o_.min_ranks) return;
    const size_t judged = work_.size();
    double median = median_in_place(work_);
    RunState& st = runs_[rec.run_id];
    if (median < o_.min_median_ms) {
      forget_quiet(st, rec, r.time_ns, out);
      return;
    }
    if (!st.grouped && o_.group_steps == 0) st.grouped = true;  // no peer groups
    if (!st.grouped) {
      // The warm-up: each rank's level, then its peer group; nothing is judged yet.
      for (const Step& s : rec.ranks) {
        if (std::isfinite(s.step_ms)) st.warm[s.rank].push_back(std::log(std::max(straggler_work_ms(s), 1e-3)));
      }
      if (++st.warm_steps >= o_.group_steps) settle_groups(st, r, rec, out);
      return;
    }
    group_medians(st, rec, median);
    // Judged against the rate measured before this step.
    int64_t need = straggler_required_hits(o_.persist_k, o_.persist_n, static_cast<int64_t>(judged),
                                           st.slow_ew / st.judged_ew, o_.false_alarm_rate);
    int64_t isolated = 0;
    for (const Step& s : rec.ranks) {
      if (!std::isfinite(s.step_ms)) continue;
      double w = straggler_work_ms(s);
      double peer = group_median_[static_cast<size_t>(group(st, s.rank))];
      double ratio = w / peer;
      if (ratio <= o_.ratio_threshold) continue;
      RankHistory& h = st.ranks[s.rank];
      h.slow_steps.push_back(rec.step);
      trim(h.slow_steps, rec.step);
      int64_t hits = static_cast<int64_t>(h.slow_steps.size());
      if (!h.flagged && hits < o_.persist_k) ++isolated;
      if (!h.flagged && hits >= need && !node_wide(st, rec, s.rank)) {
        h.flagged = true;
        h.open_ratio = ratio;
        h.alert = std::make_shared<const Alert>(make_alert(r, rec, st, s, w, peer, ratio, h.slow_steps.front(), hits));
        out.emit(alert_record(*h.alert));
      } else if (h.alert && ratio >= o_.escalation_factor * h.open_ratio) {
        h.escalated.push_back(rec.step);
        trim(h.escalated, rec.step);
        if (static_cast<int64_t>(h.escalated.size()) >= o_.persist_k) {
          h.alert = std::make_shared<const Alert>(escalate(*h.alert, r, rec, st, s, w, peer, ratio, h.open_ratio));
          h.open_ratio = ratio;
          h.escalated.clear();
          out.emit(alert_record(*h.alert));
        }
      }
    }
    double keep = 1.0 - 1.0 / static_cast<double>(std::max<int64_t>(o_.noise_window, 1));
    st.slow_ew = keep * st.slow_ew + static_cast<double>(isolated);
    st.judged_ew = keep * st.judged_ew + static_cast<double>(judged);
    forget_quiet(st, rec, r.time_ns, out);
  }

 private:
  // Forget ranks with no slow step in the window; re-arm flagged ones,
  // closing their alert (its closing revision, at this step's time).
  void forget_quiet(RunState& st, const StepRecord& rec, int64_t time_ns, Emitter& out) {
    for (auto it = st.ranks.begin(); it != st.ranks.end();) {
      trim(it->second.slow_steps, rec.step);
      trim(it->second.escalated, rec.step);
      if (!it->second.slow_steps.empty()) {
        ++it;
        continue;
      }
      if (it->second.alert) out.emit(closing_record(*it->second.alert, time_ns));
      it = st.ranks.erase(it);
    }
  }

  void trim(std::deque<int64_t>& steps, int64_t step) {
    while (!steps.empty() && steps.front() <= step - o_.persist_n) steps.pop_front();
  }

  int32_t group(const RunState& st, int32_t rank) const {
    auto it = st.group_of.find(rank);
    return it == st.group_of.end() ? st.default_group : it->second;
  }

  // Each group's median work time in this step (the run's where the group has
  // fewer than min_ranks reports in it).
  void group_medians(const RunState& st, const StepRecord& rec, double run_median) {
    group_median_.assign(static_cast<size_t>(st.groups), run_median);
    if (st.groups <= 1) return;
    group_work_.resize(static_cast<size_t>(st.groups));
    for (auto& v : group_work_) v.clear();
    for (const Step& s : rec.ranks) {
      if (std::isfinite(s.step_ms)) group_work_[static_cast<size_t>(group(st, s.rank))].push_back(straggler_work_ms(s));
    }
    for (size_t g = 0; g < group_work_.size(); ++g) {
      if (static_cast<int64_t>(group_work_[g].size()) >= o_.min_ranks)
        group_median_[g] = median_in_place(group_work_[g]);
    }
  }

  // Slow in bursts together with most of its node's ranks: the host's, not
  // the GPU's. The others count when slow in 2 or more steps of the window
  // (not one pause), and it takes 2 of them besides the rank. A rank slow in
  // every step of the window is judged as ever (a whole node slowed for good
  // is its GPUs' stragglers, not silence).
  bool node_wide(const RunState& st, const StepRecord& rec, int32_t rank) const {
    if (o_.node_wide_fraction >= 1 || !rec.run) return false;
    const RankPlacement* p = rec.run->place(rank);
    if (!p || p->node.empty()) return false;
    // Slow in every step of the window: persistent, not the bursts of a busy host.
    if (static_cast<int64_t>(st.ranks.at(rank).slow_steps.size()) >= o_.persist_n) return false;
    int64_t on_node = 0, slow = 1;
    for (const RankPlacement& q : rec.run->placement) {
      if (q.node != p->node) continue;
      ++on_node;
      if (q.rank == rank) continue;
      auto it = st.ranks.find(q.rank);
      slow += it != st.ranks.end() && it->second.slow_steps.size() >= 2;
    }
    return on_node >= 4 && slow >= 3 &&
           static_cast<double>(slow) >= o_.node_wide_fraction * static_cast<double>(on_node);
  }

  // Ends the warm-up: the run's peer groups, by the rank map's GPU models and
  // node types where they differ, else by the gaps between the ranks' levels;
  // one rank_heterogeneity when the groups' levels differ by group_gap or more.
  void settle_groups(RunState& st, const Record& r, const StepRecord& rec, Emitter& out) {
    st.grouped = true;
    std::vector<std::pair<double, int32_t>> levels;
    for (auto& [rank, v] : st.warm) {
      if (!v.empty()) levels.emplace_back(median_in_place(v), rank);
    }
    st.warm.clear();
    const size_t min_group =
        std::max<size_t>(2, static_cast<size_t>(std::ceil(o_.min_group_fraction * static_cast<double>(levels.size()))));
    std::vector<std::vector<int32_t>> groups;
    std::vector<std::string> labels;
    if (rec.run) {
      std::map<std::pair<std::string, std::string>, std::vector<int32_t>> by_label;
      for (const RankPlacement& p : rec.run->placement)
        by_label[{std::string(p.gpu_model.str()), std::string(p.node_type.str())}].push_back(p.rank);
      size_t big = 0;
      for (const auto& [label, ranks] : by_label) big += ranks.size() >= min_group;
      if (big >= 2) {
        for (auto& [label, ranks] : by_label) {
          if (ranks.size() < min_group) continue;  // too few to be a group: judged with the largest
          groups.push_back(ranks);
          std::string words = label.first;
          if (!label.second.empty()) words += (words.empty() ? "" : ", ") + label.second;
          labels.push_back(words);
        }
      }
    }
    if (groups.empty()) groups = straggler_peer_groups(levels, o_.group_gap, min_group);
    if (groups.size() < 2) return;
    // Each group's level (the median of its ranks' levels), fastest first.
    std::map<int32_t, double> level_of;
    for (const auto& [l, rank] : levels) level_of[rank] = l;
    std::vector<double> group_level;
    for (const auto& g : groups) {
      std::vector<double> v;
      for (int32_t rank : g) {
        if (auto it = level_of.find(rank); it != level_of.end()) v.push_back(it->second);
      }
      group_level.push_back(v.empty() ? std::numeric_limits<double>::infinity() : median_in_place(v));
    }
    std::vector<size_t> order(groups.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return group_level[a] < group_level[b]; });
    st.groups = static_cast<int32_t>(groups.size());
    size_t largest = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      for (int32_t rank : groups[order[k]]) st.group_of[rank] = static_cast<int32_t>(k);
      if (groups[order[k]].size() > groups[order[largest]].size()) largest = k;
    }
    st.default_group = static_cast<int32_t>(largest);
    double fast = group_level[order.front()], slow = group_level[order.back()];
    if (!std::isfinite(slow) || std::exp(slow - fast) < o_.group_gap) return;  // labelled groups of one speed
    Alert a;
    a.kind = alert_kind::kRankHeterogeneity;
    a.severity = Severity::kInfo;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = rec.run_id;
    a.step = rec.step;
    a.value = std::exp(slow - fast);
    a.threshold = o_.group_gap;
    std::string parts;
    for (size_t k = 0; k < order.size(); ++k) {
      const auto& g = groups[order[k]];
      std::set<std::string> nodes;
      for (int32_t rank : g) {
        if (const RankPlacement* p = rec.run ? rec.run->place(rank) : nullptr; p && !p->node.empty())
          nodes.insert(std::string(p->node.str()));
      }
      parts += (k ? "; " : "") + std::to_string(g.size()) + " ranks (" + rank_ranges(g) + ")";
      if (!labels.empty()) parts += " on " + labels[order[k]];
      if (!nodes.empty() && nodes.size() <= 4) {
        std::string names;
        for (const auto& n : nodes) names += (names.empty() ? "" : ", ") + n;
        parts += " on " + names;
      } else if (!nodes.empty()) {
        parts += " on " + std::to_string(nodes.size()) + " nodes";
      }
      parts += " at " + fmt_num(std::exp(group_level[order[k]])) + " ms";
      if (k) parts += " (" + fmt_num(std::exp(group_level[order[k]] - fast), "%.2f") + "x)";
    }
    a.summary = "RANK HETEROGENEITY: " + std::to_string(groups.size()) + " speed groups from the start" +
                (labels.empty() ? "" : " (by GPU model and node type)") + ": " + parts +
                "; each rank is judged against its own group";
    a.attrs = {{"groups", static_cast<double>(groups.size())},
               {"ratio", a.value.value_or(0)},
               {"fast_ms", std::exp(fast)},
               {"slow_ms", std::exp(slow)},
               {"fast_ranks", static_cast<double>(groups[order.front()].size())},
               {"slow_ranks", static_cast<double>(groups[order.back()].size())},
               {"by_label", labels.empty() ? 0.0 : 1.0},
               {"onset_step", static_cast<double>(rec.step - st.warm_steps + 1)}};
    a.alert_id = make_alert_id(a, 0);
    out.emit(alert_record(std::move(a)));
  }

  // "a median of 1903 ms", or "its group's median of 4888 ms (16 ranks)".
  std::string median_words(const RunState& st, int32_t rank, double median) const {
    if (st.groups <= 1) return "a median of " + fmt_num(median) + " ms";
    int32_t g = group(st, rank);
    return "its group's median of " + fmt_num(median) + " ms (" +
           std::to_string(group_work_[static_cast<size_t>(g)].size()) + " ranks)";
  }

  Alert make_alert(const Record& r, const StepRecord& rec, const RunState& st, const Step& s, double work,
                   double median, double ratio, int64_t onset, int64_t hits) {
    Alert a;
    a.kind = alert_kind::kStraggler;
    a.severity = Severity::kWarning;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = rec.run_id;
    a.step = rec.step;
    std::string where = locate_rank(a, rec.run.get(), s.rank);
    a.value = ratio;
    a.threshold = o_.ratio_threshold;
    a.summary = "STRAGGLER DETECTED: " + where + " works " + fmt_num(work) + " ms per step against " +
                median_words(st, s.rank, median) + " (" + fmt_num(ratio, "%.2f") + "x) in " + std::to_string(hits) +
                " of the last " + std::to_string(o_.persist_n) + " steps, since step " + std::to_string(onset);
    a.attrs = {
        {"work_ms", work}, {"median_ms", median}, {"step_ms", s.step_ms}, {"onset_step", static_cast<double>(onset)}};
    if (st.groups > 1) a.attrs.emplace_back("group", static_cast<double>(group(st, s.rank)));
    a.alert_id = make_alert_id(a, onset);
    return a;
  }

  // The open incident's next revision: the rank got escalation_factor x slower than it opened at.
  Alert escalate(const Alert& open, const Record& r, const StepRecord& rec, const RunState& st, const Step& s,
                 double work, double median, double ratio, double was) {
    Alert a = open;
    a.revision = open.revision + 1;
    a.time_ns = r.time_ns;
    a.step = rec.step;
    a.value = ratio;
    std::string where = locate_rank(a, rec.run.get(), s.rank);
    double onset = -1;
    for (const auto& [k, v] : open.attrs) {
      if (k == "onset_step") onset = v;
    }
    a.summary = "STRAGGLER ESCALATED: " + where + " works " + fmt_num(work) + " ms per step against " +
                median_words(st, s.rank, median) + " (" + fmt_num(ratio, "%.2f") + "x, up from " +
                fmt_num(was, "%.2f") + "x), slow since step " + fmt_num(onset);
    a.attrs = {{"work_ms", work},     {"median_ms", median}, {"step_ms", s.step_ms},
               {"onset_step", onset}, {"escalation", 1},     {"previous_ratio", was}};
    if (st.groups > 1) a.attrs.emplace_back("group", static_cast<double>(group(st, s.rank)));
    a.alert_id = open.alert_id;
    return a;
  }

  StragglerOptions o_;
  std::vector<double> work_;  // scratch
  std::vector<double> group_median_;
  std::vector<std::vector<double>> group_work_;
};

std::string describe_options(const StragglerOptions& o) {
  return "ratio_threshold=" + fmt_num(o.ratio_threshold, "%g") + " persist=" + std::to_string(o.persist_k) + "/" +
         std::to_string(o.persist_n) + " false_alarm_rate=" + fmt_num(o.false_alarm_rate, "%g") +
         " group_steps=" + std::to_string(o.group_steps) + " group_gap=" + fmt_num(o.group_gap, "%g") +
         " escalation_factor=" + fmt_num(o.escalation_factor, "%g");
}

}  // namespace

std::unique_ptr<OperatorDef> MakeStraggler(const StragglerOptions& options) {
  return std::make_unique<PerRunDef<Straggler, StragglerOptions>>(options, &describe_options);
}

void RegisterStraggler(Registry& registry) {
  ComponentInfo info;
  info.type = "straggler";
  info.role = Role::kOperator;
  info.doc =
      "Per joined step, scores each rank on its own work time (step_ms minus comm_ms and data_wait_ms where "
      "present) against the median rank, and raises `straggler` for a rank slower than `ratio_threshold` x the "
      "median in at least `persist_k` of the last `persist_n` steps, naming its rank, node and GPU. When the run's "
      "measured rate of isolated slow rank-steps would let more than `false_alarm_rate` chance alerts per step "
      "through at persist_k, it requires more slow steps of the window (up to all persist_n). The first `group_steps` "
      "steps form peer groups (by the rank map's GPU models and node types, else by gaps of `group_gap` between the "
      "ranks' levels); a stable difference is one `rank_heterogeneity` (info) and each rank is then judged against "
      "its own group. An open incident that gets `escalation_factor` x worse is published again (`escalation` = 1); "
      "slowness shared by `node_wide_fraction` of a node's ranks is the host's, not a straggler.";
  const StragglerOptions defaults;  // each default is written once, in StragglerOptions
  info.params = {
      {.name = "ratio_threshold",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.ratio_threshold),
       .doc = "Slowest-rank / median-rank work time above which a step counts as slow for that rank.",
       .min = 1.0},
      {.name = "persist_k",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_k),
       .doc = "Slow steps needed within the window to flag a rank.",
       .min = 1,
       .max = 1e6},
      {.name = "persist_n",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.persist_n),
       .doc = "Window length in steps.",
       .min = 1,
       .max = 1e6},
      {.name = "min_ranks",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.min_ranks),
       .doc = "Fewest reporting ranks for a step to be judged.",
       .min = 2},
      {.name = "min_median_ms",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.min_median_ms),
       .doc = "Steps whose median work time is below this are not judged.",
       .min = 0},
      {.name = "false_alarm_rate",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.false_alarm_rate),
       .doc = "Chance alerts per step the persistence rule may let through across the run's ranks, given the run's "
              "measured rate of isolated slow rank-steps; above it, more of the last persist_n steps must be slow (0: "
              "always persist_k).",
       .min = 0,
       .max = 1},
      {.name = "noise_window",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.noise_window),
       .doc = "Steps over which the rate of isolated slow rank-steps is measured (decayed).",
       .min = 1,
       .max = 1e9},
      {.name = "group_steps",
       .type = ParamType::kInt,
       .default_value = runtime::int_text(defaults.group_steps),
       .doc = "Judged steps at a run's start that measure each rank's level and form the peer groups; nothing is "
              "raised during them (0: no peer groups).",
       .min = 0,
       .max = 1e6},
      {.name = "group_gap",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.group_gap),
       .doc = "Ratio between adjacent ranks' levels (sorted) that separates two peer groups, and between the "
              "fastest and slowest groups' levels for a rank_heterogeneity.",
       .min = 1.01},
      {.name = "min_group_fraction",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.min_group_fraction),
       .doc = "Fewest ranks of a peer group, as a share of the run's ranks (and at least 2); fewer slow ranks are "
              "stragglers, not a group.",
       .min = 0,
       .max = 0.5},
      {.name = "escalation_factor",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.escalation_factor),
       .doc = "An open incident whose ratio reaches this many times the ratio it opened at (in persist_k of the last "
              "persist_n steps) is published again: same alert_id, revision + 1, escalation = 1 in attrs.",
       .min = 1.01},
      {.name = "node_wide_fraction",
       .type = ParamType::kDouble,
       .default_value = runtime::number_text(defaults.node_wide_fraction),
       .doc = "Share of a node's ranks (4 or more) slow in the window at once that makes the slowness the host's: "
              "none of them is flagged (1: never).",
       .min = 0.01,
       .max = 1},
  };
  info.accepts = mask(Kind::kStepRecord) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    StragglerOptions o;
    o.ratio_threshold = ctx.params->get_double("ratio_threshold");
    o.persist_k = ctx.params->get_int("persist_k");
    o.persist_n = ctx.params->get_int("persist_n");
    o.min_ranks = ctx.params->get_int("min_ranks");
    o.min_median_ms = ctx.params->get_double("min_median_ms");
    o.false_alarm_rate = ctx.params->get_double("false_alarm_rate");
    o.noise_window = ctx.params->get_int("noise_window");
    o.group_steps = ctx.params->get_int("group_steps");
    o.group_gap = ctx.params->get_double("group_gap");
    o.min_group_fraction = ctx.params->get_double("min_group_fraction");
    o.escalation_factor = ctx.params->get_double("escalation_factor");
    o.node_wide_fraction = ctx.params->get_double("node_wide_fraction");
    if (o.persist_k > o.persist_n)
      ctx.fail("persist_k", "persist_k (" + std::to_string(o.persist_k) + ") must not exceed persist_n (" +
                                std::to_string(o.persist_n) + ")");
    return MakeStraggler(o);
  });
}

}  // namespace runlens::ops
