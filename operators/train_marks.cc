#include "operators/train_marks.h"

#include <cmath>

#include "operators/placement.h"
#include "operators/run_state.h"

namespace runlens::ops {

std::optional<TrainMarks> mark_train(const TrainMarksOptions& o, const Train& t, TrainSeries& s) {
  if (t.step <= s.last_step) return std::nullopt;
  s.last_step = t.step;
  TrainMarks m;
  m.run_id = t.run_id;
  m.step = t.step;
  if (t.has(Train::F::lr) && std::isfinite(t.lr) && t.lr > 0) {
    if (s.lr1 && s.lr2 && *s.lr1 > 0 && *s.lr2 > 0) {
      double step_log = std::log(t.lr / *s.lr1), trend_log = std::log(*s.lr1 / *s.lr2);
      double limit = std::log(o.lr_change_ratio);
      if (std::fabs(step_log) > limit && std::fabs(step_log - trend_log) > limit) m.lr = {*s.lr1, t.lr};
    }
    s.lr2 = s.lr1;
    s.lr1 = t.lr;
  }
  auto jump = [&](bool has, double v, std::optional<double>& prev, std::optional<TrainMarks::Change>& mark) {
    if (!has || !std::isfinite(v)) return;
    if (prev && *prev > 0 && v > o.jump_ratio * *prev) mark = TrainMarks::Change{*prev, v};
    prev = v;
  };
  jump(t.has(Train::F::loss), t.loss, s.loss, m.loss);
  jump(t.has(Train::F::grad_norm), t.grad_norm, s.grad_norm, m.grad_norm);
  if (!m.lr && !m.loss && !m.grad_norm) return std::nullopt;
  return m;
}

namespace {

class TrainMarksOp final : public PerRunOperator<TrainMarksOp, TrainSeries> {
 public:
  static constexpr runtime::state::StateType kState{"train_marks", 1};
  explicit TrainMarksOp(const TrainMarksOptions& o) : o_(o) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  // A restart starts the series again; a node's restart (no run) is one of
  // every run placed there (and on that GPU, when it says).
  void on_restart(Symbol run, const Record& r, Emitter&) {
    if (!run.empty()) {
      runs_[run].restart();
      return;
    }
    const Occurrence& e = r.as<Occurrence>();
    if (e.node.empty()) return;
    int32_t gpu = e.has(Occurrence::F::gpu) ? e.gpu : -1;
    for (auto& [id, s] : runs_) {
      for (const auto& [node, g] : s.placed) {
        if (node == e.node && (gpu < 0 || g == gpu)) {
          s.restart();
          break;
        }
      }
    }
  }

  void handle(const Record& r, Emitter& out) {
    switch (r.kind()) {
      case Kind::kRunStart: {
        const RunStart& rs = r.run_start();
        TrainSeries& s = runs_[rs.run_id];
        if (s.started) s.restart();  // started again
        s.started = true;
        for (const auto& p : rs.ranks) {
          if (p.rank >= 0 && p.rank < rs.world_size && !p.node.empty()) s.placed.emplace_back(p.node, p.gpu);
        }
        break;
      }
      case Kind::kRunEnd: {
        auto it = runs_.find(r.as<RunEnd>().run_id);
        if (it != runs_.end()) it->second.placed.clear();
        break;
      }
      case Kind::kTrain: {
        const Train& t = r.as<Train>();
        if (auto m = mark_train(o_, t, runs_[t.run_id])) {
          Record rec;
          rec.time_ns = r.time_ns;
          rec.tenant = r.tenant;
          rec.body = std::move(*m);
          out.emit(std::move(rec));
        }
        break;
      }
      default:
        break;
    }
  }

 private:
  TrainMarksOptions o_;
};

// Per run, but a node's events (no run) go to every partition: each holds
// the placement of its own runs.
class TrainMarksDef final : public OperatorDef {
 public:
  explicit TrainMarksDef(TrainMarksOptions o) : o_(o) {}
  bool partitioned() const override { return true; }
  std::optional<uint64_t> key(const Record& r) const override {
    Symbol run = r.run_id();
    if (run.empty()) return std::nullopt;
    return run_key(run);
  }
  std::unique_ptr<Operator> open(const runtime::OperatorContext&) const override {
    return std::make_unique<TrainMarksOp>(o_);
  }
  std::string describe() const override {
    return "lr_change_ratio=" + fmt_num(o_.lr_change_ratio, "%g") + " jump_ratio=" + fmt_num(o_.jump_ratio, "%g");
  }

 private:
  TrainMarksOptions o_;
};

}  // namespace

std::unique_ptr<OperatorDef> MakeTrainMarks(const TrainMarksOptions& options) {
  return std::make_unique<TrainMarksDef>(options);
}

void RegisterTrainMarks(Registry& registry) {
  ComponentInfo info;
  info.type = "train_marks";
  info.role = Role::kOperator;
  info.doc =
      "Marks LR changes and loss / gradient-norm jumps in each run's train series (the first report of each "
      "step), as `train_marks` rows at the train row's time, for the timeline sink's lr_change, loss_jump and "
      "grad_norm_jump entries. A restart, or a run started again, starts the series again.";
  info.params = {
      {"lr_change_ratio",
       ParamType::kDouble,
       "1.5",
       "A step-to-step LR factor beyond this (against the previous step's trend) is an LR change.",
       {},
       1.0,
       std::nullopt},
      {"jump_ratio",
       ParamType::kDouble,
       "4",
       "A loss or gradient norm this many times the previous step's is marked as a jump.",
       {},
       1.0,
       std::nullopt},
  };
  info.accepts = mask(Kind::kRunStart) | mask(Kind::kTrain) | mask(Kind::kEvent) | mask(Kind::kRunEnd);
  info.emits = mask(Kind::kTrainMarks);
  registry.add_operator(std::move(info), [](const BuildContext& ctx) {
    TrainMarksOptions o;
    o.lr_change_ratio = ctx.params->get_double("lr_change_ratio");
    o.jump_ratio = ctx.params->get_double("jump_ratio");
    return MakeTrainMarks(o);
  });
}

}  // namespace runlens::ops
