#include "eval/wire/wire.h"

#include <cmath>
#include <limits>

#include "eval/metric.h"
#include "eval/suite.h"
#include "formats/canonical_json.h"
#include "formats/json_reader.h"
#include "formats/json_writer.h"

namespace runlens::eval::wire {

std::string_view ack_outcome_name(AckOutcome o) {
  switch (o) {
    case AckOutcome::kAccepted:
      return "accepted";
    case AckOutcome::kDuplicate:
      return "duplicate";
    case AckOutcome::kRejected:
      return "rejected";
  }
  return "?";
}

// --- encoding ------------------------------------------------------------------------

namespace {

void libraries(json::Writer& w, const Libraries& libs) {
  w.begin_object();
  for (const auto& [k, v] : libs) w.key(k).str(v);
  w.end_object();
}

void strings(json::Writer& w, const std::vector<std::string>& v) {
  w.begin_array();
  for (const auto& s : v) w.str(s);
  w.end_array();
}

// Appends a JSON text that is known to be an object (canonical JSON from a suite), or {} when empty.
void raw_object(json::Writer& w, std::string* out, const std::string& text) {
  w.str("");  // writes the separator and a placeholder ""
  out->resize(out->size() - 2);
  out->append(text.empty() ? "{}" : text);
}

}  // namespace

std::string encode(const Hello& m) {
  std::string s;
  json::Writer w(&s);
  w.begin_object().key("type").str("hello").key("protocol").integer(m.protocol).key("worker").str(m.worker);
  w.key("pool").str(m.pool).key("memoryMib").integer(m.memory_mib).key("slots").integer(m.slots);
  w.key("workerVersion").str(m.worker_version).key("codeCommit").str(m.code_commit).key("libraries");
  libraries(w, m.libraries);
  w.key("evaluators");
  strings(w, m.evaluators);
  w.end_object();
  return s;
}

std::string encode(const Heartbeat& m) {
  std::string s;
  json::Writer w(&s);
  w.begin_object().key("type").str("heartbeat").key("worker").str(m.worker);
  if (m.has_loaded) {
    w.key("loaded");
    strings(w, m.loaded);
  }
  w.end_object();
  return s;
}

std::string encode(const Result& m) {
  std::string s;
  s.reserve(128 + m.items.size() * (160 + 12 * static_cast<size_t>(m.stats_per_item)));
  json::Writer w(&s);
  w.begin_object().key("type").str("result").key("worker").str(m.worker).key("evaluationId").str(m.evaluation_id);
  w.key("shard").integer(m.shard).key("attempt").integer(m.attempt).key("items").begin_array();
  const size_t per = m.items.empty() ? 0 : m.stats.size() / m.items.size();
  for (size_t i = 0; i < m.items.size(); ++i) {
    const ResultItem& it = m.items[i];
    w.begin_object().key("item").integer(it.item).key("itemHash").str(it.item_hash).key("stats").begin_array();
    for (size_t j = 0; j < per; ++j) w.num(m.stats[i * per + j]);
    w.end_array().key("responseHash").str(it.response_hash).key("latencyMs").num(it.latency_ms);
    w.key("error").str(it.error).end_object();
  }
  w.end_array().key("provenance").begin_object();
  w.key("workerVersion").str(m.provenance.worker_version).key("codeCommit").str(m.provenance.code_commit);
  w.key("libraries");
  libraries(w, m.provenance.libraries);
  w.end_object().end_object();
  return s;
}

std::string encode(const Fail& m) {
  std::string s;
  json::Writer w(&s);
  w.begin_object().key("type").str("fail").key("worker").str(m.worker).key("evaluationId").str(m.evaluation_id);
  w.key("shard").integer(m.shard).key("attempt").integer(m.attempt).key("reason").str(m.reason);
  w.key("retryable").boolean(m.retryable).end_object();
  return s;
}

std::string encode(const Bye& m) {
  std::string s;
  json::Writer(&s).begin_object().key("type").str("bye").key("worker").str(m.worker).end_object();
  return s;
}

std::string encode(const Welcome& m) {
  std::string s;
  json::Writer(&s)
      .begin_object()
      .key("type")
      .str("welcome")
      .key("protocol")
      .integer(m.protocol)
      .key("heartbeatMs")
      .integer(m.heartbeat_ms)
      .key("timeoutMs")
      .integer(m.timeout_ms)
      .end_object();
  return s;
}

std::string encode(const Reregister& m) {
  std::string s;
  json::Writer(&s).begin_object().key("type").str("reregister").key("reason").str(m.reason).end_object();
  return s;
}

std::string encode(const Assign& m) {
  std::string s;
  s.reserve(1024);
  json::Writer w(&s);
  w.begin_object().key("type").str("assign").key("evaluationId").str(m.evaluation_id);
  w.key("shard").integer(m.shard).key("attempt").integer(m.attempt);
  w.key("items").begin_array().integer(m.begin).integer(m.end).end_array();
  w.key("modelVersion").str(m.model_version);
  w.key("checkpoint").begin_object().key("id").str(m.checkpoint.id).key("uri").str(m.checkpoint.uri);
  w.key("sha256").str(m.checkpoint.sha256).end_object();
  const SuiteInfo& su = m.suite;
  w.key("suite").begin_object().key("name").str(su.name).key("benchmark").str(su.benchmark);
  w.key("version").str(su.version).key("evaluator").str(su.evaluator);
  const DatasetInfo& d = su.dataset;
  w.key("dataset").begin_object().key("id").str(d.id).key("version").str(d.version).key("sha256").str(d.sha256);
  w.key("path").str(d.path).key("firstItem").integer(d.first_item).key("items").integer(d.items).end_object();
  w.key("prompt").begin_object().key("template").str(su.prompt.template_text).key("version").str(su.prompt.version);
  w.key("sha256").str(su.prompt.sha256).end_object();
  w.key("decoding");
  raw_object(w, &s, su.decoding_json);
  w.key("judge");
  if (!su.judge) {
    w.null();
  } else {
    const JudgeInfo& j = *su.judge;
    w.begin_object().key("model").str(j.model).key("version").str(j.version).key("prompt").str(j.prompt);
    w.key("promptVersion").str(j.prompt_version).key("rubricVersion").str(j.rubric_version).key("criteria");
    strings(w, j.criteria);
    w.key("scale").begin_array().num(j.scale_lo).num(j.scale_hi).end_array();
    w.key("temperature").num(j.temperature).key("sampling");
    raw_object(w, &s, j.sampling_json);
    w.end_object();
  }
  w.end_object();
  w.key("metrics").begin_array();
  for (const MetricInfo& mi : m.metrics) {
    w.begin_object().key("name").str(mi.name).key("args").begin_object();
    for (const auto& [k, v] : mi.args) {
      w.key(k);
      if (v == "true" || v == "false")
        w.boolean(v == "true");
      else
        w.str(v);
    }
    w.end_object().key("k").begin_array();
    for (int64_t k : mi.k) w.integer(k);
    w.end_array().key("stats").integer(mi.stats).end_object();
  }
  w.end_array().key("stride").integer(m.stride).end_object();
  return s;
}

std::string encode(const Ack& m) {
  std::string s;
  json::Writer w(&s);
  w.begin_object().key("type").str("ack").key("evaluationId").str(m.evaluation_id).key("shard").integer(m.shard);
  w.key("attempt").integer(m.attempt).key("outcome").str(ack_outcome_name(m.outcome)).key("reason").str(m.reason);
  w.end_object();
  return s;
}

std::string encode(const Error& m) {
  std::string s;
  json::Writer(&s)
      .begin_object()
      .key("type")
      .str("error")
      .key("error")
      .str(m.error)
      .key("about")
      .str(m.about)
      .end_object();
  return s;
}

std::string encode(const WorkerMessage& m) {
  return std::visit([](const auto& x) { return encode(x); }, m);
}
std::string encode(const ServiceMessage& m) {
  return std::visit([](const auto& x) { return encode(x); }, m);
}

namespace {
struct TypeNames {
  std::string_view operator()(const Hello&) const { return "hello"; }
  std::string_view operator()(const Heartbeat&) const { return "heartbeat"; }
  std::string_view operator()(const Result&) const { return "result"; }
  std::string_view operator()(const Fail&) const { return "fail"; }
  std::string_view operator()(const Bye&) const { return "bye"; }
  std::string_view operator()(const Welcome&) const { return "welcome"; }
  std::string_view operator()(const Reregister&) const { return "reregister"; }
  std::string_view operator()(const Assign&) const { return "assign"; }
  std::string_view operator()(const Ack&) const { return "ack"; }
  std::string_view operator()(const Error&) const { return "error"; }
};
}  // namespace

std::string_view type_name(const WorkerMessage& m) { return std::visit(TypeNames{}, m); }
std::string_view type_name(const ServiceMessage& m) { return std::visit(TypeNames{}, m); }

SuiteInfo suite_info(const Suite& s) {
  SuiteInfo i;
  i.name = s.name;
  i.benchmark = s.benchmark;
  i.version = s.version;
  i.evaluator = s.evaluator_version;
  i.dataset = {s.dataset.id,     s.dataset.version,    s.dataset.sha256,
               s.dataset_path(), s.dataset.first_item, s.dataset.items.value_or(0)};
  i.prompt = {s.prompt.text, s.prompt.version, s.prompt.sha256};
  i.decoding_json = s.decoding_json;
  if (s.judge) {
    const JudgeSpec& j = *s.judge;
    i.judge = JudgeInfo{j.model,    j.model_version, j.prompt,   j.prompt_version, j.rubric_version,
                        j.criteria, j.scale_lo,      j.scale_hi, j.temperature,    j.sampling_json};
  }
  return i;
}

std::vector<MetricInfo> metric_infos(const Suite& s) {
  std::vector<MetricInfo> out;
  for (const MetricSpec& m : s.metrics) {
    out.push_back(MetricInfo{m.name, m.args, m.k, m.def ? stats_per_item(m.def->aggregation) : 1});
  }
  return out;
}

// --- decoding ------------------------------------------------------------------------

namespace {

using json::Value;

// Reads members of one object, keeping the first problem.
class Reader {
 public:
  Reader(const Value& v, std::string what, std::string* err) : v_(v), what_(std::move(what)), err_(err) {}

  bool ok() const { return err_->empty(); }

  const Value* member(std::string_view name, bool required) {
    const Value* m = v_.find(name);
    if ((!m || m->type == Value::Type::kNull) && required) {
      fail("missing member '" + std::string(name) + "'");
      return nullptr;
    }
    if (m && m->type == Value::Type::kNull) return nullptr;
    return m;
  }

  bool str(std::string_view name, std::string* out, bool required = true) {
    const Value* m = member(name, required);
    if (!m) return !required;
    if (m->type != Value::Type::kString) return wrong(name, "a string", *m);
    *out = m->text;
    return true;
  }

  bool integer(std::string_view name, int64_t* out, int64_t lo, int64_t hi, bool required = true) {
    const Value* m = member(name, required);
    if (!m) return !required;
    return integer_value(*m, std::string(name), out, lo, hi);
  }

  bool integer_value(const Value& m, const std::string& name, int64_t* out, int64_t lo, int64_t hi) {
    if (m.type != Value::Type::kNumber || !m.integral) return wrong(name, "an integer", m);
    if (m.integer < lo || m.integer > hi) {
      return fail("member '" + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                  ", got " + std::to_string(m.integer));
    }
    *out = m.integer;
    return true;
  }

  bool int32(std::string_view name, int* out, int64_t lo, int64_t hi, bool required = true) {
    int64_t v = *out;
    if (!integer(name, &v, lo, hi, required)) return false;
    *out = static_cast<int>(v);
    return true;
  }

  bool number(std::string_view name, double* out, bool required = true) {
    const Value* m = member(name, required);
    if (!m) return !required;
    if (m->type != Value::Type::kNumber) return wrong(name, "a number", *m);
    *out = m->number;
    return true;
  }

  bool boolean(std::string_view name, bool* out, bool required = true) {
    const Value* m = member(name, required);
    if (!m) return !required;
    if (m->type != Value::Type::kBool) return wrong(name, "true or false", *m);
    *out = m->boolean;
    return true;
  }

  bool strings(std::string_view name, std::vector<std::string>* out, bool required = true) {
    const Value* m = member(name, required);
    if (!m) return !required;
    if (m->type != Value::Type::kArray) return wrong(name, "a list of strings", *m);
    out->clear();
    for (const Value& x : m->items) {
      if (x.type != Value::Type::kString) return wrong(std::string(name) + "[]", "a string", x);
      out->push_back(x.text);
    }
    return true;
  }

  bool libraries(std::string_view name, Libraries* out, bool required = true) {
    const Value* m = member(name, required);
    if (!m) return !required;
    if (m->type != Value::Type::kObject) return wrong(name, "an object of library names to versions", *m);
    out->clear();
    for (const auto& [k, x] : m->members) {
      if (x.type != Value::Type::kString) return wrong(std::string(name) + "." + k, "a version string", x);
      out->emplace_back(k, x.text);
    }
    return true;
  }

  // A JSON object member, as canonical JSON text.
  bool object_text(std::string_view name, std::string* out, bool required = true) {
    const Value* m = member(name, required);
    if (!m) return !required;
    if (m->type != Value::Type::kObject) return wrong(name, "an object", *m);
    std::string why;
    out->clear();
    if (!json::append_canonical(out, *m, &why)) return fail("member '" + std::string(name) + "': " + why);
    return true;
  }

  const Value* object(std::string_view name, bool required = true) {
    const Value* m = member(name, required);
    if (!m) return nullptr;
    if (m->type != Value::Type::kObject) {
      wrong(name, "an object", *m);
      return nullptr;
    }
    return m;
  }

  bool fail(const std::string& why) {
    if (err_->empty()) *err_ = what_ + ": " + why;
    return false;
  }

  bool wrong(std::string_view name, const char* expected, const Value& got) {
    return fail("member '" + std::string(name) + "' must be " + expected + ", got " + describe(got));
  }

  static std::string describe(const Value& v) {
    switch (v.type) {
      case Value::Type::kNull:
        return "null";
      case Value::Type::kBool:
        return v.boolean ? "true" : "false";
      case Value::Type::kNumber: {
        std::string s = "the number ";
        json::append_number(&s, v.number);
        return s;
      }
      case Value::Type::kString:
        return "a string";
      case Value::Type::kArray:
        return "a list";
      case Value::Type::kObject:
        return "an object";
    }
    return "?";
  }

 private:
  const Value& v_;
  std::string what_;
  std::string* err_;
};

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxItem = int64_t{1} << 50;

bool decode_hello(Reader& r, Hello* h) {
  int64_t protocol = 0;
  r.integer("protocol", &protocol, 0, kMaxInt32);
  h->protocol = static_cast<int>(protocol);
  r.str("worker", &h->worker);
  if (r.ok() && h->worker.empty()) r.fail("member 'worker' must not be empty");
  r.str("pool", &h->pool, false);
  if (r.ok() && h->pool != "cpu" && h->pool != "gpu")
    r.fail("member 'pool' must be \"cpu\" or \"gpu\", got \"" + h->pool + "\"");
  r.integer("memoryMib", &h->memory_mib, 0, int64_t{1} << 40, false);
  r.int32("slots", &h->slots, 1, 1024, false);
  r.str("workerVersion", &h->worker_version);
  r.str("codeCommit", &h->code_commit, false);
  r.libraries("libraries", &h->libraries, false);
  r.strings("evaluators", &h->evaluators, false);
  return r.ok();
}

bool decode_heartbeat(Reader& r, Heartbeat* h) {
  r.str("worker", &h->worker);
  h->has_loaded = r.member("loaded", false) != nullptr;
  r.strings("loaded", &h->loaded, false);
  return r.ok();
}

bool decode_result(const Value& v, Reader& r, Result* m) {
  r.str("worker", &m->worker);
  r.str("evaluationId", &m->evaluation_id);
  r.int32("shard", &m->shard, 0, kMaxInt32);
  r.int32("attempt", &m->attempt, 1, kMaxInt32);
  if (!r.ok()) return false;
  const Value* items = r.member("items", true);
  if (!items) return false;
  if (items->type != Value::Type::kArray) return r.wrong("items", "a list of items", *items);
  m->items.reserve(items->items.size());
  int per = -1;
  for (size_t i = 0; i < items->items.size(); ++i) {
    const Value& x = items->items[i];
    const std::string at = "items[" + std::to_string(i) + "]";
    if (x.type != Value::Type::kObject) return r.wrong(at, "an object", x);
    ResultItem it;
    const Value* id = x.find("item");
    if (!id) return r.fail("missing member '" + at + ".item'");
    if (!r.integer_value(*id, at + ".item", &it.item, 0, kMaxItem)) return false;
    const Value* st = x.find("stats");
    if (!st) return r.fail("missing member '" + at + ".stats'");
    if (st->type != Value::Type::kArray) return r.wrong(at + ".stats", "a list of numbers", *st);
    if (per < 0) {
      per = static_cast<int>(st->items.size());
      m->stats.reserve(items->items.size() * static_cast<size_t>(per));
    } else if (static_cast<int>(st->items.size()) != per) {
      return r.fail(at + ".stats has " + std::to_string(st->items.size()) + " numbers, items[0].stats has " +
                    std::to_string(per));
    }
    for (const Value& n : st->items) {
      if (n.type != Value::Type::kNumber) return r.wrong(at + ".stats[]", "a number", n);
      m->stats.push_back(n.number);
    }
    for (auto [name, field] : {std::pair{"itemHash", &it.item_hash}, std::pair{"responseHash", &it.response_hash},
                               std::pair{"error", &it.error}}) {
      const Value* s = x.find(name);
      if (!s || s->type == Value::Type::kNull) continue;
      if (s->type != Value::Type::kString) return r.wrong(at + "." + name, "a string", *s);
      *field = s->text;
    }
    if (const Value* l = x.find("latencyMs"); l && l->type != Value::Type::kNull) {
      if (l->type != Value::Type::kNumber) return r.wrong(at + ".latencyMs", "a number", *l);
      it.latency_ms = l->number;
    }
    m->items.push_back(std::move(it));
  }
  m->stats_per_item = per < 0 ? 0 : per;
  if (const Value* p = r.object("provenance", true)) {
    std::string perr;
    Reader pr(*p, "result: provenance", &perr);
    pr.str("workerVersion", &m->provenance.worker_version);
    pr.str("codeCommit", &m->provenance.code_commit, false);
    pr.libraries("libraries", &m->provenance.libraries, false);
    if (!perr.empty()) return r.fail(perr.substr(std::string("result: ").size()));
  }
  (void)v;
  return r.ok();
}

bool decode_fail(Reader& r, Fail* f) {
  r.str("worker", &f->worker);
  r.str("evaluationId", &f->evaluation_id);
  r.int32("shard", &f->shard, 0, kMaxInt32);
  r.int32("attempt", &f->attempt, 1, kMaxInt32);
  r.str("reason", &f->reason);
  r.boolean("retryable", &f->retryable, false);
  return r.ok();
}

// Parses the frame and reads its type.
const Value* parse_frame(std::string_view bytes, Value* root, std::string* type, DecodeError* err) {
  json::ParseError pe;
  if (bytes.size() > (size_t{1} << 30)) {
    err->error = "message of " + std::to_string(bytes.size()) + " bytes is too large";
    return nullptr;
  }
  if (!json::parse(bytes, root, &pe)) {
    err->error = "not JSON: " + pe.message + " at byte " + std::to_string(pe.offset);
    return nullptr;
  }
  if (root->type != Value::Type::kObject) {
    err->error = "a message is a JSON object with a \"type\" member, got " + Reader::describe(*root);
    return nullptr;
  }
  const Value* t = root->find("type");
  if (!t) {
    err->error = "missing member 'type'";
    return nullptr;
  }
  if (t->type != Value::Type::kString) {
    err->error = "member 'type' must be a string, got " + Reader::describe(*t);
    return nullptr;
  }
  *type = t->text;
  err->about = t->text;
  return root;
}

}  // namespace

std::optional<WorkerMessage> decode_worker_message(std::string_view bytes, DecodeError* err) {
  *err = {};
  Value root;
  std::string type;
  if (!parse_frame(bytes, &root, &type, err)) return std::nullopt;
  std::string why;
  Reader r(root, type, &why);
  std::optional<WorkerMessage> out;
  if (type == "hello") {
    Hello h;
    if (decode_hello(r, &h)) out = std::move(h);
  } else if (type == "heartbeat") {
    Heartbeat h;
    if (decode_heartbeat(r, &h)) out = std::move(h);
  } else if (type == "result") {
    Result m;
    if (decode_result(root, r, &m)) out = std::move(m);
  } else if (type == "fail") {
    Fail f;
    if (decode_fail(r, &f)) out = std::move(f);
  } else if (type == "bye") {
    Bye b;
    if (r.str("worker", &b.worker)) out = std::move(b);
  } else {
    why = "unknown message type '" + type + "' (a worker sends hello, heartbeat, result, fail or bye)";
  }
  if (!out) err->error = why;
  return out;
}

namespace {

bool decode_assign(Reader& r, Assign* a) {
  r.str("evaluationId", &a->evaluation_id);
  r.int32("shard", &a->shard, 0, kMaxInt32);
  r.int32("attempt", &a->attempt, 1, kMaxInt32);
  if (const Value* items = r.member("items", true)) {
    if (items->type != Value::Type::kArray || items->items.size() != 2)
      return r.wrong("items", "a list [begin, end)", *items);
    r.integer_value(items->items[0], "items[0]", &a->begin, 0, kMaxItem);
    r.integer_value(items->items[1], "items[1]", &a->end, a->begin, kMaxItem);
  }
  r.str("modelVersion", &a->model_version);
  if (const Value* c = r.object("checkpoint")) {
    std::string e;
    Reader cr(*c, "checkpoint", &e);
    cr.str("id", &a->checkpoint.id);
    cr.str("uri", &a->checkpoint.uri, false);
    cr.str("sha256", &a->checkpoint.sha256);
    if (!e.empty()) r.fail(e);
  }
  if (const Value* s = r.object("suite")) {
    std::string e;
    Reader sr(*s, "suite", &e);
    SuiteInfo& su = a->suite;
    sr.str("name", &su.name);
    sr.str("benchmark", &su.benchmark);
    sr.str("version", &su.version);
    sr.str("evaluator", &su.evaluator);
    if (const Value* d = sr.object("dataset")) {
      Reader dr(*d, "suite.dataset", &e);
      dr.str("id", &su.dataset.id);
      dr.str("version", &su.dataset.version);
      dr.str("sha256", &su.dataset.sha256);
      dr.str("path", &su.dataset.path, false);
      dr.integer("firstItem", &su.dataset.first_item, 0, kMaxItem, false);
      dr.integer("items", &su.dataset.items, 0, kMaxItem, false);
    }
    if (const Value* p = sr.object("prompt")) {
      Reader pr(*p, "suite.prompt", &e);
      pr.str("template", &su.prompt.template_text);
      pr.str("version", &su.prompt.version);
      pr.str("sha256", &su.prompt.sha256, false);
    }
    sr.object_text("decoding", &su.decoding_json, false);
    if (const Value* j = sr.object("judge", false)) {
      Reader jr(*j, "suite.judge", &e);
      JudgeInfo ji;
      jr.str("model", &ji.model);
      jr.str("version", &ji.version);
      jr.str("prompt", &ji.prompt);
      jr.str("promptVersion", &ji.prompt_version);
      jr.str("rubricVersion", &ji.rubric_version);
      jr.strings("criteria", &ji.criteria, false);
      if (const Value* sc = jr.member("scale", false)) {
        if (sc->type != Value::Type::kArray || sc->items.size() != 2 || sc->items[0].type != Value::Type::kNumber ||
            sc->items[1].type != Value::Type::kNumber)
          jr.wrong("scale", "[lowest, highest]", *sc);
        else
          ji.scale_lo = sc->items[0].number, ji.scale_hi = sc->items[1].number;
      }
      jr.number("temperature", &ji.temperature, false);
      jr.object_text("sampling", &ji.sampling_json, false);
      su.judge = std::move(ji);
    }
    if (!e.empty()) r.fail(e);
  }
  if (const Value* ms = r.member("metrics", true)) {
    if (ms->type != Value::Type::kArray) return r.wrong("metrics", "a list", *ms);
    for (size_t i = 0; i < ms->items.size(); ++i) {
      const Value& x = ms->items[i];
      const std::string at = "metrics[" + std::to_string(i) + "]";
      if (x.type != Value::Type::kObject) return r.wrong(at, "an object", x);
      std::string e;
      Reader mr(x, at, &e);
      MetricInfo mi;
      mr.str("name", &mi.name);
      if (const Value* args = mr.object("args", false)) {
        for (const auto& [k, v] : args->members) {
          if (v.type == Value::Type::kBool)
            mi.args.emplace_back(k, v.boolean ? "true" : "false");
          else if (v.type == Value::Type::kString)
            mi.args.emplace_back(k, v.text);
          else
            mr.wrong("args." + k, "a string or a boolean", v);
        }
      }
      if (const Value* k = mr.member("k", false)) {
        if (k->type != Value::Type::kArray) {
          mr.wrong("k", "a list of integers", *k);
        } else {
          for (const Value& kv : k->items) {
            int64_t kk = 0;
            if (mr.integer_value(kv, "k[]", &kk, 1, kMaxInt32)) mi.k.push_back(kk);
          }
        }
      }
      mr.int32("stats", &mi.stats, 1, 64);
      if (!e.empty()) return r.fail(e);
      a->metrics.push_back(std::move(mi));
    }
  }
  r.int32("stride", &a->stride, 0, 4096);
  return r.ok();
}

}  // namespace

std::optional<ServiceMessage> decode_service_message(std::string_view bytes, DecodeError* err) {
  *err = {};
  Value root;
  std::string type;
  if (!parse_frame(bytes, &root, &type, err)) return std::nullopt;
  std::string why;
  Reader r(root, type, &why);
  std::optional<ServiceMessage> out;
  if (type == "welcome") {
    Welcome w;
    int64_t p = 0;
    r.integer("protocol", &p, 0, kMaxInt32);
    w.protocol = static_cast<int>(p);
    r.integer("heartbeatMs", &w.heartbeat_ms, 1, int64_t{1} << 40);
    r.integer("timeoutMs", &w.timeout_ms, 1, int64_t{1} << 40);
    if (r.ok()) out = w;
  } else if (type == "reregister") {
    Reregister m;
    if (r.str("reason", &m.reason, false)) out = m;
  } else if (type == "assign") {
    Assign a;
    if (decode_assign(r, &a)) out = std::move(a);
  } else if (type == "ack") {
    Ack a;
    r.str("evaluationId", &a.evaluation_id);
    r.int32("shard", &a.shard, 0, kMaxInt32);
    r.int32("attempt", &a.attempt, 0, kMaxInt32);
    std::string o;
    r.str("outcome", &o);
    r.str("reason", &a.reason, false);
    if (r.ok()) {
      if (o == "accepted")
        a.outcome = AckOutcome::kAccepted;
      else if (o == "duplicate")
        a.outcome = AckOutcome::kDuplicate;
      else if (o == "rejected")
        a.outcome = AckOutcome::kRejected;
      else
        r.fail("member 'outcome' must be accepted, duplicate or rejected, got \"" + o + "\"");
    }
    if (r.ok()) out = std::move(a);
  } else if (type == "error") {
    Error e;
    r.str("error", &e.error);
    r.str("about", &e.about, false);
    if (r.ok()) out = std::move(e);
  } else {
    why = "unknown message type '" + type + "' (the service sends welcome, reregister, assign, ack or error)";
  }
  if (!out) err->error = why;
  return out;
}

}  // namespace runlens::eval::wire
