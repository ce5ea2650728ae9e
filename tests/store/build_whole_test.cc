// A new store built whole (store::OpenOptions::build_whole, the timeline
// sink's `new_store: whole`, `runlens replay`'s default): built beside its
// path, put in place whole and in WAL mode by finish_build() or at close; a
// store that exists, or an in-memory one, is opened in place; a file that
// appeared at the path meanwhile is kept and the new store left where it was
// built, named in the error; one a failed write may have left half-written is
// removed, not put in place; builds of killed processes are removed at the
// next open; `replay` builds whole unless --new-store, --set or the
// environment say in_place, and both leave the same store.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <fstream>

#include "tests/cli/child_process.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

namespace fs = std::filesystem;

// The files of `dir`, by name.
std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void write_run(store::Store& s, const std::string& run_id) {
  store::GraphBatch b;
  store::RunRow r;
  r.run_id = run_id;
  b.runs.push_back(r);
  s.graph->write(b);
}

// Bytes 18 and 19 of a SQLite file's header: 2 and 2 in WAL mode, 1 and 1 with a rollback journal.
std::pair<int, int> header_versions(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char h[20] = {};
  in.read(h, sizeof h);
  return {h[18], h[19]};
}

std::string building_prefix(const std::string& db) { return fs::path(db).filename().string() + ".building-"; }

// A pid no process has: a child's, reaped.
pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

const std::string kBin = RUNLENS_BINARY;
const std::string kInput = std::string(RUNLENS_SOURCE_DIR) + "/tests/golden/straggler/input.jsonl";

}  // namespace

TEST_CASE("build whole: nothing at the path until finish_build, then the whole store in WAL mode, nothing beside") {
  std::string d = fresh_dir("whole-basic");
  std::string db = d + "/a.db";
  store::Store s = store::open_store(url_of(db), {.build_whole = true});
  REQUIRE(s.finish_build);
  CHECK_FALSE(fs::exists(db));
  // read_url names the file being built, beside the path.
  REQUIRE(s.read_url.rfind("sqlite://" + db + ".building-" + std::to_string(getpid()) + "-", 0) == 0);
  write_run(s, "r1");
  {
    store::Store reader = store::open_store(s.read_url, {.mode = store::OpenMode::kReadOnly});
    CHECK(reader.graph->run("r1"));
  }
  write_run(s, "r2");
  CHECK_FALSE(fs::exists(db));
  s.finish_build();
  CHECK(files_in(d) == std::vector<std::string>{"a.db"});  // no log, no build file left
  CHECK(header_versions(db) == std::pair<int, int>{2, 2});
  // The store is closed: nothing more is served through it.
  CHECK_THROWS_WITH_AS(s.graph->run("r1"), doctest::Contains("is closed"), store::StoreError);
  store::Store reader = store::open_store(url_of(db), {.mode = store::OpenMode::kReadOnly});
  CHECK(reader.graph->run("r1"));
  CHECK(reader.graph->run("r2"));
  fs::remove_all(d);
}

TEST_CASE("build whole: a store destroyed without finish_build is put in place all the same") {
  std::string d = fresh_dir("whole-close");
  std::string db = d + "/sub/b.db";  // its directory is made too
  {
    store::Store s = store::open_store(url_of(db), {.build_whole = true});
    write_run(s, "r1");
  }
  CHECK(files_in(d + "/sub") == std::vector<std::string>{"b.db"});
  CHECK(header_versions(db) == std::pair<int, int>{2, 2});
  store::Store reader = store::open_store(url_of(db), {.mode = store::OpenMode::kReadOnly});
  CHECK(reader.graph->run("r1"));
  fs::remove_all(d);
}

TEST_CASE("build whole: a store that exists, and an in-memory one, are written in place") {
  std::string d = fresh_dir("whole-exists");
  std::string db = d + "/c.db";
  { store::open_store(url_of(db)); }  // made in place
  store::Store s = store::open_store(url_of(db), {.build_whole = true});
  CHECK_FALSE(s.finish_build);
  CHECK(s.read_url == url_of(db));
  write_run(s, "r1");
  {  // readable at its path at once
    store::Store reader = store::open_store(url_of(db), {.mode = store::OpenMode::kReadOnly});
    CHECK(reader.graph->run("r1"));
  }
  for (const auto& name : files_in(d)) CHECK(name.find(".building-") == std::string::npos);

  store::Store memory = store::open_store("sqlite://:memory:", {.build_whole = true});
  CHECK_FALSE(memory.finish_build);
  write_run(memory, "m1");
  CHECK(memory.graph->run("m1"));
  fs::remove_all(d);
}

TEST_CASE("build whole: a file that appears at the path meanwhile is kept; the error names where the store is") {
  std::string d = fresh_dir("whole-race");
  std::string db = d + "/e.db";
  store::Store s = store::open_store(url_of(db), {.build_whole = true});
  write_run(s, "mine");
  std::string built = s.read_url.substr(std::string("sqlite://").size());
  { std::ofstream(db) << "someone else's"; }
  const std::string why = "a file appeared there while it was built; the store is left at " + built;
  CHECK_THROWS_WITH_AS(s.finish_build(), doctest::Contains(why.c_str()), store::StoreError);
  CHECK(read_file(db) == "someone else's");
  store::Store left = store::open_store(url_of(built), {.mode = store::OpenMode::kReadOnly});
  CHECK(left.graph->run("mine"));
  fs::remove_all(d);
}

TEST_CASE("build whole: after a failed write (the file size limit) nothing is put in place, and nothing is left") {
  std::string d = fresh_dir("whole-failed");
  std::string db = d + "/f.db";
  pid_t child = fork();
  if (child == 0) {  // writes past RLIMIT_FSIZE (EFBIG, not SIGXFSZ), then ends the build
    signal(SIGXFSZ, SIG_IGN);
    rlimit limit{4 << 20, 4 << 20};
    setrlimit(RLIMIT_FSIZE, &limit);
    int code = 0;
    try {
      store::Store s = store::open_store(url_of(db), {.build_whole = true});
      write_run(s, "small");
      store::GraphBatch big;
      for (int i = 0; i < 4000; ++i) {
        store::RunRow r;
        r.run_id = "run-" + std::to_string(i);
        r.config.emplace_back("notes", Value::of(std::string(2000, static_cast<char>('a' + i % 26))));
        big.runs.push_back(std::move(r));
      }
      bool write_failed = false;
      try {
        s.graph->write(big);
      } catch (const store::StoreError&) {
        write_failed = true;
      }
      if (!write_failed) code = 2;
      try {
        s.finish_build();
        code = code ? code : 3;
      } catch (const store::StoreError& e) {
        if (std::string(e.what()).find("a write to it failed") == std::string::npos) code = code ? code : 4;
      }
    } catch (...) {
      code = 5;
    }
    _exit(code);
  }
  CHECK(wait_exit(child) == 0);
  CHECK(files_in(d).empty());  // neither the store nor its build
  fs::remove_all(d);
}

TEST_CASE("build whole: a killed builder leaves nothing at the path; the next open removes what it left") {
  std::string d = fresh_dir("whole-killed");
  std::string db = d + "/k.db";
  pid_t child = fork();
  if (child == 0) {  // builds, commits, and is killed before it ends
    store::Store s = store::open_store(url_of(db), {.build_whole = true});
    write_run(s, "lost");
    kill(getpid(), SIGKILL);
    _exit(1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  CHECK_FALSE(fs::exists(db));
  auto left = files_in(d);
  REQUIRE(left.size() == 1);
  CHECK(left[0].rfind(building_prefix(db) + std::to_string(child) + "-", 0) == 0);

  // Beside it: a live process's build (pid 1), another dead one, names that are not builds.
  const std::string live = building_prefix(db) + "1-0", dead = building_prefix(db) + std::to_string(dead_pid()) + "-3";
  for (const auto& name : {live, dead, building_prefix(db) + "x-0",
                           std::string("other.db.building-") + std::to_string(dead_pid()) + "-0"}) {
    std::ofstream(d + "/" + name) << "";
  }
  {
    store::Store s = store::open_store(url_of(db), {.build_whole = true});
    write_run(s, "again");
    s.finish_build();
  }
  left = files_in(d);
  CHECK(std::count(left.begin(), left.end(), "k.db") == 1);
  CHECK(std::count(left.begin(), left.end(), live) == 1);
  CHECK(std::count(left.begin(), left.end(), building_prefix(db) + "x-0") == 1);
  CHECK(std::count_if(left.begin(), left.end(), [](const std::string& n) { return n.rfind("other.db", 0) == 0; }) == 1);
  CHECK(left.size() == 4);  // the killed build and the dead one are gone
  store::Store reader = store::open_store(url_of(db), {.mode = store::OpenMode::kReadOnly});
  CHECK(reader.graph->run("again"));
  CHECK_FALSE(reader.graph->run("lost"));
  fs::remove_all(d);
}

TEST_CASE("replay --new-store: whole by default, in_place by flag, --set or environment; the same store either way") {
  std::string d = fresh_dir("whole-replay");
  auto replay = [&](const std::string& name, const std::string& flags, const std::string& env = "") {
    auto r = shell(env + " " + kBin + " replay " + kInput + " --quiet --out " + d + "/" + name +
                   " --set RUNLENS_PUBLISH=ipc://" + d + "/" + name + ".sock " + flags);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    return SqliteFile(d + "/" + name + "/runlens.db").dump();
  };
  std::string whole = replay("whole", "");
  CHECK(whole.find("golden-straggler") != std::string::npos);
  CHECK(replay("flag", "--new-store in_place") == whole);
  CHECK(replay("set", "--set RUNLENS_NEW_STORE=in_place") == whole);
  CHECK(replay("env", "", "RUNLENS_NEW_STORE=in_place") == whole);
  CHECK(replay("over", "--new-store whole", "RUNLENS_NEW_STORE=in_place") == whole);
  // A second replay into that store, which exists now, writes it in place.
  auto r = shell(kBin + " replay " + kInput + " --quiet --out " + d + "/whole --set RUNLENS_PUBLISH=ipc://" + d +
                 "/again.sock");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  for (const auto& name : files_in(d + "/whole")) CHECK(name.find(".building-") == std::string::npos);

  auto bad = shell(kBin + " replay " + kInput + " --out " + d + "/bad --new-store sideways 2>&1");
  CHECK(bad.code == 2);
  CHECK(bad.output.find("--new-store") != std::string::npos);
  auto bad_set = shell(kBin + " replay " + kInput + " --out " + d + "/bad --set RUNLENS_NEW_STORE=sideways 2>&1");
  CHECK(bad_set.code != 0);
  CHECK(bad_set.output.find("new_store") != std::string::npos);
  CHECK_FALSE(fs::exists(d + "/bad/runlens.db"));
  fs::remove_all(d);
}

TEST_CASE("replay --new-store: readers see no store while a replay builds it whole, and a killed one leaves none") {
  std::string d = fresh_dir("whole-paced");
  auto paced = [&](const std::string& name, const std::string& mode) {  // mode "": replay's default
    std::vector<std::string> args{"replay",       kInput,    "--speed",
                                  "100x",         "--quiet", "--out",
                                  d + "/" + name, "--set",   "RUNLENS_PUBLISH=ipc://" + d + "/" + name + ".sock"};
    if (!mode.empty()) args.insert(args.end(), {"--new-store", mode});
    return spawn(args, d + "/" + name + ".log");
  };
  auto building = [&](const std::string& name) {
    if (!fs::exists(d + "/" + name)) return false;
    for (const auto& f : files_in(d + "/" + name))
      if (f.rfind("runlens.db.building-", 0) == 0) return true;
    return false;
  };
  // The input spans 327 s of event time: 3.3 s at 100x.
  pid_t whole = paced("whole", "");
  REQUIRE(wait_for([&] { return building("whole"); }, 10));
  CHECK_FALSE(fs::exists(d + "/whole/runlens.db"));
  kill(whole, SIGKILL);
  wait_exit(whole);
  CHECK_FALSE(fs::exists(d + "/whole/runlens.db"));

  pid_t live = paced("live", "in_place");
  REQUIRE(wait_for([&] { return fs::exists(d + "/live/runlens.db"); }, 10));
  CHECK(waitpid(live, nullptr, WNOHANG) == 0);  // still running, and its store is there to read
  CHECK_FALSE(building("live"));
  CHECK(wait_exit(live) == 0);
  fs::remove_all(d);
}
