// connectors/recording + connectors/input_reader: recordings written by
// recording::Writer and JSONL files, read by InputReader, which recognises
// the format by content and dead-letters what it cannot use (with a line or
// byte offset) while reading on: bad lines, truncated files, corrupt frames.
#include "formats/recording.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "formats/capnp_codec.h"
#include "formats/crc32c.h"
#include "formats/input_reader.h"
#include "formats/jsonl_codec.h"
#include "runtime/operator.h"
#include "schema/alert.h"
#include "schema/telemetry.capnp.h"
#include "tests/formats/sample_events.h"
#include "tests/read_file.h"

// Prints vectors of lines in failure messages (doctest shows them as {?}).
namespace doctest {
template <>
struct StringMaker<std::vector<std::string>> {
  static String convert(const std::vector<std::string>& v) {
    std::string s = "{";
    for (const auto& x : v) s += "\n  " + x;
    s += v.empty() ? "}" : "\n}";
    return String(s.c_str());
  }
};
}  // namespace doctest

namespace runlens {
namespace {

using runlens::testing::read_file;

using test::kSampleLines;
using test::sample_records;

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/runlens-recording-test-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Always a new file: rewriting one in place (truncate, then write) makes ext4
// flush it on close, which costs milliseconds per case on a busy disk.
void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::remove(path);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

class CollectingSink final : public runtime::DeadLetterSink {
 public:
  void write(const runtime::DeadLetter& d) override { letters.push_back(d); }
  std::vector<runtime::DeadLetter> letters;
};

struct ReadResult {
  std::string format;
  std::vector<std::string> lines;      // the rows, as JSONL
  std::vector<std::string> positions;  // describe_position of each row
  std::vector<runtime::DeadLetter> dead;
  uint64_t dead_lettered = 0;
  double progress = 0;
};

ReadResult read_all(const std::string& path, size_t max_rows = 1000) {
  std::string error;
  auto reader = InputReader::open(path, &error);
  CAPTURE(error);
  REQUIRE(reader != nullptr);
  ReadResult out;
  out.format = reader->format();
  CollectingSink sink;
  std::vector<Record> rows;
  std::vector<uint64_t> positions;
  for (int calls = 0;; ++calls) {
    REQUIRE(calls < 1000000);
    size_t before = rows.size();
    bool more = reader->next(&rows, &positions, max_rows, sink, "telemetry");
    REQUIRE(positions.size() == rows.size());
    // "Up to about max_rows": a recording hands over whole frames.
    if (out.format == "jsonl") CHECK(rows.size() - before <= max_rows);
    if (!more) break;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    out.lines.push_back(jsonl::encode_record(rows[i]));
    out.positions.push_back(reader->describe_position(positions[i]));
  }
  out.dead = sink.letters;
  out.dead_lettered = reader->dead_lettered();
  out.progress = reader->progress();
  CHECK(reader->bytes() == std::filesystem::file_size(path));
  return out;
}

// A recording written by recording::Writer, and what a reader should see in it.
struct Recording {
  std::string bytes;
  std::vector<size_t> frame_start;                    // byte offset of each frame
  std::vector<size_t> frame_end;                      // one past its last payload byte
  std::vector<std::vector<std::string>> frame_lines;  // its events, as JSONL

  // Rows and positions of the frames that end at or before `cut`, minus frame `skip`.
  void expected(const std::string& path, size_t cut, size_t skip, std::vector<std::string>* lines,
                std::vector<std::string>* positions, size_t shift_after = 0, size_t shift = 0) const {
    for (size_t f = 0; f < frame_start.size(); ++f) {
      if (frame_end[f] > cut || f == skip) continue;
      size_t at = frame_start[f] + (frame_start[f] >= shift_after ? shift : 0);
      for (size_t e = 0; e < frame_lines[f].size(); ++e) {
        lines->push_back(frame_lines[f][e]);
        positions->push_back(path + "@" + std::to_string(at) + "#" + std::to_string(e));
      }
    }
  }
};

uint32_t u32_at(const std::string& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}

// Writes frames of the given sizes (events cycle through the samples) and
// checks the layout documented in recording.h while indexing the frames.
Recording make_recording(const std::string& path, const std::vector<size_t>& frame_sizes) {
  std::vector<Record> samples = sample_records();
  Recording rec;
  recording::Writer w;
  std::string error;
  REQUIRE(w.open(path, &error));
  size_t next = 0;
  std::vector<std::vector<Record>> frames;
  for (size_t n : frame_sizes) {
    std::vector<Record> rows;
    for (size_t i = 0; i < n; ++i) rows.push_back(samples[next++ % samples.size()]);
    REQUIRE(w.write(rows, &error));
    std::vector<std::string> lines;
    for (const auto& r : rows) lines.push_back(jsonl::encode_record(r));
    rec.frame_lines.push_back(lines);
  }
  uint64_t written = w.bytes_written();
  REQUIRE(w.close(&error));
  rec.bytes = read_file(path);
  REQUIRE(rec.bytes.size() == written);

  // Header: "RUNLENSR" | u16 format_version=1 | u16 schema_version | u32 reserved=0.
  REQUIRE(rec.bytes.size() >= recording::kHeaderBytes);
  CHECK(rec.bytes.substr(0, 8) == "RUNLENSR");
  CHECK(rec.bytes[8] == 1);
  CHECK(rec.bytes[9] == 0);
  CHECK(rec.bytes[10] == static_cast<char>(capnpc::kSchemaVersion));
  CHECK(rec.bytes[11] == 0);
  CHECK(u32_at(rec.bytes, 12) == 0u);
  // Frames: "RLNF" | u32 payload_bytes | u32 crc32c | u32 event_count | payload.
  size_t at = recording::kHeaderBytes;
  for (size_t f = 0; f < frame_sizes.size(); ++f) {
    REQUIRE(at + recording::kFrameHeaderBytes <= rec.bytes.size());
    CHECK(at % 8 == 0);
    CHECK(rec.bytes.substr(at, 4) == "RLNF");
    uint32_t len = u32_at(rec.bytes, at + 4);
    CHECK(len % 8 == 0);
    CHECK(u32_at(rec.bytes, at + 12) == frame_sizes[f]);
    REQUIRE(at + 16 + len <= rec.bytes.size());
    CHECK(u32_at(rec.bytes, at + 8) == crc32c(rec.bytes.data() + at + 16, len));
    rec.frame_start.push_back(at);
    rec.frame_end.push_back(at + 16 + len);
    at += 16 + len;
  }
  CHECK(at == rec.bytes.size());
  return rec;
}

std::vector<std::string> all_lines(const Recording& rec) {
  std::vector<std::string> out;
  for (const auto& f : rec.frame_lines) out.insert(out.end(), f.begin(), f.end());
  return out;
}

TEST_CASE("recording: frames written by Writer are read back in order, with their positions") {
  TempDir dir;
  std::string path = dir.file("run.rlrec");
  Recording rec = make_recording(path, {4, 1, 6});
  std::vector<std::string> lines, positions;
  rec.expected(path, rec.bytes.size(), SIZE_MAX, &lines, &positions);
  REQUIRE(lines.size() == 11u);
  CHECK(positions.front() == path + "@16#0");
  for (size_t max_rows : {1u, 2u, 5u, 1000u}) {
    CAPTURE(max_rows);
    ReadResult r = read_all(path, max_rows);
    CHECK(r.format == "recording");
    CHECK(r.lines == lines);
    CHECK(r.positions == positions);
    CHECK(r.dead.empty());
    CHECK(r.dead_lettered == 0u);
    CHECK(r.progress == 1.0);
  }
}

TEST_CASE("recording: Writer skips derived rows and empty frames; write_encoded frames a message as given") {
  TempDir dir;
  std::string path = dir.file("mixed.rlrec");
  std::vector<Record> samples = sample_records();
  Alert a;
  a.alert_id = "0123456789abcdef", a.kind = "straggler";
  std::string error;
  {
    recording::Writer w;
    REQUIRE(w.open(path, &error));
    REQUIRE(w.write({alert_record(a)}, &error));  // nothing to write: no frame
    REQUIRE(w.write({}, &error));
    REQUIRE(w.write({samples[0], alert_record(a), samples[1]}, &error));
    REQUIRE(w.write_encoded(capnpc::encode_batch(&samples[2], 1), 1, &error));
    // The destructor closes.
  }
  ReadResult r = read_all(path);
  CHECK(r.lines == std::vector<std::string>{std::string(kSampleLines[0]), std::string(kSampleLines[1]),
                                            std::string(kSampleLines[2])});
  CHECK(r.dead.empty());
  // Writing before open, or to a directory, is an error.
  recording::Writer closed;
  CHECK_FALSE(closed.write({samples[0]}, &error));
  CHECK(error.find("not open") != std::string::npos);
  recording::Writer bad;
  CHECK_FALSE(bad.open(dir.path(), &error));
  CHECK(error.find(dir.path()) != std::string::npos);
}

TEST_CASE("jsonl file: blank lines, whitespace lines, CRLF and a last line without newline") {
  TempDir dir;
  std::string path = dir.file("run.jsonl");
  std::string s0(kSampleLines[0]), s1(kSampleLines[1]), s2(kSampleLines[2]), s3(kSampleLines[3]);
  write_file(path, s0 + "\r\n" +      // 1
                       "\r\n" +       // 2 blank (CRLF)
                       " \t  \n" +    // 3 whitespace only
                       s1 + "\n" +    // 4
                       "\n" +         // 5
                       s2 + "\r\n" +  // 6
                       " \t\r\n" +    // 7
                       s3);           // 8, no newline
  for (size_t max_rows : {1u, 3u, 1000u}) {
    CAPTURE(max_rows);
    ReadResult r = read_all(path, max_rows);
    CHECK(r.format == "jsonl");
    CHECK(r.lines == std::vector<std::string>{s0, s1, s2, s3});
    CHECK(r.positions == std::vector<std::string>{path + ":1", path + ":4", path + ":6", path + ":8"});
    CHECK(r.dead.empty());
    CHECK(r.progress == 1.0);
  }
  // Trailing blank lines.
  write_file(path, s0 + "\n\n\r\n\n");
  ReadResult r = read_all(path);
  CHECK(r.lines == std::vector<std::string>{s0});
  CHECK(r.dead.empty());
}

TEST_CASE("jsonl file: each bad line is dead-lettered with path:LINE and the reason; good lines are read") {
  TempDir dir;
  std::string path = dir.file("bad.jsonl");
  struct Line {
    std::string text;
    std::string reason;  // empty: a good line
  };
  const std::string step = R"({"type":"step","time_ns":1,"run_id":"r","rank":0,"step":1,"step_ms":2)";
  const std::string long_bad = "{\"type\":\"step\",\"pad\":\"" + std::string(10000, 'x');  // unterminated
  const Line lines[] = {
      {std::string(kSampleLines[0]), ""},
      {R"({"type":"step",)", "malformed JSON at column 16"},
      {std::string(kSampleLines[1]), ""},
      {R"(["not","an","object"])", "expected a JSON object, got array"},
      {R"({"time_ns":1})", "missing required field 'type'"},
      {R"({"type":"stepz","time_ns":1})", "unknown type 'stepz'"},
      {R"({"type":"node","node":"n"})", "missing required field 'time_ns'"},
      {R"({"type":"node","time_ns":1.5,"node":"n"})", "field 'time_ns': expected an integer"},
      {step + R"(,"forward_ms":"fast"})", "field 'forward_ms': expected a number, got string"},
      {step + R"(,"run_id":1})", "field 'run_id': expected a string, got number"},
      {R"({"type":"checkpoint","time_ns":1,"run_id":"r","checkpoint_id":"c","ok":"yes"})",
       "field 'ok': expected true or false"},
      {R"({"type":"collective","time_ns":1,"run_id":"r","rank":0})", "missing required field 'latency_ms'"},
      {R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":1,"ranks":[{"gpu":0}]})", "item 0: missing 'rank'"},
      {R"({"type":"run_start","time_ns":1,"run_id":"r","world_size":1,"config":{"a":[]}})", "key 'a'"},
      {std::string(kSampleLines[2]), ""},
      {long_bad, "malformed JSON"},
      {std::string(kSampleLines[3]), ""},
  };
  std::string file;
  for (size_t i = 0; i < std::size(lines); ++i) file += lines[i].text + (i % 2 ? "\r\n" : "\n");
  write_file(path, file);

  ReadResult r = read_all(path, 2);
  std::vector<std::string> good, good_pos;
  size_t bad = 0;
  for (size_t i = 0; i < std::size(lines); ++i) {
    std::string pos = path + ":" + std::to_string(i + 1);
    if (lines[i].reason.empty()) {
      good.push_back(lines[i].text);
      good_pos.push_back(pos);
      continue;
    }
    CAPTURE(lines[i].text.substr(0, 100));
    REQUIRE(bad < r.dead.size());
    const runtime::DeadLetter& d = r.dead[bad++];
    CHECK(d.component == "telemetry");
    CHECK(d.position == pos);
    CHECK(d.reason.find(lines[i].reason) != std::string::npos);
    // The raw line, without its CR, cut to 4096 bytes.
    CHECK(d.raw == lines[i].text.substr(0, 4096));
  }
  CHECK(r.dead.size() == bad);
  CHECK(r.dead_lettered == bad);
  CHECK(r.lines == good);
  CHECK(r.positions == good_pos);
}

// Checks one truncated copy of `rec`: the events of every complete frame,
// and exactly one dead letter, with a byte offset, when the cut is not on a
// frame boundary.
void check_truncated(const Recording& rec, const std::string& path, size_t cut) {
  CAPTURE(cut);
  write_file(path, rec.bytes.substr(0, cut));
  ReadResult r = read_all(path, 3);
  std::vector<std::string> lines, positions;
  rec.expected(path, cut, SIZE_MAX, &lines, &positions);
  CHECK(r.lines == lines);
  CHECK(r.positions == positions);
  bool boundary = cut == 0 || cut == recording::kHeaderBytes ||
                  std::find(rec.frame_end.begin(), rec.frame_end.end(), cut) != rec.frame_end.end();
  if (boundary) {
    CHECK(r.dead.empty());
    return;
  }
  REQUIRE(r.dead.size() == 1u);
  CHECK(r.dead_lettered == 1u);
  const runtime::DeadLetter& d = r.dead[0];
  if (cut < 4) {
    // Fewer than 4 bytes of magic are not recognised: read as (bad) JSONL.
    CHECK(r.format == "jsonl");
    CHECK(d.position == path + ":1");
    return;
  }
  CHECK(r.format == "recording");
  if (cut < recording::kHeaderBytes) {
    CHECK(d.position == path + "@0");
    CHECK(d.reason.find("truncated recording header") != std::string::npos);
    return;
  }
  // The frame the cut fell in.
  size_t frame = 0;
  while (rec.frame_end[frame] <= cut) ++frame;
  CHECK(d.position == path + "@" + std::to_string(rec.frame_start[frame]));
  CHECK(d.reason.find("truncated") != std::string::npos);
}

TEST_CASE("recording: truncated at every byte offset of a small file") {
  TempDir dir;
  Recording rec = make_recording(dir.file("full.rlrec"), {1, 2, 1});
  std::string path = dir.file("cut.rlrec");
  for (size_t cut = 0; cut <= rec.bytes.size(); ++cut) check_truncated(rec, path, cut);
}

TEST_CASE("recording: truncated at random offsets of a larger file") {
  TempDir dir;
  std::mt19937 rng(99);
  std::vector<size_t> sizes;
  for (int i = 0; i < 40; ++i) sizes.push_back(1 + rng() % 12);
  Recording rec = make_recording(dir.file("full.rlrec"), sizes);
  std::string path = dir.file("cut.rlrec");
  for (int i = 0; i < 150; ++i) check_truncated(rec, path, rng() % (rec.bytes.size() + 1));
  // Cuts just inside and just past a frame header.
  for (size_t f : {size_t{5}, size_t{20}}) {
    for (size_t delta : {size_t{1}, size_t{15}, size_t{16}, size_t{17}})
      check_truncated(rec, path, rec.frame_start[f] + delta);
  }
}

TEST_CASE("recording: a corrupt byte in frame k dead-letters frame k only; the reader resynchronises") {
  TempDir dir;
  Recording rec = make_recording(dir.file("full.rlrec"), {2, 3, 1, 2, 2});
  std::string path = dir.file("corrupt.rlrec");
  for (size_t k = 0; k < rec.frame_start.size(); ++k) {
    for (size_t at = rec.frame_start[k]; at < rec.frame_end[k]; ++at) {
      size_t in_frame = at - rec.frame_start[k];
      if (in_frame >= 12 && in_frame < 16) continue;  // event_count: see below
      CAPTURE(k);
      CAPTURE(in_frame);
      std::string bytes = rec.bytes;
      bytes[at] ^= 0x5A;
      write_file(path, bytes);
      ReadResult r = read_all(path);
      std::vector<std::string> lines, positions;
      rec.expected(path, bytes.size(), k, &lines, &positions);
      CHECK(r.lines == lines);
      CHECK(r.positions == positions);
      REQUIRE(r.dead.size() == 1u);
      CHECK(r.dead[0].position == path + "@" + std::to_string(rec.frame_start[k]));
      const std::string& why = r.dead[0].reason;
      CAPTURE(why);
      if (in_frame < 4) CHECK(why.find("corrupt frame: no frame marker") == 0);
      if (in_frame >= 8 && in_frame < 12) CHECK(why.find("corrupt frame: checksum mismatch") == 0);
      if (in_frame >= 16) CHECK(why.find("corrupt frame: checksum mismatch") == 0);
      // What was skipped is frame k, to the byte.
      CHECK(why.find("skipped " + std::to_string(rec.frame_end[k] - rec.frame_start[k]) + " bytes") !=
            std::string::npos);
    }
  }
}

TEST_CASE("recording: the event count in a frame header is not trusted; frames are read by content") {
  TempDir dir;
  Recording rec = make_recording(dir.file("full.rlrec"), {2, 3});
  std::string path = dir.file("count.rlrec");
  std::string bytes = rec.bytes;
  bytes[rec.frame_start[1] + 12] ^= 0x7;
  write_file(path, bytes);
  ReadResult r = read_all(path);
  CHECK(r.lines == all_lines(rec));
  CHECK(r.dead.empty());
}

TEST_CASE("recording: garbage after the header or between frames is skipped (8-byte aligned)") {
  TempDir dir;
  Recording rec = make_recording(dir.file("full.rlrec"), {2, 2, 2});
  std::string path = dir.file("garbage.rlrec");
  struct Case {
    size_t where;  // offset the garbage goes in at
    size_t bytes;
  };
  for (Case c :
       {Case{16, 8}, Case{16, 24}, Case{16, 4096}, Case{rec.frame_start[1], 16}, Case{rec.frame_start[2], 40}}) {
    CAPTURE(c.where);
    CAPTURE(c.bytes);
    std::string bytes = rec.bytes;
    std::string garbage(c.bytes, '\xab');
    garbage[0] = 'R';  // not quite a marker
    bytes.insert(c.where, garbage);
    write_file(path, bytes);
    ReadResult r = read_all(path);
    std::vector<std::string> lines, positions;
    rec.expected(path, rec.bytes.size(), SIZE_MAX, &lines, &positions, c.where, c.bytes);
    CHECK(r.lines == lines);
    CHECK(r.positions == positions);
    REQUIRE(r.dead.size() == 1u);
    CHECK(r.dead[0].position == path + "@" + std::to_string(c.where));
    CHECK(r.dead[0].reason == "corrupt frame: no frame marker; skipped " + std::to_string(c.bytes) + " bytes");
  }
}

TEST_CASE("recording: garbage of any length is skipped, not only multiples of 8") {
  // Regression test, fixed (was: formats/input_reader.cc, RecordingReader::resync): the scan for
  // the next frame marker advances 8 bytes at a time from the bad frame, so
  // after garbage (or a lost or duplicated byte) whose length is not a
  // multiple of 8 no later frame is ever found: one dead letter covers the
  // rest of the file and every good frame after it is lost, although the
  // header comment promises to "resynchronize at the next one instead of
  // giving up on the rest of the file". Scan byte by byte (the marker, the
  // length check and the CRC keep false matches out; decode_batch already
  // copies unaligned payloads).
  TempDir dir;
  Recording rec = make_recording(dir.file("full.rlrec"), {2, 2, 2});
  std::string path = dir.file("garbage.rlrec");
  for (size_t n : {size_t{1}, size_t{5}, size_t{13}}) {
    CAPTURE(n);
    std::string bytes = rec.bytes;
    bytes.insert(rec.frame_start[1], std::string(n, '\xab'));
    write_file(path, bytes);
    ReadResult r = read_all(path);
    std::vector<std::string> lines, positions;
    rec.expected(path, rec.bytes.size(), SIZE_MAX, &lines, &positions, rec.frame_start[1], n);
    CHECK(r.lines == lines);
    CHECK(r.positions == positions);
    CHECK(r.dead.size() == 1u);
  }
}

TEST_CASE("recording: frames whose payload is checksummed but unusable") {
  TempDir dir;
  std::string path = dir.file("events.rlrec");
  std::vector<Record> samples = sample_records();
  std::string error;
  // A batch whose event 1 lacks a required field (step_ms), between good ones.
  std::string batch = capnpc::encode_batch(std::vector<Record>{samples[2], samples[1], samples[3]});
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(batch.size() / 8);
  std::memcpy(words.begin(), batch.data(), batch.size());
  capnp::FlatArrayMessageReader reader(words);
  capnp::MallocMessageBuilder mb;
  mb.setRoot(reader.getRoot<wire::Batch>());
  auto st = mb.getRoot<wire::Batch>().getEvents()[1].getStep();
  st.setPresent(st.getPresent() & ~(1u << static_cast<unsigned>(Step::F::step_ms)));
  kj::Array<capnp::word> edited = capnp::messageToFlatArray(mb);
  std::string edited_bytes(reinterpret_cast<const char*>(edited.asBytes().begin()), edited.asBytes().size());
  {
    recording::Writer w;
    REQUIRE(w.open(path, &error));
    REQUIRE(w.write({samples[0]}, &error));             // frame at 16
    REQUIRE(w.write_encoded(edited_bytes, 3, &error));  // one bad event
    // One segment of one word holding a null root pointer: a valid message, schemaVersion 0.
    REQUIRE(w.write_encoded(std::string("\0\0\0\0\x01\0\0\0", 8) + std::string(8, '\0'), 0, &error));
    REQUIRE(w.write_encoded(std::string(24, '\x11'), 0, &error));  // not Cap'n Proto
    REQUIRE(w.write({samples[4]}, &error));
  }
  std::string bytes = read_file(path);
  std::vector<size_t> starts;
  for (size_t at = 16; at < bytes.size(); at += 16 + u32_at(bytes, at + 4)) starts.push_back(at);
  REQUIRE(starts.size() == 5u);
  auto at = [&](size_t f) { return path + "@" + std::to_string(starts[f]); };

  ReadResult r = read_all(path);
  CHECK(r.lines == std::vector<std::string>{std::string(kSampleLines[0]), std::string(kSampleLines[2]),
                                            std::string(kSampleLines[3]), std::string(kSampleLines[4])});
  // Positions keep the index of each event within its frame.
  CHECK(r.positions == std::vector<std::string>{at(0) + "#0", at(1) + "#0", at(1) + "#2", at(4) + "#0"});
  REQUIRE(r.dead.size() == 3u);
  CHECK(r.dead[0].position == at(1) + "#1");
  CHECK(r.dead[0].reason == "missing required field 'step_ms'");
  CHECK(r.dead[1].position == at(2));
  CHECK(r.dead[1].reason.find("schemaVersion") != std::string::npos);
  CHECK(r.dead[2].position == at(3));
  CHECK(r.dead[2].reason.find("corrupt Cap'n Proto message") != std::string::npos);
  CHECK(r.dead_lettered == 3u);
}

TEST_CASE("input files: only the magic, a bad header, only a header, an empty file") {
  TempDir dir;
  std::string path = dir.file("f");
  struct Case {
    std::string bytes;
    std::string format;
    std::string position;  // of the one dead letter; empty: none
    std::string reason;
  };
  std::string header(recording::kHeaderBytes, '\0');
  std::memcpy(header.data(), "RUNLENSR\x01\x00\x01\x00", 12);
  std::string v2 = header;
  v2[8] = 2;
  const Case cases[] = {
      {"RUNLENSR", "recording", "@0", "truncated recording header (8 bytes)"},
      {"RUNL", "recording", "@0", "truncated recording header (4 bytes)"},
      {header.substr(0, 15), "recording", "@0", "truncated recording header (15 bytes)"},
      {v2, "recording", "@0", "unsupported recording format version 2"},
      {v2 + std::string(64, '\0'), "recording", "@0", "unsupported recording format version 2"},
      {header, "recording", "", ""},
      {header + std::string(15, '\0'), "recording", "@16", "truncated frame header: 15 bytes"},
      {"", "jsonl", "", ""},
      {"\n\n", "jsonl", "", ""},
      {"RUNLENSX" + std::string(20, 'x'), "jsonl", ":1", "malformed JSON at column 1"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.bytes);
    write_file(path, c.bytes);
    ReadResult r = read_all(path);
    CHECK(r.format == c.format);
    CHECK(r.lines.empty());
    if (c.position.empty()) {
      CHECK(r.dead.empty());
    } else {
      REQUIRE(r.dead.size() == 1u);
      CHECK(r.dead[0].position == path + c.position);
      CHECK(r.dead[0].reason.find(c.reason) != std::string::npos);
    }
  }
}

TEST_CASE("input files: paths that cannot be read give an error, not a reader") {
  TempDir dir;
  struct Case {
    std::string path;
    std::string error;
  };
  const Case cases[] = {
      {dir.path(), "not a regular file"},
      {dir.file("missing.jsonl"), "cannot open " + dir.file("missing.jsonl")},
      {dir.file("missing/dir/x.rlrec"), "cannot open"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.path);
    std::string error;
    auto reader = InputReader::open(c.path, &error);
    CHECK(reader == nullptr);
    CAPTURE(error);
    CHECK(error.find(c.error) != std::string::npos);
    CHECK(error.find(c.path) != std::string::npos);
  }
}

TEST_CASE("input files: a pipe is read like a file") {
  TempDir dir;
  std::string path = dir.file("pipe");
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  std::string content = std::string(kSampleLines[0]) + "\n" + std::string(kSampleLines[1]) + "\nnot json\n";
  std::thread writer([&] {
    int fd = ::open(path.c_str(), O_WRONLY);
    if (fd < 0) return;
    ssize_t n = ::write(fd, content.data(), content.size());
    (void)n;
    ::close(fd);
  });
  std::string error;
  auto reader = InputReader::open(path, &error);
  writer.join();
  REQUIRE(reader != nullptr);
  CHECK(std::string(reader->format()) == "jsonl");
  CollectingSink sink;
  std::vector<Record> rows;
  std::vector<uint64_t> positions;
  while (reader->next(&rows, &positions, 10, sink, "telemetry")) {
  }
  REQUIRE(rows.size() == 2u);
  CHECK(jsonl::encode_record(rows[1]) == kSampleLines[1]);
  REQUIRE(sink.letters.size() == 1u);
  CHECK(sink.letters[0].position == path + ":3");
}

// What recording::FrameReader makes of a file, and what InputReader makes of
// it, in the same terms: the frames read (PATH@OFFSET) and the damage skipped
// ("PATH@OFFSET: reason"), or the error that stops it at the header.
struct FrameView {
  std::vector<std::string> frames, damage;
};

FrameView frame_reader_view(const std::string& path) {
  FrameView v;
  recording::FrameReader reader;
  std::string error;
  if (!reader.open(path, &error)) {
    v.damage.push_back(error);
    return v;
  }
  recording::FrameReader::Frame f;
  for (;;) {
    bool got = reader.next(&f, &v.damage);
    if (!got) break;
    v.frames.push_back(path + "@" + std::to_string(f.offset));
    CHECK(f.data != nullptr);
  }
  return v;
}

FrameView input_reader_view(const std::string& path) {
  ReadResult r = read_all(path);
  FrameView v;
  for (const auto& p : r.positions) {
    std::string frame = p.substr(0, p.find('#'));
    if (v.frames.empty() || v.frames.back() != frame) v.frames.push_back(frame);
  }
  for (const auto& d : r.dead) v.damage.push_back(d.position + ": " + d.reason);
  return v;
}

TEST_CASE("recording: FrameReader skips the damage InputReader skips, with the same offsets and reasons") {
  TempDir dir;
  Recording rec = make_recording(dir.file("full.rlrec"), {2, 3, 1, 2, 2});
  std::string path = dir.file("damaged.rlrec");
  auto same = [&](const std::string& bytes) {
    write_file(path, bytes);
    FrameView a = frame_reader_view(path), b = input_reader_view(path);
    CHECK(a.frames == b.frames);
    CHECK(a.damage == b.damage);
  };
  same(rec.bytes);
  CHECK(frame_reader_view(path).frames.size() == 5);
  CHECK(frame_reader_view(path).damage.empty());
  // A corrupt byte anywhere in a frame (the event count aside: FrameReader
  // passes it on, InputReader reads frames by content).
  for (size_t k = 0; k < rec.frame_start.size(); ++k) {
    for (size_t at = rec.frame_start[k]; at < rec.frame_end[k]; at += 3) {
      size_t in_frame = at - rec.frame_start[k];
      if (in_frame >= 12 && in_frame < 16) continue;
      CAPTURE(k);
      CAPTURE(in_frame);
      std::string bytes = rec.bytes;
      bytes[at] ^= 0x5A;
      same(bytes);
    }
  }
  // Cut short at every offset from 4 on (fewer bytes of magic are not a recording to either).
  for (size_t cut = 4; cut <= rec.bytes.size(); ++cut) {
    CAPTURE(cut);
    same(rec.bytes.substr(0, cut));
  }
  // Garbage between frames, of a length that breaks the alignment.
  same(rec.bytes.substr(0, rec.frame_start[2]) + "garbage" + rec.bytes.substr(rec.frame_start[2]));
  // Not the format version this runlens reads.
  std::string v2 = rec.bytes;
  v2[8] = 2;
  same(v2);
  FrameView a = frame_reader_view(path);
  REQUIRE(a.damage.size() == 1);
  CHECK(a.damage[0] == path + "@0: unsupported recording format version 2 (this runlens reads 1)");

  // rewind() reads the same frames again.
  write_file(path, rec.bytes);
  recording::FrameReader reader;
  std::string error;
  REQUIRE(reader.open(path, &error));
  std::vector<std::string> damage;
  recording::FrameReader::Frame f;
  std::vector<uint64_t> first, second;
  while (reader.next(&f, &damage)) first.push_back(f.offset);
  reader.next(&f, &damage);
  reader.rewind();
  while (reader.next(&f, &damage)) {
    second.push_back(f.offset);
    CHECK(f.events == u32_at(rec.bytes, f.offset + 12));
    CHECK(std::string(f.data, f.size) == rec.bytes.substr(f.offset + 16, f.size));
  }
  CHECK(first == second);
  CHECK(first.size() == 5);
  // A file that is not there, or a directory.
  recording::FrameReader none, folder;
  CHECK(!none.open(dir.file("missing.rlrec"), &error));
  CHECK(error == "cannot open " + dir.file("missing.rlrec") + ": No such file or directory");
  CHECK(!folder.open(dir.file(""), &error));
  CHECK(error.find("is a directory") != std::string::npos);
}

// One step as text: what a reader acts on (kind, offsets, reason, the payload's bytes).
std::string describe(const recording::FrameStep& s) {
  std::string out = std::to_string(static_cast<int>(s.kind)) + " @" + std::to_string(s.offset) + " -> " +
                    std::to_string(s.next) + " " + s.reason;
  if (s.kind == recording::FrameStep::Kind::kFrame) {
    out += " events=" + std::to_string(s.events) + " crc=" + std::to_string(crc32c(s.payload, s.size));
  }
  return out;
}

// The steps FrameCursor takes through `path` with a window of `window` bytes,
// and how many of them it judged through the mapping.
std::vector<std::string> cursor_steps(const std::string& path, size_t window, uint64_t* mapped = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  recording::FrameCursor cursor(window);
  std::string error;
  REQUIRE_MESSAGE(cursor.open(fd, static_cast<uint64_t>(st.st_size), path, &error), error);
  std::vector<std::string> out;
  std::string_view head = cursor.head(recording::kHeaderBytes);
  out.push_back("header: " + recording::header_problem(head.data(), head.size(), cursor.size()));
  cursor.seek(recording::kHeaderBytes);
  for (;;) {
    recording::FrameStep s = cursor.next();
    if (s.kind == recording::FrameStep::Kind::kFrame) {
      // Read where it lies in the file, so an intact file's payloads are word-aligned.
      CHECK(reinterpret_cast<uintptr_t>(s.payload) % 8 == (s.offset + recording::kFrameHeaderBytes) % 8);
    }
    out.push_back(describe(s));
    CHECK(cursor.pos() == s.next);
    if (s.kind == recording::FrameStep::Kind::kEnd) break;
    REQUIRE(s.next > s.offset);
  }
  if (mapped) *mapped = cursor.mapped_steps();
  return out;
}

// The steps next_frame() takes over the whole file in memory: what the cursor must answer.
std::vector<std::string> whole_file_steps(const std::string& bytes) {
  std::vector<std::string> out;
  out.push_back("header: " + recording::header_problem(bytes.data(), std::min<size_t>(bytes.size(), 16), bytes.size()));
  size_t pos = recording::kHeaderBytes;
  for (;;) {
    recording::FrameStep s = recording::next_frame(bytes.data(), bytes.size(), pos);
    out.push_back(describe(s));
    pos = s.next;
    if (s.kind == recording::FrameStep::Kind::kEnd) break;
  }
  return out;
}

TEST_CASE("recording: FrameCursor's window steps as next_frame does over the whole file, damage and all") {
  TempDir dir;
  // 40 frames of 1 to 300 events (about 100 bytes to 60 KiB each).
  std::vector<size_t> sizes;
  std::mt19937 rng(1301);
  for (int i = 0; i < 40; ++i) sizes.push_back(1 + rng() % 300);
  Recording rec = make_recording(dir.file("full.rlrec"), sizes);
  REQUIRE(rec.bytes.size() > 200000);
  std::string path = dir.file("damaged.rlrec");
  const std::vector<size_t> windows = {1, 8, 100, 4096, 65536, recording::FrameCursor::kDefaultWindow};
  auto same = [&](const std::string& bytes) {
    write_file(path, bytes);
    std::vector<std::string> want = whole_file_steps(bytes);
    for (size_t w : windows) {
      CAPTURE(w);
      CHECK(cursor_steps(path, w) == want);
    }
  };
  same(rec.bytes);
  // An intact file is read through the window alone.
  for (size_t w : windows) {
    uint64_t mapped = 1;
    cursor_steps(path, w, &mapped);
    CHECK(mapped == 0);
  }
  // A flipped byte in frame headers and payloads, three at a time.
  for (int round = 0; round < 12; ++round) {
    std::string bytes = rec.bytes;
    for (int k = 0; k < 3; ++k) bytes[16 + rng() % (bytes.size() - 16)] ^= static_cast<char>(1 + rng() % 255);
    CAPTURE(round);
    same(bytes);
  }
  // A frame's length made to point past the end, into a later frame, or far beyond the window.
  for (uint32_t len : {0xFFFFFFF8u, 8u, static_cast<uint32_t>(rec.bytes.size() / 2) & ~7u}) {
    std::string bytes = rec.bytes;
    std::memcpy(bytes.data() + rec.frame_start[7] + 4, &len, 4);
    CAPTURE(len);
    same(bytes);
  }
  // Cut short inside a frame's header and inside its payload; garbage that breaks the alignment.
  same(rec.bytes.substr(0, rec.frame_start[30] + 9));
  same(rec.bytes.substr(0, rec.frame_end[30] - 5));
  same(rec.bytes.substr(0, rec.frame_start[12]) + "garbage" + rec.bytes.substr(rec.frame_start[12]));
  // A header cut short, or of a format this runlens does not read.
  same(rec.bytes.substr(0, 11));
  std::string v2 = rec.bytes;
  v2[8] = 2;
  same(v2);
}

}  // namespace
}  // namespace runlens
