// runlens eval: the evaluation service's command group. This file holds the
// group and the commands that talk to a running `runlens serve` over its
// HTTP API (docs/api.md): submit, show, why, register, promote, and the
// top-level `runlens gate`. Errors a user can act
// on (the service unreachable, an unknown id, a bad flag) are one line each
// naming what was asked; exit codes as docs/cli.md says (1 for a service
// that is unreachable or answers an error, 2 for usage).
#include "cli/eval.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "formats/json_reader.h"
#include "formats/json_writer.h"
#include "formats/sha256.h"

namespace runlens::cli {

namespace {

constexpr const char* kDefaultServer = "http://127.0.0.1:8080";

// One failed request, already phrased for the user.
struct ServiceError {
  int exit_code = kExitFailure;
  std::string message;
};

void append_value(json::Writer& w, const json::Value& v) {
  switch (v.type) {
    case json::Value::Type::kNull:
      w.null();
      break;
    case json::Value::Type::kBool:
      w.boolean(v.boolean);
      break;
    case json::Value::Type::kNumber:
      if (v.integral) {
        w.integer(v.integer);
      } else {
        w.num(v.number);
      }
      break;
    case json::Value::Type::kString:
      w.str(v.text);
      break;
    case json::Value::Type::kArray:
      w.begin_array();
      for (const auto& i : v.items) append_value(w, i);
      w.end_array();
      break;
    case json::Value::Type::kObject:
      w.begin_object();
      for (const auto& [k, m] : v.members) {
        w.key(k);
        append_value(w, m);
      }
      w.end_object();
      break;
  }
}

std::string compact(const json::Value& v) {
  std::string out;
  json::Writer w(&out);
  append_value(w, v);
  return out;
}

// A scalar as a user reads it: strings bare, numbers in their shortest form.
std::string plain(const json::Value& v) {
  if (v.type == json::Value::Type::kString) return v.text;
  if (v.type == json::Value::Type::kNull) return "-";
  return compact(v);
}

class ServiceClient {
 public:
  // Throws CLI::ValidationError for a URL that is not http://HOST[:PORT].
  explicit ServiceClient(std::string server) : server_(std::move(server)) {
    while (!server_.empty() && server_.back() == '/') server_.pop_back();
    if (server_.rfind("http://", 0) != 0 || server_.size() <= 7 || server_.find('/', 7) != std::string::npos)
      throw CLI::ValidationError(
          "--server", "expected http://HOST:PORT (e.g. " + std::string(kDefaultServer) + "), got '" + server_ + "'");
    client_ = std::make_unique<httplib::Client>(server_);
    client_->set_connection_timeout(5, 0);
    client_->set_read_timeout(30, 0);
  }

  // GET or POST; the parsed JSON body of a 2xx answer, else a ServiceError.
  json::Value get(const std::string& path, const std::string& what) {
    return answer(client_->Get(path), "GET", path, what);
  }
  json::Value post(const std::string& path, const std::string& body, const std::string& what,
                   const httplib::Headers& headers = {}) {
    return answer(client_->Post(path, headers, body, "application/json"), "POST", path, what);
  }
  const std::string& server() const { return server_; }

 private:
  json::Value answer(const httplib::Result& res, const char* method, const std::string& path, const std::string& what) {
    if (!res) {
      std::string why;
      switch (res.error()) {
        case httplib::Error::Connection:
          why = "connection refused";
          break;
        case httplib::Error::ConnectionTimeout:
          why = "connection timed out";
          break;
        case httplib::Error::Read:
          why = "no answer";
          break;
        default:
          why = httplib::to_string(res.error());
      }
      throw ServiceError{
          kExitFailure, "cannot reach the service at " + server_ + " (" + why + "): is `runlens serve` running there?"};
    }
    json::Value body;
    json::ParseError err;
    const bool parsed = json::parse(res->body, &body, &err);
    if (res->status < 200 || res->status >= 300) {
      std::string detail;
      if (parsed) {
        if (const json::Value* e = body.find("error")) detail = plain(*e);
      }
      if (detail.empty()) detail = res->body.substr(0, 200);
      if (parsed) {
        // A refused promotion names the failed gate's reasons: one a line.
        if (const json::Value* rs = body.find("reasons"); rs && rs->type == json::Value::Type::kArray) {
          for (const auto& r : rs->items) detail += "\n  " + plain(r);
        }
      }
      if (res->status == 404) throw ServiceError{kExitFailure, "no " + what + " at " + server_ + ": " + detail};
      throw ServiceError{kExitFailure,
                         std::string(method) + " " + path + " answered " + std::to_string(res->status) + ": " + detail};
    }
    if (!parsed)
      throw ServiceError{kExitFailure, std::string(method) + " " + path + " answered " + std::to_string(res->status) +
                                           " with a body that is not JSON: " + err.message};
    return body;
  }

  std::string server_;
  std::unique_ptr<httplib::Client> client_;
};

std::string url_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == ':') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

void check_model_version(const std::string& mv) {
  const size_t colon = mv.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == mv.size() ||
      mv.find(':', colon + 1) != std::string::npos)
    throw CLI::ValidationError("--model-version", "expected MODEL:VERSION (e.g. llama-x:v142), got '" + mv + "'");
}

bool terminal(const std::string& status) {
  return status == "COMPLETED" || status == "FAILED" || status == "PARTIAL" || status == "CACHED";
}

std::string member_text(const json::Value& v, const char* key) {
  const json::Value* m = v.find(key);
  return m ? plain(*m) : std::string();
}

double number_or_nan(const json::Value* v) {
  return v && v->type == json::Value::Type::kNumber ? v->number : std::nan("");
}

// GET /v1/evaluations/{id} (docs/api.md), human-readable: the summary,
// progress, missing shards, metrics with n and standard error, the shards,
// then every other member as provenance (so a field the service adds is
// shown too).
std::string format_evaluation(const json::Value& ev) {
  static const std::vector<std::string> kSummary = {"modelVersion", "checkpointId",     "benchmarkSuite",
                                                    "benchmark",    "benchmarkVersion", "cachedFrom",
                                                    "startedAt",    "completedAt",      "error"};
  static const std::vector<std::string> kSections = {"evaluationId",  "status",  "progress",
                                                     "missingShards", "metrics", "shards"};
  auto in = [](const std::vector<std::string>& v, const std::string& k) {
    return std::find(v.begin(), v.end(), k) != v.end();
  };
  std::string out = "evaluation " + member_text(ev, "evaluationId") + ": " + member_text(ev, "status") + "\n";
  size_t width = 12;
  for (const auto& [k, v] : ev.members) width = std::max(width, k.size());
  char buf[2048];
  auto line = [&](const std::string& k, const json::Value& v) {
    const bool nested = v.type == json::Value::Type::kObject || v.type == json::Value::Type::kArray;
    std::snprintf(buf, sizeof buf, "  %-*s  %s\n", static_cast<int>(width), k.c_str(),
                  (nested ? compact(v) : plain(v)).c_str());
    out += buf;
  };
  for (const auto& k : kSummary) {
    const json::Value* v = ev.find(k);
    if (v && !(k == "error" && v->type == json::Value::Type::kNull)) line(k, *v);
  }
  if (const json::Value* p = ev.find("progress"); p && p->type == json::Value::Type::kObject) {
    std::string parts;
    for (const auto& [k, v] : p->members) parts += (parts.empty() ? "" : ", ") + k + " " + plain(v);
    out += "progress: " + parts + "\n";
  }
  if (const json::Value* m = ev.find("missingShards"); m && m->type == json::Value::Type::kArray && !m->items.empty()) {
    std::string list;
    for (const auto& x : m->items) list += (list.empty() ? "" : ", ") + plain(x);
    out += "missing shards: " + list + "\n";
  }
  if (const json::Value* ms = ev.find("metrics"); ms && ms->type == json::Value::Type::kArray) {
    std::vector<eval::MetricResult> metrics;
    for (const auto& m : ms->items) {
      eval::MetricResult r;
      r.name = member_text(m, "name");
      r.value = number_or_nan(m.find("value"));
      const json::Value* n = m.find("n");
      r.n = n && n->integral ? n->integer : 0;
      r.std_error = number_or_nan(m.find("stdError") ? m.find("stdError") : m.find("stderr"));
      metrics.push_back(r);
    }
    out += "metrics\n" + format_metrics(metrics);
  }
  if (const json::Value* sh = ev.find("shards"); sh && sh->type == json::Value::Type::kArray && !sh->items.empty()) {
    out += "shards\n";
    std::snprintf(buf, sizeof buf, "  %5s  %-16s  %-9s  %7s  %s\n", "shard", "items", "status", "attempt", "worker");
    out += buf;
    constexpr size_t kMaxShardLines = 20;  // a big evaluation's shards: --json has them all
    for (size_t i = 0; i < sh->items.size(); ++i) {
      if (i == kMaxShardLines) {
        out += "  ... " + std::to_string(sh->items.size() - i) + " more shards (--json lists them all)\n";
        break;
      }
      const json::Value& s = sh->items[i];
      std::string items = member_text(s, "items");
      if (const json::Value* r = s.find("items"); r && r->type == json::Value::Type::kArray && r->items.size() == 2)
        items = "[" + plain(r->items[0]) + ", " + plain(r->items[1]) + ")";
      std::snprintf(buf, sizeof buf, "  %5s  %-16s  %-9s  %7s  %s\n", member_text(s, "shard").c_str(), items.c_str(),
                    member_text(s, "status").c_str(), member_text(s, "attempt").c_str(),
                    member_text(s, "worker").c_str());
      out += buf;
    }
  }
  out += "provenance\n";
  for (const auto& [k, v] : ev.members) {
    if (!in(kSummary, k) && !in(kSections, k)) line(k, v);
  }
  return out;
}

struct ServiceFlags {
  std::string server = kDefaultServer;
};

void add_server_flag(CLI::App* sub, ServiceFlags* f) {
  sub->add_option("--server", f->server, "The service: runlens serve's http://HOST:PORT")->capture_default_str();
}

// Runs `body`, turning a ServiceError into its message and exit code.
int with_service(const char* command, const std::function<int()>& body) {
  try {
    return body();
  } catch (const ServiceError& e) {
    std::fprintf(stderr, "runlens eval %s: %s\n", command, e.message.c_str());
    return e.exit_code;
  }
}

struct SubmitFlags : ServiceFlags {
  std::string model_version, checkpoint, suite;
  bool wait = false;
  double timeout_s = 600;
};

int submit(const SubmitFlags& f) {
  check_model_version(f.model_version);
  ServiceClient c(f.server);
  std::string body;
  json::Writer w(&body);
  w.begin_object().key("modelVersion").str(f.model_version).key("checkpointId").str(f.checkpoint);
  w.key("benchmarkSuite").str(f.suite).end_object();
  json::Value ans = c.post("/v1/evaluations", body, "checkpoint or suite");
  const std::string id = member_text(ans, "evaluationId");
  std::printf("%s %s\n", id.c_str(), member_text(ans, "status").c_str());
  std::fflush(stdout);
  if (!f.wait) return kExitOk;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.timeout_s);
  std::string status;
  while (true) {
    json::Value ev = c.get("/v1/evaluations/" + url_escape(id), "evaluation " + id);
    status = member_text(ev, "status");
    if (terminal(status)) {
      std::printf("%s", format_evaluation(ev).c_str());
      return status == "FAILED" ? kExitFailure : kExitOk;
    }
    if (stop_requested() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::fprintf(stderr, "runlens eval submit: evaluation %s is still %s after %g s (see `runlens eval show %s`)\n",
               id.c_str(), status.c_str(), f.timeout_s, id.c_str());
  return kExitFailure;
}

struct ShowFlags : ServiceFlags {
  std::string id;
  bool json = false;
};

int show(const ShowFlags& f) {
  ServiceClient c(f.server);
  json::Value ev = c.get("/v1/evaluations/" + url_escape(f.id), "evaluation " + f.id);
  std::printf("%s", f.json ? (compact(ev) + "\n").c_str() : format_evaluation(ev).c_str());
  return kExitOk;
}

int why(const ShowFlags& f) {
  ServiceClient c(f.server);
  json::Value ans = c.get("/v1/evaluations/" + url_escape(f.id) + "/why", "evaluation " + f.id);
  if (f.json) {
    std::printf("%s\n", compact(ans).c_str());
    return kExitOk;
  }
  const json::Value* d = ans.find("decisions");
  if (!d || d->type != json::Value::Type::kArray)
    throw ServiceError{kExitFailure, "the service's answer has no decisions list: " + compact(ans).substr(0, 200)};
  for (const auto& line : d->items) std::printf("%s\n", plain(line).c_str());
  return kExitOk;
}

struct RegisterFlags : ServiceFlags {
  std::string checkpoint, file, sha256, uri, run, parent, model_version;
  std::optional<int64_t> step;
};

int register_checkpoint(RegisterFlags f) {
  check_model_version(f.model_version);
  if (f.file.empty() == f.sha256.empty())
    throw CLI::ValidationError("--file/--sha256", "give exactly one: --file PATH (hashed here) or --sha256 HEX");
  if (!f.file.empty()) {
    std::ifstream in(f.file, std::ios::binary);
    if (!in) throw CLI::ValidationError("--file", "cannot open '" + f.file + "'");
    sha256::Hasher h;
    std::vector<char> buf(1 << 20);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
      h.update(buf.data(), static_cast<size_t>(in.gcount()));
    f.sha256 = sha256::to_hex(h.digest());
    if (f.uri.empty()) f.uri = "file://" + std::filesystem::absolute(f.file).lexically_normal().string();
  } else if (!sha256::is_hex_digest(f.sha256)) {
    throw CLI::ValidationError("--sha256", "expected 64 lowercase hexadecimal digits, got '" + f.sha256 + "'");
  }
  ServiceClient c(f.server);
  std::string body;
  json::Writer w(&body);
  w.begin_object().key("checkpointId").str(f.checkpoint).key("sha256").str(f.sha256).key("uri").str(f.uri);
  w.key("runId").str(f.run);
  if (f.step) {
    w.key("step").integer(*f.step);
  } else {
    w.key("step").null();
  }
  w.key("parentId").str(f.parent).key("modelVersion").str(f.model_version).end_object();
  json::Value ans = c.post("/v1/checkpoints", body, "model version");
  std::printf("registered checkpoint %s (sha256 %s) for %s\n", f.checkpoint.c_str(), f.sha256.c_str(),
              f.model_version.c_str());
  if (const json::Value* e = ans.find("evaluations"); e && e->type == json::Value::Type::kArray) {
    for (const auto& ev : e->items)
      std::printf("  %s %s\n",
                  (ev.type == json::Value::Type::kObject ? member_text(ev, "evaluationId") : plain(ev)).c_str(),
                  ev.type == json::Value::Type::kObject ? member_text(ev, "status").c_str() : "");
  }
  return kExitOk;
}

// POST /v1/gates/evaluate's decision, human-readable: the verdict line,
// then one row per gated metric (improvement-oriented difference: > 0 means
// the candidate is better), then the reasons.
std::string format_gate(const json::Value& d) {
  std::string out = "gate " + member_text(d, "gateId") + " " + member_text(d, "policy") + " v" +
                    member_text(d, "policyVersion") + ": " + member_text(d, "verdict") + "\n";
  out += "  candidate " + member_text(d, "candidateEvaluation") + ", baseline " + member_text(d, "baselineEvaluation") +
         ", " + member_text(d, "items") + " paired items, alpha " + member_text(d, "alpha") + "\n";
  auto num = [](const json::Value* v) {
    if (!v || v->type == json::Value::Type::kNull) return std::string("-");
    if (v->type != json::Value::Type::kNumber) return plain(*v);
    char b[32];
    std::snprintf(b, sizeof b, "%.4g", v->number);
    return std::string(b);
  };
  char buf[512];
  std::snprintf(buf, sizeof buf, "  %-16s %-11s %10s %10s %11s %10s %10s %8s  %s\n", "metric", "dimension", "candidate",
                "baseline", "difference", "se", "bound", "margin", "verdict");
  out += buf;
  if (const json::Value* ms = d.find("metrics"); ms && ms->type == json::Value::Type::kArray) {
    for (const auto& m : ms->items) {
      std::snprintf(buf, sizeof buf, "  %-16s %-11s %10s %10s %11s %10s %10s %8s  %s\n",
                    member_text(m, "metric").c_str(), member_text(m, "dimension").c_str(),
                    num(m.find("candidate")).c_str(), num(m.find("baseline")).c_str(),
                    num(m.find("difference")).c_str(), num(m.find("stdError")).c_str(), num(m.find("lower")).c_str(),
                    num(m.find("margin")).c_str(), member_text(m, "verdict").c_str());
      out += buf;
    }
  }
  if (const json::Value* rs = d.find("reasons"); rs && rs->type == json::Value::Type::kArray && !rs->items.empty()) {
    out += "reasons\n";
    for (const auto& r : rs->items) out += "  " + plain(r) + "\n";
  }
  return out;
}

struct GateFlags : ServiceFlags {
  std::string policy, candidate, baseline;
  bool json = false;
};

// Exit 0 on PASS, 1 on FAIL or INCONCLUSIVE (a script can gate on it).
int gate(const GateFlags& f) {
  ServiceClient c(f.server);
  std::string body;
  json::Writer w(&body);
  w.begin_object().key("policy").str(f.policy).key("candidate").str(f.candidate);
  if (!f.baseline.empty()) w.key("baseline").str(f.baseline);
  w.end_object();
  json::Value d = c.post("/v1/gates/evaluate", body, "gate policy or evaluation");
  std::printf("%s", f.json ? (compact(d) + "\n").c_str() : format_gate(d).c_str());
  return member_text(d, "verdict") == "PASS" ? kExitOk : kExitFailure;
}

struct PromoteFlags : ServiceFlags {
  std::string model_version, to, gate_id, user;
};

int promote(const PromoteFlags& f) {
  check_model_version(f.model_version);
  const size_t colon = f.model_version.find(':');
  const std::string model = f.model_version.substr(0, colon), version = f.model_version.substr(colon + 1);
  ServiceClient c(f.server);
  std::string body;
  json::Writer w(&body);
  w.begin_object().key("to").str(f.to);
  if (!f.gate_id.empty()) w.key("gateId").str(f.gate_id);
  w.end_object();
  std::string user = f.user;
  if (user.empty()) {
    if (const char* u = std::getenv("USER"); u && *u) user = u;
  }
  httplib::Headers h;
  if (!user.empty()) h.emplace("X-Runlens-User", user);
  json::Value ans = c.post("/v1/models/" + url_escape(model) + "/versions/" + url_escape(version) + "/promote", body,
                           "model version " + f.model_version, h);
  if (const json::Value* a = ans.find("audit"); a && a->type == json::Value::Type::kArray) {
    for (const auto& r : a->items) {
      std::string line = member_text(r, "modelVersion") + ": " + member_text(r, "from") + " -> " +
                         member_text(r, "to") + " by " + member_text(r, "user");
      if (const json::Value* g = r.find("gateId"); g && g->type == json::Value::Type::kString)
        line += " (gate " + g->text + ")";
      if (std::string why = member_text(r, "reason"); !why.empty()) line += ": " + why;
      std::printf("%s\n", line.c_str());
    }
  }
  return kExitOk;
}

}  // namespace

namespace {

struct ExplainFlags : ServiceFlags {
  std::string model_version, baseline;
  bool json = false;
};

std::string number_text(const json::Value* v) {
  if (!v || v->type != json::Value::Type::kNumber) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g", v->number);
  return buf;
}

// A SHA-256 as its first 12 digits, anything else as it is.
std::string short_hash(const std::string& s) {
  const bool hex = s.size() == 64 && s.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
  return hex ? s.substr(0, 12) : s;
}

// GET /v1/models/{id}/versions/{v}/explain (docs/api.md), human-readable: the
// walk of spec section 52, the decision with its path and evidence, the
// benchmarks' differences and the likely conclusion.
std::string format_explain(const json::Value& e) {
  std::string out = "model version " + member_text(e, "modelVersion") + " against " + member_text(e, "baseline") +
                    (member_text(e, "baselineFrom") == "production" ? " (the production version)" : "") + "\n";
  if (const json::Value* walk = e.find("walk"); walk && walk->type == json::Value::Type::kArray) {
    static const std::map<std::string, std::string> kLabels = {
        {"modelVersion", "model version"}, {"evaluation", "evaluation"},     {"checkpoint", "checkpoint"},
        {"trainingRun", "training run"},   {"configDiff", "config diff vs"}, {"health", "health of"},
        {"cause", "likely cause"}};
    bool first = true;
    for (const auto& l : walk->items) {
      const std::string level = member_text(l, "level");
      auto it = kLabels.find(level);
      const std::string label = it == kLabels.end() ? level : it->second;
      const std::string id = member_text(l, "id");
      out += std::string(first ? "  " : "  ↓ ") + label + (id.empty() ? "" : " " + id) + ": " +
             member_text(l, "summary") + "\n";
      first = false;
    }
  }
  if (const json::Value* d = e.find("decision")) {
    out += "decision (" + member_text(*d, "tree") + "): " + member_text(*d, "cause") + ", owner " +
           member_text(*d, "owner") + "\n";
    out += "  recommendation: " + member_text(*d, "recommendation") + "\n";
    if (const json::Value* p = d->find("path"); p && p->type == json::Value::Type::kArray) {
      for (const auto& step : p->items)
        out += "  rule: " + member_text(step, "condition") + " is " + member_text(step, "value") + "\n";
    }
    if (const json::Value* ev = d->find("evidence"); ev && ev->type == json::Value::Type::kArray) {
      for (const auto& x : ev->items)
        out += "  evidence: " + member_text(x, "signal") + " = " + number_text(x.find("value")) + "\n";
    }
  }
  if (const json::Value* bs = e.find("benchmarks"); bs && bs->type == json::Value::Type::kArray && !bs->items.empty()) {
    out += "benchmarks:\n";
    for (const auto& b : bs->items) {
      const json::Value* ms = b.find("metrics");
      if (!ms || ms->type != json::Value::Type::kArray) continue;
      for (const auto& m : ms->items) {
        out += "  " + member_text(b, "benchmark") + " " + member_text(m, "metric") + " " + number_text(m.find("left")) +
               " → " + number_text(m.find("right")) + "  difference " + number_text(m.find("difference"));
        const std::string method = member_text(m, "method");
        if (method == "paired") {
          out += " (SE " + number_text(m.find("stdError")) + ", 95% CI " + number_text(m.find("ciLow")) + " to " +
                 number_text(m.find("ciHigh")) + ", p " + number_text(m.find("pValue")) + ", n " + member_text(m, "n") +
                 (member_text(m, "significant") == "true" ? ", significant)" : ", not significant)");
        } else if (method == "unpaired") {
          out += " (NOT PAIRED: the datasets differ; no significance claimed)";
        }
        out += "\n";
      }
      if (const json::Value* vs = b.find("versions"); vs && vs->type == json::Value::Type::kArray) {
        for (const auto& v : vs->items) {
          if (member_text(v, "changed") == "true")
            out += "    " + member_text(v, "name") + " changed: " + short_hash(member_text(v, "left")) + " → " +
                   short_hash(member_text(v, "right")) + "\n";
        }
      }
    }
  }
  if (const json::Value* c = e.find("conclusion"); c && c->type == json::Value::Type::kArray) {
    out += "likely conclusion:\n";
    for (const auto& line : c->items) out += "  " + plain(line) + "\n";
  }
  return out;
}

int explain(const ExplainFlags& f) {
  check_model_version(f.model_version);
  const size_t colon = f.model_version.find(':');
  const std::string model = f.model_version.substr(0, colon), version = f.model_version.substr(colon + 1);
  if (!f.baseline.empty()) {
    const size_t bc = f.baseline.find(':');
    if (f.baseline.find(':', bc == std::string::npos ? 0 : bc + 1) != std::string::npos || bc == 0 ||
        (bc != std::string::npos && bc + 1 == f.baseline.size()))
      throw CLI::ValidationError("--baseline", "expected VERSION or MODEL:VERSION, got '" + f.baseline + "'");
  }
  ServiceClient c(f.server);
  std::string path = "/v1/models/" + url_escape(model) + "/versions/" + url_escape(version) + "/explain";
  if (!f.baseline.empty()) path += "?baseline=" + url_escape(f.baseline);
  json::Value e = c.get(path, "model version");
  std::printf("%s", f.json ? (compact(e) + "\n").c_str() : format_explain(e).c_str());
  return kExitOk;
}

}  // namespace

Command add_gate(CLI::App& app) {
  auto f = std::make_shared<GateFlags>();
  auto* sub = app.add_subcommand(
      "gate", "Apply a quality-gate policy to a candidate and a baseline evaluation (POST /v1/gates/evaluate)");
  add_server_flag(sub, f.get());
  sub->add_option("--policy", f->policy, "Gate policy name (GET /v1/gates)")->required();
  sub->add_option("--candidate", f->candidate, "The candidate's evaluation id")->required();
  sub->add_option("--baseline", f->baseline,
                  "The baseline's evaluation id (default: the model's production version's evaluation of the suite)");
  sub->add_flag("--json", f->json, "Print the service's JSON decision as it is");
  return {sub, [f] {
            try {
              return gate(*f);
            } catch (const ServiceError& e) {
              std::fprintf(stderr, "runlens gate: %s\n", e.message.c_str());
              return e.exit_code;
            }
          }};
}

Command add_eval(CLI::App& app) {
  auto* group = app.add_subcommand("eval", "The evaluation service: workers, submissions, results (docs/cli.md)");
  group->require_subcommand(1);
  std::vector<Command> subs;
  subs.push_back(add_eval_worker(*group));

  auto sf = std::make_shared<SubmitFlags>();
  auto* submit_app = group->add_subcommand("submit", "Create an evaluation (POST /v1/evaluations)");
  add_server_flag(submit_app, sf.get());
  submit_app->add_option("--model-version", sf->model_version, "MODEL:VERSION")->required();
  submit_app->add_option("--checkpoint", sf->checkpoint, "Checkpoint id (registered)")->required();
  submit_app->add_option("--suite", sf->suite, "Suite name (GET /v1/suites)")->required();
  auto* wait = submit_app->add_flag("--wait", sf->wait, "Poll until the evaluation ends; print it as `show` does");
  submit_app->add_option("--timeout", sf->timeout_s, "With --wait: give up after S seconds (exit 1)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->needs(wait);
  subs.push_back({submit_app, [sf] { return with_service("submit", [&] { return submit(*sf); }); }});

  auto shf = std::make_shared<ShowFlags>();
  auto* show_app = group->add_subcommand("show", "Print an evaluation: status, shards, metrics, provenance");
  show_app->add_option("ID", shf->id, "Evaluation id")->required();
  add_server_flag(show_app, shf.get());
  show_app->add_flag("--json", shf->json, "Print the service's JSON answer as it is");
  subs.push_back({show_app, [shf] { return with_service("show", [&] { return show(*shf); }); }});

  auto wf = std::make_shared<ShowFlags>();
  auto* why_app = group->add_subcommand("why", "Print the scheduler's decisions about an evaluation, one a line");
  why_app->add_option("ID", wf->id, "Evaluation id")->required();
  add_server_flag(why_app, wf.get());
  why_app->add_flag("--json", wf->json, "Print the service's JSON answer as it is");
  subs.push_back({why_app, [wf] { return with_service("why", [&] { return why(*wf); }); }});

  auto rf = std::make_shared<RegisterFlags>();
  auto* reg = group->add_subcommand("register", "Register a checkpoint (POST /v1/checkpoints)");
  add_server_flag(reg, rf.get());
  reg->add_option("--checkpoint", rf->checkpoint, "Checkpoint id")->required();
  auto* file = reg->add_option("--file", rf->file, "The checkpoint file: hashed here, uri file://ABSOLUTE-PATH");
  auto* sha = reg->add_option("--sha256", rf->sha256, "The checkpoint's SHA-256, when the file is not here");
  file->excludes(sha);
  reg->add_option("--uri", rf->uri, "Where workers read it (default with --file: file://ABSOLUTE-PATH)");
  reg->add_option("--run", rf->run, "The training run that wrote it");
  reg->add_option("--step", rf->step, "The training step it was saved at")->check(CLI::NonNegativeNumber);
  reg->add_option("--parent", rf->parent, "The checkpoint it was trained from");
  reg->add_option("--model-version", rf->model_version, "MODEL:VERSION it is")->required();
  subs.push_back({reg, [rf] { return with_service("register", [&] { return register_checkpoint(*rf); }); }});

  auto pf = std::make_shared<PromoteFlags>();
  auto* prom = group->add_subcommand(
      "promote", "Move a model version to a status (POST /v1/models/{id}/versions/{v}/promote); audited");
  add_server_flag(prom, pf.get());
  prom->add_option("--model-version", pf->model_version, "MODEL:VERSION")->required();
  prom->add_option("--to", pf->to, "evaluated, gated, canary, production, or rollback")
      ->required()
      ->check(CLI::IsMember({"evaluated", "gated", "canary", "production", "rollback"}));
  prom->add_option("--gate", pf->gate_id, "The gate decision to rely on (default: the version's latest)");
  prom->add_option("--user", pf->user, "Who promotes, as recorded in the audit (default: $USER)");
  subs.push_back({prom, [pf] { return with_service("promote", [&] { return promote(*pf); }); }});

  subs.push_back(add_eval_score(*group));
  return {group, [subs] {
            for (const auto& c : subs) {
              if (c.app->parsed()) return c.run();
            }
            return kExitUsage;  // require_subcommand(1) makes this unreachable
          }};
}

Command add_explain(CLI::App& app) {
  auto f = std::make_shared<ExplainFlags>();
  auto* sub = app.add_subcommand(
      "explain",
      "Walk from a model version's regression to its cause: evaluation, checkpoint, training run, config diff, "
      "health, likely cause (GET /v1/models/{id}/versions/{v}/explain)");
  sub->add_option("MODEL_VERSION", f->model_version, "MODEL:VERSION, the candidate")->required();
  sub->add_option("--baseline", f->baseline,
                  "VERSION (of the same model) or MODEL:VERSION to compare with (default: the model's production "
                  "version)");
  add_server_flag(sub, f.get());
  sub->add_flag("--json", f->json, "Print the service's JSON answer as it is");
  return {sub, [f] {
            try {
              return explain(*f);
            } catch (const ServiceError& e) {
              std::fprintf(stderr, "runlens explain: %s\n", e.message.c_str());
              return e.exit_code;
            }
          }};
}

}  // namespace runlens::cli
