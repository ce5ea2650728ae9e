// The fast JSONL decoder against the DOM decoder it stands in front of: for
// every line of a corpus, and every truncation and byte flip of the sample
// lines, both give the same verdict, the same reason and the same record,
// field by field (doubles bit for bit, so -0 and NaN count).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "formats/input_reader.h"
#include "formats/jsonl_codec.h"
#include "tests/formats/sample_events.h"

namespace runlens {
namespace {

bool same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same(const Value& a, const Value& b) { return a.kind == b.kind && same(a.number, b.number) && a.text == b.text; }
bool same(const ConfigMap& a, const ConfigMap& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !same(a[i].second, b[i].second)) return false;
  }
  return true;
}
template <class T>
bool same(const T& a, const T& b) {
  return a == b;
}

#define SAME_FIELD_(T, name, Camel, req) ok = ok && same(a.name, b.name);
#define SAME_BODY_(Type, LIST)                   \
  bool same_body(const Type& a, const Type& b) { \
    bool ok = a.present == b.present;            \
    LIST(SAME_FIELD_)                            \
    return ok;                                   \
  }
SAME_BODY_(RunStart, RUNLENS_RUN_START_FIELDS)
SAME_BODY_(Step, RUNLENS_STEP_FIELDS)
SAME_BODY_(Train, RUNLENS_TRAIN_FIELDS)
SAME_BODY_(Gpu, RUNLENS_GPU_FIELDS)
SAME_BODY_(NodeSample, RUNLENS_NODE_FIELDS)
SAME_BODY_(Collective, RUNLENS_COLLECTIVE_FIELDS)
SAME_BODY_(DataSample, RUNLENS_DATA_FIELDS)
SAME_BODY_(Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
SAME_BODY_(Occurrence, RUNLENS_OCCURRENCE_FIELDS)
SAME_BODY_(RunEnd, RUNLENS_RUN_END_FIELDS)
#undef SAME_BODY_
#undef SAME_FIELD_

bool same_record(const Record& a, const Record& b) {
  if (a.time_ns != b.time_ns || a.tenant != b.tenant || a.body.index() != b.body.index()) return false;
  if (a.kind() == Kind::kRunStart) return same_body(a.run_start(), b.run_start());
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (requires { same_body(x, x); }) {
          return same_body(x, std::get<T>(b.body));
        } else {
          return false;  // derived kinds are never decoded
        }
      },
      a.body);
}

struct Tally {
  int lines = 0, fast = 0, ok = 0;
};

// Decodes `line` with both decoders and checks they agree.
// Each line is decoded from a heap buffer of exactly its size, as from the end of a mapped file: under
// AddressSanitizer (RUNLENS_SANITIZE=address) a read past the line's last byte fails the test.
void agree(std::string_view text, Tally* t = nullptr) {
  std::unique_ptr<char[]> bytes(new char[text.size() + (text.empty() ? 1 : 0)]);
  std::memcpy(bytes.get(), text.data(), text.size());
  std::string_view line(bytes.get(), text.size());
  Record dom, fast;
  std::string dom_why, fast_why;
  bool dom_ok = jsonl::decode_record_dom(line, &dom, &dom_why);
  bool fast_ok = jsonl::decode_record(line, &fast, &fast_why);
  INFO("line: ", std::string(line));
  REQUIRE(fast_ok == dom_ok);
  if (dom_ok) {
    CHECK(same_record(dom, fast));
    CHECK(jsonl::encode_record(dom) == jsonl::encode_record(fast));
  } else {
    CHECK(fast_why == dom_why);
  }
  Record alone;
  bool taken = jsonl::decode_record_fast(line, &alone);
  if (taken) {
    REQUIRE(dom_ok);  // the fast pass never takes a line the DOM decoder rejects
    CHECK(same_record(dom, alone));
  }
  if (t) ++t->lines, t->fast += taken, t->ok += dom_ok;
}

std::string step_with(const std::string& extra) {
  return R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":1,"step_ms":2,)" + extra + "}";
}

const char* const kValues[] = {
    // numbers at the edges
    "0",
    "-0",
    "1",
    "-1",
    "1.0",
    "-0.0",
    "1.5",
    "1e3",
    "1E3",
    "1e+3",
    "1e-3",
    "1.5e300",
    "1e308",
    "1e309",
    "-1e309",
    "1e-400",
    "4.9e-324",
    "2.2250738585072014e-308",
    "0.1",
    "123456789.123456789",
    "9007199254740992",
    "9007199254740993",
    "-9007199254740993",
    "9007199254740992.0",
    "9.007199254740993e15",
    "123456789012345678",
    "1234567890123456789",
    "12345678901234567890",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "00",
    "01",
    "-",
    "-a",
    "1.",
    ".5",
    "1e",
    "1e+",
    "+1",
    "0x10",
    "1.5.5",
    "--1",
    "1ee3",
    // non-finite, bare and quoted
    "NaN",
    "Infinity",
    "-Infinity",
    "nan",
    "inf",
    "-inf",
    "NaNa",
    "Infinit",
    "-Inf",
    R"("NaN")",
    R"("nan")",
    R"("Infinity")",
    R"("inf")",
    R"("-Infinity")",
    R"("-inf")",
    R"("Na\u004e")",
    R"("+inf")",
    R"("NAN")",
    // other types
    "true",
    "false",
    "null",
    "nul",
    "tru",
    "[]",
    "{}",
    "[1]",
    R"({"a":1})",
    R"("")",
    R"("x")",
    // strings with escapes, \u sequences, surrogates, raw bytes
    R"("a\"b")",
    R"("\\")",
    R"("\/")",
    R"("\b\f\n\r\t")",
    R"("\u00e9")",
    R"("\u20ac")",
    R"("\ud83d\ude00")",
    R"("\uD83D\uDE00")",
    R"("\ud83d")",
    R"("\ude00")",
    R"("\ud83dx")",
    R"("\ud83d\u0041")",
    R"("\u12")",
    R"("\uZZZZ")",
    R"("\x")",
    R"("\u0000")",
    "\"\xc3\xa9\"",
    "\"\xff\xfe\"",
    "\"\xed\xa0\x80\"",
    "\"a\x01\"",
    "\"a\x7f\"",
    "\"unterminated",
    R"("ends in backslash\)",
    R"("long string with an escape at the end\n")",
};

// Fields of every storage type (and the placement entries' own fields).
std::vector<std::string> lines_with_value(const std::string& v) {
  return {
      step_with(R"("step_ms":)" + v),                                                          // a duplicate of step_ms
      R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":1,"step_ms":)" + v + "}",     // F64
      R"({"type":"step","time_ns":1,"run_id":"r","rank":)" + v + R"(,"step":1,"step_ms":2})",  // I32
      R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":)" + v + R"(,"step_ms":2})",  // I64
      R"({"type":"step","time_ns":)" + v + R"(,"run_id":"r","rank":0,"step":1,"step_ms":2})",  // time_ns
      R"({"type":"step","time_ns":1,"run_id":)" + v + R"(,"rank":0,"step":1,"step_ms":2})",    // SYM
      R"({"type":"step","time_ns":1,"tenant":)" + v + R"(,"run_id":"r","rank":0,"step":1,"step_ms":2})",
      R"({"type":"checkpoint","time_ns":1,"run_id":"r","checkpoint_id":"c","ok":)" + v + "}",       // BOOL
      R"({"type":"checkpoint","time_ns":1,"run_id":"r","checkpoint_id":"c","uri":)" + v + "}",      // STR
      R"({"type":"event","time_ns":1,"kind":"config_change","old":)" + v + R"(,"new":)" + v + "}",  // VALUE
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"config":{"k":)" + v + "}}",   // CONFIG
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"config":)" + v + "}",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":)" + v + "}",  // RANKS
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":)" + v + "}]}",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0,"node":)" + v + "}]}",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0,"gpu":)" + v + "}]}",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0,"gpu_model":)" + v +
          R"(,"node_type":)" + v + "}]}",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0,"x":)" + v + "}]}",
      R"({"type":"run_end","time_ns":1,"run_id":"r","reason":)" + v + "}",
      step_with(R"("unknown":)" + v),
      step_with(R"("unknown":[)" + v + "," + v + "]"),
      step_with(R"("unknown":{"a":)" + v + "}"),
      R"({"type":)" + v + R"(,"time_ns":1})",
      "{" + v + R"(:1,"type":"step"})",
      v,
  };
}

std::string nested(int depth, const std::string& open, const std::string& close) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += "1";
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

TEST_CASE("jsonl fast decode: the sample lines all take the fast path, and agree") {
  for (std::string_view line : test::kSampleLines) {
    Record r;
    INFO(std::string(line));
    CHECK(jsonl::decode_record_fast(line, &r));
    agree(line);
  }
}

TEST_CASE("jsonl fast decode: every value in every field type agrees with the DOM decoder") {
  Tally t;
  for (const char* v : kValues) {
    for (const std::string& line : lines_with_value(v)) agree(line, &t);
  }
  MESSAGE("lines ", t.lines, ", accepted ", t.ok, ", by the fast path ", t.fast);
  CHECK(t.fast > 100);
  CHECK(t.ok > t.fast);  // some accepted lines (out-of-range numbers, duplicates) go to the DOM decoder
}

TEST_CASE("jsonl fast decode: a synthetic run with faults, every line through the fast path, agrees") {
  // Every kind runlens synth writes (run_start with ranks and config, steps, train rows with NaN losses, GPU,
  // node, collective and data samples, events, run_end with escapes).
  auto path =
      std::filesystem::temp_directory_path() / ("jsonl_fast_decode_test_" + std::to_string(::getpid()) + ".jsonl");
  std::string cmd = std::string(RUNLENS_BINARY) + " synth --ranks 16 --steps 60 --gpu-every 1 --out " + path.string() +
                    " --fault nan:step=20 --fault oom:rank=3,step=50 --fault xid:rank=5,step=30"
                    " --fault config_slowdown:step=10 --fault slow_shard:rank=2,from=5 --fault network:from=5,rank=1"
                    " --fault speed_groups:label=1 --end-reason 'OOM \"rank 3\" \\ done' >/dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(path);
  Tally t;
  bool kinds[kContractKinds] = {};
  for (std::string line; std::getline(in, line);) {
    agree(line, &t);
    Record r;
    std::string why;
    if (jsonl::decode_record(line, &r, &why)) kinds[static_cast<int>(r.kind())] = true;
  }
  std::filesystem::remove(path);
  MESSAGE("lines ", t.lines, ", by the fast path ", t.fast);
  CHECK(t.lines > 3000);
  CHECK(t.fast == t.lines);
  for (Kind k : {Kind::kRunStart, Kind::kStep, Kind::kTrain, Kind::kGpu, Kind::kNode, Kind::kCollective, Kind::kData,
                 Kind::kEvent, Kind::kRunEnd}) {
    CHECK(kinds[static_cast<int>(k)]);
  }
}

// The JSONL reader, which decodes through the fast pass, against the DOM decoder line by line: the same rows,
// the same dead-letter positions and reasons, on a synthetic run with damaged, truncated, blank and padded lines.
// Read on one thread and on two (a thread of the reader's reads, splits and decodes the batches ahead), in
// calls of several sizes, from the file and through a pipe (held whole).
TEST_CASE("jsonl fast decode: the reader's rows and dead letters are the DOM decoder's, line by line") {
  struct Collect : runtime::DeadLetterSink {
    std::vector<runtime::DeadLetter> letters;
    void write(const runtime::DeadLetter& d) override { letters.push_back(d); }
  };
  auto dir = std::filesystem::temp_directory_path();
  std::string tag = std::to_string(::getpid());
  auto clean = dir / ("jsonl_fast_reader_" + tag + ".jsonl"), damaged = dir / ("jsonl_fast_damaged_" + tag + ".jsonl");
  REQUIRE(std::system((std::string(RUNLENS_BINARY) + " synth --ranks 64 --steps 200 --gpu-every 1 --out " +
                       clean.string() + " --fault nan:step=20 >/dev/null 2>&1")
                          .c_str()) == 0);
  std::ifstream in(clean);
  std::mt19937_64 rng(13);
  const char kFlips[] = " \"\\{}[],:0-.enNIx\t\x01\xff";
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    uint64_t r = rng() % 100;
    if (r < 5 && !line.empty()) {
      line[rng() % line.size()] = kFlips[rng() % (sizeof kFlips - 1)];
    } else if (r < 7) {
      line.resize(rng() % (line.size() + 1));
    } else if (r < 8) {
      line = "  " + line + " \r";
    } else if (r < 9) {
      line.clear();
    }
    lines.push_back(line);
  }
  // A file is read up to 4 MiB a batch (formats/input_reader.cc): lines cross
  // its boundaries, a line of 12 MB is longer than it, and the last line has
  // no newline.
  lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(lines.size() / 3),
               R"({"type":"event","time_ns":1767225600000000000,"run_id":"synth-run","kind":"note","message":")" +
                   std::string(12'000'000, 'x') + "\"}");
  {
    std::ofstream out(damaged, std::ios::binary);
    for (size_t i = 0; i < lines.size(); ++i) out << lines[i] << (i + 1 < lines.size() ? "\n" : "");
  }
  // What the DOM decoder says of each line, as the reader numbers them (from 1, blank lines skipped).
  std::vector<std::string> want_rows, want_letters;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    Record r;
    std::string why;
    if (jsonl::decode_record_dom(line, &r, &why)) {
      want_rows.push_back(std::to_string(i + 1) + " " + jsonl::encode_record(r));
    } else {
      want_letters.push_back(damaged.string() + ":" + std::to_string(i + 1) + " " + why + " | " +
                             std::string(line.substr(0, 4096)));
    }
  }
  // Two decoding threads only pay off for a file of several MiB (formats/input_reader.cc).
  CHECK(std::filesystem::file_size(damaged) > (4u << 20));
  CHECK(want_letters.size() > 20);
  // With two threads a batch is decoded while the one before is handed over;
  // `keep` passes the same vectors on every call, so the rows are appended.
  struct Case {
    int threads;
    size_t batch;
    bool keep;
    bool pipe;
  };
  const auto fifo = dir / ("jsonl_fast_fifo_" + tag);
  for (auto [threads, batch, keep, pipe] :
       {Case{1, 100, false, false}, Case{2, 100, false, false}, Case{2, 1000, false, false},
        Case{2, 4096, false, false}, Case{2, 16384, false, false}, Case{1, 1000, true, false},
        Case{2, 1000, true, false}, Case{1, 1000, false, true}, Case{2, 4096, false, true}}) {
    CAPTURE(threads);
    CAPTURE(batch);
    CAPTURE(keep);
    CAPTURE(pipe);
    std::string error;
    std::thread writer;
    if (pipe) {
      std::filesystem::remove(fifo);
      REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
      writer = std::thread([&] {
        std::ifstream from(damaged, std::ios::binary);
        std::ofstream to(fifo, std::ios::binary);
        to << from.rdbuf();
      });
    }
    auto reader = InputReader::open(pipe ? fifo.string() : damaged.string(), &error, threads);
    if (writer.joinable()) writer.join();
    REQUIRE_MESSAGE(reader, error);
    Collect dl;
    std::vector<std::string> got_rows, got_letters;
    std::vector<Record> rows;
    std::vector<uint64_t> positions;
    double progress = reader->progress();
    CHECK(progress == 0.0);
    for (bool more = true; more;) {
      const size_t before = keep ? rows.size() : 0;
      if (!keep) rows.clear(), positions.clear();
      more = reader->next(&rows, &positions, batch, dl, "test", nullptr);
      REQUIRE(rows.size() == positions.size());
      CHECK(rows.size() - before <= batch);
      CHECK(reader->progress() >= progress);  // the bytes of the lines handed over
      progress = reader->progress();
      for (size_t k = before; k < rows.size(); ++k) {
        got_rows.push_back(std::to_string(positions[k]) + " " + jsonl::encode_record(rows[k]));
      }
    }
    for (const auto& d : dl.letters) {
      // A pipe's positions name the pipe.
      std::string position = d.position;
      if (pipe && position.rfind(fifo.string() + ":", 0) == 0) {
        position = damaged.string() + position.substr(fifo.string().size());
      }
      got_letters.push_back(position + " " + d.reason + " | " + d.raw);
    }
    MESSAGE(got_rows.size(), " rows, ", got_letters.size(), " dead letters");
    CHECK(got_rows == want_rows);
    CHECK(got_letters == want_letters);
    CHECK(reader->dead_lettered() == want_letters.size());
    CHECK(progress == 1.0);
    CHECK_FALSE(reader->next(&rows, &positions, batch, dl, "test", nullptr));  // and stays at the end
  }
  std::filesystem::remove(fifo);
  // A reader closed while its thread reads and decodes ahead waits for it.
  for (int calls = 0; calls < 3; ++calls) {
    std::string error;
    auto reader = InputReader::open(damaged.string(), &error, 2);
    REQUIRE_MESSAGE(reader, error);
    Collect dl;
    std::vector<Record> rows;
    std::vector<uint64_t> positions;
    for (int k = 0; k < calls; ++k) CHECK(reader->next(&rows, &positions, 4096, dl, "test", nullptr));
    CHECK(rows.size() == positions.size());
  }
  std::filesystem::remove(clean);
  std::filesystem::remove(damaged);
}

// How many of `numbers` (each also with its sign flipped) decode to other
// bits on the fast pass than on the DOM decoder (from_chars); the first ten
// are reported.
int number_disagreements(const std::vector<std::string>& numbers) {
  int failures = 0;
  for (const std::string& text : numbers) {
    for (const std::string& signed_text : {text, text[0] == '-' ? text.substr(1) : "-" + text}) {
      std::string line = R"({"type":"train","time_ns":1,"run_id":"r","step":1,"loss":)" + signed_text + "}";
      Record dom, fast;
      std::string why;
      INFO(line, " ", why);
      REQUIRE(jsonl::decode_record_dom(line, &dom, &why));
      REQUIRE(jsonl::decode_record(line, &fast, &why));
      double a = dom.as<Train>().loss, b = fast.as<Train>().loss;
      if (!same(a, b) && ++failures <= 10) {
        FAIL_CHECK(signed_text, ": from_chars ", a, ", fast ", b);
      }
    }
  }
  return failures;
}

// The fast pass computes doubles itself where one floating-point operation is
// exact (formats/jsonl_fast_decode.cc: clinger, exact_double); the DOM decoder
// uses from_chars. Both must give the same bits for every number.
TEST_CASE("jsonl fast decode: numbers decode to the same double bits as from_chars") {
  std::mt19937_64 rng(20261202);
  std::vector<std::string> numbers;
  char buf[512];
  // Doubles written with 15 to 20 significant digits, as %g and as plain decimals.
  for (int i = 0; i < 40000; ++i) {
    double magnitude = std::ldexp(1.0, static_cast<int>(rng() % 500) - 250);
    double d = magnitude * (static_cast<double>(rng() >> 11) * 0x1.0p-53);
    int digits = 15 + static_cast<int>(rng() % 6);
    std::snprintf(buf, sizeof buf, "%.*g", digits, d);
    numbers.push_back(buf);
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(rng() % 18), d);
    numbers.push_back(buf);
  }
  // Random digit strings with a point somewhere and an exponent.
  for (int i = 0; i < 40000; ++i) {
    int digits = 1 + static_cast<int>(rng() % 21);
    std::string m;
    for (int k = 0; k < digits; ++k) m += static_cast<char>('0' + rng() % 10);
    if (m.size() > 1 && m[0] == '0') m[0] = '1';
    size_t point = rng() % (m.size() + 1);
    std::string text = point > 0 && point < m.size() ? m.substr(0, point) + "." + m.substr(point) : m + ".0";
    if (rng() % 2) text += "e" + std::to_string(static_cast<int>(rng() % 161) - 80);
    numbers.push_back(text);
  }
  // Ties: halfway between two doubles, exactly (from_chars rounds them to even).
  for (int k = 53; k < 64; ++k) {
    for (uint64_t odd = 1; odd < 8; odd += 2) {
      uint64_t half = (uint64_t{1} << k) + (odd << (k - 53));
      numbers.push_back(std::to_string(half) + ".0");
      numbers.push_back(std::to_string(half) + "e0");
      numbers.push_back(std::to_string(half - 1) + ".0");
      numbers.push_back(std::to_string(half + 1) + ".0");
      numbers.push_back(std::to_string(half) + "0e-1");
    }
  }
  for (const char* t : {"0.1",
                        "0.2",
                        "0.3",
                        "1e23",
                        "8.589973e9",
                        "2.2250738585072011e-308",
                        "9007199254740993.0",
                        "1.7976931348623157e308",
                        "5e-324",
                        "0.0",
                        "-0.0",
                        "0e10",
                        "-0e-10",
                        "1e27",
                        "1e28",
                        "1e-27",
                        "1e-28",
                        "18446744073709551615.0",
                        "9999999999999999999.0",
                        "0.30000000000000004"}) {
    numbers.push_back(t);
  }
  CHECK(number_disagreements(numbers) == 0);
}

// The hardest numbers for exact_double: 19 significant digits (its widest
// input) on either side of, and at, the decimal nearest a halfway point
// between two doubles, at every power of ten it takes and just outside them.
// A halfway point has 54 bits, so the x87's 64 hold it exactly and printf
// prints its nearest 19-digit decimal exactly.
TEST_CASE("jsonl fast decode: numbers next to halfway points decode as from_chars does") {
  std::mt19937_64 rng(20261206);
  std::vector<std::string> numbers;
  char buf[128];
  for (int i = 0; i < 30000; ++i) {
    // Decimal exponents -85..85 around 19 digits: w * 10^q with q in about [-100, 70].
    double d = std::ldexp(static_cast<double>(rng() >> 11 | 1), static_cast<int>(rng() % 560) - 333);
    long double half = (static_cast<long double>(d) + static_cast<long double>(std::nextafter(d, 1e308))) / 2;
    std::snprintf(buf, sizeof buf, "%.18Le", half);
    std::string text = buf;  // d.dddddddddddddddddde±x
    numbers.push_back(text);
    size_t e = text.find('e');
    for (char last : {'0', '1', '4', '5', '6', '9'}) {
      std::string t = text;
      t[e - 1] = last;
      numbers.push_back(t);
    }
  }
  // Every power of ten exact_double takes, and the ones past it, on digits of every length.
  for (int q = -70; q <= 70; ++q) {
    for (int k = 0; k < 40; ++k) {
      int digits = 1 + static_cast<int>(rng() % 19);
      std::string m;
      for (int j = 0; j < digits; ++j) m += static_cast<char>('0' + rng() % 10);
      if (m[0] == '0') m[0] = '7';
      numbers.push_back(m + "e" + std::to_string(q));
    }
    numbers.push_back("1e" + std::to_string(q));
    numbers.push_back("9999999999999999999e" + std::to_string(q));
  }
  CHECK(number_disagreements(numbers) == 0);
}

TEST_CASE("jsonl fast decode: shapes, duplicates, nulls, whitespace and nesting agree") {
  const std::string base = R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":1,"step_ms":2})";
  const std::vector<std::string> lines = {
      base,
      // whitespace
      "  " + base + "  ",
      "\t" + base + "\t",
      base + "\r",
      "\r" + base,
      base + "\n",
      base + " x",
      R"( { "type" : "step" , "time_ns" : 1 , "run_id" : "r" , "rank" : 0 , "step" : 1 , "step_ms" : 2 } )",
      "{\"type\"\t:\r\"step\",\n\"time_ns\":1,\"run_id\":\"r\",\"rank\":0,\"step\":1,\"step_ms\":2}",
      // order, missing and extra members
      R"({"time_ns":1,"type":"step","run_id":"r","rank":0,"step":1,"step_ms":2})",
      R"({"step_ms":2,"step":1,"rank":0,"run_id":"r","time_ns":1,"type":"step"})",
      R"({"type":"step","run_id":"r","rank":0,"step":1,"step_ms":2,"time_ns":1})",
      R"({"type":"step","run_id":"r","rank":0,"step":1,"step_ms":2})",
      R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":1})",
      R"({"type":"step","time_ns":1})",
      R"({"type":"step"})",
      R"({"type":"step",})",
      R"({"type":"step"})",
      R"({"type":"step","time_ns":1,})",
      "{}",
      "[]",
      "",
      " ",
      "{",
      "}",
      R"({"type")",
      R"({"type":)",
      R"({"type":"alert","time_ns":1})",
      R"({"type":"step_record","time_ns":1})",
      R"({"type":"Step","time_ns":1})",
      R"({"type":"st\u0065p","time_ns":1,"run_id":"r","rank":0,"step":1,"step_ms":2})",
      // duplicates: the DOM decoder's rules (first for type, time_ns and tenant; last for body fields)
      step_with(R"("run_id":"s")"),
      step_with(R"("step_ms":3)"),
      step_with(R"("step_ms":"x")"),
      step_with(R"("step_ms":null)"),
      step_with(R"("time_ns":2)"),
      step_with(R"("time_ns":"x")"),
      step_with(R"("type":"gpu")"),
      step_with(R"("tenant":"a","tenant":"b")"),
      step_with(R"("tenant":"a","tenant":7)"),
      step_with(R"("tenant":null,"tenant":"b")"),
      step_with(R"("tenant":"")"),
      step_with(R"("forward_ms":null,"forward_ms":1)"),
      step_with(R"("forward_ms":1,"forward_ms":null)"),
      step_with(R"("unknown":1,"unknown":"x")"),
      step_with(R"("run\u005fid":"s")"),
      step_with(R"("\u0072":1)"),
      step_with("\"k\x01\":1"),
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0,"rank":1}]})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0,"node":"a","node":"b"}]})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"node":"a"}]})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{}]})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0},]})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0} {"rank":1}]})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[1]})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[]})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0,"node":null,"gpu":null}]})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"config":{}})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"config":{"a":1,"a":"x","b":null,"c\n":true}})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"config":{"a":1,}})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"config":{"a":[1]}})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"config":{"a":1},"config":{"b":2}})",
      R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0}],"ranks":[{"rank":1}]})",
      // unknown nested values, valid and not
      step_with(R"("x":{"a":[1,{"b":null}],"c":"\ud83d\ude00"})"),
      step_with(R"("x":{"a":1,})"),
      step_with(R"("x":[1,])"),
      step_with(R"("x":{"a"})"),
      step_with(R"("x":{1:2})"),
      step_with(R"("x":"\ud800")"),
      step_with(R"("x":[NaN,-Infinity,"\u00e9"])"),
      step_with(R"("x":[[[[]]]])"),
      step_with(R"("x":{"a":{"b":{}}})"),
  };
  for (const std::string& line : lines) agree(line);
  // Nesting: the top object is level one of 64.
  for (int depth = 60; depth <= 66; ++depth) {
    agree(step_with(R"("x":)" + nested(depth, "[", "]")));
    agree(step_with(R"("x":)" + nested(depth, "{\"a\":", "}")));
    agree(R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":2,"ranks":[{"rank":0,"x":)" +
          nested(depth, "[", "]") + "}]}");
  }
}

TEST_CASE("jsonl fast decode: every truncation and byte flip of the sample lines agrees") {
  const char kFlips[] = {' ', '"', '\\', '{', '}', '[',  ']',  ',',  ':',    '0',    '9',    '-',   '.',
                         'e', 'n', 'N',  'I', 'x', '\t', '\r', '\0', '\x01', '\x7f', '\xc3', '\xff'};
  Tally t;
  for (std::string_view sample : test::kSampleLines) {
    std::string line(sample);
    for (size_t n = 0; n <= line.size(); ++n) agree(std::string_view(line).substr(0, n), &t);
    for (size_t i = 0; i < line.size(); ++i) {
      std::string m = line;
      for (char f : kFlips) {
        m[i] = f;
        agree(m, &t);
      }
      m[i] = static_cast<char>(line[i] ^ 0x20);
      agree(m, &t);
      agree(line.substr(0, i) + line.substr(i + 1), &t);  // a byte dropped
    }
  }
  MESSAGE("lines ", t.lines, ", accepted ", t.ok, ", by the fast path ", t.fast);
  CHECK(t.fast > 1000);
}

}  // namespace
}  // namespace runlens
