// train_marks: what a run's train series did at each step, for the run's
// timeline (timeline/run_graph.h keeps the marks as entries).
//  - An LR change: the step-to-step factor of the lr series beyond
//    `lr_change_ratio` that also breaks the trend of the step before by as
//    much (so warm-up and decay, a steady factor per step, are not changes).
//  - A loss or gradient-norm jump: a finite value above `jump_ratio` times
//    the previous step's (positive) value.
// One train_marks row per train row that has a mark, at its time (it sorts
// right after that train row: schema/record.h). Only the first train report
// of a step counts (several ranks may report it). A restart (an event of kind
// restart for the run, or for a node the run is placed on) and a second
// run_start of a run start its series again: training may resume from an
// earlier step. Whether a mark is shown is the timeline's call: an LR change
// the run reported itself (a config_change) is not shown twice.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "operators/operator.h"

namespace runlens::ops {

struct TrainMarksOptions {
  double lr_change_ratio = 1.5;
  double jump_ratio = 4.0;
};

// One run's series, as train_marks keeps it: all of its state for the run.
struct TrainSeries {
  bool started = false;                            // a run_start was seen
  std::vector<std::pair<Symbol, int32_t>> placed;  // (node, gpu) of its ranks, until run_end
  int64_t last_step = INT64_MIN;                   // of the last train report read
  std::optional<double> lr1, lr2;                  // the previous LR and the one before
  std::optional<double> loss, grad_norm;           // the previous step's
  void restart() {
    last_step = INT64_MIN;
    lr1.reset(), lr2.reset(), loss.reset(), grad_norm.reset();
  }
  template <class Io>
  void fields(Io& io) {  // docs/state.md
    io(started, placed, last_step, lr1, lr2, loss, grad_norm);
  }
};

// The marks of one train report against the series before it; advances the
// series. nullopt: a repeated step, or nothing to mark.
std::optional<TrainMarks> mark_train(const TrainMarksOptions& o, const Train& t, TrainSeries& s);

void RegisterTrainMarks(Registry& registry);
std::unique_ptr<OperatorDef> MakeTrainMarks(const TrainMarksOptions& options);

}  // namespace runlens::ops
