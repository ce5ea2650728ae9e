// Codecs of the telemetry types for operator state snapshots (docs/state.md,
// runtime/state/codec.h): what an operator keeps between rows may hold
// symbols, contract bodies, run infos, joined steps, alerts and whole rows.
//
// A symbol is written as its text (ids depend on arrival order) and interned
// again on restore. Contract bodies are written as their presence bits and
// then every field of their X-macro list (schema/record.h), in contract
// order: a field added to the contract changes the field count, which a
// reader of an older snapshot rejects.
#pragma once

#include "runtime/state/codec.h"
#include "schema/alert.h"
#include "schema/record.h"

namespace runlens::runtime::state {

template <>
struct Codec<Symbol> {
  static void encode(Writer& w, Symbol s) { w.bytes(s.str()); }
  static void decode(Reader& r, Symbol& s) { s = Symbol::intern(r.bytes()); }
};

template <>
struct Codec<Value> {
  static void encode(Writer& w, const Value& v) { w(v.kind, v.number, v.text); }
  static void decode(Reader& r, Value& v) {
    r(v.kind, v.number, v.text);
    if (v.kind > Value::Kind::kString) r.fail("a value of kind " + std::to_string(static_cast<int>(v.kind)));
  }
};

template <>
struct Codec<RankPlacement> {
  static void encode(Writer& w, const RankPlacement& p) { w(p.rank, p.node, p.gpu, p.gpu_model, p.node_type); }
  static void decode(Reader& r, RankPlacement& p) { r(p.rank, p.node, p.gpu, p.gpu_model, p.node_type); }
};

#define RUNLENS_STATE_FIELD_(T, name, Camel, req) , v.name
#define RUNLENS_STATE_BODY_CODEC_(Struct, LIST)                                                 \
  template <>                                                                                   \
  struct Codec<Struct> {                                                                        \
    static void encode(Writer& w, const Struct& v) { w(v.present LIST(RUNLENS_STATE_FIELD_)); } \
    static void decode(Reader& r, Struct& v) { r(v.present LIST(RUNLENS_STATE_FIELD_)); }       \
  };
RUNLENS_STATE_BODY_CODEC_(RunStart, RUNLENS_RUN_START_FIELDS)
RUNLENS_STATE_BODY_CODEC_(Step, RUNLENS_STEP_FIELDS)
RUNLENS_STATE_BODY_CODEC_(Train, RUNLENS_TRAIN_FIELDS)
RUNLENS_STATE_BODY_CODEC_(Gpu, RUNLENS_GPU_FIELDS)
RUNLENS_STATE_BODY_CODEC_(NodeSample, RUNLENS_NODE_FIELDS)
RUNLENS_STATE_BODY_CODEC_(Collective, RUNLENS_COLLECTIVE_FIELDS)
RUNLENS_STATE_BODY_CODEC_(DataSample, RUNLENS_DATA_FIELDS)
RUNLENS_STATE_BODY_CODEC_(Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
RUNLENS_STATE_BODY_CODEC_(Occurrence, RUNLENS_OCCURRENCE_FIELDS)
RUNLENS_STATE_BODY_CODEC_(RunEnd, RUNLENS_RUN_END_FIELDS)
#undef RUNLENS_STATE_BODY_CODEC_
#undef RUNLENS_STATE_FIELD_

template <>
struct Codec<RunInfo> {
  static void encode(Writer& w, const RunInfo& v) { w(v.start, v.placement); }
  static void decode(Reader& r, RunInfo& v) { r(v.start, v.placement); }
};

template <>
struct Codec<StepRecord> {
  static void encode(Writer& w, const StepRecord& v) {
    w(v.run_id, v.step, v.world_size, v.ranks, v.missing, v.timed_out, v.first_time_ns, v.run, v.work_ms,
      v.ratio_to_median, v.slowest_rank, v.shed);
  }
  static void decode(Reader& r, StepRecord& v) {
    r(v.run_id, v.step, v.world_size, v.ranks, v.missing, v.timed_out, v.first_time_ns, v.run, v.work_ms,
      v.ratio_to_median, v.slowest_rank, v.shed);
  }
};

template <>
struct Codec<TrainMarks::Change> {
  static void encode(Writer& w, const TrainMarks::Change& v) { w(v.before, v.after); }
  static void decode(Reader& r, TrainMarks::Change& v) { r(v.before, v.after); }
};

template <>
struct Codec<TrainMarks> {
  static void encode(Writer& w, const TrainMarks& v) { w(v.run_id, v.step, v.lr, v.loss, v.grad_norm); }
  static void decode(Reader& r, TrainMarks& v) { r(v.run_id, v.step, v.lr, v.loss, v.grad_norm); }
};

template <>
struct Codec<StepStats> {
  template <class Io, class S>
  static void io(Io& x, S& v) {
    x(v.run_id, v.step, v.world_size, v.reported, v.step_ms, v.work_min, v.work_p50, v.work_p95, v.work_p99, v.work_max,
      v.slowest_rank, v.straggler_ratio, v.tokens, v.tokens_per_s, v.mfu, v.data_wait_ratio, v.communication_ratio,
      v.loss, v.val_loss, v.lr, v.grad_norm, v.run, v.shed, v.forward_ms, v.backward_ms, v.optimizer_ms, v.comm_ms,
      v.data_wait_ms);
  }
  static void encode(Writer& w, const StepStats& v) { io(w, v); }
  static void decode(Reader& r, StepStats& v) { io(r, v); }
};

template <>
struct Codec<Evidence> {
  static void encode(Writer& w, const Evidence& v) { w(v.kind, v.step, v.detail, v.alert_id); }
  static void decode(Reader& r, Evidence& v) { r(v.kind, v.step, v.detail, v.alert_id); }
};

template <>
struct Codec<Alert> {
  template <class Io, class A>
  static void io(Io& x, A& a) {
    x(a.alert_id, a.revision, a.kind, a.severity, a.time_ns, a.ends_ns, a.tenant, a.run_id, a.step, a.rank, a.node,
      a.gpu, a.model_id, a.model_version, a.evaluation_id, a.value, a.threshold, a.summary, a.symptom, a.cause, a.owner,
      a.recommendation, a.evidence, a.attrs);
  }
  static void encode(Writer& w, const Alert& a) { io(w, a); }
  static void decode(Reader& r, Alert& a) {
    io(r, a);
    if (a.severity > Severity::kCritical)
      r.fail("an alert of severity " + std::to_string(static_cast<int>(a.severity)));
  }
};

template <>
struct Codec<Record> {
  static void encode(Writer& w, const Record& v) { w(v.time_ns, v.tenant, v.body); }
  static void decode(Reader& r, Record& v) { r(v.time_ns, v.tenant, v.body); }
};

}  // namespace runlens::runtime::state
