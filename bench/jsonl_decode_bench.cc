// JSONL decoding into rows on one thread: jsonl_decode_bench FILE [RUNS [VARIANT]]
//
// Splits FILE into lines as the JSONL reader does, then decodes every line
// into a Record (rows collected in batches of 4096, as `runlens convert` and
// `replay` read them) with
//   dom   jsonl::decode_record_dom: the json_reader DOM, then the fields
//   fast  jsonl::decode_record: the single pass, the DOM decoder behind it
// and, where simdjson was found at build time, as a ceiling for a decoder
// built on it (parsing only, no rows):
//   simdjson_dom_parse  dom::parser::parse of each line
//   simdjson_parse_many dom::parser::parse_many over the whole buffer
// Each variant runs RUNS times (default 5), the variants alternating; it
// prints the median MB/s (file bytes) and lines/s of each, and the ratio to
// dom. Before timing it checks that dom and fast agree on every line (same
// verdict, same reason, same encoded record) and counts the lines the fast
// pass took by itself. With VARIANT it runs that one alone, unchecked (for a
// profiler).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "bench/timing.h"
#include "formats/jsonl_codec.h"

#ifdef RUNLENS_HAVE_SIMDJSON
#include <simdjson.h>
#endif

namespace {

using runlens::Record;
namespace jsonl = runlens::jsonl;

struct Input {
  std::string bytes;  // the file, then padding (simdjson reads past a document's end)
  size_t size = 0;
  std::vector<std::string_view> lines;
};

bool load(const char* path, Input* in) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  in->bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  in->size = in->bytes.size();
  in->bytes.append(64, ' ');
  const char* d = in->bytes.data();
  size_t pos = 0, n = in->size;
  while (pos < n) {
    const void* nl = std::memchr(d + pos, '\n', n - pos);
    size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - d) : n;
    std::string_view line(d + pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    in->lines.push_back(line);
  }
  return true;
}

using runlens::bench::median;
using runlens::bench::thread_cpu;

using Decoder = bool (*)(std::string_view, Record*, std::string*);

// Decodes every line into rows; returns the rows produced.
size_t decode_all(const Input& in, Decoder decode) {
  std::vector<Record> rows;
  rows.reserve(4096);
  size_t produced = 0;
  std::string why;
  for (std::string_view line : in.lines) {
    rows.emplace_back();
    if (!decode(line, &rows.back(), &why)) {
      rows.pop_back();
      continue;
    }
    if (rows.size() == 4096) produced += rows.size(), rows.clear();
  }
  return produced + rows.size();
}

struct Variant {
  Variant(const char* n, std::function<size_t()> r) : name(n), run(std::move(r)) {}
  const char* name;
  std::function<size_t()> run;
  std::vector<double> seconds;      // wall
  std::vector<double> cpu_seconds;  // this thread's CPU time
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: jsonl_decode_bench FILE [RUNS]\n");
    return 2;
  }
  int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  std::string only = argc > 3 ? argv[3] : "";
  Input in;
  if (!load(argv[1], &in)) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }

  // The two decoders agree on every line, and how often the fast pass decides alone.
  size_t disagree = 0, taken = 0, rejected = 0;
  for (std::string_view line : only.empty() ? in.lines : std::vector<std::string_view>()) {
    Record a, b, c;
    std::string ea, eb;
    bool oka = jsonl::decode_record_dom(line, &a, &ea);
    bool okb = jsonl::decode_record(line, &b, &eb);
    taken += jsonl::decode_record_fast(line, &c);
    rejected += !oka;
    if (oka != okb || (oka ? jsonl::encode_record(a) != jsonl::encode_record(b) : ea != eb)) ++disagree;
  }
  std::printf("%s: %zu bytes, %zu lines; dom rejects %zu; fast pass takes %zu (%.2f%%); disagreements %zu\n", argv[1],
              in.size, in.lines.size(), rejected, taken, 100.0 * static_cast<double>(taken) / in.lines.size(),
              disagree);

  std::vector<Variant> variants;
  variants.push_back({"dom", [&] { return decode_all(in, jsonl::decode_record_dom); }});
  variants.push_back({"fast", [&] { return decode_all(in, static_cast<Decoder>(jsonl::decode_record)); }});
#ifdef RUNLENS_HAVE_SIMDJSON
  simdjson::dom::parser parser;
  variants.push_back({"simdjson_dom_parse", [&] {
                        size_t ok = 0;
                        for (std::string_view line : in.lines) {
                          simdjson::dom::element e;
                          ok += parser.parse(line.data(), line.size(), false).get(e) == simdjson::SUCCESS;
                        }
                        return ok;
                      }});
  simdjson::dom::parser many_parser;
  variants.push_back({"simdjson_parse_many", [&] {
                        size_t ok = 0;
                        simdjson::dom::document_stream docs;
                        if (many_parser.parse_many(in.bytes.data(), in.size, 1 << 20).get(docs)) return ok;
                        for (auto doc : docs) ok += doc.error() == simdjson::SUCCESS;
                        return ok;
                      }});
#endif
  if (!only.empty()) {
    std::erase_if(variants, [&](const Variant& v) { return v.name != only; });
    if (variants.empty()) return std::fprintf(stderr, "no variant %s\n", only.c_str()), 2;
  }
  size_t rows = 0;
  for (int r = 0; r < runs; ++r) {
    for (auto& v : variants) {
      auto t0 = std::chrono::steady_clock::now();
      double c0 = thread_cpu();
      rows = v.run();
      double c1 = thread_cpu();
      auto t1 = std::chrono::steady_clock::now();
      v.seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
      v.cpu_seconds.push_back(c1 - c0);
      if (r == 0) std::printf("  %-20s %zu rows\n", v.name, rows);
    }
  }
  // Wall time on a quiet machine; the thread's CPU time is the steadier figure on a shared one.
  double base = median(variants[0].seconds), cpu_base = median(variants[0].cpu_seconds);
  std::printf("%-20s %9s %9s %8s %11s %8s   (medians of %d, alternating)\n", "variant", "wall s", "MB/s", "vs dom",
              "CPU MB/s", "vs dom", runs);
  for (auto& v : variants) {
    double s = median(v.seconds), c = median(v.cpu_seconds);
    std::printf("%-20s %9.3f %9.1f %7.2fx %11.1f %7.2fx   %.2f M lines/s (CPU)\n", v.name, s,
                static_cast<double>(in.size) / s / 1e6, base / s, static_cast<double>(in.size) / c / 1e6, cpu_base / c,
                static_cast<double>(in.lines.size()) / c / 1e6);
  }
  return disagree == 0 ? 0 : 1;
}
