#include "eval/service/http.h"

#include <climits>
#include <set>

#include "eval/service/records.h"
#include "eval/walk/walk.h"
#include "formats/json_reader.h"
#include "formats/json_writer.h"
#include "server/route.h"

namespace runlens::eval::service {

namespace {

using api::HttpError;
using api::HttpRequest;
using api::HttpResponse;
using json::Writer;

store::Store open_read(const std::string& url) {
  try {
    return store::open_store(url, {store::OpenMode::kReadOnly});
  } catch (const store::StoreError& e) {
    throw HttpError{503, e.what()};
  }
}

json::Value body_object(const HttpRequest& req) {
  json::Value v;
  json::ParseError err;
  if (req.body.empty()) throw HttpError{400, "the request needs a JSON object body"};
  if (!json::parse(req.body, &v, &err))
    throw HttpError{400, "the request body is not JSON: " + err.message + " at byte " + std::to_string(err.offset)};
  if (v.type != json::Value::Type::kObject) throw HttpError{400, "the request body must be a JSON object"};
  return v;
}

std::string body_string(const json::Value& v, const char* name, bool required) {
  const json::Value* m = v.find(name);
  if (!m || m->type == json::Value::Type::kNull) {
    if (required) throw HttpError{400, std::string("missing member '") + name + "'"};
    return {};
  }
  if (m->type != json::Value::Type::kString)
    throw HttpError{400, std::string("member '") + name + "' must be a string"};
  if (required && m->text.empty()) throw HttpError{400, std::string("member '") + name + "' must not be empty"};
  return m->text;
}

std::optional<int64_t> body_int(const json::Value& v, const char* name, int64_t lo, int64_t hi) {
  const json::Value* m = v.find(name);
  if (!m || m->type == json::Value::Type::kNull) return std::nullopt;
  if (m->type != json::Value::Type::kNumber || !m->integral || m->integer < lo || m->integer > hi)
    throw HttpError{400, std::string("member '") + name + "' must be an integer from " + std::to_string(lo) + " to " +
                             std::to_string(hi)};
  return m->integer;
}

void opt_str(Writer& w, const char* key, const std::string& v) {
  w.key(key);
  if (v.empty())
    w.null();
  else
    w.str(v);
}

void raw_json(Writer& w, std::string* out, const std::string& text) {
  json::Value v;
  json::ParseError err;
  if (text.empty() || !json::parse(text, &v, &err)) {
    w.null();
    return;
  }
  w.str("");
  out->resize(out->size() - 2);
  out->append(text);
}

void metrics_array(Writer& w, const std::vector<store::MetricValue>& ms) {
  w.begin_array();
  for (const auto& m : ms) {
    w.begin_object().key("name").str(m.name).key("value").num(m.value).key("n").integer(m.n).key("stdError");
    if (m.std_error)
      w.num(*m.std_error);
    else
      w.null();
    w.end_object();
  }
  w.end_array();
}

// The fields every listing of an evaluation has.
void summary_fields(Writer& w, const store::EvaluationRecord& r) {
  w.key("evaluationId").str(r.evaluation_id).key("status").str(r.status);
  w.key("modelVersion").str(r.model_id + ":" + r.model_version).key("checkpointId").str(r.checkpoint_id);
  w.key("benchmarkSuite")
      .str(r.suite)
      .key("benchmark")
      .str(r.benchmark)
      .key("benchmarkVersion")
      .str(r.benchmark_version);
  opt_str(w, "cachedFrom", r.cached_from);
  w.key("startedAt").str(r.started_at);
  opt_str(w, "completedAt", r.completed_at);
}

void evaluation_json(Writer& w, std::string* out, const store::EvaluationView& v, const std::string& failure) {
  const store::EvaluationRecord& r = v.run;
  w.begin_object();
  summary_fields(w, r);
  w.key("modelId").str(r.model_id).key("version").str(r.model_version);
  w.key("checkpointHash").str(r.checkpoint_hash);
  opt_str(w, "runId", r.run_id);
  w.key("datasetId")
      .str(r.dataset_id)
      .key("datasetVersion")
      .str(r.dataset_version)
      .key("datasetHash")
      .str(r.dataset_hash);
  w.key("promptTemplateVersion").str(r.prompt_template_version).key("promptTemplateHash").str(r.prompt_template_hash);
  w.key("evaluatorVersion").str(r.evaluator_version).key("usesJudge").boolean(r.uses_judge).key("judge");
  if (r.uses_judge) {
    w.begin_object().key("model").str(r.judge_model).key("modelVersion").str(r.judge_model_version);
    w.key("promptVersion").str(r.judge_prompt_version).key("promptHash").str(r.judge_prompt_hash);
    w.key("rubricVersion").str(r.rubric_version).end_object();
  } else {
    w.null();
  }
  w.key("temperature");
  if (r.temperature)
    w.num(*r.temperature);
  else
    w.null();
  w.key("decoding");
  raw_json(w, out, r.decoding_json);
  w.key("codeCommit").str(r.code_commit).key("workerVersion").str(r.worker_version).key("libraryVersions");
  w.begin_object();
  for (const auto& [k, val] : r.library_versions) w.key(k).str(val);
  w.end_object();
  w.key("cacheKey").str(r.cache_key);
  opt_str(w, "error", failure);
  int64_t completed = 0, cached = 0, running = 0, queued = 0, failed = 0;
  std::vector<int> missing;
  for (const auto& s : v.shards) {
    if (s.status == "COMPLETED") ++completed;
    if (s.status == "CACHED") ++cached;
    if (s.status == "RUNNING") ++running;
    if (s.status == "QUEUED") ++queued;
    if (s.status == "FAILED") ++failed, missing.push_back(s.shard);
  }
  w.key("progress").begin_object().key("total").integer(static_cast<int64_t>(v.shards.size()));
  w.key("completed").integer(completed).key("cached").integer(cached).key("running").integer(running);
  w.key("queued").integer(queued).key("failed").integer(failed).end_object();
  w.key("shards").begin_array();
  for (const auto& s : v.shards) {
    w.begin_object().key("shard").integer(s.shard).key("items").begin_array().integer(s.item_begin).integer(s.item_end);
    w.end_array().key("status").str(s.status).key("attempt").integer(s.attempt);
    opt_str(w, "worker", s.worker);
    w.key("resultAttempt");
    if (s.result_attempt)
      w.integer(*s.result_attempt);
    else
      w.null();
    w.key("cacheKey").str(s.cache_key).end_object();
  }
  w.end_array();
  w.key("metrics");
  metrics_array(w, v.metrics);
  w.key("missingShards").begin_array();
  if (store::is_terminal_status(r.status)) {
    for (int m : missing) w.integer(m);
  }
  w.end_array();
  w.end_object();
}

store::EvaluationView evaluation_or_404(store::Store& s, const std::string& id) {
  auto v = s.evals->evaluation(id);
  if (!v) throw HttpError{404, "unknown evaluation '" + id + "'"};
  return *v;
}

void submit_outcome_json(Writer& w, const SubmitOutcome& o) {
  w.begin_object().key("evaluationId").str(o.evaluation_id).key("status").str(o.status);
  w.key("benchmarkSuite").str(o.suite);
  if (!o.cached_from.empty()) w.key("cachedFrom").str(o.cached_from);
  if (!o.error.empty()) w.key("error").str(o.error);
  w.end_object();
}

}  // namespace

void add_routes(api::ApiServer& server, EvalService& svc) {
  EvalService* service = &svc;

  server.add_route("POST", "/v1/evaluations", [service](const HttpRequest& req, HttpResponse& res) {
    // No query check: a client that posts JSON as a form (curl -d) has it parsed into params too.
    json::Value b = body_object(req);
    SubmitRequest r;
    r.model_version = body_string(b, "modelVersion", true);
    r.checkpoint_id = body_string(b, "checkpointId", true);
    r.suite = body_string(b, "benchmarkSuite", true);
    std::string p = body_string(b, "priority", false);
    if (!p.empty()) {
      r.priority = parse_priority(p);
      if (!r.priority) throw HttpError{400, "member 'priority' must be P0, P1, P2 or P3, got '" + p + "'"};
    }
    r.deadline_s = body_int(b, "deadlineSeconds", 1, int64_t{1} << 40);
    SubmitOutcome o = service->submit(r);
    if (o.evaluation_id.empty()) throw HttpError{o.http_status, o.error};
    res.status = 201;
    Writer w(&res.body);
    submit_outcome_json(w, o);
  });

  server.add_route("GET", "/v1/evaluations", [service](const HttpRequest& req, HttpResponse& res) {
    api::Args args(req.params, {"modelVersion", "benchmark", "benchmarkVersion", "status"});
    store::EvaluationFilter f;
    if (auto mv = args.text("modelVersion")) {
      std::string why;
      auto id = parse_model_version(*mv, &why);
      if (!id) throw HttpError{400, "parameter 'modelVersion': " + why};
      f.model_id = id->model;
      f.model_version = id->version;
    }
    f.benchmark = args.text("benchmark").value_or("");
    f.benchmark_version = args.text("benchmarkVersion").value_or("");
    std::string status = args.text("status").value_or("");
    store::Store s = open_read(service->store_url());
    auto list = s.evals->evaluations(f);
    Writer w(&res.body);
    w.begin_object().key("evaluations").begin_array();
    int64_t n = 0;
    for (const auto& r : list) {
      if (!status.empty() && r.status != status) continue;
      w.begin_object();
      summary_fields(w, r);
      w.end_object();
      ++n;
    }
    w.end_array().key("count").integer(n).end_object();
  });

  server.add_route("GET", R"(/v1/evaluations/([^/]+))", [service](const HttpRequest& req, HttpResponse& res) {
    api::Args(req.params, {});
    store::Store s = open_read(service->store_url());
    store::EvaluationView v = evaluation_or_404(s, req.matches.at(1));
    Writer w(&res.body);
    evaluation_json(w, &res.body, v, service->failure(v.run.evaluation_id));
  });

  server.add_route("GET", R"(/v1/evaluations/([^/]+)/why)", [service](const HttpRequest& req, HttpResponse& res) {
    api::Args(req.params, {});
    const std::string id = req.matches.at(1);
    auto lines = service->why(id);
    std::string status;
    if (!lines) {
      store::Store s = open_read(service->store_url());
      store::EvaluationView v = evaluation_or_404(s, id);
      status = v.run.status;
    } else {
      store::Store s = open_read(service->store_url());
      if (auto v = s.evals->evaluation(id)) status = v->run.status;
    }
    Writer w(&res.body);
    w.begin_object().key("evaluationId").str(id).key("status").str(status).key("decisions").begin_array();
    if (lines) {
      for (const auto& l : *lines) w.str(l);
    }
    w.end_array();
    if (!lines)
      w.key("note").str(
          "the decision log is kept in memory: this evaluation was decided before the service last started");
    w.end_object();
  });

  server.add_route("GET", R"(/v1/evaluations/([^/]+)/items)", [service](const HttpRequest& req, HttpResponse& res) {
    api::Args args(req.params, {"shard", "limit"});
    auto shard = args.integer("shard", 0, INT32_MAX);
    auto limit = args.integer("limit", 1, INT64_MAX / 2);
    store::Store s = open_read(service->store_url());
    store::EvaluationView v = evaluation_or_404(s, req.matches.at(1));
    // A whole-cache hit keeps no items of its own: they are its source's.
    std::string from = v.run.status == "CACHED" && !v.run.cached_from.empty() &&
                               s.evals->items(v.run.evaluation_id, std::nullopt).empty()
                           ? v.run.cached_from
                           : v.run.evaluation_id;
    std::optional<int32_t> sh;
    if (shard) sh = static_cast<int32_t>(*shard);
    auto items = s.evals->items(from, sh);
    Writer w(&res.body);
    w.begin_object().key("evaluationId").str(v.run.evaluation_id).key("itemsOf").str(from).key("items").begin_array();
    int64_t n = 0;
    for (const auto& it : items) {
      if (limit && n >= *limit) break;
      ++n;
      w.begin_object().key("item").integer(it.item).key("shard").integer(it.shard).key("attempt").integer(it.attempt);
      w.key("itemHash").str(it.item_hash).key("scores").begin_object();
      for (const auto& [k, val] : it.scores) w.key(k).num(val);
      w.end_object().key("responseHash").str(it.response_hash).key("latencyMs").num(it.latency_ms);
      w.key("error").str(it.error);
      if (!it.clusters.empty()) {
        w.key("clusters").begin_object();
        for (const auto& [k, id] : it.clusters) w.key(k).str(id);
        w.end_object();
      }
      w.end_object();
    }
    w.end_array().key("count").integer(n).end_object();
  });

  server.add_route("GET", R"(/v1/models/([^/]+)/versions/([^/]+))",
                   [service](const HttpRequest& req, HttpResponse& res) {
                     api::Args(req.params, {});
                     store::Store s = open_read(service->store_url());
                     const std::string model = req.matches.at(1), version = req.matches.at(2);
                     auto v = s.evals->model_version(model, version);
                     if (!v) throw HttpError{404, "unknown model version '" + model + ":" + version + "'"};
                     Writer w(&res.body);
                     w.begin_object().key("modelId").str(model).key("version").str(version);
                     w.key("modelVersion").str(model + ":" + version);
                     opt_str(w, "checkpointId", v->version.checkpoint_id);
                     opt_str(w, "runId", v->version.run_id);
                     w.key("status").str(v->version.status).key("createdNs").integer(v->version.created_ns);
                     w.key("evaluations").begin_array();
                     for (const auto& r : v->evaluations) {
                       w.begin_object();
                       summary_fields(w, r);
                       w.key("metrics");
                       metrics_array(w, s.evals->evaluation(r.evaluation_id)->metrics);
                       w.end_object();
                     }
                     w.end_array().key("gates").begin_array();
                     for (const auto& r : v->evaluations) {
                       for (const auto& g : s.evals->gate_rows_of_evaluation(r.evaluation_id)) {
                         if (g.metric.empty() && !g.decision_json.empty()) raw_json(w, &res.body, g.decision_json);
                       }
                     }
                     w.end_array().end_object();
                   });

  server.add_route("GET", R"(/v1/models/([^/]+)/versions/([^/]+)/audit)",
                   [service](const HttpRequest& req, HttpResponse& res) {
                     api::Args(req.params, {});
                     store::Store s = open_read(service->store_url());
                     const std::string model = req.matches.at(1), version = req.matches.at(2);
                     auto v = s.evals->model_version(model, version);
                     if (!v) throw HttpError{404, "unknown model version '" + model + ":" + version + "'"};
                     Writer w(&res.body);
                     w.begin_object().key("modelVersion").str(model + ":" + version);
                     w.key("status").str(v->version.status).key("audit").begin_array();
                     for (const auto& t : s.evals->transitions(model, version)) {
                       raw_json(w, &res.body, transition_json(t));
                     }
                     w.end_array().end_object();
                   });

  // The regression walk (eval/walk/walk.h): compare two versions, explain one against a baseline.
  server.add_route("GET", R"(/v1/models/([^/]+)/compare)", [service](const HttpRequest& req, HttpResponse& res) {
    api::Args a(req.params, {"left", "right"});
    const std::string left = a.required("left"), right = a.required("right");
    store::Store s = open_read(service->store_url());
    try {
      res.body = walk::model_compare(s, req.matches.at(1), left, right);
    } catch (const walk::WalkError& e) {
      throw HttpError{e.status, e.message};
    }
  });
  server.add_route("GET", R"(/v1/models/([^/]+)/versions/([^/]+)/explain)",
                   [service](const HttpRequest& req, HttpResponse& res) {
                     api::Args a(req.params, {"baseline"});
                     const std::string baseline = a.text("baseline").value_or("");
                     store::Store s = open_read(service->store_url());
                     try {
                       res.body = walk::model_explain(s, req.matches.at(1), req.matches.at(2), baseline);
                     } catch (const walk::WalkError& e) {
                       throw HttpError{e.status, e.message};
                     }
                   });

  server.add_route("POST", R"(/v1/models/([^/]+)/versions/([^/]+)/promote)",
                   [service](const HttpRequest& req, HttpResponse& res) {
                     json::Value b = body_object(req);
                     PromoteRequest r;
                     r.model_id = req.matches.at(1);
                     r.version = req.matches.at(2);
                     r.to = body_string(b, "to", true);
                     r.gate_id = body_string(b, "gateId", false);
                     if (auto h = req.headers.find("X-Runlens-User"); h != req.headers.end()) r.user = h->second;
                     PromoteOutcome o = service->promote(r);
                     Writer w(&res.body);
                     res.status = o.http_status;
                     if (!o.error.empty()) {
                       if (o.reasons.empty() && o.gate_id.empty()) throw HttpError{o.http_status, o.error};
                       w.begin_object().key("error").str(o.error).key("status").integer(o.http_status);
                       opt_str(w, "gateId", o.gate_id);
                       w.key("reasons").begin_array();
                       for (const auto& x : o.reasons) w.str(x);
                       w.end_array().end_object();
                       return;
                     }
                     w.begin_object().key("modelVersion").str(r.model_id + ":" + r.version).key("to");
                     w.str(r.to == "rollback" ? std::string("rolled_back") : r.to);
                     opt_str(w, "gateId", o.gate_id);
                     w.key("audit").begin_array();
                     for (const auto& a : o.audit) raw_json(w, &res.body, a);
                     w.end_array().end_object();
                   });

  server.add_route("GET", "/v1/gates", [service](const HttpRequest& req, HttpResponse& res) {
    api::Args(req.params, {});
    Writer w(&res.body);
    w.begin_object().key("gates").begin_array();
    for (const auto& g : service->gates()) {
      w.begin_object().key("name").str(g.name).key("file").str(g.file).key("version").str(g.version);
      opt_str(w, "suite", g.suite);
      w.key("description").str(g.description).key("alpha").num(g.alpha).key("metrics").begin_array();
      for (const auto& m : g.metrics) w.str(m);
      w.end_array().end_object();
    }
    w.end_array().key("problems").begin_array();
    for (const auto& p : service->gate_problems()) w.str(p);
    w.end_array().end_object();
  });

  server.add_route("POST", "/v1/gates/evaluate", [service](const HttpRequest& req, HttpResponse& res) {
    json::Value b = body_object(req);
    GateRequest r;
    r.policy = body_string(b, "policy", true);
    r.candidate = body_string(b, "candidate", true);
    r.baseline = body_string(b, "baseline", false);  // default: the model's production version
    GateOutcome o = service->evaluate_gate(r);
    if (!o.error.empty()) throw HttpError{o.http_status, o.error};
    res.status = 201;
    res.body = o.json;
  });

  server.add_route("POST", "/v1/checkpoints", [service](const HttpRequest& req, HttpResponse& res) {
    // No query check: a client that posts JSON as a form (curl -d) has it parsed into params too.
    json::Value b = body_object(req);
    CheckpointRequest r;
    r.checkpoint.checkpoint_id = body_string(b, "checkpointId", true);
    r.checkpoint.content_hash = body_string(b, "sha256", true);
    r.checkpoint.uri = body_string(b, "uri", false);
    r.checkpoint.run_id = body_string(b, "runId", false);
    r.checkpoint.step = body_int(b, "step", 0, INT64_MAX / 2);
    r.checkpoint.parent_id = body_string(b, "parentId", false);
    r.model_version = body_string(b, "modelVersion", true);
    CheckpointOutcome o = service->register_checkpoint(r);
    if (!o.error.empty()) throw HttpError{o.http_status, o.error};
    res.status = o.registered ? 201 : 200;
    Writer w(&res.body);
    w.begin_object().key("checkpointId").str(r.checkpoint.checkpoint_id).key("modelVersion").str(r.model_version);
    w.key("registered").boolean(o.registered).key("evaluations").begin_array();
    for (const auto& e : o.evaluations) submit_outcome_json(w, e);
    w.end_array().end_object();
  });

  server.add_route("GET", "/v1/suites", [service](const HttpRequest& req, HttpResponse& res) {
    api::Args(req.params, {});
    Writer w(&res.body);
    w.begin_object().key("suites").begin_array();
    for (const auto& s : service->suites()) {
      w.begin_object().key("name").str(s.name).key("file").str(s.file).key("benchmark").str(s.benchmark);
      w.key("version").str(s.version).key("evaluator").str(s.evaluator);
      w.key("dataset").begin_object().key("id").str(s.dataset_id).key("version").str(s.dataset_version).end_object();
      w.key("items");
      if (s.items)
        w.integer(s.items);
      else
        w.null();
      w.key("partitionSize")
          .integer(s.partition_size)
          .key("priority")
          .str(s.priority)
          .key("onCheckpoint")
          .begin_array();
      for (const auto& p : s.on_checkpoint) w.str(p);
      w.end_array().end_object();
    }
    w.end_array().key("problems").begin_array();
    for (const auto& p : service->suite_problems()) w.str(p);
    w.end_array().end_object();
  });

  server.add_route("GET", "/v1/workers", [service](const HttpRequest& req, HttpResponse& res) {
    api::Args(req.params, {});
    ServiceCounters c = service->counters();
    Writer w(&res.body);
    w.begin_object().key("endpoint").str(service->endpoint()).key("workers").begin_array();
    for (const auto& x : service->workers()) {
      w.begin_object().key("id").str(x.id).key("pool").str(x.pool).key("memoryMib").integer(x.memory_mib);
      w.key("slots").integer(x.slots).key("running").integer(x.running).key("alive").boolean(x.alive);
      w.key("lastHeartbeatMsAgo").integer(x.last_heartbeat_ms_ago).key("workerVersion").str(x.worker_version);
      w.key("codeCommit").str(x.code_commit).key("libraries").begin_object();
      for (const auto& [k, v] : x.libraries) w.key(k).str(v);
      w.end_object().key("evaluators").begin_array();
      for (const auto& e : x.evaluators) w.str(e);
      w.end_array().end_object();
    }
    w.end_array().key("counters").begin_object();
    w.key("messages").integer(c.messages).key("badMessages").integer(c.bad_messages);
    w.key("assigned").integer(c.assigned).key("accepted").integer(c.accepted).key("duplicates").integer(c.duplicates);
    w.key("rejected").integer(c.rejected).key("failed").integer(c.failed).key("items").integer(c.items);
    w.key("checkpointsRegistered").integer(c.checkpoints_registered).end_object().end_object();
  });
}

}  // namespace runlens::eval::service
