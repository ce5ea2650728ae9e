#include "formats/capnp_codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

#include "schema/telemetry.capnp.h"

namespace runlens::capnpc {
namespace {

capnp::Text::Reader text(Symbol s) {
  std::string_view v = s.str();  // backed by a std::string: NUL-terminated
  return capnp::Text::Reader(v.empty() ? "" : v.data(), v.size());
}
capnp::Text::Reader text(const std::string& s) { return capnp::Text::Reader(s.c_str(), s.size()); }
std::string_view view(capnp::Text::Reader t) { return std::string_view(t.begin(), t.size()); }

void put_value(wire::Value::Builder b, const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNone:
      b.setNone();
      break;
    case Value::Kind::kNumber:
      b.setNumber(v.number);
      break;
    case Value::Kind::kString:
      b.setText(text(v.text));
      break;
  }
}
Value get_value(wire::Value::Reader r) {
  switch (r.which()) {
    case wire::Value::NUMBER:
      return Value::of(r.getNumber());
    case wire::Value::TEXT:
      return Value::of(std::string(view(r.getText())));
    default:
      return Value{};
  }
}
void put_config(capnp::List<wire::ConfigEntry>::Builder b, const ConfigMap& m) {
  for (size_t i = 0; i < m.size(); ++i) {
    b[i].setKey(text(m[i].first));
    put_value(b[i].initValue(), m[i].second);
  }
}
void get_config(capnp::List<wire::ConfigEntry>::Reader r, ConfigMap* m) {
  m->clear();
  for (auto e : r) m->emplace_back(std::string(view(e.getKey())), get_value(e.getValue()));
}
void put_ranks(capnp::List<wire::RankEntry>::Builder b, const RankList& l) {
  for (size_t i = 0; i < l.size(); ++i) {
    b[i].setRank(l[i].rank);
    b[i].setNode(text(l[i].node));
    b[i].setGpu(l[i].gpu);
    if (!l[i].gpu_model.empty()) b[i].setGpuModel(text(l[i].gpu_model));
    if (!l[i].node_type.empty()) b[i].setNodeType(text(l[i].node_type));
  }
}
void get_ranks(capnp::List<wire::RankEntry>::Reader r, RankList* l) {
  l->clear();
  for (auto e : r) {
    RankPlacement p{e.getRank(), Symbol::intern(view(e.getNode())), e.getGpu()};
    if (e.hasGpuModel()) p.gpu_model = Symbol::intern(view(e.getGpuModel()));
    if (e.hasNodeType()) p.node_type = Symbol::intern(view(e.getNodeType()));
    l->push_back(p);
  }
}

#define ENC_I32(bld, C, v) bld.set##C(v)
#define ENC_I64(bld, C, v) bld.set##C(v)
#define ENC_F64(bld, C, v) bld.set##C(v)
#define ENC_BOOL(bld, C, v) bld.set##C(v)
#define ENC_SYM(bld, C, v) bld.set##C(text(v))
#define ENC_STR(bld, C, v) bld.set##C(text(v))
#define ENC_CONFIG(bld, C, v) put_config(bld.init##C(static_cast<unsigned>(v.size())), v)
#define ENC_RANKS(bld, C, v) put_ranks(bld.init##C(static_cast<unsigned>(v.size())), v)
#define ENC_VALUE(bld, C, v) put_value(bld.init##C(), v)

#define DEC_I32(rd, C, v) v = rd.get##C()
#define DEC_I64(rd, C, v) v = rd.get##C()
#define DEC_F64(rd, C, v) v = rd.get##C()
#define DEC_BOOL(rd, C, v) v = rd.get##C()
#define DEC_SYM(rd, C, v) v = Symbol::intern(view(rd.get##C()))
#define DEC_STR(rd, C, v) v = std::string(view(rd.get##C()))
#define DEC_CONFIG(rd, C, v) get_config(rd.get##C(), &v)
#define DEC_RANKS(rd, C, v) get_ranks(rd.get##C(), &v)
#define DEC_VALUE(rd, C, v) v = get_value(rd.get##C())

#define RUNLENS_ENC_FIELD_(T, name, Camel, req) \
  if (b.has(B::F::name)) ENC_##T(bld, Camel, b.name);
#define RUNLENS_DEC_FIELD_(T, name, Camel, req) \
  if (b.has(B::F::name)) DEC_##T(rd, Camel, b.name);
#define RUNLENS_REQ_FIELD_(T, name, Camel, req) \
  if (req && !b.has(B::F::name)) return "missing required field '" #name "'";

#define RUNLENS_CAPNP_CODEC_(Type, W, LIST)                                       \
  void encode_body(const Type& b, wire::W::Builder bld) {                         \
    using B = Type;                                                               \
    bld.setPresent(b.present);                                                    \
    LIST(RUNLENS_ENC_FIELD_)                                                      \
  }                                                                               \
  const char* decode_body(wire::W::Reader rd, Type* out) {                        \
    using B = Type;                                                               \
    B& b = *out;                                                                  \
    constexpr uint32_t kKnown = (1u << static_cast<unsigned>(B::F::kCount)) - 1u; \
    b.present = rd.getPresent() & kKnown;                                         \
    LIST(RUNLENS_DEC_FIELD_)                                                      \
    LIST(RUNLENS_REQ_FIELD_)                                                      \
    return nullptr;                                                               \
  }
RUNLENS_CAPNP_CODEC_(RunStart, RunStart, RUNLENS_RUN_START_FIELDS)
RUNLENS_CAPNP_CODEC_(Step, Step, RUNLENS_STEP_FIELDS)
RUNLENS_CAPNP_CODEC_(Train, Train, RUNLENS_TRAIN_FIELDS)
RUNLENS_CAPNP_CODEC_(Gpu, Gpu, RUNLENS_GPU_FIELDS)
RUNLENS_CAPNP_CODEC_(NodeSample, Node, RUNLENS_NODE_FIELDS)
RUNLENS_CAPNP_CODEC_(Collective, Collective, RUNLENS_COLLECTIVE_FIELDS)
RUNLENS_CAPNP_CODEC_(DataSample, Data, RUNLENS_DATA_FIELDS)
RUNLENS_CAPNP_CODEC_(Checkpoint, Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
RUNLENS_CAPNP_CODEC_(Occurrence, Occurrence, RUNLENS_OCCURRENCE_FIELDS)
RUNLENS_CAPNP_CODEC_(RunEnd, RunEnd, RUNLENS_RUN_END_FIELDS)

void encode_event(const Record& r, wire::Event::Builder ev) {
  ev.setTimeNs(r.time_ns);
  if (!r.tenant.empty()) ev.setTenant(text(r.tenant));
  switch (r.kind()) {
    case Kind::kRunStart:
      encode_body(r.run_start(), ev.initRunStart());
      break;
    case Kind::kStep:
      encode_body(r.as<Step>(), ev.initStep());
      break;
    case Kind::kTrain:
      encode_body(r.as<Train>(), ev.initTrain());
      break;
    case Kind::kGpu:
      encode_body(r.as<Gpu>(), ev.initGpu());
      break;
    case Kind::kNode:
      encode_body(r.as<NodeSample>(), ev.initNode());
      break;
    case Kind::kCollective:
      encode_body(r.as<Collective>(), ev.initCollective());
      break;
    case Kind::kData:
      encode_body(r.as<DataSample>(), ev.initData());
      break;
    case Kind::kCheckpoint:
      encode_body(r.as<Checkpoint>(), ev.initCheckpoint());
      break;
    case Kind::kEvent:
      encode_body(r.as<Occurrence>(), ev.initEvent());
      break;
    case Kind::kRunEnd:
      encode_body(r.as<RunEnd>(), ev.initRunEnd());
      break;
    default:
      break;
  }
}

// Decodes in place, in the row's own variant: a body is up to 150 bytes.
template <class B, class Rd>
const char* decode_into(Rd rd, Record* r) {
  return decode_body(rd, &r->body.emplace<B>());
}

const char* decode_event(wire::Event::Reader ev, Record* r) {
  r->time_ns = ev.getTimeNs();
  r->tenant = ev.hasTenant() ? Symbol::intern(view(ev.getTenant())) : Symbol();
  switch (ev.which()) {
    case wire::Event::RUN_START: {
      auto b = std::make_shared<RunStart>();
      const char* err = decode_body(ev.getRunStart(), b.get());
      r->body = std::shared_ptr<const RunStart>(std::move(b));
      return err;
    }
    case wire::Event::STEP:
      return decode_into<Step>(ev.getStep(), r);
    case wire::Event::TRAIN:
      return decode_into<Train>(ev.getTrain(), r);
    case wire::Event::GPU:
      return decode_into<Gpu>(ev.getGpu(), r);
    case wire::Event::NODE:
      return decode_into<NodeSample>(ev.getNode(), r);
    case wire::Event::COLLECTIVE:
      return decode_into<Collective>(ev.getCollective(), r);
    case wire::Event::DATA:
      return decode_into<DataSample>(ev.getData(), r);
    case wire::Event::CHECKPOINT:
      return decode_into<Checkpoint>(ev.getCheckpoint(), r);
    case wire::Event::EVENT:
      return decode_into<Occurrence>(ev.getEvent(), r);
    case wire::Event::RUN_END:
      return decode_into<RunEnd>(ev.getRunEnd(), r);
  }
  return "unknown event type (written by a newer schema?)";
}

}  // namespace

std::string encode_batch(const Record* rows, size_t n, const BatchProgress* progress) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += static_cast<int>(rows[i].kind()) < kContractKinds;
  // One segment for the whole batch (a typical event takes 20-30 words): a
  // reader then follows no pointer into another segment, which Cap'n Proto
  // looks up under a lock.
  capnp::MallocMessageBuilder message(static_cast<unsigned>(std::min<size_t>(64 + 40 * count, 1u << 26)));
  auto batch = message.initRoot<wire::Batch>();
  batch.setSchemaVersion(kSchemaVersion);
  if (progress && !progress->producer.empty()) {
    batch.setProducer(text(progress->producer));
    batch.setSeq(progress->seq);
    batch.setWatermarkNs(progress->watermark_ns);
    batch.setFinal(progress->final);
  }
  auto events = batch.initEvents(static_cast<unsigned>(count));
  size_t j = 0;
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<int>(rows[i].kind()) >= kContractKinds) continue;
    encode_event(rows[i], events[static_cast<unsigned>(j++)]);
  }
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

bool decode_batch(const void* data, size_t size, std::vector<Record>* out, std::vector<EventIssue>* issues,
                  std::string* error, BatchProgress* progress) {
  if (progress) *progress = BatchProgress{};
  if (size == 0 || size % sizeof(capnp::word) != 0) {
    *error = "not a Cap'n Proto message (size " + std::to_string(size) + " is not a multiple of 8)";
    return false;
  }
  const size_t first = out->size();  // rows before this batch's
  // FlatArrayMessageReader needs word alignment; copy when the caller's buffer is not.
  kj::Array<capnp::word> aligned;
  const capnp::word* words = reinterpret_cast<const capnp::word*>(data);
  if (reinterpret_cast<uintptr_t>(data) % alignof(capnp::word) != 0) {
    aligned = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
    std::memcpy(aligned.begin(), data, size);
    words = aligned.begin();
  }
  try {
    capnp::ReaderOptions options;
    // Bounded by the message itself: a small message cannot make us walk (or
    // allocate for) more than a few times its own size.
    options.traversalLimitInWords = 8 * (size / sizeof(capnp::word)) + 1024;
    options.nestingLimit = 32;
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words, size / sizeof(capnp::word)), options);
    auto batch = reader.getRoot<wire::Batch>();
    // Version 0 means the field was never set: not a runlens batch. Newer
    // versions are read: fields they add are skipped by Cap'n Proto.
    if (batch.getSchemaVersion() == 0) {
      *error = "not a runlens batch (schemaVersion is 0)";
      return false;
    }
    auto events = batch.getEvents();
    // Every event is a pointer of at least one word: more events than words is a forged count.
    if (events.size() > size / sizeof(capnp::word)) {
      *error = "corrupt Cap'n Proto message: " + std::to_string(events.size()) + " events in " + std::to_string(size) +
               " bytes";
      return false;
    }
    if (progress && batch.hasProducer()) {
      progress->producer = std::string(view(batch.getProducer()));
      if (!progress->producer.empty()) {
        progress->seq = batch.getSeq();
        progress->watermark_ns = batch.getWatermarkNs();
        progress->final = batch.getFinal();
      }
    }
    out->reserve(out->size() + events.size());
    for (unsigned i = 0; i < events.size(); ++i) {
      Record& r = out->emplace_back();  // decoded in place; taken back if it is bad
      const char* err = nullptr;
      try {
        err = decode_event(events[i], &r);
      } catch (const kj::Exception& e) {
        out->pop_back();
        issues->push_back({i, "corrupt event: " + std::string(e.getDescription().cStr())});
        continue;
      }
      if (err) {
        out->pop_back();
        issues->push_back({i, err});
      }
    }
  } catch (const kj::Exception& e) {
    out->resize(first);
    if (progress) *progress = BatchProgress{};
    *error = "corrupt Cap'n Proto message: " + std::string(e.getDescription().cStr());
    return false;
  } catch (const std::exception& e) {
    out->resize(first);
    if (progress) *progress = BatchProgress{};
    *error = std::string("corrupt Cap'n Proto message: ") + e.what();
    return false;
  }
  return true;
}

}  // namespace runlens::capnpc
