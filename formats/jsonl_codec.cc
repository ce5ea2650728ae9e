#include "formats/jsonl_codec.h"

#include <cmath>
#include <limits>

#include "formats/json_writer.h"

namespace runlens::jsonl {
namespace {

using json::Value;
using JT = json::Value::Type;

constexpr std::string_view strip_underscore(std::string_view s) {
  return !s.empty() && s.back() == '_' ? s.substr(0, s.size() - 1) : s;
}

std::string got(const Value& v) { return std::string(v.type_name()); }

bool number_of(const Value& v, double* out) {
  if (v.type == JT::kNumber) {
    *out = v.number;
    return true;
  }
  if (v.type == JT::kString) {
    const std::string& s = v.text;
    if (s == "NaN" || s == "nan") return *out = std::numeric_limits<double>::quiet_NaN(), true;
    if (s == "Infinity" || s == "inf") return *out = std::numeric_limits<double>::infinity(), true;
    if (s == "-Infinity" || s == "-inf") return *out = -std::numeric_limits<double>::infinity(), true;
  }
  return false;
}

bool decode_I64(const Value& v, int64_t* out, std::string* why) {
  if (v.type == JT::kNumber && v.integral) return *out = v.integer, true;
  if (v.type == JT::kNumber && std::isfinite(v.number) && v.number == std::floor(v.number) &&
      std::fabs(v.number) < 9.007199254740992e15) {
    return *out = static_cast<int64_t>(v.number), true;
  }
  *why = "expected an integer, got " + (v.type == JT::kNumber ? std::string("a fractional or huge number") : got(v));
  return false;
}
bool decode_I32(const Value& v, int32_t* out, std::string* why) {
  int64_t i;
  if (!decode_I64(v, &i, why)) return false;
  if (i < INT32_MIN || i > INT32_MAX) return *why = "integer out of range", false;
  *out = static_cast<int32_t>(i);
  return true;
}
bool decode_F64(const Value& v, double* out, std::string* why) {
  if (number_of(v, out)) return true;
  *why = "expected a number, got " + got(v);
  return false;
}
bool decode_BOOL(const Value& v, bool* out, std::string* why) {
  if (v.type == JT::kBool) return *out = v.boolean, true;
  *why = "expected true or false, got " + got(v);
  return false;
}
bool decode_SYM(const Value& v, Symbol* out, std::string* why) {
  if (v.type == JT::kString) return *out = Symbol::intern(v.text), true;
  *why = "expected a string, got " + got(v);
  return false;
}
bool decode_STR(const Value& v, std::string* out, std::string* why) {
  if (v.type == JT::kString) return *out = v.text, true;
  *why = "expected a string, got " + got(v);
  return false;
}
bool decode_VALUE(const Value& v, runlens::Value* out, std::string* why) {
  if (v.type == JT::kNumber) return *out = runlens::Value::of(v.number), true;
  if (v.type == JT::kString) return *out = runlens::Value::of(v.text), true;
  if (v.type == JT::kBool) return *out = runlens::Value::of(v.boolean ? 1.0 : 0.0), true;
  *why = "expected a number or a string, got " + got(v);
  return false;
}
bool decode_CONFIG(const Value& v, ConfigMap* out, std::string* why) {
  if (v.type != JT::kObject) return *why = "expected an object of names to numbers or strings, got " + got(v), false;
  out->clear();
  for (const auto& [k, item] : v.members) {
    if (item.type == JT::kNull) continue;
    runlens::Value val;
    if (!decode_VALUE(item, &val, why)) return *why = "key '" + k + "': " + *why, false;
    out->emplace_back(k, std::move(val));
  }
  return true;
}
bool decode_RANKS(const Value& v, RankList* out, std::string* why) {
  if (v.type != JT::kArray) return *why = "expected a list of {rank, node, gpu}, got " + got(v), false;
  out->clear();
  for (size_t i = 0; i < v.items.size(); ++i) {
    const Value& item = v.items[i];
    std::string at = "item " + std::to_string(i) + ": ";
    if (item.type != JT::kObject) return *why = at + "expected an object {rank, node, gpu}", false;
    RankPlacement p;
    const Value* rank = item.find("rank");
    if (!rank) return *why = at + "missing 'rank'", false;
    if (!decode_I32(*rank, &p.rank, why)) return *why = at + "rank: " + *why, false;
    if (const Value* n = item.find("node"); n && n->type != JT::kNull) {
      if (!decode_SYM(*n, &p.node, why)) return *why = at + "node: " + *why, false;
    }
    if (const Value* g = item.find("gpu"); g && g->type != JT::kNull) {
      if (!decode_I32(*g, &p.gpu, why)) return *why = at + "gpu: " + *why, false;
    }
    if (const Value* m = item.find("gpu_model"); m && m->type != JT::kNull) {
      if (!decode_SYM(*m, &p.gpu_model, why)) return *why = at + "gpu_model: " + *why, false;
    }
    if (const Value* t = item.find("node_type"); t && t->type != JT::kNull) {
      if (!decode_SYM(*t, &p.node_type, why)) return *why = at + "node_type: " + *why, false;
    }
    out->push_back(p);
  }
  return true;
}

#define RUNLENS_DECODE_FIELD_(T, name, Camel, req)  \
  if (key == strip_underscore(#name)) {             \
    if (!decode_##T(v, &b.name, why)) return false; \
    b.set_present(B::F::name);                      \
    return true;                                    \
  }
#define RUNLENS_REQUIRED_(T, name, Camel, req)                                      \
  if (req && !b.has(B::F::name)) {                                                  \
    *why = "missing required field '" + std::string(strip_underscore(#name)) + "'"; \
    return false;                                                                   \
  }
#define RUNLENS_CODEC_(Type, LIST)                                                  \
  bool set_field(Type& b, std::string_view key, const Value& v, std::string* why) { \
    using B = Type;                                                                 \
    LIST(RUNLENS_DECODE_FIELD_)                                                     \
    return true; /* unknown fields are ignored (forward compatibility) */           \
  }                                                                                 \
  bool check_required(const Type& b, std::string* why) {                            \
    using B = Type;                                                                 \
    LIST(RUNLENS_REQUIRED_)                                                         \
    return true;                                                                    \
  }
RUNLENS_CODEC_(RunStart, RUNLENS_RUN_START_FIELDS)
RUNLENS_CODEC_(Step, RUNLENS_STEP_FIELDS)
RUNLENS_CODEC_(Train, RUNLENS_TRAIN_FIELDS)
RUNLENS_CODEC_(Gpu, RUNLENS_GPU_FIELDS)
RUNLENS_CODEC_(NodeSample, RUNLENS_NODE_FIELDS)
RUNLENS_CODEC_(Collective, RUNLENS_COLLECTIVE_FIELDS)
RUNLENS_CODEC_(DataSample, RUNLENS_DATA_FIELDS)
RUNLENS_CODEC_(Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
RUNLENS_CODEC_(Occurrence, RUNLENS_OCCURRENCE_FIELDS)
RUNLENS_CODEC_(RunEnd, RUNLENS_RUN_END_FIELDS)
#undef RUNLENS_CODEC_
#undef RUNLENS_REQUIRED_
#undef RUNLENS_DECODE_FIELD_

template <class B>
bool decode_body(const Value& obj, B* b, std::string* why) {
  for (const auto& [key, v] : obj.members) {
    if (key == "type" || key == "time_ns" || key == "tenant" || v.type == JT::kNull) continue;
    std::string inner;
    if (!set_field(*b, key, v, &inner)) {
      *why = "field '" + key + "': " + inner;
      return false;
    }
  }
  return check_required(*b, why);
}

// --- encoding -------------------------------------------------------------------
void enc(json::Writer& w, int32_t v) { w.integer(v); }
void enc(json::Writer& w, int64_t v) { w.integer(v); }
void enc(json::Writer& w, double v) { w.num(v); }
void enc(json::Writer& w, bool v) { w.boolean(v); }
void enc(json::Writer& w, Symbol v) { w.str(v.str()); }
void enc(json::Writer& w, const std::string& v) { w.str(v); }
void enc(json::Writer& w, const runlens::Value& v) {
  if (v.kind == runlens::Value::Kind::kNumber)
    w.num(v.number);
  else if (v.kind == runlens::Value::Kind::kString)
    w.str(v.text);
  else
    w.null();
}
void enc(json::Writer& w, const ConfigMap& m) {
  w.begin_object();
  for (const auto& [k, v] : m) {
    w.key(k);
    enc(w, v);
  }
  w.end_object();
}
void enc(json::Writer& w, const RankList& l) {
  w.begin_array();
  for (const auto& p : l) {
    w.begin_object().key("rank").integer(p.rank);
    if (!p.node.empty()) w.key("node").str(p.node.str());
    if (p.gpu >= 0) w.key("gpu").integer(p.gpu);
    if (!p.gpu_model.empty()) w.key("gpu_model").str(p.gpu_model.str());
    if (!p.node_type.empty()) w.key("node_type").str(p.node_type.str());
    w.end_object();
  }
  w.end_array();
}

#define RUNLENS_ENCODE_FIELD_(T, name, Camel, req) \
  if (b.has(B::F::name)) {                         \
    w.key(strip_underscore(#name));                \
    enc(w, b.name);                                \
  }
#define RUNLENS_ENCODER_(Type, LIST)                 \
  void encode_body(json::Writer& w, const Type& b) { \
    using B = Type;                                  \
    LIST(RUNLENS_ENCODE_FIELD_)                      \
  }
RUNLENS_ENCODER_(RunStart, RUNLENS_RUN_START_FIELDS)
RUNLENS_ENCODER_(Step, RUNLENS_STEP_FIELDS)
RUNLENS_ENCODER_(Train, RUNLENS_TRAIN_FIELDS)
RUNLENS_ENCODER_(Gpu, RUNLENS_GPU_FIELDS)
RUNLENS_ENCODER_(NodeSample, RUNLENS_NODE_FIELDS)
RUNLENS_ENCODER_(Collective, RUNLENS_COLLECTIVE_FIELDS)
RUNLENS_ENCODER_(DataSample, RUNLENS_DATA_FIELDS)
RUNLENS_ENCODER_(Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
RUNLENS_ENCODER_(Occurrence, RUNLENS_OCCURRENCE_FIELDS)
RUNLENS_ENCODER_(RunEnd, RUNLENS_RUN_END_FIELDS)
#undef RUNLENS_ENCODER_
#undef RUNLENS_ENCODE_FIELD_

void encode_body(json::Writer& w, const std::shared_ptr<const RunStart>& b) { encode_body(w, *b); }
void encode_body(json::Writer& w, const std::shared_ptr<const StepRecord>& b) {
  w.key("run_id").str(b->run_id.str());
  w.key("step").integer(b->step);
  w.key("world_size").integer(b->world_size);
  w.key("reported").integer(static_cast<int64_t>(b->ranks.size()));
  w.key("missing").begin_array();
  for (int32_t m : b->missing) w.integer(m);
  w.end_array();
  w.key("timed_out").boolean(b->timed_out);
  if (b->shed) w.key("shed").boolean(true);
}
void encode_body(json::Writer& w, const std::shared_ptr<const StepStats>& b) {
  w.key("run_id").str(b->run_id.str());
  w.key("step").integer(b->step);
  w.key("world_size").integer(b->world_size);
  w.key("reported").integer(b->reported);
  w.key("step_ms").num(b->step_ms);
  w.key("work_min_ms").num(b->work_min);
  w.key("work_p50_ms").num(b->work_p50);
  w.key("work_p95_ms").num(b->work_p95);
  w.key("work_p99_ms").num(b->work_p99);
  w.key("work_max_ms").num(b->work_max);
  w.key("slowest_rank").integer(b->slowest_rank);
  w.key("straggler_ratio").num(b->straggler_ratio);
  if (b->tokens) w.key("tokens").integer(b->tokens);
  auto opt = [&](const char* k, const std::optional<double>& v) {
    if (v) w.key(k).num(*v);
  };
  opt("tokens_per_s", b->tokens_per_s);
  opt("mfu", b->mfu);
  opt("data_wait_ratio", b->data_wait_ratio);
  opt("communication_ratio", b->communication_ratio);
  opt("loss", b->loss);
  opt("val_loss", b->val_loss);
  opt("lr", b->lr);
  opt("grad_norm", b->grad_norm);
  if (b->shed) w.key("shed").boolean(true);
}
void encode_body(json::Writer&, const std::shared_ptr<const Alert>&) {}
void encode_body(json::Writer& w, const TrainMarks& b) {
  w.key("run_id").str(b.run_id.str());
  w.key("step").integer(b.step);
  auto change = [&](const char* k, const std::optional<TrainMarks::Change>& c) {
    if (c) w.key(k).begin_object().key("before").num(c->before).key("after").num(c->after).end_object();
  };
  change("lr", b.lr);
  change("loss", b.loss);
  change("grad_norm", b.grad_norm);
}

}  // namespace

bool decode_record(const json::Value& obj, Record* out, std::string* error) {
  if (obj.type != JT::kObject) {
    *error = "expected a JSON object, got " + got(obj);
    return false;
  }
  const Value* type = obj.find("type");
  if (!type || type->type != JT::kString) {
    *error = type ? "field 'type': expected a string" : "missing required field 'type'";
    return false;
  }
  Kind kind;
  if (!kind_from_name(type->text, &kind) || static_cast<int>(kind) >= kContractKinds) {
    *error = "unknown type '" + type->text + "'";
    return false;
  }
  const Value* t = obj.find("time_ns");
  std::string why;
  if (!t || t->type == JT::kNull) {
    *error = "missing required field 'time_ns'";
    return false;
  }
  if (!decode_I64(*t, &out->time_ns, &why)) {
    *error = "field 'time_ns': " + why;
    return false;
  }
  out->tenant = Symbol();
  if (const Value* tenant = obj.find("tenant"); tenant && tenant->type != JT::kNull) {
    if (!decode_SYM(*tenant, &out->tenant, &why)) {
      *error = "field 'tenant': " + why;
      return false;
    }
  }
  bool ok = false;
  switch (kind) {
    case Kind::kRunStart: {
      auto b = std::make_shared<RunStart>();
      ok = decode_body(obj, b.get(), &why);
      out->body = std::shared_ptr<const RunStart>(std::move(b));
      break;
    }
#define RUNLENS_CASE_(K, B)          \
  case Kind::K: {                    \
    B b;                             \
    ok = decode_body(obj, &b, &why); \
    out->body = std::move(b);        \
    break;                           \
  }
      RUNLENS_CASE_(kStep, Step)
      RUNLENS_CASE_(kTrain, Train)
      RUNLENS_CASE_(kGpu, Gpu)
      RUNLENS_CASE_(kNode, NodeSample)
      RUNLENS_CASE_(kCollective, Collective)
      RUNLENS_CASE_(kData, DataSample)
      RUNLENS_CASE_(kCheckpoint, Checkpoint)
      RUNLENS_CASE_(kEvent, Occurrence)
      RUNLENS_CASE_(kRunEnd, RunEnd)
#undef RUNLENS_CASE_
    default:
      break;
  }
  if (!ok) *error = "type '" + type->text + "': " + why;
  return ok;
}

bool decode_record_dom(std::string_view line, Record* out, std::string* error) {
  json::Value v;
  json::ParseError pe;
  if (!json::parse(line, &v, &pe)) {
    *error = "malformed JSON at column " + std::to_string(pe.offset + 1) + ": " + pe.message;
    return false;
  }
  return decode_record(v, out, error);
}

void encode_record(const Record& r, std::string* out) {
  if (r.kind() == Kind::kAlert) return encode_alert(r.alert(), out);
  json::Writer w(out);
  w.begin_object();
  w.key("type").str(kind_name(r.kind()));
  w.key("time_ns").integer(r.time_ns);
  if (!r.tenant.empty()) w.key("tenant").str(r.tenant.str());
  std::visit([&](const auto& b) { encode_body(w, b); }, r.body);
  w.end_object();
}

std::string encode_record(const Record& r) {
  std::string s;
  encode_record(r, &s);
  return s;
}

void encode_alert(const Alert& a, std::string* out) {
  json::Writer w(out);
  w.begin_object();
  w.key("alert_id").str(a.alert_id);
  w.key("revision").integer(a.revision);
  w.key("kind").str(a.kind);
  w.key("severity").str(severity_name(a.severity));
  w.key("time_ns").integer(a.time_ns);
  if (a.ends_ns) w.key("ends_ns").integer(*a.ends_ns);
  if (!a.tenant.empty()) w.key("tenant").str(a.tenant.str());
  if (!a.run_id.empty()) w.key("run_id").str(a.run_id.str());
  if (a.step) w.key("step").integer(*a.step);
  if (a.rank) w.key("rank").integer(*a.rank);
  if (!a.node.empty()) w.key("node").str(a.node.str());
  if (a.gpu) w.key("gpu").integer(*a.gpu);
  if (!a.model_id.empty()) w.key("model_id").str(a.model_id);
  if (!a.model_version.empty()) w.key("model_version").str(a.model_version);
  if (!a.evaluation_id.empty()) w.key("evaluation_id").str(a.evaluation_id);
  if (a.value) w.key("value").num(*a.value);
  if (a.threshold) w.key("threshold").num(*a.threshold);
  w.key("summary").str(a.summary);
  if (!a.symptom.empty()) w.key("symptom").str(a.symptom);
  if (!a.cause.empty()) w.key("cause").str(a.cause);
  if (!a.owner.empty()) w.key("owner").str(a.owner);
  if (!a.evidence.empty()) {
    w.key("evidence").begin_array();
    for (const auto& e : a.evidence) {
      w.begin_object().key("kind").str(e.kind);
      if (e.step) w.key("step").integer(*e.step);
      w.key("detail").str(e.detail);
      if (!e.alert_id.empty()) w.key("alert_id").str(e.alert_id);
      w.end_object();
    }
    w.end_array();
  }
  if (!a.recommendation.empty()) w.key("recommendation").str(a.recommendation);
  if (!a.attrs.empty()) {
    w.key("attrs").begin_object();
    for (const auto& [k, v] : a.attrs) w.key(k).num(v);
    w.end_object();
  }
  w.end_object();
}

bool decode_alert(std::string_view line, Alert* a, std::string* error) {
  json::Value v;
  json::ParseError pe;
  if (!json::parse(line, &v, &pe)) {
    *error = "malformed JSON at column " + std::to_string(pe.offset + 1) + ": " + pe.message;
    return false;
  }
  if (v.type != JT::kObject) return *error = "expected an object", false;
  *a = Alert();
  std::string why;
  for (const auto& [k, f] : v.members) {
    bool ok = true;
    if (k == "alert_id")
      ok = decode_STR(f, &a->alert_id, &why);
    else if (k == "revision")
      ok = decode_I32(f, &a->revision, &why);
    else if (k == "kind")
      ok = decode_STR(f, &a->kind, &why);
    else if (k == "severity") {
      std::string s;
      ok = decode_STR(f, &s, &why);
      a->severity = s == "critical" ? Severity::kCritical : (s == "info" ? Severity::kInfo : Severity::kWarning);
    } else if (k == "time_ns")
      ok = decode_I64(f, &a->time_ns, &why);
    else if (k == "ends_ns") {
      int64_t e;
      ok = decode_I64(f, &e, &why);
      a->ends_ns = e;
    } else if (k == "tenant")
      ok = decode_SYM(f, &a->tenant, &why);
    else if (k == "run_id")
      ok = decode_SYM(f, &a->run_id, &why);
    else if (k == "step") {
      int64_t s;
      ok = decode_I64(f, &s, &why);
      a->step = s;
    } else if (k == "rank") {
      int32_t s;
      ok = decode_I32(f, &s, &why);
      a->rank = s;
    } else if (k == "node")
      ok = decode_SYM(f, &a->node, &why);
    else if (k == "gpu") {
      int32_t s;
      ok = decode_I32(f, &s, &why);
      a->gpu = s;
    } else if (k == "model_id")
      ok = decode_STR(f, &a->model_id, &why);
    else if (k == "model_version")
      ok = decode_STR(f, &a->model_version, &why);
    else if (k == "evaluation_id")
      ok = decode_STR(f, &a->evaluation_id, &why);
    else if (k == "value") {
      double d;
      ok = decode_F64(f, &d, &why);
      a->value = d;
    } else if (k == "threshold") {
      double d;
      ok = decode_F64(f, &d, &why);
      a->threshold = d;
    } else if (k == "summary")
      ok = decode_STR(f, &a->summary, &why);
    else if (k == "symptom")
      ok = decode_STR(f, &a->symptom, &why);
    else if (k == "cause")
      ok = decode_STR(f, &a->cause, &why);
    else if (k == "owner")
      ok = decode_STR(f, &a->owner, &why);
    else if (k == "recommendation")
      ok = decode_STR(f, &a->recommendation, &why);
    else if (k == "evidence" && f.type == JT::kArray) {
      for (const auto& e : f.items) {
        Evidence ev;
        if (const Value* x = e.find("kind")) decode_STR(*x, &ev.kind, &why);
        if (const Value* x = e.find("step")) {
          int64_t s;
          if (decode_I64(*x, &s, &why)) ev.step = s;
        }
        if (const Value* x = e.find("detail")) decode_STR(*x, &ev.detail, &why);
        if (const Value* x = e.find("alert_id")) decode_STR(*x, &ev.alert_id, &why);
        a->evidence.push_back(std::move(ev));
      }
    } else if (k == "attrs" && f.type == JT::kObject) {
      for (const auto& [ak, av] : f.members) {
        double d;
        if (decode_F64(av, &d, &why)) a->attrs.emplace_back(ak, d);
      }
    }
    if (!ok) return *error = "field '" + k + "': " + why, false;
  }
  if (a->alert_id.empty() || a->kind.empty()) return *error = "missing alert_id or kind", false;
  return true;
}

}  // namespace runlens::jsonl
