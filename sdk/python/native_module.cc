// runlens._native: the C++ emitter for Python, and decode_batch.
//
// Emitter.emit(type, fields) is the one entry the pure-Python layer
// (runlens/__init__.py) calls: it converts a dict of JSONL-named fields into
// the typed C++ payload and never raises: a value that does not convert is
// skipped and counted (stats()["invalid_fields"]), an event without a field
// the contract requires is not sent and is counted (stats()["invalid_events"]). decode_batch reads
// presence by reflection over the schema, independently of the hand-written bits the encoder uses,
// so a round trip in the tests checks the encoder against the schema itself.
#include <capnp/dynamic.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "runlens/sdk.h"
#include "schema/telemetry.capnp.h"

namespace py = pybind11;

namespace runlens::sdk {
namespace {

// Texts made from non-str objects live here until emit has copied them.
using TextStore = std::deque<std::string>;

// Each Assign converts one Python value; false means "not convertible", with
// the Python error cleared. None means "absent" and always succeeds.
bool Assign(std::optional<double>& out, py::handle v, TextStore&) {
  if (v.is_none()) return true;
  const double d = PyFloat_AsDouble(v.ptr());
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  out = d;
  return true;
}

bool AsInt64(py::handle v, int64_t& out) {
  if (PyFloat_Check(v.ptr())) {
    // 512.0 is a fine token count; 0.5 or NaN is not.
    const double d = PyFloat_AS_DOUBLE(v.ptr());
    if (!std::isfinite(d) || d != std::trunc(d) || std::fabs(d) > 9.2e18) return false;
    out = static_cast<int64_t>(d);
    return true;
  }
  PyObject* index = PyNumber_Index(v.ptr());  // int, numpy and torch integers
  if (index == nullptr) {
    PyErr_Clear();
    return false;
  }
  const long long value = PyLong_AsLongLong(index);
  Py_DECREF(index);
  if (value == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  out = value;
  return true;
}

bool Assign(std::optional<int64_t>& out, py::handle v, TextStore&) {
  if (v.is_none()) return true;
  int64_t value;
  if (!AsInt64(v, value)) return false;
  out = value;
  return true;
}

bool Assign(std::optional<int32_t>& out, py::handle v, TextStore&) {
  if (v.is_none()) return true;
  int64_t value;
  if (!AsInt64(v, value) || value < INT32_MIN || value > INT32_MAX) return false;
  out = static_cast<int32_t>(value);
  return true;
}

bool Assign(std::optional<bool>& out, py::handle v, TextStore&) {
  if (v.is_none()) return true;
  const int truth = PyObject_IsTrue(v.ptr());
  if (truth < 0) {
    PyErr_Clear();
    return false;
  }
  out = truth != 0;
  return true;
}

// Points into the str object (alive in the caller's dict for the whole emit)
// or, for other objects, into `store`.
bool AsText(py::handle v, std::string_view& out, TextStore& store) {
  if (PyUnicode_Check(v.ptr())) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(v.ptr(), &size);
    if (data == nullptr) {
      PyErr_Clear();
      return false;
    }
    out = std::string_view(data, static_cast<size_t>(size));
    return true;
  }
  PyObject* text = PyObject_Str(v.ptr());
  if (text == nullptr) {
    PyErr_Clear();
    return false;
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text, &size);
  if (data == nullptr) {
    PyErr_Clear();
    Py_DECREF(text);
    return false;
  }
  out = store.emplace_back(data, static_cast<size_t>(size));
  Py_DECREF(text);
  return true;
}

bool Assign(std::string_view& out, py::handle v, TextStore& store) {
  if (v.is_none()) return true;
  return AsText(v, out, store);
}

bool Assign(int64_t& out, py::handle v, TextStore&) { return !v.is_none() && AsInt64(v, out); }

bool Assign(EventValue& out, py::handle v, TextStore& store) {
  if (v.is_none()) return true;
  if (PyUnicode_Check(v.ptr())) {
    std::string_view text;
    if (!AsText(v, text, store)) return false;
    out = text;
    return true;
  }
  const double d = PyFloat_AsDouble(v.ptr());  // bool, int, float, tensors
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    std::string_view text;
    if (!AsText(v, text, store)) return false;
    out = text;
    return true;
  }
  out = d;
  return true;
}

template <class T>
struct FieldSpec {
  const char* name;
  bool (*assign)(T&, py::handle, TextStore&);
  bool required;
};

template <auto Member, class T>
bool AssignMember(T& obj, py::handle v, TextStore& store) {
  return Assign(obj.*Member, v, store);
}

#define RUNLENS_FIELD(Type, member) \
  FieldSpec<Type> { #member, &AssignMember < &Type::member, Type>, false }
#define RUNLENS_REQUIRED(Type, member) \
  FieldSpec<Type> { #member, &AssignMember < &Type::member, Type>, true }

const std::vector<FieldSpec<Step>> kStepFields = {
    RUNLENS_REQUIRED(Step, step),
    RUNLENS_FIELD(Step, step_ms),
    RUNLENS_FIELD(Step, forward_ms),
    RUNLENS_FIELD(Step, backward_ms),
    RUNLENS_FIELD(Step, optimizer_ms),
    RUNLENS_FIELD(Step, comm_ms),
    RUNLENS_FIELD(Step, data_wait_ms),
    RUNLENS_FIELD(Step, tokens),
    RUNLENS_FIELD(Step, samples),
    RUNLENS_FIELD(Step, seq_len),
    RUNLENS_FIELD(Step, dataset_shard),
    RUNLENS_FIELD(Step, mem_allocated_bytes),
    RUNLENS_FIELD(Step, mem_reserved_bytes),
    RUNLENS_FIELD(Step, mem_peak_bytes),
    RUNLENS_FIELD(Step, time_ns),
};

const std::vector<FieldSpec<Train>> kTrainFields = {
    RUNLENS_REQUIRED(Train, step),    RUNLENS_FIELD(Train, loss),      RUNLENS_FIELD(Train, val_loss),
    RUNLENS_FIELD(Train, lr),         RUNLENS_FIELD(Train, grad_norm), RUNLENS_FIELD(Train, weight_norm),
    RUNLENS_FIELD(Train, loss_scale), RUNLENS_FIELD(Train, nan_count), RUNLENS_FIELD(Train, inf_count),
    RUNLENS_FIELD(Train, time_ns),
};

const std::vector<FieldSpec<Data>> kDataFields = {
    RUNLENS_FIELD(Data, step),
    RUNLENS_FIELD(Data, batch_load_ms),
    RUNLENS_FIELD(Data, decode_ms),
    RUNLENS_FIELD(Data, tokenize_ms),
    RUNLENS_FIELD(Data, prefetch_queue_depth),
    RUNLENS_FIELD(Data, cache_hit_rate),
    RUNLENS_FIELD(Data, storage_read_ms),
    RUNLENS_FIELD(Data, bytes_read),
    RUNLENS_FIELD(Data, dataset_shard),
    RUNLENS_FIELD(Data, dataset_version),
    RUNLENS_FIELD(Data, time_ns),
};

const std::vector<FieldSpec<Collective>> kCollectiveFields = {
    RUNLENS_FIELD(Collective, step),  RUNLENS_FIELD(Collective, op),      RUNLENS_FIELD(Collective, latency_ms),
    RUNLENS_FIELD(Collective, bytes), RUNLENS_FIELD(Collective, time_ns),
};

const std::vector<FieldSpec<Checkpoint>> kCheckpointFields = {
    RUNLENS_FIELD(Checkpoint, checkpoint_id), RUNLENS_FIELD(Checkpoint, step),
    RUNLENS_FIELD(Checkpoint, duration_ms),   RUNLENS_FIELD(Checkpoint, size_bytes),
    RUNLENS_FIELD(Checkpoint, upload_ms),     RUNLENS_FIELD(Checkpoint, ok),
    RUNLENS_FIELD(Checkpoint, uri),           RUNLENS_FIELD(Checkpoint, sha256),
    RUNLENS_FIELD(Checkpoint, time_ns),
};

// `old` and `new` are the JSONL names of Event::old_value / new_value.
const std::vector<FieldSpec<Event>> kEventFields = {
    RUNLENS_REQUIRED(Event, kind),
    RUNLENS_FIELD(Event, step),
    RUNLENS_FIELD(Event, rank),
    RUNLENS_FIELD(Event, node),
    RUNLENS_FIELD(Event, gpu),
    RUNLENS_FIELD(Event, code),
    RUNLENS_FIELD(Event, message),
    RUNLENS_FIELD(Event, key),
    FieldSpec<Event>{"old", &AssignMember<&Event::old_value, Event>, false},
    FieldSpec<Event>{"new", &AssignMember<&Event::new_value, Event>, false},
    RUNLENS_FIELD(Event, time_ns),
};

#undef RUNLENS_FIELD
#undef RUNLENS_REQUIRED

template <class T>
py::tuple FieldNames(const std::vector<FieldSpec<T>>& specs) {
  py::tuple names(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) names[i] = py::str(specs[i].name);
  return names;
}

class PyEmitter {
 public:
  explicit PyEmitter(EmitterOptions options) : emitter_(std::move(options)) {}

  // Never raises: the training loop calls this.
  bool Emit(const std::string& type, py::dict fields) noexcept {
    try {
      if (type == "step") return Fill(kStepFields, fields);
      if (type == "train") return Fill(kTrainFields, fields);
      if (type == "data") return Fill(kDataFields, fields);
      if (type == "collective") return Fill(kCollectiveFields, fields);
      if (type == "checkpoint") return Fill(kCheckpointFields, fields);
      if (type == "event") return Fill(kEventFields, fields);
      invalid_fields_.fetch_add(1, std::memory_order_relaxed);
      return false;
    } catch (...) {
      PyErr_Clear();
      invalid_fields_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  }

  bool Close(double timeout_s, const std::string& status, const std::string& reason) {
    const double ms = std::isfinite(timeout_s) ? std::max(timeout_s, 0.0) * 1000.0 : 0.0;
    py::gil_scoped_release release;  // the exporter may take the whole timeout
    return emitter_.close(std::chrono::milliseconds(static_cast<int64_t>(ms)), status, reason);
  }

  // Emitter::hold_watermark: (hold id, time_ns); id 0 when nothing is held.
  py::tuple HoldWatermark() {
    const auto hold = emitter_.hold_watermark();
    return py::make_tuple(hold.id, hold.time_ns);
  }
  void ReleaseWatermark(uint64_t id) noexcept { emitter_.release_watermark(id); }

  // Test-only (the tests have no other way to drive the C++ emitter from
  // several threads at once, the GIL serializing Python callers): `threads`
  // threads each emit `per_thread` step events, step = thread * per_thread + i,
  // step_ms = step / 2, dataset_shard = "t<thread>". Returns how many were taken.
  uint64_t EmitStepsFromThreads(int threads, int per_thread) {
    py::gil_scoped_release release;
    std::atomic<uint64_t> taken{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::string shard = "t" + std::to_string(t);
        for (int i = 0; i < per_thread; ++i) {
          Step s;
          s.step = int64_t{t} * per_thread + i;
          s.step_ms = static_cast<double>(s.step) / 2;
          s.dataset_shard = shard;
          taken.fetch_add(emitter_.emit(s), std::memory_order_relaxed);
        }
      });
    }
    for (auto& thread : pool) thread.join();
    return taken.load();
  }

  py::dict GetStats() const {
    const Stats s = emitter_.stats();
    auto by_priority = [](const std::array<uint64_t, kPriorities>& v) {
      py::dict d;
      for (size_t i = 0; i < kPriorities; ++i) d[py::str("p" + std::to_string(i))] = v[i];
      return d;
    };
    py::dict d;
    d["emitted"] = by_priority(s.emitted);
    d["dropped"] = by_priority(s.dropped);
    d["sent"] = s.sent;
    d["batches_sent"] = s.batches_sent;
    d["send_retries"] = s.send_retries;
    d["send_errors"] = s.send_errors;
    d["truncated_texts"] = s.truncated_texts;
    d["invalid_fields"] = invalid_fields_.load(std::memory_order_relaxed);
    d["invalid_events"] = s.invalid + invalid_events_.load(std::memory_order_relaxed);
    d["connect_error"] = s.connect_error.empty() ? py::none() : py::cast(s.connect_error);
    d["closed"] = s.closed;
    d["host_sampler"] = s.host_sampler;
    d["host_samples"] = s.host_samples;
    d["host_read_errors"] = s.host_read_errors;
    return d;
  }

 private:
  // The field names as interned Python strings, made once per table: a
  // lookup with them hashes nothing (PyDict_GetItemString would build a new
  // string for every field of every event). Never freed: they live as long
  // as the module.
  template <class T>
  static const std::vector<PyObject*>& Keys(const std::vector<FieldSpec<T>>& specs) {
    static const std::vector<PyObject*> keys = [&] {
      std::vector<PyObject*> k;
      for (const FieldSpec<T>& spec : specs) k.push_back(PyUnicode_InternFromString(spec.name));
      return k;
    }();
    return keys;
  }

  template <class T>
  bool Fill(const std::vector<FieldSpec<T>>& specs, py::dict fields) {
    T value{};
    TextStore store;
    size_t matched = 0;
    bool required_ok = true;
    const std::vector<PyObject*>& keys = Keys(specs);
    for (size_t i = 0; i < specs.size(); ++i) {
      const FieldSpec<T>& spec = specs[i];
      PyObject* item = PyDict_GetItemWithError(fields.ptr(), keys[i]);  // borrowed
      if (item == nullptr) {
        PyErr_Clear();  // a key whose __eq__ raised; treated as absent
        if (spec.required) required_ok = false;
        continue;
      }
      ++matched;
      if (!spec.assign(value, py::handle(item), store)) {
        invalid_fields_.fetch_add(1, std::memory_order_relaxed);
        if (spec.required) required_ok = false;
      } else if (spec.required && py::handle(item).is_none()) {
        required_ok = false;
      }
    }
    // Names that matched nothing are counted too; the Python layer warns.
    if (matched < static_cast<size_t>(PyDict_Size(fields.ptr()))) {
      invalid_fields_.fetch_add(PyDict_Size(fields.ptr()) - matched, std::memory_order_relaxed);
    }
    if (!required_ok) {
      invalid_events_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    return emitter_.emit(value);  // checks the required fields that are optional<> in T
  }

  Emitter emitter_;
  std::atomic<uint64_t> invalid_fields_{0};
  std::atomic<uint64_t> invalid_events_{0};
};

ConfigValue ToConfigValue(py::handle v) {
  if (PyUnicode_Check(v.ptr())) return v.cast<std::string>();
  if (PyBool_Check(v.ptr()) || PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr())) {
    return v.cast<double>();
  }
  return py::str(v).cast<std::string>();
}

std::unique_ptr<PyEmitter> MakeEmitter(std::string endpoint, std::string run_id, int32_t rank, int32_t world_size,
                                       std::string node, std::optional<int32_t> gpu, std::string tenant,
                                       std::optional<py::dict> config, std::string experiment_id, std::string job_id,
                                       std::string model_id, std::string model_version, std::string dataset_version,
                                       std::string code_commit, std::optional<double> gpu_peak_flops,
                                       std::optional<double> model_flops_per_token, std::optional<py::list> ranks,
                                       py::object buffer_capacity, uint32_t batch_size, double flush_interval_ms,
                                       int send_hwm, std::string cluster_id, std::optional<bool> host_samples) {
  EmitterOptions o;
  o.endpoint = std::move(endpoint);
  o.run_id = std::move(run_id);
  o.rank = rank;
  o.world_size = world_size;
  o.node = std::move(node);
  o.gpu = gpu;
  o.tenant = std::move(tenant);
  if (config) {
    for (auto [key, value] : *config) {
      if (value.is_none()) continue;
      o.config.push_back(ConfigEntry{py::str(key).cast<std::string>(), ToConfigValue(value)});
    }
  }
  o.experiment_id = std::move(experiment_id);
  o.job_id = std::move(job_id);
  o.model_id = std::move(model_id);
  o.model_version = std::move(model_version);
  o.dataset_version = std::move(dataset_version);
  o.code_commit = std::move(code_commit);
  o.gpu_peak_flops = gpu_peak_flops;
  o.model_flops_per_token = model_flops_per_token;
  o.cluster_id = std::move(cluster_id);
  if (ranks) {
    for (py::handle entry : *ranks) {
      RankInfo info;
      if (py::isinstance<py::dict>(entry)) {
        py::dict d = py::reinterpret_borrow<py::dict>(entry);
        info.rank = d["rank"].cast<int32_t>();
        info.node = d.contains("node") ? py::str(d["node"]).cast<std::string>() : "";
        info.gpu = d.contains("gpu") ? d["gpu"].cast<int32_t>() : -1;
        if (d.contains("gpu_model") && !d["gpu_model"].is_none()) info.gpu_model = py::str(d["gpu_model"]);
        if (d.contains("node_type") && !d["node_type"].is_none()) info.node_type = py::str(d["node_type"]);
      } else {
        py::sequence t = py::reinterpret_borrow<py::sequence>(entry);
        if (t.size() != 3 && t.size() != 5) {
          throw py::value_error("ranks: each entry is (rank, node, gpu) or (rank, node, gpu, gpu_model, node_type)");
        }
        info.rank = t[0].cast<int32_t>();
        info.node = py::str(t[1]).cast<std::string>();
        info.gpu = t[2].cast<int32_t>();
        if (t.size() == 5 && !t[3].is_none()) info.gpu_model = py::str(t[3]);
        if (t.size() == 5 && !t[4].is_none()) info.node_type = py::str(t[4]);
      }
      o.ranks.push_back(std::move(info));
    }
  }
  if (!buffer_capacity.is_none()) {
    if (PyLong_Check(buffer_capacity.ptr())) {
      o.buffer_capacity.fill(buffer_capacity.cast<uint32_t>());
    } else {
      auto capacities = buffer_capacity.cast<std::vector<uint32_t>>();
      if (capacities.size() != kPriorities) {
        throw py::value_error("buffer_capacity: one number, or four (P0, P1, P2, P3)");
      }
      std::copy(capacities.begin(), capacities.end(), o.buffer_capacity.begin());
    }
  }
  o.batch_size = batch_size;
  if (!(flush_interval_ms >= 1.0)) flush_interval_ms = 1.0;
  o.flush_interval = std::chrono::milliseconds(static_cast<int64_t>(flush_interval_ms));
  o.send_hwm = send_hwm;
  o.host_samples = host_samples;
  return std::make_unique<PyEmitter>(std::move(o));
}

// --- decode_batch ------------------------------------------------------------

std::string SnakeCase(kj::StringPtr camel) {
  std::string out;
  for (char c : camel) {
    if (c >= 'A' && c <= 'Z') {
      out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

py::object ToPython(const capnp::DynamicValue::Reader& value);

// Value: its union member; ConfigEntry lists become {key: value}; any other
// struct without `present` (RankEntry) becomes a dict of all its fields but
// the pointer fields that are not set (RankEntry's optional gpuModel and
// nodeType: absent, not "").
py::object StructToPython(const capnp::DynamicStruct::Reader& s) {
  const auto schema = s.getSchema();
  if (schema.getProto().getId() == capnp::typeId<wire::Value>()) {
    KJ_IF_MAYBE (field, s.which()) {
      if (field->getProto().getName() == "none") return py::none();
      return ToPython(s.get(*field));
    }
    return py::none();
  }
  py::dict d;
  for (auto field : schema.getFields()) {
    if (!s.has(field)) continue;
    d[py::str(SnakeCase(field.getProto().getName()))] = ToPython(s.get(field));
  }
  return d;
}

py::object ToPython(const capnp::DynamicValue::Reader& value) {
  switch (value.getType()) {
    case capnp::DynamicValue::VOID:
      return py::none();
    case capnp::DynamicValue::BOOL:
      return py::bool_(value.as<bool>());
    case capnp::DynamicValue::INT:
      return py::int_(value.as<int64_t>());
    case capnp::DynamicValue::UINT:
      return py::int_(value.as<uint64_t>());
    case capnp::DynamicValue::FLOAT:
      return py::float_(value.as<double>());
    case capnp::DynamicValue::TEXT: {
      auto text = value.as<capnp::Text>();
      return py::str(text.cStr(), text.size());
    }
    case capnp::DynamicValue::DATA: {
      auto data = value.as<capnp::Data>();
      return py::bytes(reinterpret_cast<const char*>(data.begin()), data.size());
    }
    case capnp::DynamicValue::LIST: {
      auto list = value.as<capnp::DynamicList>();
      const auto element = list.getSchema().getElementType();
      if (element.isStruct() && element.asStruct().getProto().getId() == capnp::typeId<wire::ConfigEntry>()) {
        py::dict config;
        for (auto entry : list) {
          auto e = entry.as<capnp::DynamicStruct>();
          config[ToPython(e.get("key"))] = ToPython(e.get("value"));
        }
        return config;
      }
      py::list out;
      for (auto item : list) out.append(ToPython(item));
      return out;
    }
    case capnp::DynamicValue::ENUM:
      return py::int_(value.as<capnp::DynamicEnum>().getRaw());
    case capnp::DynamicValue::STRUCT:
      return StructToPython(value.as<capnp::DynamicStruct>());
    default:
      return py::none();
  }
}

// Body structs: field i after `present` is there when bit i is set.
void BodyToPython(const capnp::DynamicStruct::Reader& body, py::dict& out) {
  auto fields = body.getSchema().getFields();
  const uint32_t present = body.get(fields[0]).as<uint32_t>();
  for (unsigned i = 1; i < fields.size() && i <= 32; ++i) {
    if ((present >> (i - 1) & 1u) == 0) continue;
    out[py::str(SnakeCase(fields[i].getProto().getName()))] = ToPython(body.get(fields[i]));
  }
}

py::list DecodeBatch(py::bytes data) {
  std::string_view bytes = data;
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    throw py::value_error("decode_batch: not a Cap'n Proto message (size " + std::to_string(bytes.size()) +
                          " is not a positive multiple of 8)");
  }
  // Copied so the words are aligned whatever Python's buffer is.
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  py::list events;
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 1ull << 30;
    capnp::FlatArrayMessageReader reader(words, options);
    auto batch = reader.getRoot<wire::Batch>();
    for (auto event : batch.getEvents()) {
      py::dict out;
      auto dynamic = capnp::toDynamic(event);
      KJ_IF_MAYBE (field, dynamic.which()) {
        out["type"] = SnakeCase(field->getProto().getName());
        out["time_ns"] = event.getTimeNs();
        if (event.hasTenant() && event.getTenant().size() != 0) {
          out["tenant"] = std::string(event.getTenant().cStr());
        }
        BodyToPython(dynamic.get(*field).as<capnp::DynamicStruct>(), out);
      } else {
        out["type"] = py::none();  // a body this schema does not know
        out["time_ns"] = event.getTimeNs();
      }
      events.append(out);
    }
  } catch (const kj::Exception& e) {
    throw py::value_error(std::string("decode_batch: ") + e.getDescription().cStr());
  }
  return events;
}

// The batch's producer progress (contract v2): producer, seq, watermark_ns,
// final; producer "" for an old sender's batch.
py::dict DecodeProgress(py::bytes data) {
  std::string_view bytes = data;
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    throw py::value_error("decode_progress: not a Cap'n Proto message (size " + std::to_string(bytes.size()) +
                          " is not a positive multiple of 8)");
  }
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  py::dict out;
  try {
    capnp::FlatArrayMessageReader reader(words);
    auto batch = reader.getRoot<wire::Batch>();
    out["producer"] = std::string(batch.getProducer().cStr());
    out["seq"] = batch.getSeq();
    out["watermark_ns"] = batch.getWatermarkNs();
    out["final"] = batch.getFinal();
  } catch (const kj::Exception& e) {
    throw py::value_error(std::string("decode_progress: ") + e.getDescription().cStr());
  }
  return out;
}

}  // namespace
}  // namespace runlens::sdk

PYBIND11_MODULE(_native, m) {
  using namespace runlens::sdk;
  m.doc() = "runlens SDK native core: the C++ Emitter and decode_batch.";

  py::class_<PyEmitter>(m, "Emitter")
      .def(py::init(&MakeEmitter), py::arg("endpoint"), py::arg("run_id"), py::arg("rank") = 0,
           py::arg("world_size") = 1, py::arg("node") = "", py::arg("gpu") = py::none(), py::arg("tenant") = "",
           py::arg("config") = py::none(), py::arg("experiment_id") = "", py::arg("job_id") = "",
           py::arg("model_id") = "", py::arg("model_version") = "", py::arg("dataset_version") = "",
           py::arg("code_commit") = "", py::arg("gpu_peak_flops") = py::none(),
           py::arg("model_flops_per_token") = py::none(), py::arg("ranks") = py::none(),
           py::arg("buffer_capacity") = py::none(), py::arg("batch_size") = 256, py::arg("flush_interval_ms") = 50.0,
           py::arg("send_hwm") = 64, py::arg("cluster_id") = "", py::arg("host_samples") = py::none())
      .def("emit", &PyEmitter::Emit, py::arg("type"), py::arg("fields"),
           "Queue one event; True when taken, False when dropped or invalid. Never raises.")
      .def("close", &PyEmitter::Close, py::arg("timeout_s"), py::arg("status") = "completed", py::arg("reason") = "")
      .def("stats", &PyEmitter::GetStats)
      .def("hold_watermark", &PyEmitter::HoldWatermark,
           "Hold the emitter's watermark at now until released; returns (hold, time_ns).")
      .def("release_watermark", &PyEmitter::ReleaseWatermark, py::arg("hold"))
      .def("_emit_steps_from_threads", &PyEmitter::EmitStepsFromThreads, py::arg("threads"), py::arg("per_thread"));

  m.def("decode_batch", &DecodeBatch, py::arg("data"),
        "Decode one Batch message into a list of dicts with JSONL contract names.");
  m.def("decode_progress", &DecodeProgress, py::arg("data"),
        "The producer progress of one Batch message: producer, seq, watermark_ns, final.");

  py::dict fields;
  fields["step"] = FieldNames(kStepFields);
  fields["train"] = FieldNames(kTrainFields);
  fields["data"] = FieldNames(kDataFields);
  fields["collective"] = FieldNames(kCollectiveFields);
  fields["checkpoint"] = FieldNames(kCheckpointFields);
  fields["event"] = FieldNames(kEventFields);
  m.attr("FIELDS") = fields;
  m.attr("SCHEMA_VERSION") = runlens::wire::SCHEMA_VERSION;
}
