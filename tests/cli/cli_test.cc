// The command line as users and their scripts meet it: exit codes, messages
// with file:line:col, and the files each command writes.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "engine/component_docs.h"
#include "formats/sha256.h"
#include "schema/vocabulary.h"
#include "tests/cli/child_process.h"

namespace {

using runlens::testing::read_file;
using runlens::testing::scratch_dir;
using runlens::testing::write_text;

const std::string kBin = RUNLENS_BINARY;
const std::string kSrc = RUNLENS_SOURCE_DIR;

// `runlens ARGS`: its exit code and output (stdout and stderr together).
runlens::testing::ShellResult sh(const std::string& args) { return runlens::testing::shell(kBin + " " + args); }

}  // namespace

TEST_CASE("docs/operators.md is generated from the registry and current") {
  CHECK_MESSAGE(read_file(kSrc + "/docs/operators.md") == runlens::operators_markdown(),
                "regenerate with: build/runlens operators --markdown > docs/operators.md");
}

TEST_CASE("docs/alerts.md holds the vocabulary's tables as generated from schema/vocabulary.h") {
  CHECK_MESSAGE(read_file(kSrc + "/docs/alerts.md").find(runlens::vocabulary_markdown()) != std::string::npos,
                "regenerate the tables with: build/runlens operators --vocabulary");
  auto r = sh("operators --vocabulary");
  CHECK(r.code == 0);
  CHECK(r.output == runlens::vocabulary_markdown());
}

// The hand-written "Raised today" table of docs/alerts.md says, per kind, which
// component raises it and how: it must name every alert kind of the
// vocabulary once, no other, and only components that exist.
TEST_CASE("docs/alerts.md's 'Raised today' table covers the vocabulary's alert kinds") {
  std::string doc = read_file(kSrc + "/docs/alerts.md");
  size_t at = doc.find("## Raised today");
  REQUIRE(at != std::string::npos);
  std::string components = runlens::operators_markdown();
  std::map<std::string, int> rows;  // kind -> rows naming it
  std::istringstream in(doc.substr(at));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line) && (line.empty() || line[0] == '|')) {
    if (line.rfind("| `", 0) != 0) continue;
    // "| `loss_spike`, `grad_spike` | `spike_detect` | ..."
    size_t bar = line.find(" | ", 2);
    REQUIRE(bar != std::string::npos);
    std::string kinds = line.substr(2, bar - 2);
    for (size_t q = kinds.find('`'); q != std::string::npos; q = kinds.find('`', kinds.find('`', q + 1) + 1))
      rows[kinds.substr(q + 1, kinds.find('`', q + 1) - q - 1)] += 1;
    size_t by_end = line.find(" | ", bar + 3);
    std::string by = line.substr(bar + 3, by_end - bar - 3);
    CAPTURE(line);
    // The evaluation kinds are raised by the evaluation service, not by a component.
    CHECK((by == "`runlens serve`" || components.find("### " + by + "\n") != std::string::npos));
  }
  for (const runlens::Term& t : runlens::alert_kind::kAll) {
    CAPTURE(t.name);
    CHECK(rows[std::string(t.name)] == 1);
  }
  CHECK(rows.size() == std::size(runlens::alert_kind::kAll));
}

TEST_CASE("validate accepts the shipped pipelines") {
  auto r = sh("validate " + kSrc + "/pipelines/training-health.yaml");
  CHECK(r.code == 0);
  CHECK(r.output.find(": ok") != std::string::npos);
}

TEST_CASE("validate reports each problem at file:line:col and exits 2") {
  std::string dir = scratch_dir("validate");
  std::string path = write_text(dir, "bad.yaml",
                                "sources:\n"
                                "  telemetry: {type: zmq, bind: \"tcp://127.0.0.1:5555\"}\n"
                                "operators:\n"
                                "  stragglers:\n"
                                "    type: straggler\n"
                                "    inputs: [join]\n"
                                "    ratio_treshold: 2\n");
  auto r = sh("validate " + path);
  CHECK(r.code == 2);
  CHECK(r.output.find(path + ":6:14: error: unknown input 'join'") != std::string::npos);
  CHECK(r.output.find(path + ":7:5: error: unknown parameter 'ratio_treshold' for straggler (did you mean "
                             "'ratio_threshold'?) (in operators.stragglers)") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("an invalid pipeline runs nothing") {
  std::string dir = scratch_dir("invalid");
  std::string path = write_text(dir, "bad.yaml", "sources: {s: {type: file, paths: [x]}}\nsinks: {a: {type: jsonl}}\n");
  auto r =
      sh("replay " + kSrc + "/tests/golden/nan_loss/input.jsonl --quiet --pipeline " + path + " --out " + dir + "/out");
  CHECK(r.code == 2);
  CHECK(r.output.find("missing 'inputs'") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir + "/out/alerts.jsonl"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("replay writes alerts and exits 0; --strict exits 3 when input was dead-lettered") {
  std::string dir = scratch_dir("replay");
  std::string pub = "--set RUNLENS_PUBLISH=ipc://" + dir + "/pub";
  auto r = sh("replay " + kSrc + "/tests/golden/straggler/input.jsonl --quiet --threads 2 " + pub + " --out " + dir);
  CHECK(r.code == 0);
  CHECK(read_file(dir + "/alerts.jsonl") == read_file(kSrc + "/tests/golden/straggler/expected_alerts.jsonl"));
  CHECK(r.output.find("STRAGGLER DETECTED") != std::string::npos);  // the console sink
  CHECK_FALSE(std::filesystem::exists(dir + "/dead_letter.jsonl"));

  auto bad = sh("replay " + kSrc + "/tests/golden/bad_input/input.jsonl --strict " + pub + " --out " + dir);
  CHECK(bad.code == 3);
  CHECK(bad.output.find("9 dead letters") != std::string::npos);
  CHECK(std::filesystem::exists(dir + "/dead_letter.jsonl"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("usage errors exit 2") {
  CHECK(sh("replay x.jsonl --speed sideways").code == 2);
  CHECK(sh("no-such-command").code == 2);
  CHECK(sh("synth --out /dev/null --fault meteor:rank=1").code == 2);
}

TEST_CASE("a missing input file is a clear error, not a crash") {
  std::string dir = scratch_dir("missing");
  auto r = sh("replay /nonexistent/run.jsonl --quiet --set RUNLENS_PUBLISH=ipc://" + dir + "/pub --out " + dir);
  CHECK(r.code == 2);
  CHECK(r.output.find("cannot open /nonexistent/run.jsonl") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("convert: JSONL -> recording -> JSONL is byte-identical") {
  std::string dir = scratch_dir("convert");
  std::string in = kSrc + "/tests/golden/rank_missing/input.jsonl";
  REQUIRE(sh("convert " + in + " " + dir + "/run.rlrec").code == 0);
  REQUIRE(sh("convert " + dir + "/run.rlrec " + dir + "/back.jsonl").code == 0);
  CHECK(read_file(dir + "/back.jsonl") == read_file(in));
  CHECK(read_file(dir + "/run.rlrec").substr(0, 8) == "RUNLENSR");
  std::filesystem::remove_all(dir);
}

TEST_CASE("graph prints DOT with every edge of the default pipeline") {
  auto r = sh("graph");
  CHECK(r.code == 0);
  for (const char* edge :
       {"\"telemetry\" -> \"join\"", "\"join\" -> \"stragglers\"", "\"telemetry\" -> \"nan\"",
        "\"stragglers\" -> \"context\"", "\"context\" -> \"alerts\"", "\"diagnose\" -> \"alerts\""}) {
    CHECK(r.output.find(edge) != std::string::npos);
  }
}

TEST_CASE("synth writes what it says, with the injected straggler detectable") {
  std::string dir = scratch_dir("synth");
  auto r = sh("synth --ranks 64 --steps 60 --fault straggler:rank=13,from=20 --out " + dir + "/s.rlrec");
  CHECK(r.code == 0);
  CHECK(r.output.find("64 ranks, 60 steps") != std::string::npos);
  auto rep = sh("replay " + dir + "/s.rlrec --quiet --set RUNLENS_PUBLISH=ipc://" + dir + "/pub --out " + dir);
  CHECK(rep.code == 0);
  std::string alerts = read_file(dir + "/alerts.jsonl");
  CHECK(alerts.find("\"kind\":\"straggler\"") != std::string::npos);
  CHECK(alerts.find("\"rank\":13,\"node\":\"gpu-node-1\",\"gpu\":5") != std::string::npos);
  std::filesystem::remove_all(dir);
}

namespace {
// The raw text of a top-level field of a JSONL line ("" when absent).
std::string field_text(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return "";
  at += key.size() + 3;
  return line.substr(at, line.find_first_of(",}", at) - at);
}
}  // namespace

TEST_CASE("synth --detail-every N: a data and a collective sample of every rank every N steps, nothing else changed") {
  std::string dir = scratch_dir("synth-detail-every");
  const std::string flags = " --ranks 8 --steps 12 --gpu-every 3 --fault straggler:rank=3,from=6 --fault nan:step=10";
  REQUIRE(sh("synth" + flags + " --out " + dir + "/base.jsonl").code == 0);
  auto r = sh("synth" + flags + " --detail-every 4 --out " + dir + "/rich.jsonl");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("wrote 194 events") != std::string::npos);  // 146 + 3 steps x 8 ranks x 2
  // The default output is the one before the flag existed (its SHA-256 then).
  std::string base = read_file(dir + "/base.jsonl");
  CHECK(runlens::sha256::hex(base) == "ecdb556082da0e1bfedafc950c091ca643c55ab5a4d0298d13d4d668de3faf71");
  std::istringstream in(read_file(dir + "/rich.jsonl"));
  std::string line, rest;
  std::map<std::string, std::string> comm, data_wait;      // "step/rank" -> the step's text
  std::map<std::string, std::string> latency, batch_load;  // "step/rank" -> the sample's text
  std::map<std::string, int> per_step;                     // "type step" -> samples
  while (std::getline(in, line)) {
    std::string type = field_text(line, "type"), key = field_text(line, "step") + "/" + field_text(line, "rank");
    if (type == "\"data\"" || type == "\"collective\"") {
      ++per_step[type + " " + field_text(line, "step")];
      (type == "\"data\"" ? batch_load : latency)[key] =
          field_text(line, type == "\"data\"" ? "batch_load_ms" : "latency_ms");
      if (type == "\"collective\"") CHECK(field_text(line, "op") == "\"all_reduce\"");
      continue;
    }
    rest += line + "\n";
    if (type == "\"step\"") comm[key] = field_text(line, "comm_ms"), data_wait[key] = field_text(line, "data_wait_ms");
  }
  // Without the samples, the file is the default one byte for byte.
  CHECK(rest == base);
  CHECK(per_step == std::map<std::string, int>{{"\"collective\" 12", 8},
                                               {"\"collective\" 4", 8},
                                               {"\"collective\" 8", 8},
                                               {"\"data\" 12", 8},
                                               {"\"data\" 4", 8},
                                               {"\"data\" 8", 8}});
  // Consistent with the step: the all_reduce took its comm_ms, the batch its data_wait_ms.
  REQUIRE(latency.size() == 24);
  for (const auto& [key, text] : latency) CHECK_MESSAGE(text == comm[key], key);
  for (const auto& [key, text] : batch_load) CHECK_MESSAGE(text == data_wait[key], key);
  CHECK(sh("synth --detail-every -1 --out " + dir + "/x.jsonl").code != 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("docs/telemetry.md holds the contract's field table as generated from schema/record.h") {
  CHECK_MESSAGE(read_file(kSrc + "/docs/telemetry.md").find(runlens::contract_markdown()) != std::string::npos,
                "regenerate the table with: build/runlens operators --contract");
}

TEST_CASE("report replays telemetry files and prints the failure page") {
  auto r = sh("report " + kSrc + "/tests/golden/nan_loss/input.jsonl --run golden-nan");
  CHECK(r.code == 0);
  CHECK(r.output.find("TRAINING RUN golden-nan") != std::string::npos);
  CHECK(r.output.find("NaN loss detected at step 40") != std::string::npos);
  CHECK(r.output.find("LIKELY CAUSE") != std::string::npos);
  CHECK(r.output.find("training_instability") != std::string::npos);
  CHECK(sh("report --run golden-nan").code == 2);
}

TEST_CASE("replay: the console prints a closing revision as one short resolved line") {
  std::string dir = scratch_dir("console-resolved");
  auto syn = sh("synth --out " + dir +
                "/in.jsonl --run-id run-c --ranks 8 --steps 45 --gpu-every 0 "
                "--fault straggler:rank=3,from=5,to=15");
  REQUIRE_MESSAGE(syn.code == 0, syn.output);
  auto r = sh("replay " + dir + "/in.jsonl --quiet --threads 2 --set RUNLENS_PUBLISH=ipc://" + dir + "/pub --out " +
              dir + "/out");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  std::string alerts = read_file(dir + "/out/alerts.jsonl");
  // The straggler's alert_id, from its first publication.
  size_t at = alerts.find("\"revision\":0,\"kind\":\"straggler\"");
  REQUIRE(at != std::string::npos);
  size_t id = alerts.rfind("\"alert_id\":\"", at);
  REQUIRE(id != std::string::npos);
  std::string alert_id = alerts.substr(id + 12, 16);
  size_t line = r.output.find("[warning] straggler resolved run=run-c rank=3 node=gpu-node-0 gpu=3 after ");
  REQUIRE_MESSAGE(line != std::string::npos, r.output);
  std::string text = r.output.substr(line, r.output.find('\n', line) - line);
  CHECK(text.size() < 120);
  CHECK(text.substr(text.size() - 26) == "s (alert " + alert_id + ")");
  std::filesystem::remove_all(dir);
}

namespace {

// `runlens replay - --out DIR --quiet [FLAGS]` (its alert stream on an ipc
// socket in DIR) with its standard input a pipe this test holds open,
// started with GLIBC_TUNABLES as given (unset when empty); returned once one
// of its threads waits in read(2) on that pipe.
struct WaitingReplay {
  pid_t pid = -1;
  int input = -1;  // the pipe's write end: closing it ends the replay

  // `huge_pages`: RUNLENS_HUGE_PAGES (empty: unset).
  WaitingReplay(const std::string& dir, const std::string& tunables, const std::vector<std::string>& flags = {},
                const std::string& huge_pages = "") {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      dup2(fds[0], 0);
      close(fds[0]);
      close(fds[1]);
      if (tunables.empty()) {
        unsetenv("GLIBC_TUNABLES");
      } else {
        setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
      }
      if (huge_pages.empty()) {
        unsetenv("RUNLENS_HUGE_PAGES");
      } else {
        setenv("RUNLENS_HUGE_PAGES", huge_pages.c_str(), 1);
      }
      const std::string out = dir + "/out";
      // Its own alert stream: another replay (a concurrent test) may hold the default port.
      const std::string publish = "RUNLENS_PUBLISH=ipc://" + dir + "/pub";
      std::vector<const char*> argv = {kBin.c_str(), "replay",  "-",     "--out",
                                       out.c_str(),  "--quiet", "--set", publish.c_str()};
      for (const auto& f : flags) argv.push_back(f.c_str());
      argv.push_back(nullptr);
      execv(kBin.c_str(), const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    close(fds[0]);
    input = fds[1];
    // /proc/PID/task/TID/syscall: "0 0x0 ..." is read(0, ...).
    bool reading = runlens::testing::wait_for([&] {
      std::error_code ec;
      for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        if (read_file(t.path().string() + "/syscall").rfind("0 0x0 ", 0) == 0) return true;
      }
      return false;
    });
    if (!reading) stop();  // a throwing constructor runs no destructor
    REQUIRE(reading);
  }
  // If the test stops before finish(): the replay is stopped by its pid.
  ~WaitingReplay() { stop(); }
  void stop() {
    if (input >= 0) close(input);
    input = -1;
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    pid = -1;
  }
  // Its /proc/PID/smaps.
  std::string mappings() const { return read_file("/proc/" + std::to_string(pid) + "/smaps"); }
  // Writes `bytes` into its standard input (blocks while the pipe is full).
  void feed(const std::string& bytes) {
    for (size_t at = 0; at < bytes.size();) {
      ssize_t n = write(input, bytes.data() + at, bytes.size() - at);
      REQUIRE(n > 0);
      at += static_cast<size_t>(n);
    }
  }
  int finish() {
    close(input);
    input = -1;
    int code = runlens::testing::wait_exit(pid);
    pid = -1;
    return code;
  }
};

// Whether the heap's mapping has `flag` in its VmFlags ("hg": advised to use
// huge pages, "nh": advised not to).
bool heap_flag(const std::string& smaps, std::string_view flag) {
  size_t heap = smaps.find("[heap]");
  if (heap == std::string::npos) return false;
  size_t flags = smaps.find("VmFlags:", heap);
  return flags != std::string::npos &&
         smaps.substr(flags, smaps.find('\n', flags) - flags).find(" " + std::string(flag)) != std::string::npos;
}
bool heap_on_huge_pages(const std::string& smaps) { return heap_flag(smaps, "hg"); }

constexpr uint64_t kHeapMax = uint64_t{64} << 20;  // glibc's HEAP_MAX_SIZE

// One mapping's line of /proc/PID/maps or smaps ("BEGIN-END PERMS OFFSET DEV
// INODE [NAME]"); false for smaps' other lines.
struct Mapping {
  uint64_t begin = 0, end = 0;
  std::string perms;
  bool anonymous = false;  // no file and no name ([heap], [stack])
};
bool parse_mapping(const std::string& line, Mapping* m) {
  char perms[5] = {};
  unsigned long long offset = 0, inode = 0;
  char dev[16] = {};
  int name_at = 0;
  if (std::sscanf(line.c_str(), "%lx-%lx %4s %llx %15s %llu %n", &m->begin, &m->end, perms, &offset, dev, &inode,
                  &name_at) < 6) {
    return false;
  }
  m->perms = perms;
  m->anonymous = inode == 0 && line.find_first_not_of(' ', static_cast<size_t>(name_at)) == std::string::npos;
  return true;
}

// The mappings of /proc/PID/maps or smaps, in order, each with its VmFlags
// line (smaps) or none (maps).
struct MappingFlags {
  Mapping m;
  std::string vm_flags;
};
std::vector<MappingFlags> mappings_of(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  std::vector<MappingFlags> out;
  while (std::getline(lines, line)) {
    Mapping m;
    if (parse_mapping(line, &m)) {
      out.push_back({m, ""});
    } else if (!out.empty() && line.rfind("VmFlags:", 0) == 0) {
      out.back().vm_flags = line;
    }
  }
  return out;
}

// How many heaps of glibc malloc's thread arenas begin at mappings[i]: each
// is an anonymous mapping at a multiple of 64 MiB (HEAP_MAX_SIZE),
// read-write up to what the arena uses and reserved (---p) right after to
// the next multiple. Whole heaps next to each other are one mapping; a
// partial one ends it. Another anonymous mapping that happens to begin at a
// multiple of 64 MiB has no such reservation, and is none. (An arena past
// 64 MiB has a second heap; the test's arenas stay far below.)
int heaps_at(const std::vector<MappingFlags>& mappings, size_t i) {
  const Mapping& m = mappings[i].m;
  if (!m.anonymous || m.perms != "rw-p" || m.begin % kHeapMax != 0) return 0;
  const uint64_t whole = (m.end - m.begin) / kHeapMax;
  if ((m.end - m.begin) % kHeapMax == 0) return static_cast<int>(whole);
  if (i + 1 == mappings.size()) return 0;
  const Mapping& rest = mappings[i + 1].m;
  const bool reserved =
      rest.anonymous && rest.perms == "---p" && rest.begin == m.end && rest.end == m.begin + (whole + 1) * kHeapMax;
  return reserved ? static_cast<int>(whole) + 1 : 0;
}

// The thread arenas' heaps in smaps (heaps_at): how many there are, and how
// many of them have `flag` in their VmFlags ("hg", "nh").
std::pair<int, int> thread_heaps_flagged(const std::string& smaps, std::string_view flag) {
  const auto mappings = mappings_of(smaps);
  int heaps = 0, advised = 0;
  for (size_t i = 0; i < mappings.size(); ++i) {
    const int n = heaps_at(mappings, i);
    heaps += n;
    if (n > 0 && mappings[i].vm_flags.find(" " + std::string(flag)) != std::string::npos) advised += n;
  }
  return {heaps, advised};
}

// The thread arenas' heaps in /proc/PID/maps (heaps_at).
int arena_heaps(pid_t pid) {
  const auto mappings = mappings_of(read_file("/proc/" + std::to_string(pid) + "/maps"));
  int heaps = 0;
  for (size_t i = 0; i < mappings.size(); ++i) heaps += heaps_at(mappings, i);
  return heaps;
}

}  // namespace

// docs/cli.md, "Memory allocator settings": malloc's arenas are capped at
// three with one executor thread and at the executor's threads with more
// (heaps besides the main arena, which is [heap]: two and one with two
// threads), unless GLIBC_TUNABLES is the operator's.
// The tests below read glibc's thread heaps out of smaps. A mapping of
// someone else's that begins at a multiple of 64 MiB by chance is not one (a
// 704 KiB one unadvised failed the huge-pages case once, 2026-12-07).
TEST_CASE("thread heaps in smaps: a heap has its reservation; a mapping that only begins at 64 MiB is none") {
  const std::string smaps =
      "7f7f4c000000-7f7f50000000 rw-p 00000000 00:00 0 \n"
      "VmFlags: rd wr mr mw me nr nh \n"
      "7f7f54000000-7f7f54200000 rw-p 00000000 00:00 0 \n"
      "VmFlags: rd wr mr mw me nr hg \n"
      "7f7f54200000-7f7f58000000 ---p 00000000 00:00 0 \n"
      "VmFlags: mr mw me nr hg \n"
      "7f7f5c000000-7f7f5c0b0000 rw-p 00000000 00:00 0 \n"
      "VmFlags: rd wr mr mw me ac \n"
      "7f7f60000000-7f7f60021000 rw-p 00000000 00:00 0 \n"
      "VmFlags: rd wr mr mw me nr \n"
      "7f7f60021000-7f7f63000000 ---p 00000000 00:00 0 \n"
      "VmFlags: mr mw me nr \n"
      "7f7f64000000-7f7f64200000 rw-p 00000000 fe:00 4242 /tmp/a.db\n"
      "VmFlags: rd wr mr mw me \n";
  // The whole heap and the heap with its reservation; not the 704 KiB
  // mapping, nor the one whose ---p rest stops short, nor the file.
  CHECK(thread_heaps_flagged(smaps, "nh") == std::pair{2, 1});
  CHECK(thread_heaps_flagged(smaps, "hg") == std::pair{2, 1});
  CHECK(thread_heaps_flagged(smaps, "nr") == std::pair{2, 2});
  CHECK(thread_heaps_flagged("", "nh") == std::pair{0, 0});
}

TEST_CASE("replay caps malloc's arenas, unless GLIBC_TUNABLES says otherwise") {
  std::string dir = scratch_dir("arenas");
  const std::string input = dir + "/in.jsonl";
  REQUIRE(sh("synth --ranks 64 --steps 800 --gpu-every 1 --out " + input).code == 0);
  const std::string rows = read_file(input);
  // The most heaps seen at once while a replay with `threads` executor
  // threads processes the rows, given in four parts.
  auto most_heaps = [&](const std::string& tunables, const std::string& threads) {
    WaitingReplay r(dir, tunables, {"--threads", threads});
    int most = 0;
    for (size_t part = 0, at = 0; part < 4; ++part) {
      size_t end = part == 3 ? rows.size() : rows.find('\n', rows.size() * (part + 1) / 4) + 1;
      r.feed(rows.substr(at, end - at));
      at = end;
      for (int i = 0; i < 10; ++i) {
        most = std::max(most, arena_heaps(r.pid));
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
      }
    }
    CHECK(r.finish() == 0);
    return most;
  };
  // Two executor threads, two arenas: the main one ([heap]) and one heap.
  // (Uncapped, glibc gives a heap to each thread that allocates while the
  // others hold theirs: 3 were seen here with the cap taken out.)
  CHECK(most_heaps("", "2") == 1);
  // One executor thread, three arenas: at most two heaps.
  const int one_thread = most_heaps("", "1");
  CHECK(one_thread >= 1);
  CHECK(one_thread <= 2);
  // The operator's cap stands: one arena, the main one.
  CHECK(most_heaps("glibc.malloc.arena_max=1", "2") == 0);
  std::filesystem::remove_all(dir);
}

// docs/cli.md, "Memory allocator settings": the allocator's advice makes
// arenas on threads of its own, and a process that may start no thread (a
// user at its limit) still runs: the advice is only a hint. (e46695f aborted
// here with std::system_error.)
TEST_CASE("a command that moves rows runs where it may start no thread") {
  if (getuid() != 0 || runlens::testing::shell("command -v setpriv && command -v prlimit").code != 0) {
    MESSAGE("needs root, setpriv and prlimit (util-linux) to run as another user with a limit on threads");
    return;
  }
  std::string dir = scratch_dir("no-threads");
  std::filesystem::permissions(dir, std::filesystem::perms::all);  // the other user writes here
  const std::string bin = dir + "/runlens";
  std::error_code ec;
  std::filesystem::create_hard_link(kBin, bin, ec);
  if (ec) std::filesystem::copy_file(kBin, bin);
  REQUIRE(sh("synth --ranks 4 --steps 5 --out " + dir + "/in.jsonl").code == 0);
  std::filesystem::permissions(dir + "/in.jsonl", std::filesystem::perms::others_read,
                               std::filesystem::perm_options::add);
  // RLIMIT_NPROC counts the user's processes and threads: at 1, this process
  // is all it may have (root is exempt, hence another user).
  auto r = runlens::testing::shell("setpriv --reuid=65534 --regid=65534 --clear-groups prlimit --nproc=1 " + bin +
                                   " convert " + dir + "/in.jsonl " + dir + "/out.rlrec");
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("converted") != std::string::npos);
  CHECK(std::filesystem::exists(dir + "/out.rlrec"));
  std::filesystem::remove_all(dir);
}

// docs/cli.md, "Memory allocator settings".
TEST_CASE(
    "replay puts its heaps on huge pages as RUNLENS_HUGE_PAGES says (auto: where a small page is dear); GLIBC_TUNABLES "
    "win") {
  std::string dir = scratch_dir("huge-pages");
  const std::string thp = read_file("/sys/kernel/mm/transparent_hugepage/enabled");
  const bool thp_never = thp.find("[never]") != std::string::npos;
  if (thp_never) MESSAGE("transparent huge pages are off here, so runlens advises nothing to check: " << thp);
  // Every thread arena's heap has `flag` ("hg" or "nh"), and there is one.
  auto every_arena = [](const std::string& smaps, std::string_view flag) {
    auto [heaps, flagged] = thread_heaps_flagged(smaps, flag);
    CHECK(heaps >= 1);
    CHECK_MESSAGE(flagged == heaps, flag << " on " << flagged << " of " << heaps << " arena heaps\n" << smaps);
  };
  // No heap advised onto huge pages, each advised against them (the kernel's
  // "always" mode would give them huge pages).
  auto none_huge = [&](const std::string& smaps) {
    CHECK_MESSAGE(smaps.find(" hg") == std::string::npos, smaps);
    if (!thp_never) {
      CHECK_MESSAGE(heap_flag(smaps, "nh"), smaps);
      every_arena(smaps, "nh");
    }
  };
  // Every heap on huge pages: the main heap and each thread arena's.
  auto all_huge = [&](const std::string& smaps) {
    if (!thp_never) {
      CHECK_MESSAGE(heap_on_huge_pages(smaps), smaps);
      every_arena(smaps, "hg");
    }
  };
  {
    // RUNLENS_HUGE_PAGES unset: auto, which measures the first touch of a
    // 4 KiB page and takes always or never; which one depends on the machine,
    // but it is one of the two, whole.
    WaitingReplay r(dir, "");
    // Started once, as itself: not again with GLIBC_TUNABLES (as runlens
    // did before 2026-12-05), which would be in the environment it started with.
    CHECK(read_file("/proc/" + std::to_string(r.pid) + "/comm") == "runlens\n");
    CHECK(read_file("/proc/" + std::to_string(r.pid) + "/environ").find("GLIBC_TUNABLES=") == std::string::npos);
    const std::string smaps = r.mappings();
    if (smaps.find(" hg") == std::string::npos) {
      none_huge(smaps);
    } else {
      all_huge(smaps);
    }
    CHECK(r.finish() == 0);
  }
  {
    WaitingReplay r(dir, "", {}, "never");
    none_huge(r.mappings());
    CHECK(r.finish() == 0);
  }
  {
    // heap: the main heap on huge pages, every thread arena's heap advised
    // against them.
    WaitingReplay r(dir, "", {}, "heap");
    const std::string smaps = r.mappings();
    if (!thp_never) {
      CHECK_MESSAGE(heap_on_huge_pages(smaps), smaps);
      every_arena(smaps, "nh");
      CHECK_MESSAGE(thread_heaps_flagged(smaps, "hg").second == 0, smaps);
    }
    CHECK(r.finish() == 0);
  }
  {
    // always: the thread arenas' heaps too.
    WaitingReplay r(dir, "", {}, "always");
    all_huge(r.mappings());
    CHECK(r.finish() == 0);
  }
  {
    // The operator's GLIBC_TUNABLES win over everything: no advice anywhere.
    WaitingReplay r(dir, "glibc.malloc.hugetlb=0", {}, "always");
    const std::string smaps = r.mappings();
    CHECK(smaps.find(" hg") == std::string::npos);
    // (glibc advises its threads' stacks nh itself.)
    CHECK(!heap_flag(smaps, "nh"));
    CHECK_MESSAGE(thread_heaps_flagged(smaps, "nh").second == 0, smaps);
    CHECK(r.finish() == 0);
  }
  // A value it does not know is reported and taken as the default.
  REQUIRE(sh("synth --ranks 2 --steps 3 --out " + dir + "/tiny.jsonl").code == 0);
  auto replay = [&](const std::string& env, bool quiet) {
    return runlens::testing::shell("env -u GLIBC_TUNABLES " + env + " " + kBin + " replay " + dir +
                                   "/tiny.jsonl --out " + dir + "/tiny-out --no-progress" + (quiet ? " --quiet" : ""));
  };
  auto r = replay("RUNLENS_HUGE_PAGES=sometimes", true);
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK_MESSAGE(r.output.find("RUNLENS_HUGE_PAGES is auto, never, heap or always, not 'sometimes': using auto") !=
                    std::string::npos,
                r.output);
  // The summary says which heaps are on huge pages and why: auto with the
  // time it measured, the others as asked.
  if (!thp_never) {
    for (const char* env : {"-u RUNLENS_HUGE_PAGES", "RUNLENS_HUGE_PAGES=auto"}) {
      r = replay(env, false);
      CHECK_MESSAGE(r.code == 0, r.output);
      static const std::regex kAuto(
          R"(memory: every heap on (huge|4 KiB) pages \(RUNLENS_HUGE_PAGES=auto: a 4 KiB page's first touch took )"
          R"([0-9]+\.[0-9] us here\)\n)");
      CHECK_MESSAGE(std::regex_search(r.output, kAuto), r.output);
    }
    r = replay("RUNLENS_HUGE_PAGES=never", false);
    CHECK_MESSAGE(r.output.find("memory: every heap on 4 KiB pages (RUNLENS_HUGE_PAGES=never)\n") != std::string::npos,
                  r.output);
    r = replay("RUNLENS_HUGE_PAGES=heap", false);
    CHECK_MESSAGE(r.output.find("memory: the main heap on huge pages, the threads' arenas on 4 KiB pages "
                                "(RUNLENS_HUGE_PAGES=heap)\n") != std::string::npos,
                  r.output);
    r = replay("RUNLENS_HUGE_PAGES=always", false);
    CHECK_MESSAGE(r.output.find("memory: every heap on huge pages (RUNLENS_HUGE_PAGES=always)\n") != std::string::npos,
                  r.output);
  }
  // Nothing advised, nothing said: the operator's GLIBC_TUNABLES decide.
  r = runlens::testing::shell("GLIBC_TUNABLES=glibc.malloc.hugetlb=0 " + kBin + " replay " + dir +
                              "/tiny.jsonl --out " + dir + "/tiny-out --no-progress");
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK_MESSAGE(r.output.find("memory: ") == std::string::npos, r.output);
  std::filesystem::remove_all(dir);
}
