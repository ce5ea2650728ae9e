// runlens convert: JSONL <-> recording (output format by extension).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "formats/input_reader.h"
#include "formats/jsonl_codec.h"
#include "formats/recording.h"

namespace runlens::cli {

namespace {

class CountingDeadLetters final : public runtime::DeadLetterSink {
 public:
  void write(const runtime::DeadLetter& d) override {
    ++count;
    std::fprintf(stderr, "dead letter: %s: %s\n", d.position.c_str(), d.reason.c_str());
  }
  uint64_t count = 0;
};

int convert(const std::string& in, const std::string& out) {
  std::string error;
  // JSONL is decoded on two threads where there is a second core (the rows and dead letters are the same).
  auto reader = InputReader::open(in, &error, InputReader::parallel_decode_threads());
  if (!reader) {
    std::fprintf(stderr, "runlens convert: %s\n", error.c_str());
    return kExitFailure;
  }
  bool to_jsonl = ends_with(out, ".jsonl") || ends_with(out, ".json") || out == "-";
  recording::Writer writer;
  std::FILE* f = nullptr;
  if (to_jsonl) {
    f = out == "-" ? stdout : std::fopen(out.c_str(), "wb");
    if (!f) {
      std::fprintf(stderr, "runlens convert: cannot create %s\n", out.c_str());
      return kExitFailure;
    }
  } else if (!writer.open(out, &error)) {
    std::fprintf(stderr, "runlens convert: %s\n", error.c_str());
    return kExitFailure;
  }
  CountingDeadLetters dl;
  std::vector<Record> rows;
  std::vector<uint64_t> pos;
  uint64_t n = 0;
  bool more = true;
  std::string line;
  while (more) {
    rows.clear();
    pos.clear();
    more = reader->next(&rows, &pos, 4096, dl, "convert");
    n += rows.size();
    if (to_jsonl) {
      for (const auto& r : rows) {
        line.clear();
        jsonl::encode_record(r, &line);
        line.push_back('\n');
        std::fwrite(line.data(), 1, line.size(), f);
      }
    } else if (!writer.write(rows, &error)) {
      std::fprintf(stderr, "runlens convert: %s\n", error.c_str());
      return kExitFailure;
    }
  }
  if (f && f != stdout) std::fclose(f);
  if (!to_jsonl && !writer.close(&error)) {
    std::fprintf(stderr, "runlens convert: %s\n", error.c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "converted %llu events (%s -> %s)%s\n", static_cast<unsigned long long>(n), reader->format(),
               to_jsonl ? "jsonl" : "recording",
               dl.count ? (", " + std::to_string(dl.count) + " dead letters").c_str() : "");
  return kExitOk;
}

struct ConvertFlags {
  std::string in, out;
};

}  // namespace

Command add_convert(CLI::App& app) {
  auto f = std::make_shared<ConvertFlags>();
  auto* sub =
      app.add_subcommand("convert", "Convert JSONL <-> recording (output format by extension: .jsonl or other)");
  sub->add_option("IN", f->in, "Input (format by content)")->required();
  sub->add_option("OUT", f->out, "Output: *.jsonl for JSONL, anything else (e.g. *.rlrec) for a recording")->required();
  return {sub, [f] { return convert(f->in, f->out); }};
}

}  // namespace runlens::cli
