#include "schema/record.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "schema/alert.h"
#include "schema/vocabulary.h"

namespace runlens {

bool Value::operator==(const Value& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::kNone:
      return true;
    case Kind::kNumber:
      return std::bit_cast<uint64_t>(number) == std::bit_cast<uint64_t>(o.number);
    case Kind::kString:
      return text == o.text;
  }
  return false;
}

namespace {

constexpr std::string_view strip_underscore(std::string_view s) {
  return !s.empty() && s.back() == '_' ? s.substr(0, s.size() - 1) : s;
}

#define RUNLENS_FIELDINFO_(T, name, Camel, req) FieldInfo{strip_underscore(#name), #Camel, FieldType::k##T, req},
const FieldInfo kRunStartFields[] = {RUNLENS_RUN_START_FIELDS(RUNLENS_FIELDINFO_)};
const FieldInfo kStepFields[] = {RUNLENS_STEP_FIELDS(RUNLENS_FIELDINFO_)};
const FieldInfo kTrainFields[] = {RUNLENS_TRAIN_FIELDS(RUNLENS_FIELDINFO_)};
const FieldInfo kGpuFields[] = {RUNLENS_GPU_FIELDS(RUNLENS_FIELDINFO_)};
const FieldInfo kNodeFields[] = {RUNLENS_NODE_FIELDS(RUNLENS_FIELDINFO_)};
const FieldInfo kCollectiveFields[] = {RUNLENS_COLLECTIVE_FIELDS(RUNLENS_FIELDINFO_)};
const FieldInfo kDataFields[] = {RUNLENS_DATA_FIELDS(RUNLENS_FIELDINFO_)};
const FieldInfo kCheckpointFields[] = {RUNLENS_CHECKPOINT_FIELDS(RUNLENS_FIELDINFO_)};
const FieldInfo kOccurrenceFields[] = {RUNLENS_OCCURRENCE_FIELDS(RUNLENS_FIELDINFO_)};
const FieldInfo kRunEndFields[] = {RUNLENS_RUN_END_FIELDS(RUNLENS_FIELDINFO_)};
#undef RUNLENS_FIELDINFO_

#define RUNLENS_BODYINFO_(K, name, arr) \
  BodyInfo { Kind::K, name, arr, static_cast<int>(std::size(arr)) }
const BodyInfo kBodies[kContractKinds] = {
    RUNLENS_BODYINFO_(kRunStart, "run_start", kRunStartFields),
    RUNLENS_BODYINFO_(kStep, "step", kStepFields),
    RUNLENS_BODYINFO_(kTrain, "train", kTrainFields),
    RUNLENS_BODYINFO_(kGpu, "gpu", kGpuFields),
    RUNLENS_BODYINFO_(kNode, "node", kNodeFields),
    RUNLENS_BODYINFO_(kCollective, "collective", kCollectiveFields),
    RUNLENS_BODYINFO_(kData, "data", kDataFields),
    RUNLENS_BODYINFO_(kCheckpoint, "checkpoint", kCheckpointFields),
    RUNLENS_BODYINFO_(kEvent, "event", kOccurrenceFields),
    RUNLENS_BODYINFO_(kRunEnd, "run_end", kRunEndFields),
};
#undef RUNLENS_BODYINFO_

constexpr std::string_view kKindNames[] = {"run_start",   "step",       "train",      "gpu",        "node",
                                           "collective",  "data",       "checkpoint", "event",      "run_end",
                                           "step_record", "step_stats", "alert",      "train_marks"};
static_assert(std::size(kKindNames) == static_cast<size_t>(Kind::kCount));

// --- content hashing ---------------------------------------------------------
inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
uint64_t hash_of(uint64_t h, int32_t v) { return mix(h, static_cast<uint64_t>(static_cast<int64_t>(v))); }
uint64_t hash_of(uint64_t h, int64_t v) { return mix(h, static_cast<uint64_t>(v)); }
uint64_t hash_of(uint64_t h, double v) { return mix(h, std::bit_cast<uint64_t>(v)); }
uint64_t hash_of(uint64_t h, bool v) { return mix(h, v ? 1 : 2); }
uint64_t hash_of(uint64_t h, Symbol v) { return mix(h, v.text_hash()); }
uint64_t hash_of(uint64_t h, const std::string& v) { return mix(h, fnv1a(v)); }
uint64_t hash_of(uint64_t h, const Value& v) {
  h = mix(h, static_cast<uint64_t>(v.kind));
  if (v.kind == Value::Kind::kNumber) h = hash_of(h, v.number);
  if (v.kind == Value::Kind::kString) h = hash_of(h, v.text);
  return h;
}
uint64_t hash_of(uint64_t h, const ConfigMap& m) {
  for (const auto& [k, v] : m) h = hash_of(hash_of(h, k), v);
  return h;
}
uint64_t hash_of(uint64_t h, const RankList& l) {
  for (const auto& p : l) {
    h = hash_of(hash_of(hash_of(h, p.rank), p.node), p.gpu);
    // Mixed in only when present, so that a list without them hashes as it always did.
    if (!p.gpu_model.empty()) h = hash_of(mix(h, 1), p.gpu_model);
    if (!p.node_type.empty()) h = hash_of(mix(h, 2), p.node_type);
  }
  return h;
}

#define RUNLENS_HASHFIELD_(T, name, Camel, req) \
  if (b.has(B::F::name)) h = hash_of(mix(h, static_cast<uint64_t>(B::F::name) + 1), b.name);
#define RUNLENS_BODY_HASH_(Type, LIST)            \
  uint64_t body_hash(uint64_t h, const Type& b) { \
    using B = Type;                               \
    LIST(RUNLENS_HASHFIELD_)                      \
    return h;                                     \
  }
RUNLENS_BODY_HASH_(RunStart, RUNLENS_RUN_START_FIELDS)
RUNLENS_BODY_HASH_(Step, RUNLENS_STEP_FIELDS)
RUNLENS_BODY_HASH_(Train, RUNLENS_TRAIN_FIELDS)
RUNLENS_BODY_HASH_(Gpu, RUNLENS_GPU_FIELDS)
RUNLENS_BODY_HASH_(NodeSample, RUNLENS_NODE_FIELDS)
RUNLENS_BODY_HASH_(Collective, RUNLENS_COLLECTIVE_FIELDS)
RUNLENS_BODY_HASH_(DataSample, RUNLENS_DATA_FIELDS)
RUNLENS_BODY_HASH_(Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
RUNLENS_BODY_HASH_(Occurrence, RUNLENS_OCCURRENCE_FIELDS)
RUNLENS_BODY_HASH_(RunEnd, RUNLENS_RUN_END_FIELDS)
#undef RUNLENS_BODY_HASH_
#undef RUNLENS_HASHFIELD_

uint64_t body_hash(uint64_t h, const std::shared_ptr<const RunStart>& b) { return body_hash(h, *b); }
uint64_t body_hash(uint64_t h, const std::shared_ptr<const StepRecord>& b) {
  h = hash_of(hash_of(h, b->run_id), b->step);
  for (const Step& s : b->ranks) h = body_hash(h, s);
  for (int32_t m : b->missing) h = hash_of(h, m);
  return h;
}
uint64_t hash_of(uint64_t h, const std::optional<double>& v) { return v ? hash_of(mix(h, 1), *v) : mix(h, 2); }
uint64_t body_hash(uint64_t h, const TrainMarks& b) {
  h = hash_of(hash_of(h, b.run_id), b.step);
  for (const auto* c : {&b.lr, &b.loss, &b.grad_norm})
    h = *c ? hash_of(hash_of(mix(h, 1), (*c)->before), (*c)->after) : mix(h, 2);
  return h;
}
template <class T>
uint64_t hash_opt(uint64_t h, const std::optional<T>& v) {
  return v ? hash_of(mix(h, 1), *v) : mix(h, 2);
}
uint64_t body_hash(uint64_t h, const std::shared_ptr<const StepStats>& b) {
  h = hash_of(hash_of(h, b->run_id), b->step);
  h = hash_of(hash_of(h, b->world_size), b->reported);
  for (double v : {b->step_ms, b->work_min, b->work_p50, b->work_p95, b->work_p99, b->work_max, b->straggler_ratio}) {
    h = hash_of(h, v);
  }
  h = hash_of(hash_of(h, b->slowest_rank), b->tokens);
  for (const auto* v : {&b->tokens_per_s, &b->mfu, &b->data_wait_ratio, &b->communication_ratio, &b->loss, &b->val_loss,
                        &b->lr, &b->grad_norm}) {
    h = hash_of(h, *v);
  }
  return h;
}
// Every field, so that two alerts compare equal in canonical order only when they are equal.
uint64_t body_hash(uint64_t h, const std::shared_ptr<const Alert>& b) {
  const Alert& a = *b;
  h = hash_of(hash_of(hash_of(h, a.alert_id), a.kind), static_cast<int32_t>(a.severity));
  h = hash_of(hash_of(hash_of(h, a.time_ns), a.tenant), a.run_id);
  h = hash_opt(hash_opt(hash_opt(h, a.step), a.rank), a.gpu);
  h = hash_of(h, a.node);
  h = hash_opt(hash_opt(h, a.value), a.threshold);
  for (const std::string* s : {&a.summary, &a.symptom, &a.cause, &a.owner, &a.recommendation}) h = hash_of(h, *s);
  for (const auto& e : a.evidence) h = hash_opt(hash_of(hash_of(h, e.kind), e.detail), e.step);
  for (const auto& [k, v] : a.attrs) h = hash_of(hash_of(h, k), v);
  return h;
}

// --- canonical order -----------------------------------------------------------
template <class T>
int cmp(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

struct Locator {
  Symbol run;
  int64_t step = INT64_MIN;
  int32_t rank = INT32_MIN;
  Symbol node;
  int32_t gpu = INT32_MIN;
  Symbol kind;
};

Locator locate(const Record& r) {
  Locator l;
  std::visit(
      [&](const auto& b) {
        using B = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<B, Step>) {
          l.run = b.run_id, l.step = b.step, l.rank = b.rank;
        } else if constexpr (std::is_same_v<B, Train>) {
          l.run = b.run_id, l.step = b.step, l.rank = b.has(Train::F::rank) ? b.rank : 0;
        } else if constexpr (std::is_same_v<B, Gpu>) {
          l.node = b.node, l.gpu = b.gpu;
        } else if constexpr (std::is_same_v<B, NodeSample>) {
          l.node = b.node;
        } else if constexpr (std::is_same_v<B, Collective> || std::is_same_v<B, DataSample>) {
          l.run = b.run_id, l.rank = b.rank;
          if (b.has(B::F::step)) l.step = b.step;
        } else if constexpr (std::is_same_v<B, Checkpoint>) {
          l.run = b.run_id;
          if (b.has(B::F::step)) l.step = b.step;
        } else if constexpr (std::is_same_v<B, Occurrence>) {
          l.run = b.run_id, l.kind = b.kind, l.node = b.node;
          if (b.has(B::F::step)) l.step = b.step;
          if (b.has(B::F::rank)) l.rank = b.rank;
          if (b.has(B::F::gpu)) l.gpu = b.gpu;
        } else if constexpr (std::is_same_v<B, RunEnd>) {
          l.run = b.run_id;
        } else if constexpr (std::is_same_v<B, TrainMarks>) {
          l.run = b.run_id, l.step = b.step, l.rank = INT32_MAX;  // after the train rows of its step
        } else if constexpr (std::is_same_v<B, std::shared_ptr<const RunStart>>) {
          l.run = b->run_id;
        } else if constexpr (std::is_same_v<B, std::shared_ptr<const StepRecord>> ||
                             std::is_same_v<B, std::shared_ptr<const StepStats>>) {
          l.run = b->run_id, l.step = b->step;
        } else if constexpr (std::is_same_v<B, std::shared_ptr<const Alert>>) {
          l.run = b->run_id, l.node = b->node;
          if (b->step) l.step = *b->step;
          if (b->rank) l.rank = *b->rank;
          if (b->gpu) l.gpu = *b->gpu;
        }
      },
      r.body);
  return l;
}

}  // namespace

uint64_t fnv1a(std::string_view s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string_view kind_name(Kind k) {
  auto i = static_cast<size_t>(k);
  return i < std::size(kKindNames) ? kKindNames[i] : std::string_view("?");
}

bool kind_from_name(std::string_view name, Kind* out) {
  for (size_t i = 0; i < std::size(kKindNames); ++i) {
    if (kKindNames[i] == name) {
      *out = static_cast<Kind>(i);
      return true;
    }
  }
  return false;
}

const BodyInfo& body_info(Kind k) { return kBodies[static_cast<int>(k)]; }

Priority Record::priority() const {
  static const Symbol kXid = Symbol::intern(event_kind::kXid), kOom = Symbol::intern(event_kind::kOom),
                      kNccl = Symbol::intern(event_kind::kNcclTimeout), kExc = Symbol::intern(event_kind::kException),
                      kAbort = Symbol::intern(event_kind::kAbort), kRestart = Symbol::intern(event_kind::kRestart),
                      kConfig = Symbol::intern(event_kind::kConfigChange),
                      kGap = Symbol::intern(event_kind::kTelemetryGap);
  switch (kind()) {
    case Kind::kRunStart:
    case Kind::kRunEnd:
    case Kind::kAlert:
      return Priority::kP0;
    case Kind::kStep:
    case Kind::kStepRecord:
    case Kind::kStepStats:
    case Kind::kTrainMarks:
      return Priority::kP1;
    case Kind::kTrain: {
      const Train& t = as<Train>();
      bool bad = (t.has(Train::F::loss) && !std::isfinite(t.loss)) ||
                 (t.has(Train::F::grad_norm) && !std::isfinite(t.grad_norm)) ||
                 (t.has(Train::F::nan_count) && t.nan_count > 0) || (t.has(Train::F::inf_count) && t.inf_count > 0);
      return bad ? Priority::kP0 : Priority::kP1;
    }
    case Kind::kCheckpoint: {
      const Checkpoint& c = as<Checkpoint>();
      return c.has(Checkpoint::F::ok) && !c.ok ? Priority::kP0 : Priority::kP1;
    }
    case Kind::kGpu: {
      const Gpu& g = as<Gpu>();
      return g.has(Gpu::F::xid) && g.xid != 0 ? Priority::kP0 : Priority::kP2;
    }
    case Kind::kNode:
    case Kind::kCollective:
    case Kind::kData:
      return Priority::kP2;
    case Kind::kEvent: {
      Symbol k = as<Occurrence>().kind;
      if (k == kXid || k == kOom || k == kNccl || k == kExc || k == kAbort || k == kRestart || k == kGap)
        return Priority::kP0;
      if (k == kConfig) return Priority::kP1;
      return Priority::kP3;
    }
    case Kind::kCount:
      break;
  }
  return Priority::kP3;
}

Symbol Record::run_id() const {
  return std::visit(
      [](const auto& b) -> Symbol {
        using B = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<B, Gpu> || std::is_same_v<B, NodeSample>) {
          return Symbol();
        } else if constexpr (std::is_same_v<B, std::shared_ptr<const RunStart>> ||
                             std::is_same_v<B, std::shared_ptr<const StepRecord>> ||
                             std::is_same_v<B, std::shared_ptr<const StepStats>> ||
                             std::is_same_v<B, std::shared_ptr<const Alert>>) {
          return b->run_id;
        } else {
          return b.run_id;
        }
      },
      body);
}

uint64_t content_hash(const Record& r) {
  uint64_t h = mix(static_cast<uint64_t>(r.time_ns), static_cast<uint64_t>(r.kind()));
  h = hash_of(h, r.tenant);
  return std::visit([&](const auto& b) { return body_hash(h, b); }, r.body);
}

// The kind a row sorts with: its own, or the kind of the row it annotates.
size_t order_kind(const Record& r) {
  return r.kind() == Kind::kTrainMarks ? static_cast<size_t>(Kind::kTrain) : r.body.index();
}

int compare_canonical(const Record& a, const Record& b) {
  if (int c = cmp(a.time_ns, b.time_ns)) return c;
  if (int c = cmp(order_kind(a), order_kind(b))) return c;
  // The kinds a fleet sends thousands of at one time (a step of every rank,
  // a sample of every GPU) are ordered by what locate() would give them
  // first; only their ties go on to the whole order below.
  if (a.body.index() == b.body.index()) {
    switch (a.kind()) {
      case Kind::kGpu: {
        const Gpu &x = std::get<Gpu>(a.body), &y = std::get<Gpu>(b.body);
        if (int c = Symbol::compare(x.node, y.node)) return c;
        if (int c = cmp(x.gpu, y.gpu)) return c;
        break;
      }
      case Kind::kNode:
        if (int c = Symbol::compare(std::get<NodeSample>(a.body).node, std::get<NodeSample>(b.body).node)) return c;
        break;
      case Kind::kStep: {
        const Step &x = std::get<Step>(a.body), &y = std::get<Step>(b.body);
        if (int c = Symbol::compare(x.run_id, y.run_id)) return c;
        if (int c = cmp(x.step, y.step)) return c;
        if (int c = cmp(x.rank, y.rank)) return c;
        break;
      }
      default:
        break;
    }
  }
  Locator la = locate(a), lb = locate(b);
  if (int c = Symbol::compare(la.run, lb.run)) return c;
  if (int c = cmp(la.step, lb.step)) return c;
  if (int c = cmp(la.rank, lb.rank)) return c;
  if (int c = Symbol::compare(la.node, lb.node)) return c;
  if (int c = cmp(la.gpu, lb.gpu)) return c;
  if (int c = Symbol::compare(la.kind, lb.kind)) return c;
  if (int c = cmp(a.body.index(), b.body.index())) return c;  // an annotation and its row never tie (rank)
  if (int c = Symbol::compare(a.tenant, b.tenant)) return c;
  return cmp(content_hash(a), content_hash(b));
}

}  // namespace runlens
