// The alertmanager sink against Debian's prometheus-alertmanager (0.25),
// started here as a plain process on a loopback port, with a webhook receiver
// in the test: a straggler arrives grouped by run with its labels and
// annotations, its resolution arrives, and an outage of Alertmanager during
// the run loses nothing. The shipped routing tree passes amtool check-config.
#include <httplib.h>

#include <mutex>
#include <set>
#include <sstream>

#include "formats/json_reader.h"
#include "tests/cli/child_process.h"

namespace runlens {
namespace {

using testing::read_file;
using testing::scratch_dir;
using testing::shell;
using testing::wait_exit;
using testing::wait_for;
using testing::write_text;

// A server binary: on PATH, else in /usr/bin; empty when missing (the test fails: CI installs it).
std::string find_binary(const std::string& name) {
  testing::ShellResult r = shell("command -v " + name);
  if (r.code == 0 && !r.output.empty()) return r.output.substr(0, r.output.find('\n'));
  if (std::filesystem::exists("/usr/bin/" + name)) return "/usr/bin/" + name;
  return "";
}

using testing::free_port;

// A process started here, stopped by its PID when the test ends, pass or fail.
struct Process {
  pid_t pid = -1;
  explicit Process(pid_t p) : pid(p) {}
  Process(const Process&) = delete;
  ~Process() { stop(SIGTERM); }
  void stop(int sig) {
    if (pid <= 0) return;
    kill(pid, sig);
    if (wait_exit(pid, 10) < 0) kill(pid, SIGKILL);
    pid = -1;
  }
};

pid_t spawn_exe(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "a");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// The webhook receiver: records every notification Alertmanager posts.
class Hook {
 public:
  Hook() {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      bodies_.push_back(req.body);
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Hook() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  // Every alert of every notification so far: (status, the alert object), with the group's labels.
  struct Seen {
    std::string status, group_run_id;
    json::Value alert;
  };
  std::vector<Seen> alerts() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Seen> out;
    for (const auto& b : bodies_) {
      json::Value v;
      json::ParseError pe;
      if (!json::parse(b, &v, &pe)) continue;
      std::string run;
      if (const json::Value* g = v.find("groupLabels"); g && g->find("run_id")) run = g->find("run_id")->text;
      if (const json::Value* as = v.find("alerts")) {
        for (const auto& a : as->items) out.push_back({a.find("status") ? a.find("status")->text : "", run, a});
      }
    }
    return out;
  }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> bodies_;
};

std::string label(const json::Value& alert, std::string_view name) {
  const json::Value* l = alert.find("labels");
  const json::Value* x = l ? l->find(name) : nullptr;
  return x ? x->text : "";
}
std::string annotation(const json::Value& alert, std::string_view name) {
  const json::Value* l = alert.find("annotations");
  const json::Value* x = l ? l->find(name) : nullptr;
  return x ? x->text : "";
}

// Alertmanager on 127.0.0.1:port with a route to the hook, no gossip.
struct Alertmanager {
  std::string bin, dir, config;
  int port;
  std::unique_ptr<Process> proc;
  Alertmanager(const std::string& d, int hook_port) : dir(d), port(free_port()) {
    bin = find_binary("prometheus-alertmanager");
    REQUIRE_MESSAGE(!bin.empty(), "prometheus-alertmanager is not installed (apt-get install prometheus-alertmanager)");
    config = write_text(dir, "am.yml",
                        "route:\n"
                        "  receiver: hook\n"
                        "  group_by: [run_id]\n"
                        "  group_wait: 100ms\n"
                        "  group_interval: 200ms\n"
                        "  repeat_interval: 1h\n"
                        "receivers:\n"
                        "  - name: hook\n"
                        "    webhook_configs:\n"
                        "      - url: http://127.0.0.1:" +
                            std::to_string(hook_port) +
                            "/hook\n"
                            "        send_resolved: true\n");
    start();
  }
  void start() {
    std::filesystem::create_directories(dir + "/am-data");
    proc = std::make_unique<Process>(
        spawn_exe({bin, "--config.file=" + config, "--storage.path=" + dir + "/am-data",
                   "--web.listen-address=127.0.0.1:" + std::to_string(port), "--cluster.listen-address="},
                  dir + "/am.log"));
    httplib::Client c("127.0.0.1", port);
    REQUIRE_MESSAGE(wait_for(
                        [&] {
                          auto r = c.Get("/-/ready");
                          return r && r->status == 200;
                        },
                        10),
                    read_file(dir + "/am.log"));
  }
  void kill_now() { proc->stop(SIGKILL); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  // The alert_ids Alertmanager holds active now.
  std::set<std::string> active() const {
    httplib::Client c("127.0.0.1", port);
    std::set<std::string> ids;
    auto r = c.Get("/api/v2/alerts");
    if (!r || r->status != 200) return ids;
    json::Value v;
    json::ParseError pe;
    if (!json::parse(r->body, &v, &pe)) return ids;
    for (const auto& a : v.items) ids.insert(label(a, "alert_id"));
    return ids;
  }
};

std::string pipeline(const std::string& dir, const std::string& am_url) {
  return write_text(dir, "pipeline.yaml",
                    "version: 1\n"
                    "name: alertmanager-test\n"
                    "settings: {lateness: 100ms}\n"  // alerts go out as the paced replay reaches them
                    "sources:\n"
                    "  telemetry: {type: file, paths: [replaced-by-replay]}\n"
                    "operators:\n"
                    "  join: {type: rank_join, inputs: [telemetry]}\n"
                    "  stragglers: {type: straggler, inputs: [join], ratio_threshold: 1.5, persist_k: 3, persist_n: "
                    "5}\n"
                    "sinks:\n"
                    "  alerts: {type: jsonl, inputs: [stragglers], path: \"" +
                        dir +
                        "/alerts.jsonl\"}\n"
                        "  am:\n"
                        "    type: alertmanager\n"
                        "    inputs: [stragglers]\n"
                        "    url: " +
                        am_url +
                        "\n"
                        "    resend_interval: 300ms\n"
                        "    backoff: 100ms\n"
                        "    backoff_max: 400ms\n"
                        "    flush_timeout: 5s\n"
                        "    link: http://portal.example/runs/{run_id}\n");
}

std::vector<std::string> alert_ids_of(const std::string& jsonl, bool opening_only) {
  std::vector<std::string> ids;
  std::istringstream in(jsonl);
  std::string line;
  while (std::getline(in, line)) {
    json::Value v;
    json::ParseError pe;
    if (!json::parse(line, &v, &pe) || !v.find("alert_id")) continue;
    if (opening_only && v.find("ends_ns")) continue;
    ids.push_back(v.find("alert_id")->text);
  }
  return ids;
}

}  // namespace

TEST_CASE("a straggler reaches Alertmanager's receiver grouped by run, with its labels, and then its resolution") {
  std::string dir = scratch_dir("am-straggler");
  Hook hook;
  Alertmanager am(dir, hook.port());
  std::string in = dir + "/in.jsonl";
  testing::ShellResult syn = shell(std::string(RUNLENS_BINARY) + " synth --out " + in +
                                   " --run-id run-am --job-id job-7 --ranks 8 --steps 60 --step-ms 40 --gpu-every 0 "
                                   "--fault straggler:rank=3,from=5,to=40");
  REQUIRE_MESSAGE(syn.code == 0, syn.output);
  testing::ShellResult r = shell(std::string(RUNLENS_BINARY) + " replay " + in + " --pipeline " +
                                 pipeline(dir, am.url()) + " --speed 20x --quiet --threads 2 --out " + dir);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  std::string alerts = read_file(dir + "/alerts.jsonl");
  REQUIRE_MESSAGE(alert_ids_of(alerts, true).size() == 1, alerts);
  REQUIRE_MESSAGE(alerts.find("\"ends_ns\":") != std::string::npos, alerts);  // its closing revision
  std::string id = alert_ids_of(alerts, true).front();

  auto has = [&](const std::string& status) {
    for (const auto& s : hook.alerts()) {
      if (s.status == status && label(s.alert, "alert_id") == id) return true;
    }
    return false;
  };
  REQUIRE_MESSAGE(wait_for([&] { return has("firing") && has("resolved"); }, 10), read_file(dir + "/am.log"));
  for (const auto& s : hook.alerts()) {
    if (label(s.alert, "alert_id") != id) continue;
    CHECK(s.group_run_id == "run-am");
    CHECK(label(s.alert, "alertname") == "straggler");
    CHECK(label(s.alert, "severity") == "warning");
    CHECK(label(s.alert, "run_id") == "run-am");
    CHECK(label(s.alert, "rank") == "3");
    CHECK(label(s.alert, "owner") == "infrastructure");
    CHECK(!label(s.alert, "node").empty());
    CHECK(annotation(s.alert, "summary").rfind("STRAGGLER DETECTED: rank 3", 0) == 0);
    CHECK(annotation(s.alert, "link") == "http://portal.example/runs/run-am");
    CHECK(annotation(s.alert, "threshold") == "1.5");
    CHECK(s.alert.find("generatorURL")->text == "http://portal.example/runs/run-am");
    CHECK(annotation(s.alert, "revision") == (s.status == "resolved" ? "1" : "0"));
  }
}

TEST_CASE("an Alertmanager killed during the run and restarted on its port loses no alert") {
  std::string dir = scratch_dir("am-outage");
  Hook hook;
  Alertmanager am(dir, hook.port());
  std::string in = dir + "/in.jsonl";
  testing::ShellResult syn = shell(std::string(RUNLENS_BINARY) + " synth --out " + in +
                                   " --run-id run-out --ranks 8 --steps 80 --step-ms 40 --gpu-every 0 "
                                   "--fault straggler:rank=3,from=3 --fault straggler:rank=6,from=50");
  REQUIRE_MESSAGE(syn.code == 0, syn.output);
  std::string counters = dir + "/counters.json";
  pid_t replay = testing::spawn({"replay", in, "--pipeline", pipeline(dir, am.url()), "--speed", "20x", "--quiet",
                                 "--threads", "2", "--out", dir, "--counters-json", counters},
                                dir + "/replay.log");
  Process replay_guard(replay);
  // The first straggler reaches the receiver; then Alertmanager goes down while the second opens.
  REQUIRE(wait_for([&] { return !hook.alerts().empty(); }, 10));
  am.kill_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  am.start();
  int code = wait_exit(replay, 30);
  replay_guard.pid = -1;
  REQUIRE_MESSAGE(code == 0, read_file(dir + "/replay.log"));
  std::vector<std::string> ids = alert_ids_of(read_file(dir + "/alerts.jsonl"), true);
  REQUIRE(ids.size() == 2);
  auto all_arrived = [&] {
    std::set<std::string> seen = am.active();
    for (const auto& s : hook.alerts()) seen.insert(label(s.alert, "alert_id"));
    for (const auto& id : ids) {
      if (!seen.count(id)) return false;
    }
    return true;
  };
  CHECK_MESSAGE(wait_for(all_arrived, 10), read_file(dir + "/replay.log"));
  // Both are active in the restarted Alertmanager: the first re-sent, the second delivered from the queue.
  std::set<std::string> active = am.active();
  for (const auto& id : ids) CHECK(active.count(id) == 1);
  std::string c = read_file(counters);
  CHECK_MESSAGE(c.find("\"undelivered\":0}") != std::string::npos, c);
  CHECK_MESSAGE(c.find("\"post_errors\":0,") == std::string::npos, c);  // the outage was felt, and retried
}

TEST_CASE("the shipped Alertmanager routing tree passes amtool check-config") {
  std::string amtool = find_binary("amtool");
  REQUIRE_MESSAGE(!amtool.empty(), "amtool is not installed (apt-get install prometheus-alertmanager)");
  testing::ShellResult r = shell(amtool + " check-config " RUNLENS_SOURCE_DIR "/configs/alertmanager/alertmanager.yml");
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("SUCCESS") != std::string::npos);
  CHECK(r.output.find(" - 5 receivers") != std::string::npos);
}

}  // namespace runlens
