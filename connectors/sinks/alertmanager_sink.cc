#include "connectors/sinks/alertmanager_sink.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "connectors/sinks/sinks.h"
#include "formats/json_writer.h"
#include "schema/number_format.h"

namespace runlens::connectors {

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kMaxBatch = 1000;     // alerts per post
constexpr size_t kMaxEvidence = 2000;  // characters of the evidence annotation
constexpr char kRetired = '\x1f';      // alert_id + kRetired + owner: an old label set

// A path segment: unreserved characters as they are, the rest %XX, so that
// any run_id makes a valid URL (Alertmanager refuses a batch with a bad generatorURL).
std::string url_segment(std::string_view v) {
  std::string out;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string render_link(const std::string& tmpl, const Alert& a) {
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl.compare(i, 8, "{run_id}") == 0) {
      out += url_segment(a.run_id.string());
      i += 8;
    } else if (tmpl.compare(i, 10, "{alert_id}") == 0) {
      out += url_segment(a.alert_id);
      i += 10;
    } else {
      out += tmpl[i++];
    }
  }
  return out;
}

}  // namespace

bool split_http_url(const std::string& url, std::string* origin, std::string* prefix, std::string* why) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos || (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0)) {
    *why = "expected an http:// URL, got '" + url + "'";
    return false;
  }
  size_t host = scheme + 3;
  size_t slash = url.find('/', host);
  if (slash == host || host >= url.size()) {
    *why = "the URL '" + url + "' names no host";
    return false;
  }
  *origin = url.substr(0, slash);
  *prefix = slash == std::string::npos ? "" : url.substr(slash);
  while (!prefix->empty() && prefix->back() == '/') prefix->pop_back();
  return true;
}

std::string rfc3339(int64_t unix_ns) {
  int64_t secs = unix_ns / 1'000'000'000;
  int64_t ms = (unix_ns % 1'000'000'000) / 1'000'000;
  if (ms < 0) ms += 1000, --secs;
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

AlertmanagerDelivery::AlertmanagerDelivery(AlertmanagerOptions o, runtime::DeliveryCounters* counters)
    : o_(std::move(o)), counters_(counters) {
  std::string why;
  if (!split_http_url(o_.url, &origin_, &path_, &why)) origin_.clear();
  path_ += "/api/v2/alerts";
  backoff_ns_ = o_.backoff_initial_ns;
}

AlertmanagerDelivery::~AlertmanagerDelivery() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AlertmanagerDelivery::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

bool AlertmanagerDelivery::insert(const std::string& key, Entry e) {
  int sev = static_cast<int>(e.alert->severity);
  if (static_cast<int64_t>(entries_.size()) >= o_.queue) {
    // Full: the least severe, oldest goes (the new one when it is less severe than all held).
    auto victim = order_.begin();
    if (victim == order_.end() || sev < std::get<0>(*victim)) {
      if (counters_) counters_->dropped[static_cast<size_t>(sev)].fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (counters_)
      counters_->dropped[static_cast<size_t>(std::get<0>(*victim))].fetch_add(1, std::memory_order_relaxed);
    erase(entries_.find(std::get<2>(*victim)));
  }
  e.seq = ++seq_;
  order_.insert({sev, e.seq, key});
  entries_.emplace(key, std::move(e));
  if (counters_) counters_->accepted.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void AlertmanagerDelivery::erase(std::map<std::string, Entry>::iterator it) {
  if (it == entries_.end()) return;
  order_.erase({static_cast<int>(it->second.alert->severity), it->second.seq, it->first});
  entries_.erase(it);
}

void AlertmanagerDelivery::retire_owner(const std::string& id, const std::string& owner, int64_t now_ns) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.owner == owner) return;
  Entry& e = it->second;
  if (!e.ends_ns) {
    // The old label set is resolved now; the alert goes on under the new owner.
    Entry old;
    old.alert = e.alert;
    old.owner = e.owner;
    old.ends_ns = now_ns;
    old.retired = true;
    insert(id + kRetired + e.owner, std::move(old));
    it = entries_.find(id);  // the insert may have evicted (never this one: it is not less severe than itself)
    if (it == entries_.end()) return;
  }
  it->second.owner = owner;
  it->second.dirty = true;
  ++it->second.version;
}

void AlertmanagerDelivery::offer(const Alert& a) {
  int64_t now = wall_ns();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto alert = std::make_shared<const Alert>(a);
    auto it = entries_.find(a.alert_id);
    if (it != entries_.end()) {
      Entry& e = it->second;
      const Alert& held = *e.alert;
      // Consumers keep the highest revision; a closing one wins a tie.
      bool newer = a.revision > held.revision || (a.revision == held.revision && a.ends_ns && !held.ends_ns);
      if (newer) {
        if (a.severity != held.severity) {
          order_.erase({static_cast<int>(held.severity), e.seq, it->first});
          order_.insert({static_cast<int>(a.severity), e.seq, it->first});
        }
        // Its end is the latest revision's (a diagnosis a later symptom reopens
        // has none again), but one the sink set (run_end, hold) stays.
        bool own_end = held.ends_ns.has_value();
        e.alert = alert;
        if (a.ends_ns)
          e.ends_ns = *a.ends_ns;
        else if (own_end && !e.retired)
          e.ends_ns.reset();
        e.dirty = true;
        ++e.version;
      }
    } else {
      Entry e;
      e.alert = alert;
      if (a.kind == alert_kind::kDiagnosis) {
        e.owner = a.owner;
      } else if (auto x = explained_owner_.find(a.alert_id); x != explained_owner_.end()) {
        e.owner = x->second;
      } else {
        e.owner = std::string(alert_owner(a.kind));
      }
      if (a.ends_ns) e.ends_ns = *a.ends_ns;
      if (!alert_closes(a.kind)) e.hold_until_ns = now + o_.hold_ns;
      insert(a.alert_id, std::move(e));
    }
    if (a.kind == alert_kind::kDiagnosis && !a.owner.empty()) {
      for (const Evidence& ev : a.evidence) {
        if (ev.alert_id.empty()) continue;
        if (static_cast<int64_t>(explained_owner_.size()) < 4 * o_.queue) explained_owner_[ev.alert_id] = a.owner;
        retire_owner(ev.alert_id, a.owner, now);
      }
    }
  }
  cv_.notify_all();
}

void AlertmanagerDelivery::run_start(Symbol run, Symbol job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!job.empty()) jobs_[run] = job;
}

void AlertmanagerDelivery::run_end(Symbol run, int64_t time_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, e] : entries_) {
      if (e.ends_ns || e.alert->run_id != run) continue;
      e.ends_ns = time_ns;
      e.dirty = true;
      ++e.version;
    }
  }
  cv_.notify_all();
}

std::vector<std::string> AlertmanagerDelivery::due(int64_t steady_now, int64_t wall_now) {
  std::vector<std::string> keys;
  for (auto& [key, e] : entries_) {
    if (!e.ends_ns && e.hold_until_ns > 0 && wall_now >= e.hold_until_ns) {
      e.ends_ns = e.hold_until_ns;
      e.dirty = true;
      ++e.version;
    }
    if (!e.dirty && !e.ends_ns && steady_now >= e.next_send_ns) e.dirty = true;  // re-send while active
    if (e.dirty && keys.size() < kMaxBatch) keys.push_back(key);
  }
  return keys;
}

size_t AlertmanagerDelivery::pending_locked() const {
  size_t n = 0;
  for (const auto& [key, e] : entries_) n += e.dirty;
  return n;
}

void AlertmanagerDelivery::loop() {
  std::unique_ptr<httplib::Client> client;
  if (!origin_.empty()) {
    client = std::make_unique<httplib::Client>(origin_);
    auto secs = [](int64_t ns) { return std::chrono::microseconds(std::max<int64_t>(ns / 1000, 1000)); };
    client->set_connection_timeout(secs(o_.timeout_ns));
    client->set_read_timeout(secs(o_.timeout_ns));
    client->set_write_timeout(secs(o_.timeout_ns));
    client->set_keep_alive(false);
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    int64_t now = steady_ns();
    if (now < retry_at_ns_) {
      cv_.wait_for(lock, std::chrono::nanoseconds(retry_at_ns_ - now));
      continue;
    }
    std::vector<std::string> keys = due(now, wall_ns());
    if (keys.empty()) {
      idle_cv_.notify_all();
      // Sleep until the next re-send or hold expiry, or an offer.
      int64_t next = now + o_.resend_ns;
      int64_t wall = wall_ns();
      for (const auto& [key, e] : entries_) {
        if (e.ends_ns) continue;
        next = std::min(next, e.next_send_ns);
        if (e.hold_until_ns > 0) next = std::min(next, now + std::max<int64_t>(e.hold_until_ns - wall, 0));
      }
      cv_.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(next - now, 1'000'000)));
      continue;
    }
    std::vector<const Entry*> batch;
    std::vector<std::pair<std::string, uint64_t>> sent;
    for (const auto& k : keys) {
      const Entry& e = entries_.at(k);
      batch.push_back(&e);
      sent.emplace_back(k, e.version);
    }
    std::string payload = body(batch);
    posting_ = true;
    lock.unlock();
    int status = -1;
    if (client) {
      auto res = client->Post(path_, payload, "application/json");
      if (res) status = res->status;
    }
    lock.lock();
    posting_ = false;
    now = steady_ns();
    // 2xx: delivered. 4xx but 429: Alertmanager refuses these alerts, and would again: not retried.
    bool delivered = status >= 200 && status < 300;
    bool refused = status >= 400 && status < 500 && status != 429;
    if (counters_) (delivered ? counters_->posts : counters_->post_errors).fetch_add(1, std::memory_order_relaxed);
    if (delivered || refused) {
      if (refused)
        std::fprintf(stderr, "alertmanager sink: %s refused %zu alerts (HTTP %d)\n", o_.url.c_str(), sent.size(),
                     status);
      for (const auto& [k, version] : sent) {
        auto it = entries_.find(k);
        if (it == entries_.end() || it->second.version != version) continue;  // changed meanwhile: goes again
        if (it->second.ends_ns) {
          erase(it);
          continue;
        }
        it->second.dirty = false;
        it->second.next_send_ns = now + o_.resend_ns;
      }
      backoff_ns_ = o_.backoff_initial_ns;
      retry_at_ns_ = 0;
    } else {
      retry_at_ns_ = now + backoff_ns_;
      backoff_ns_ = std::min(2 * backoff_ns_, o_.backoff_max_ns);
    }
    idle_cv_.notify_all();
  }
}

size_t AlertmanagerDelivery::flush(int64_t bound_ns) {
  std::unique_lock<std::mutex> lock(mu_);
  int64_t deadline = steady_ns() + bound_ns;
  // A retry waiting on its backoff goes at once: the bound is what limits it now.
  retry_at_ns_ = std::min(retry_at_ns_, steady_ns());
  backoff_ns_ = std::min(backoff_ns_, std::max<int64_t>(bound_ns / 8, o_.backoff_initial_ns));
  cv_.notify_all();
  while (thread_.joinable() && (pending_locked() > 0 || posting_)) {
    int64_t now = steady_ns();
    if (now >= deadline) break;
    idle_cv_.wait_for(lock, std::chrono::nanoseconds(std::min<int64_t>(deadline - now, 50'000'000)));
  }
  size_t left = pending_locked();
  stop_ = true;
  lock.unlock();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (counters_) counters_->undelivered.fetch_add(left, std::memory_order_relaxed);
  return left;
}

size_t AlertmanagerDelivery::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

size_t AlertmanagerDelivery::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_locked();
}

std::string AlertmanagerDelivery::pending_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const Entry*> batch;
  for (const auto& [key, e] : entries_) {
    if (e.dirty) batch.push_back(&e);
  }
  return body(batch);
}

std::string AlertmanagerDelivery::body(const std::vector<const Entry*>& entries) const {
  std::string out = "[";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out += ",";
    encode(&out, *entries[i]);
  }
  return out + "]";
}

void AlertmanagerDelivery::encode(std::string* out, const Entry& e) const {
  const Alert& a = *e.alert;
  json::Writer w(out);
  w.begin_object();
  w.key("labels").begin_object();
  w.key("alertname").str(a.kind);
  w.key("severity").str(severity_name(a.severity));
  w.key("alert_id").str(a.alert_id);
  if (!a.run_id.empty()) w.key("run_id").str(a.run_id.str());
  if (auto j = jobs_.find(a.run_id); j != jobs_.end()) w.key("job_id").str(j->second.str());
  if (!a.node.empty()) w.key("node").str(a.node.str());
  if (a.gpu) w.key("gpu").str(std::to_string(*a.gpu));
  if (a.rank) w.key("rank").str(std::to_string(*a.rank));
  if (!a.model_id.empty()) w.key("model_id").str(a.model_id);
  if (!e.owner.empty()) w.key("owner").str(e.owner);
  w.end_object();
  w.key("annotations").begin_object();
  w.key("summary").str(a.summary);
  if (!a.cause.empty()) w.key("cause").str(a.cause);
  if (!a.evidence.empty()) {
    std::string ev;
    for (const Evidence& x : a.evidence) {
      if (!ev.empty()) ev += "\n";
      ev += x.kind + (x.step ? " (step " + std::to_string(*x.step) + ")" : std::string()) + ": " + x.detail;
      if (ev.size() > kMaxEvidence) {
        ev.resize(kMaxEvidence);
        ev += "...";
        break;
      }
    }
    w.key("evidence").str(ev);
  }
  if (!a.recommendation.empty()) w.key("recommendation").str(a.recommendation);
  std::string link = render_link(o_.link, a);
  if (!link.empty()) w.key("link").str(link);
  if (a.value) w.key("value").str(fmt_num(*a.value, "%g"));
  if (a.threshold) w.key("threshold").str(fmt_num(*a.threshold, "%g"));
  w.key("revision").str(std::to_string(a.revision));
  w.end_object();
  // Alertmanager refuses an end before the start.
  int64_t starts = a.time_ns;
  w.key("startsAt").str(rfc3339(starts));
  if (e.ends_ns) w.key("endsAt").str(rfc3339(std::max(*e.ends_ns, starts + 1'000'000)));
  if (!link.empty()) w.key("generatorURL").str(link);
  w.end_object();
}

namespace {

class AlertmanagerSink final : public Operator {
 public:
  AlertmanagerSink(const AlertmanagerOptions& o, runtime::NodeCounters* counters)
      : o_(o), delivery_(o, counters ? &counters->delivery : nullptr) {
    if (!o_.url.empty()) delivery_.start();  // without a url the sink is inert (routed no rows)
  }
  void process(const Record& r, Emitter&) override {
    switch (r.kind()) {
      case Kind::kAlert:
        delivery_.offer(r.alert());
        break;
      case Kind::kRunStart:
        delivery_.run_start(r.run_start().run_id, r.run_start().job_id);
        break;
      case Kind::kRunEnd:
        delivery_.run_end(r.as<RunEnd>().run_id, r.time_ns);
        break;
      default:
        break;
    }
  }
  void finish(Emitter&) override {
    if (o_.url.empty()) return;
    size_t left = delivery_.flush(o_.flush_ns);
    if (left > 0) {
      std::fprintf(stderr, "alertmanager sink: %zu alerts not delivered to %s within %s\n", left, o_.url.c_str(),
                   runtime::format_duration(o_.flush_ns).c_str());
    }
  }

 private:
  AlertmanagerOptions o_;
  AlertmanagerDelivery delivery_;
};

class AlertmanagerSinkDef final : public OperatorDef {
 public:
  explicit AlertmanagerSinkDef(AlertmanagerOptions o) : o_(std::move(o)) {}
  std::unique_ptr<Operator> open(const runtime::OperatorContext& ctx) const override {
    return std::make_unique<AlertmanagerSink>(o_, ctx.counters);
  }
  // An empty url turns the sink off (the default pipeline's, unless
  // RUNLENS_ALERTMANAGER names one): it is routed no rows.
  uint32_t accepts(uint32_t declared) const override { return o_.url.empty() ? 0 : declared; }
  std::string describe() const override {
    return "url=" + (o_.url.empty() ? std::string("(none: off)") : o_.url) +
           " resend_interval=" + runtime::format_duration(o_.resend_ns) + " queue=" + std::to_string(o_.queue);
  }

 private:
  AlertmanagerOptions o_;
};

}  // namespace

void RegisterAlertmanagerSink(Registry& registry) {
  runtime::ComponentInfo info;
  info.type = "alertmanager";
  info.role = runtime::Role::kSink;
  info.doc =
      "Posts alerts to Alertmanager's v2 API (POST {url}/api/v2/alerts) from a thread of its own: the pipeline never "
      "waits on it. Labels (what does not change over an incident): alertname (the kind), severity, alert_id, "
      "run_id, job_id, node, gpu, rank, owner; annotations: summary, cause, evidence, recommendation, link, value, "
      "threshold, revision. Active alerts are re-sent every `resend_interval` and sent with endsAt when they close "
      "(their closing revision, their run's run_end, or `hold` after an event-like kind was raised). A symptom "
      "carries its kind's owner until a diagnosis that explains it names another. Failed posts are retried with "
      "exponential backoff; at most `queue` alerts are held, the least severe dropped first. List run_start and "
      "run_end rows (the source) among its inputs for job_id and run-end resolution. docs/integrations.md.";
  const AlertmanagerOptions d;
  info.params = {
      {.name = "url",
       .type = runtime::ParamType::kString,
       .doc = "Alertmanager's base URL, e.g. http://127.0.0.1:9093 (a path prefix is kept); empty: the sink is off "
              "(routed no rows)."},
      {.name = "resend_interval",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(d.resend_ns),
       .doc = "Wall time between re-sends of an active alert: keep it below Alertmanager's resolve_timeout.",
       .min = 0.001},
      {.name = "queue",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(d.queue),
       .doc = "Alerts (label sets) held at most, active or waiting for delivery; when full, info goes first, then "
              "warning, critical last (counted by severity in the delivery counters).",
       .min = 1,
       .max = 1e7},
      {.name = "timeout",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(d.timeout_ns),
       .doc = "Connect, read and write timeout of one post.",
       .min = 0.001},
      {.name = "backoff",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(d.backoff_initial_ns),
       .doc = "Delay before the first retry of a failed post; doubled on each failure up to backoff_max.",
       .min = 0.001},
      {.name = "backoff_max",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(d.backoff_max_ns),
       .doc = "Longest delay between retries.",
       .min = 0.001},
      {.name = "flush_timeout",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(d.flush_ns),
       .doc = "At the end of a replay or run, how long the sink tries to deliver what it holds; what is left is "
              "reported (stderr, delivery.undelivered).",
       .min = 0},
      {.name = "hold",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(d.hold_ns),
       .doc = "An event-like alert (one no detector closes: nan_loss, oom, xid_error, ...; docs/alerts.md) is "
              "resolved this long after it was raised.",
       .min = 0.001},
      {.name = "link",
       .type = runtime::ParamType::kString,
       .default_value = "${RUNLENS_PORTAL:-http://127.0.0.1:8080}/runs/{run_id}",
       .doc = "The run page's URL ({run_id}, {alert_id} substituted): the link annotation and generatorURL."},
  };
  info.accepts = mask(Kind::kAlert) | mask(Kind::kRunStart) | mask(Kind::kRunEnd);
  registry.add_operator(std::move(info), [](const runtime::BuildContext& ctx) {
    AlertmanagerOptions o;
    o.url = ctx.params->get_string("url");
    std::string origin, prefix, why;
    if (!o.url.empty() && !split_http_url(o.url, &origin, &prefix, &why)) ctx.fail("url", why);
    o.resend_ns = ctx.params->get_duration_ns("resend_interval");
    o.queue = ctx.params->get_int("queue");
    o.timeout_ns = ctx.params->get_duration_ns("timeout");
    o.backoff_initial_ns = ctx.params->get_duration_ns("backoff");
    o.backoff_max_ns = ctx.params->get_duration_ns("backoff_max");
    if (o.backoff_max_ns < o.backoff_initial_ns) ctx.fail("backoff_max", "backoff_max must not be below backoff");
    o.flush_ns = ctx.params->get_duration_ns("flush_timeout");
    o.hold_ns = ctx.params->get_duration_ns("hold");
    o.link = ctx.params->get_string("link");
    return std::make_unique<AlertmanagerSinkDef>(std::move(o));
  });
}

}  // namespace runlens::connectors
