// The store on the command line (cli/store_option.h): `replay --store URL`
// and `serve --store URL` with the same URL; RUNLENS_STORE; malformed URLs
// named in the error; and the deprecated forms (--db, RUNLENS_DB, the timeline
// sink's `db`), which still work and print one deprecation line each.
#include <httplib.h>

#include <regex>

#include "tests/cli/child_process.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

const std::string kBin = RUNLENS_BINARY;
const std::string kInput = std::string(RUNLENS_SOURCE_DIR) + "/tests/golden/straggler/input.jsonl";

ShellResult sh(const std::string& args) { return shell(kBin + " " + args); }
// What `runlens ARGS` writes to stderr alone (the console sink prints alerts on stdout).
ShellResult errors(const std::string& args, const std::string& env = "") {
  return shell("{ " + env + " " + kBin + " " + args + " 2>&1 >/dev/null; }");
}

// A replay of the straggler golden input with its own alert stream, into `dir`/out.
std::string replay_args(const std::string& dir) {
  return "replay " + kInput + " --quiet --out " + dir + "/out --set RUNLENS_PUBLISH=ipc://" + dir + "/pub";
}

std::vector<std::string> runs_in(const std::string& db) {
  return lines_of(SqliteFile(db).rows("SELECT run_id FROM runs ORDER BY run_id"));
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("store flags: replay --store sqlite:///ABSOLUTE/PATH.db, then serve --store the same URL") {
  std::string d = fresh_dir("store-flag");
  std::string url = "sqlite://" + d + "/stores/all.db";
  auto r = sh(replay_args(d) + " --store " + url);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("deprecated") == std::string::npos);
  CHECK(runs_in(d + "/stores/all.db") == std::vector<std::string>{"golden-straggler"});
  CHECK_FALSE(std::filesystem::exists(d + "/out/runlens.db"));  // not the default store

  pid_t serve = spawn({"serve", "--store", url, "--port", "0", "--workers", "tcp://127.0.0.1:0"}, d + "/serve.log");
  int port = 0;
  REQUIRE(wait_for([&] {
    std::smatch m;
    std::string log = read_file(d + "/serve.log");
    if (!std::regex_search(log, m, std::regex("serving (\\S+) on http://127\\.0\\.0\\.1:(\\d+)/v1/"))) return false;
    CHECK(m[1] == url);
    port = std::stoi(m[2]);
    return true;
  }));
  httplib::Client client("127.0.0.1", port);
  auto runs = client.Get("/v1/runs");
  REQUIRE(runs);
  CHECK(runs->status == 200);
  auto v = parse_json(runs->body);
  REQUIRE(v.find("count"));
  CHECK(v.find("count")->number == 1);
  CHECK(v.find("runs")->items[0].find("runId")->text == "golden-straggler");
  auto health = client.Get("/v1/health");
  REQUIRE(health);
  CHECK(health->body == "{\"status\":\"ok\",\"schemaVersion\":10}");
  kill(serve, SIGINT);
  CHECK(wait_exit(serve) == 0);

  // The report reads it by URL too, and RUNLENS_STORE names it for both.
  auto page = sh("report --store " + url + " --run golden-straggler");
  CHECK(page.code == 0);
  CHECK(page.output.find("TRAINING RUN golden-straggler") == 0);
  std::string env_url = "sqlite://" + d + "/env.db";
  CHECK(shell("RUNLENS_STORE=" + env_url + " " + kBin + " " + replay_args(d)).code == 0);
  CHECK(runs_in(d + "/env.db") == std::vector<std::string>{"golden-straggler"});
  CHECK(shell("RUNLENS_STORE=" + env_url + " " + kBin + " report --run golden-straggler").code == 0);
  std::filesystem::remove_all(d);
}

TEST_CASE("store flags: without --store, runlens.db in --out; a relative sqlite:// URL is from the working dir") {
  std::string d = fresh_dir("store-default");
  REQUIRE(sh(replay_args(d)).code == 0);
  CHECK(runs_in(d + "/out/runlens.db") == std::vector<std::string>{"golden-straggler"});
  auto r = shell("cd " + d + " && " + kBin + " " + replay_args(d) + " --store sqlite://rel/r.db");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(runs_in(d + "/rel/r.db") == std::vector<std::string>{"golden-straggler"});
  CHECK(shell("cd " + d + " && " + kBin + " report --store sqlite://rel/r.db --run golden-straggler").code == 0);
  std::filesystem::remove_all(d);
}

TEST_CASE("store flags: a malformed store URL is a usage error naming the URL and where it came from") {
  std::string d = fresh_dir("store-bad");
  struct Case {
    std::string command, message;
  };
  const Case cases[] = {
      {replay_args(d) + " --store out/runlens.db",
       "runlens: --store: store URL 'out/runlens.db' has no scheme: expected SCHEME://LOCATION, e.g. "
       "sqlite:///ABSOLUTE/PATH.db or sqlite://RELATIVE/PATH.db\n"},
      {replay_args(d) + " --store postgres://db/x",
       "runlens: --store: store URL 'postgres://db/x' has an unknown scheme 'postgres' (this build knows "
       "sqlite://)\n"},
      {"run --store sqlite:// --out " + d,
       "runlens: --store: store URL 'sqlite://': no path (expected sqlite:///ABSOLUTE/PATH.db or "
       "sqlite://RELATIVE/PATH.db)\n"},
      {replay_args(d) + " --set RUNLENS_STORE=x.db", "runlens: RUNLENS_STORE: store URL 'x.db' has no scheme"},
      {"serve --store /abs/x.db", "runlens: --store: store URL '/abs/x.db' has no scheme"},
      {"report --store sqlite:///x.db?ro --run r", "runlens: --store: store URL 'sqlite:///x.db?ro': '?' and '#'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.command);
    auto r = sh(c.command);
    CHECK(r.code == 2);
    CHECK(r.output.find(c.message) == 0);
  }
  auto env = shell("RUNLENS_STORE=nowhere " + kBin + " serve");
  CHECK(env.code == 2);
  CHECK(env.output.find("runlens: RUNLENS_STORE: store URL 'nowhere' has no scheme") == 0);
  auto none = shell("env -u RUNLENS_STORE " + kBin + " serve");
  CHECK(none.code == 2);
  CHECK(none.output ==
        "runlens serve: name the store: --store URL (or RUNLENS_STORE), e.g. --store "
        "sqlite://out/runlens.db\n");
  // In a pipeline, the sink's parameter is checked where it is written.
  std::string pipeline = d + "/p.yaml";
  std::ofstream(pipeline) << "sources:\n  in: {type: file, paths: [x.jsonl]}\nsinks:\n  store:\n    type: timeline\n"
                             "    inputs: [in]\n    store: mysql://h/db\n";
  auto v = sh(replay_args(d) + " --pipeline " + pipeline);
  CHECK(v.code == 2);
  CHECK(v.output.find(pipeline + ":7:12: error: store URL 'mysql://h/db' has an unknown scheme 'mysql'") == 0);
  CHECK(sh("serve --store sqlite:///x.db --db x.db").code == 2);  // not both
  std::filesystem::remove_all(d);
}

TEST_CASE("store flags: --db, RUNLENS_DB and the sink's db still work, each with one deprecation line") {
  std::string d = fresh_dir("store-deprecated");
  std::string db = d + "/old.db";
  auto set = errors(replay_args(d) + " --set RUNLENS_DB=" + db);
  REQUIRE_MESSAGE(set.code == 0, set.output);
  CHECK(set.output ==
        "runlens replay: RUNLENS_DB is deprecated and goes away in the next release; use --store "
        "sqlite://" +
            db + " (or RUNLENS_STORE=sqlite://" + db + ")\n");
  CHECK(runs_in(db) == std::vector<std::string>{"golden-straggler"});

  std::string env_db = d + "/env-old.db";
  auto env = errors(replay_args(d), "RUNLENS_DB=" + env_db);
  REQUIRE(env.code == 0);
  CHECK(count(env.output, "RUNLENS_DB is deprecated") == 1);
  CHECK(count(env.output, "\n") == 1);
  CHECK(runs_in(env_db) == std::vector<std::string>{"golden-straggler"});
  // Where a store URL is also given, it wins; RUNLENS_DB is named as ignored.
  auto both = errors(replay_args(d) + " --set RUNLENS_DB=" + d + "/ignored.db --store sqlite://" + d + "/won.db");
  REQUIRE(both.code == 0);
  CHECK(both.output ==
        "runlens replay: RUNLENS_DB is deprecated and goes away in the next release; ignored here, "
        "as the store is named by --store or RUNLENS_STORE\n");
  CHECK_FALSE(std::filesystem::exists(d + "/ignored.db"));
  CHECK(runs_in(d + "/won.db") == std::vector<std::string>{"golden-straggler"});

  auto report = sh("report --db " + db + " --run golden-straggler");
  CHECK(report.code == 0);
  CHECK(report.output.find("runlens report: --db is deprecated and goes away in the next release; use --store "
                           "sqlite://" +
                           db + "\nTRAINING RUN golden-straggler") == 0);
  auto serve = sh("serve --db " + d + "/absent.db");
  CHECK(serve.code == 2);
  CHECK(serve.output ==
        "runlens serve: --db is deprecated and goes away in the next release; use --store sqlite://" + d +
            "/absent.db\nrunlens serve: no store at sqlite://" + d +
            "/absent.db (replay or run a pipeline with a timeline sink first, or pass --create to start "
            "an empty one)\n");

  // A pipeline of the previous release, with the sink's `db`.
  std::string text = read_file(std::string(RUNLENS_SOURCE_DIR) + "/pipelines/training-health.yaml");
  const std::string line = "    store: ${RUNLENS_STORE:-sqlite://${RUNLENS_OUT:-out}/runlens.db}\n";
  size_t at = text.find(line);
  REQUIRE(at != std::string::npos);
  text.replace(at, line.size(), "    db: " + d + "/sink.db\n");
  int line_no = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
  std::ofstream(d + "/old.yaml") << text;
  auto old = errors(replay_args(d) + " --pipeline " + d +
                    "/old.yaml --set RUNLENS_RULES=" + std::string(RUNLENS_SOURCE_DIR) + "/configs/rules");
  REQUIRE_MESSAGE(old.code == 0, old.output);
  CHECK(old.output == "runlens: " + d + "/old.yaml:" + std::to_string(line_no) +
                          ":9: timeline parameter 'db' is deprecated and goes away in the next release; use store: "
                          "sqlite://" +
                          d + "/sink.db\n");
  CHECK(runs_in(d + "/sink.db") == std::vector<std::string>{"golden-straggler"});
  std::filesystem::remove_all(d);
}

TEST_CASE("store flags: run --store URL --api-port serves the store the pipeline writes") {
  std::string d = fresh_dir("store-run");
  std::string url = "sqlite://" + d + "/live/store.db";
  pid_t run = spawn({"run", "--out", d + "/out", "--threads", "2", "--store", url, "--api-port", "0", "--set",
                     "RUNLENS_LISTEN=ipc://" + d + "/in.sock", "--set", "RUNLENS_PUBLISH=ipc://" + d + "/pub"},
                    d + "/run.log");
  int port = 0;
  REQUIRE(wait_for([&] {
    std::smatch m;
    std::string log = read_file(d + "/run.log");
    if (!std::regex_search(log, m, std::regex("query API on http://127\\.0\\.0\\.1:(\\d+)/v1/ \\(store (\\S+)\\)")))
      return false;
    CHECK(m[2] == url);
    port = std::stoi(m[1]);
    return std::filesystem::exists(d + "/live/store.db");
  }));
  httplib::Client client("127.0.0.1", port);
  CHECK(wait_for([&] {
    auto res = client.Get("/v1/health");
    return res && res->status == 200;
  }));
  auto runs = client.Get("/v1/runs");
  REQUIRE(runs);
  CHECK(runs->body == "{\"runs\":[],\"count\":0}");
  kill(run, SIGINT);
  int code = wait_exit(run);
  CHECK_MESSAGE(code == 0, read_file(d + "/run.log"));
  CHECK_FALSE(std::filesystem::exists(d + "/out/runlens.db"));
  std::filesystem::remove_all(d);
}
