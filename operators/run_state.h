// Per-run state owned by the runtime (docs/state.md), bound to Record rows.
//
// An operator partitioned by run (PerRunDef) derives from
// PerRunOperator<Self, Run>: `runs_` holds one `Run` per run, created on first
// use (runtime/state/keyed_state.h), and the operator lists what survives
// between rows in `state_fields(io)` and names it in `kState`, which gives it
// snapshot() and restore():
//
//   class Straggler final : public PerRunOperator<Straggler, RunState> {
//    public:
//     static constexpr runtime::state::StateType kState{"straggler", 1};
//     template <class Io> void state_fields(Io& io) { io(runs_); }
//     void handle(const Record& r, Emitter& out);   // instead of process()
//   };
//
// A `restart` event (the job restarted from a checkpoint) resets the run's
// state before the operator handles the row: by default the run is forgotten
// (its state is created afresh on next use). An operator that keeps part of it
// declares `void on_restart(Symbol run, const Record& event, Emitter& out)`,
// which the binding calls instead. An operator with timers declares
// `void advance(int64_t t, Emitter& out)`, which fires what is due before t:
// the binding calls it before each row (before the restart too), on each
// watermark and, with kEndOfTime, at finish().
#pragma once

#include "operators/operator.h"
#include "runtime/state/keyed_state.h"
#include "runtime/state/snapshot.h"
#include "schema/state_codecs.h"

namespace runlens::ops {

// The event kind that restarts a run.
inline Symbol restart_kind() {
  static const Symbol kRestart = Symbol::intern(event_kind::kRestart);
  return kRestart;
}

// A failure event that stops a run (the P0 event kinds of the SDK's
// PriorityOfEventKind but restart: oom, xid, exception, nccl_timeout, abort).
// Like a run_end, it closes the run's pending windows at its time (docs/alerts.md,
// "A job that stops closes its windows").
inline bool stops_run(const Occurrence& e) {
  static const Symbol kStops[] = {Symbol::intern(event_kind::kOom), Symbol::intern(event_kind::kXid),
                                  Symbol::intern(event_kind::kException), Symbol::intern(event_kind::kNcclTimeout),
                                  Symbol::intern(event_kind::kAbort)};
  if (e.run_id.empty()) return false;
  for (Symbol k : kStops) {
    if (e.kind == k) return true;
  }
  return false;
}

template <class Run>
using RunStates = runtime::state::KeyedState<Symbol, Run>;

template <class Self, class Run>
class PerRunOperator : public runtime::state::Snapshottable<Record, Self> {
 public:
  void process(const Record& r, Emitter& out) final {
    Self& self = static_cast<Self&>(*this);
    if constexpr (requires { self.advance(int64_t{}, out); }) self.advance(r.time_ns, out);
    if (r.kind() == Kind::kEvent) {
      const Occurrence& e = r.as<Occurrence>();
      if (e.kind == restart_kind()) {
        if constexpr (requires { self.on_restart(e.run_id, r, out); })
          self.on_restart(e.run_id, r, out);
        else
          runs_.reset(e.run_id);
      }
    }
    self.handle(r, out);
  }
  void on_watermark(int64_t watermark_ns, Emitter& out) final {
    Self& self = static_cast<Self&>(*this);
    if constexpr (requires { self.advance(int64_t{}, out); }) self.advance(watermark_ns, out);
  }
  void finish(Emitter& out) final {
    Self& self = static_cast<Self&>(*this);
    if constexpr (requires { self.advance(int64_t{}, out); }) self.advance(runtime::kEndOfTime, out);
  }

 protected:
  RunStates<Run> runs_;
};

}  // namespace runlens::ops
