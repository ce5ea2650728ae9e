#include "connectors/sources/prometheus_scrape.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "formats/prom_text.h"

namespace runlens::connectors {

bool parse_scrape_target(const std::string& text, ScrapeTarget* out, std::string* why) {
  std::string rest = text;
  if (rest.rfind("https://", 0) == 0) {
    *why = "https targets are not supported (this build's HTTP client has no TLS): " + text;
    return false;
  }
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (rest.find("://") != std::string::npos) {
    *why = "expected http://host:port/path or host:port, got '" + text + "'";
    return false;
  }
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  out->path = slash == std::string::npos ? "/metrics" : rest.substr(slash);
  size_t colon = authority.rfind(':');
  if (authority.empty() || colon == std::string::npos || colon == 0 || colon + 1 == authority.size()) {
    *why = "expected host:port in '" + text + "' (a scrape target names its port)";
    return false;
  }
  out->host = authority.substr(0, colon);
  std::string port = authority.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 ||
      std::stoi(port) > 65535) {
    *why = "invalid port '" + port + "' in '" + text + "'";
    return false;
  }
  out->port = std::stoi(port);
  out->host_port = authority;
  out->url = "http://" + authority + out->path;
  return true;
}

namespace {

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ms_text(int64_t ns) { return std::to_string(ns / 1'000'000) + " ms"; }

// What one scrape gave: rows, or why it failed.
struct ScrapeResult {
  size_t target = 0;
  bool ok = false;
  std::vector<Record> rows;
  runtime::DeadLetter dead;  // when !ok
  int64_t promise_ns = 0;    // no row of any target will be older than this
};

class PrometheusScrape final : public runtime::SourceDef<Record> {
 public:
  explicit PrometheusScrape(PrometheusScrapeOptions o) : o_(std::move(o)) {}

  void run(runtime::SourceOutput<Record>& out) override {
    if (o_.targets.empty()) return;  // nothing to scrape: the source ends at once and holds nothing back
    component_ = out.node_id();
    targets_.clear();
    for (const auto& t : o_.targets) {
      auto s = std::make_unique<TargetState>();
      s->mapper = std::make_unique<ScrapeMapper>(Symbol::intern(t.node), t.format, t.node_given);
      targets_.push_back(std::move(s));
    }
    int64_t start = wall_ns();
    for (auto& t : targets_) t->due_ns = start;
    size_t workers = static_cast<size_t>(std::min<int64_t>(o_.concurrency, static_cast<int64_t>(targets_.size())));
    for (size_t i = 0; i < workers; ++i) workers_.emplace_back([this] { work(); });

    std::vector<uint64_t> seq(targets_.size(), 0);
    std::deque<ScrapeResult> batch;
    while (!out.stopping() && !interrupted_.load()) {
      {
        std::unique_lock lk(results_mu_);
        results_cv_.wait_for(lk, std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(10), out.watermark_due()),
                             [&] { return !results_.empty() || interrupted_.load(); });
        batch.swap(results_);
      }
      if (batch.empty()) {
        out.idle();
        continue;
      }
      for (ScrapeResult& r : batch) {
        const ScrapeTarget& t = o_.targets[r.target];
        if (!r.ok) {
          r.dead.component = component_;
          out.dead_letters().write(r.dead);
          out.counters().add(out.counters().dead_lettered, 1);
        }
        // A failed target leaves (a final batch): it holds nothing back until it answers again.
        runtime::Progress p{t.url, ++seq[r.target], r.promise_ns, /*final=*/!r.ok};
        out.push(
            r.rows, [&](size_t) { return t.url; }, &p);
      }
      batch.clear();
    }
    stop_workers();
  }

  void interrupt() override {
    interrupted_.store(true);
    results_cv_.notify_all();
  }
  bool live() const override { return true; }

  std::string describe() const override {
    std::string s = std::to_string(o_.targets.size()) + " targets every " + runtime::format_duration(o_.interval_ns);
    for (size_t i = 0; i < o_.targets.size() && i < 4; ++i) s += (i ? ", " : ": ") + o_.targets[i].url;
    if (o_.targets.size() > 4) s += ", ...";
    return s;
  }

 private:
  struct TargetState {
    std::unique_ptr<ScrapeMapper> mapper;  // used by one worker at a time (the target is busy)
    std::unique_ptr<httplib::Client> client;
    int64_t due_ns = 0;    // the next tick
    int64_t start_ns = 0;  // the scrape in flight began (event time of its rows)
    bool busy = false;
    int64_t stamped_floor_ns = INT64_MAX;  // the oldest row of its last scrape, when the exporter stamps samples
  };

  // The oldest event time any target's rows can still have: a target in
  // flight stamps its rows with its start, an idle one with its next tick or
  // later; one whose exporter stamps samples no older than its last scrape's
  // oldest row. Monotone. Under mu_.
  int64_t safe_bound() const {
    int64_t b = INT64_MAX;
    for (const auto& t : targets_) b = std::min({b, t->busy ? t->start_ns : t->due_ns, t->stamped_floor_ns});
    return b;
  }

  void work() {
    std::unique_lock lk(mu_);
    while (!stop_) {
      TargetState* next = nullptr;
      size_t index = 0;
      for (size_t i = 0; i < targets_.size(); ++i) {
        TargetState* t = targets_[i].get();
        if (!t->busy && (!next || t->due_ns < next->due_ns)) next = t, index = i;
      }
      if (!next) {
        cv_.wait(lk);
        continue;
      }
      int64_t now = wall_ns();
      if (next->due_ns > now) {
        cv_.wait_for(lk, std::chrono::nanoseconds(next->due_ns - now));
        continue;
      }
      next->busy = true;
      next->start_ns = std::max(now, next->due_ns);
      if (!next->client) {
        const ScrapeTarget& t = o_.targets[index];
        next->client = std::make_unique<httplib::Client>(t.host, t.port);
        next->client->set_keep_alive(true);
      }
      lk.unlock();
      ScrapeResult r = scrape(index, *next);
      lk.lock();
      next->busy = false;
      // The next tick after now: a scrape that overran skips the ticks it missed.
      int64_t done = wall_ns();
      while (next->due_ns <= done) next->due_ns += o_.interval_ns;
      if (r.ok && next->mapper->stamped() && !r.rows.empty()) {
        int64_t oldest = INT64_MAX;
        for (const Record& row : r.rows) oldest = std::min(oldest, row.time_ns);
        next->stamped_floor_ns = oldest;
      } else if (r.ok) {
        next->stamped_floor_ns = INT64_MAX;
      }
      r.promise_ns = safe_bound();
      {
        std::lock_guard rl(results_mu_);
        results_.push_back(std::move(r));
      }
      results_cv_.notify_one();
      cv_.notify_all();
    }
  }

  ScrapeResult scrape(size_t index, TargetState& st) {
    const ScrapeTarget& t = o_.targets[index];
    ScrapeResult r;
    r.target = index;
    r.dead.position = t.url;
    auto fail = [&](std::string why) {
      r.ok = false;
      r.dead.reason = std::move(why);
      return std::move(r);
    };
    httplib::Client& cli = *st.client;
    auto timeout = std::chrono::nanoseconds(o_.timeout_ns);
    auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout);
    auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(timeout - secs);
    cli.set_connection_timeout(secs.count(), usecs.count());
    cli.set_read_timeout(secs.count(), usecs.count());
    cli.set_write_timeout(secs.count(), usecs.count());
    auto began = std::chrono::steady_clock::now();
    std::string body;
    bool too_large = false, too_slow = false;
    httplib::Headers headers = {{"Accept", "text/plain;version=0.0.4"}};
    auto res = cli.Get(t.path, headers, [&](const char* data, size_t n) {
      if (body.size() + n > static_cast<size_t>(o_.max_bytes)) {
        too_large = true;
        return false;
      }
      if (std::chrono::steady_clock::now() - began > timeout) {
        too_slow = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    int64_t took =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - began).count();
    if (stop_requested()) return fail("scrape cancelled: the source is stopping");
    if (too_large) return fail("answer larger than max_bytes (" + std::to_string(o_.max_bytes) + " bytes)");
    if (too_slow || (!res && took >= o_.timeout_ns - 1'000'000))
      return fail("timeout: no complete answer within " + ms_text(o_.timeout_ns) + " (timeout)");
    if (!res) {
      httplib::Error e = res.error();
      if (e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout)
        return fail("target down: cannot connect to " + t.host_port + " (" + httplib::to_string(e) + ")");
      return fail("scrape failed after " + ms_text(took) + ": " + httplib::to_string(e));
    }
    if (res->status != 200) return fail("HTTP " + std::to_string(res->status) + " from the target (expected 200)");
    prom::Exposition e;
    prom::ParseError pe;
    if (!prom::parse_text(body, &e, &pe)) {
      r.dead.position = t.url + " line " + std::to_string(pe.line) + ":" + std::to_string(pe.col);
      r.dead.raw = line_of(body, pe.line);
      return fail("malformed exposition: " + pe.message);
    }
    std::string why;
    if (!st.mapper->map(e, st.start_ns, &r.rows, &why)) return fail(why);
    r.ok = true;
    return r;
  }

  static std::string line_of(const std::string& text, int line) {
    size_t pos = 0;
    for (int i = 1; i < line && pos != std::string::npos; ++i) {
      pos = text.find('\n', pos);
      if (pos != std::string::npos) ++pos;
    }
    if (pos == std::string::npos || pos > text.size()) return {};
    std::string s = text.substr(pos, text.find('\n', pos) - pos);
    if (s.size() > 512) s.resize(512);
    return s;
  }

  bool stop_requested() {
    std::lock_guard lk(mu_);
    return stop_;
  }

  void stop_workers() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
      // A scrape in flight is cut short rather than waited for (up to its timeout).
      for (auto& t : targets_) {
        if (t->busy && t->client) t->client->stop();
      }
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  PrometheusScrapeOptions o_;
  std::string component_;
  std::vector<std::unique_ptr<TargetState>> targets_;
  std::vector<std::thread> workers_;
  std::mutex mu_;  // targets_' schedule, stop_
  std::condition_variable cv_;
  bool stop_ = false;
  std::mutex results_mu_;
  std::condition_variable results_cv_;
  std::deque<ScrapeResult> results_;
  std::atomic<bool> interrupted_{false};
};

// "KEY=VALUE" items, several comma-separated in one item (so that one
// ${VAR} can hold many); blank ones skipped.
std::vector<std::pair<std::string, std::string>> pairs_of(const std::vector<std::string>& items, bool* ok,
                                                          std::string* bad) {
  std::vector<std::pair<std::string, std::string>> out;
  *ok = true;
  for (const auto& item : items) {
    size_t pos = 0;
    while (pos <= item.size()) {
      size_t comma = item.find(',', pos);
      std::string part = item.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? item.size() + 1 : comma + 1;
      part.erase(0, part.find_first_not_of(" \t"));
      part.erase(part.find_last_not_of(" \t") + 1);
      if (part.empty()) continue;
      size_t eq = part.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == part.size()) {
        *ok = false;
        *bad = part;
        return out;
      }
      out.emplace_back(part.substr(0, eq), part.substr(eq + 1));
    }
  }
  return out;
}

std::vector<std::string> split_list(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    size_t pos = 0;
    while (pos <= item.size()) {
      size_t cut = item.find_first_of(", \t", pos);
      std::string part = item.substr(pos, cut == std::string::npos ? std::string::npos : cut - pos);
      pos = cut == std::string::npos ? item.size() + 1 : cut + 1;
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<runtime::SourceDef<Record>> MakePrometheusScrapeSource(PrometheusScrapeOptions options) {
  return std::make_unique<PrometheusScrape>(std::move(options));
}

void RegisterPrometheusScrapeSource(Registry& registry) {
  runtime::ComponentInfo info;
  info.type = "prometheus_scrape";
  info.role = runtime::Role::kSource;
  info.doc =
      "Scrapes node_exporter and dcgm-exporter targets (the Prometheus text format over HTTP) every `interval` and "
      "emits node and gpu samples (docs/integrations.md has the mapping). Each target is a producer with its own "
      "progress; one that is down, slow, answers non-200 or serves malformed text is dead-lettered with the reason "
      "(and line:col) and the others go on. No targets: the source ends at once.";
  const PrometheusScrapeOptions defaults;  // each default is written once, in PrometheusScrapeOptions
  info.params = {
      {.name = "targets",
       .type = runtime::ParamType::kStringList,
       .default_value = "[]",
       .doc = "Targets: http://host:port/path, or host:port (path /metrics); an item may list several, separated by "
              "commas or blanks (so that one ${VAR} can hold them)."},
      {.name = "nodes",
       .type = runtime::ParamType::kStringList,
       .default_value = "[]",
       .doc = "TARGET=NODE items (TARGET as host:port or the URL): the node a node_exporter target's samples name, "
              "as run_start's rank map names it. Default: the uname collector's nodename, else the target's host. "
              "dcgm-exporter's samples name the node of their Hostname label."},
      {.name = "formats",
       .type = runtime::ParamType::kStringList,
       .default_value = "[]",
       .doc = "TARGET=FORMAT items (node_exporter or dcgm); a target not named is detected from its families "
              "(DCGM_FI_* or node_*)."},
      {.name = "interval",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.interval_ns),
       .doc = "Time between two scrapes of a target.",
       .min = 0.01},
      {.name = "timeout",
       .type = runtime::ParamType::kDuration,
       .default_value = runtime::duration_text(defaults.timeout_ns),
       .doc = "A scrape not answered in full within this is dead-lettered (at most `interval`; 0: `interval`).",
       .min = 0},
      {.name = "concurrency",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(defaults.concurrency),
       .doc = "Scrapes in flight at once (worker threads); a slow target holds one of them.",
       .min = 1,
       .max = 1024},
      {.name = "max_bytes",
       .type = runtime::ParamType::kInt,
       .default_value = runtime::int_text(defaults.max_bytes),
       .doc = "Largest answer accepted; a larger one is dead-lettered.",
       .min = 1024},
  };
  info.emits = mask(Kind::kGpu) | mask(Kind::kNode);
  registry.add_source(std::move(info), [](const runtime::BuildContext& ctx) {
    PrometheusScrapeOptions o;
    o.interval_ns = ctx.params->get_duration_ns("interval");
    o.timeout_ns = ctx.params->get_duration_ns("timeout");
    if (o.timeout_ns == 0) o.timeout_ns = o.interval_ns;
    if (o.timeout_ns > o.interval_ns)
      ctx.fail("timeout", "timeout (" + runtime::format_duration(o.timeout_ns) + ") is longer than interval (" +
                              runtime::format_duration(o.interval_ns) + ")");
    o.concurrency = ctx.params->get_int("concurrency");
    o.max_bytes = ctx.params->get_int("max_bytes");
    for (const auto& text : split_list(ctx.params->get_list("targets"))) {
      ScrapeTarget t;
      std::string why;
      if (!parse_scrape_target(text, &t, &why)) ctx.fail("targets", why);
      for (const auto& other : o.targets) {
        if (other.url == t.url) ctx.fail("targets", "target " + t.url + " is listed twice");
      }
      t.node = t.host;
      o.targets.push_back(std::move(t));
    }
    auto find = [&](const std::string& key, const char* param) -> ScrapeTarget& {
      for (auto& t : o.targets) {
        if (t.host_port == key || t.url == key) return t;
        ScrapeTarget k;
        std::string why;
        if (parse_scrape_target(key, &k, &why) && k.url == t.url) return t;
      }
      ctx.fail(param, "'" + key + "' is not one of the targets");
    };
    bool ok = true;
    std::string bad;
    for (const auto& [key, node] : pairs_of(ctx.params->get_list("nodes"), &ok, &bad)) {
      ScrapeTarget& t = find(key, "nodes");
      t.node = node;
      t.node_given = true;
    }
    if (!ok) ctx.fail("nodes", "expected TARGET=NODE, got '" + bad + "'");
    for (const auto& [key, format] : pairs_of(ctx.params->get_list("formats"), &ok, &bad)) {
      ScrapeTarget& t = find(key, "formats");
      if (format == "node_exporter")
        t.format = ScrapeFormat::kNodeExporter;
      else if (format == "dcgm")
        t.format = ScrapeFormat::kDcgm;
      else
        ctx.fail("formats", "unknown format '" + format + "' for " + key + " (node_exporter or dcgm)");
    }
    if (!ok) ctx.fail("formats", "expected TARGET=FORMAT, got '" + bad + "'");
    return MakePrometheusScrapeSource(std::move(o));
  });
}

}  // namespace runlens::connectors
