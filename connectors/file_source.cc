#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "connectors/input_reader.h"
#include "connectors/sources.h"

namespace runlens::connectors {

std::optional<double> parse_speed(const std::string& text) {
  if (text == "max") return 0.0;
  if (text == "realtime") return 1.0;
  std::string t = text;
  if (!t.empty() && (t.back() == 'x' || t.back() == 'X')) t.pop_back();
  try {
    size_t used = 0;
    double v = std::stod(t, &used);
    if (used != t.size() || !(v > 0) || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

namespace {

class FileSource final : public runtime::SourceDef<Record> {
 public:
  explicit FileSource(FileSourceOptions o) : o_(std::move(o)) {}

  void run(runtime::SourceOutput<Record>& out) override {
    struct Input {
      std::unique_ptr<InputReader> reader;
      int64_t last_time = runtime::kBeginningOfTime;
      bool done = false;
    };
    std::vector<Input> inputs;
    uint64_t total_bytes = 0;
    for (const auto& p : o_.paths) {
      std::string error;
      auto r = InputReader::open(p, &error);
      if (!r) throw runtime::ConfigError({runtime::Diagnostic{{}, "", error}});
      total_bytes += r->bytes();
      inputs.push_back(Input{std::move(r)});
    }
    std::vector<Record> rows;
    std::vector<uint64_t> positions;
    auto started = std::chrono::steady_clock::now();
    auto last_draw = started;
    uint64_t total_rows = 0;
    int64_t first_event = runtime::kBeginningOfTime;
    for (;;) {
      if (out.stopping()) break;
      // Read next from the input furthest behind in event time, so several
      // files of one run stay aligned and the watermark keeps moving.
      Input* in = nullptr;
      for (auto& i : inputs) {
        if (!i.done && (!in || i.last_time < in->last_time)) in = &i;
      }
      if (!in) break;
      rows.clear();
      positions.clear();
      uint64_t dead_before = in->reader->dead_lettered();
      in->done = !in->reader->next(&rows, &positions, o_.batch_size, out.dead_letters(), out.node_id());
      if (uint64_t dead = in->reader->dead_lettered() - dead_before) {
        out.counters().add(out.counters().dead_lettered, dead);
        out.counters().add(out.counters().in, dead);
      }
      if (!rows.empty()) in->last_time = rows.back().time_ns;
      total_rows += rows.size();
      InputReader* reader = in->reader.get();
      auto where = [&](size_t i) { return reader->describe_position(positions[i]); };
      if (o_.speed > 0) {
        paced_push(out, rows, positions, *reader, first_event, started);
      } else {
        out.push(rows, where);
      }
      if (o_.progress) {
        auto now = std::chrono::steady_clock::now();
        if (now - last_draw > std::chrono::milliseconds(200)) {
          last_draw = now;
          draw(inputs_progress(inputs, total_bytes), total_rows, now - started);
        }
      }
    }
    if (o_.progress) {
      draw(1.0, total_rows, std::chrono::steady_clock::now() - started);
      std::fputc('\n', stderr);
    }
  }

  std::string describe() const override {
    std::string s;
    for (const auto& p : o_.paths) s += (s.empty() ? "" : ",") + p;
    return "paths=" + s;
  }

 private:
  template <class Inputs>
  static double inputs_progress(const Inputs& inputs, uint64_t total_bytes) {
    if (total_bytes == 0) return 1.0;
    double done = 0;
    for (const auto& i : inputs) done += i.reader->progress() * static_cast<double>(i.reader->bytes());
    return done / static_cast<double>(total_bytes);
  }

  static void draw(double fraction, uint64_t rows, std::chrono::steady_clock::duration elapsed) {
    constexpr int kWidth = 30;
    int filled = static_cast<int>(fraction * kWidth);
    char bar[kWidth + 1];
    for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    bar[kWidth] = 0;
    double secs = std::chrono::duration<double>(elapsed).count();
    std::fprintf(stderr, "\rreplay [%s] %3.0f%%  %llu events  %.2f M events/s ", bar, fraction * 100,
                 static_cast<unsigned long long>(rows), secs > 0 ? static_cast<double>(rows) / secs / 1e6 : 0.0);
    std::fflush(stderr);
  }

  // Pushes rows when their event time, scaled by the speed, is due on the wall clock.
  void paced_push(runtime::SourceOutput<Record>& out, std::vector<Record>& rows, std::vector<uint64_t>& positions,
                  const InputReader& reader, int64_t& first_event, std::chrono::steady_clock::time_point started) {
    std::vector<Record> chunk;
    std::vector<uint64_t> chunk_pos;
    auto flush = [&] {
      if (chunk.empty()) return;
      out.push(chunk, [&](size_t i) { return reader.describe_position(chunk_pos[i]); });
      chunk.clear();
      chunk_pos.clear();
    };
    for (size_t i = 0; i < rows.size() && !out.stopping(); ++i) {
      if (first_event == runtime::kBeginningOfTime) first_event = rows[i].time_ns;
      double offset_s = static_cast<double>(rows[i].time_ns - first_event) / 1e9 / o_.speed;
      auto due = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(std::max(0.0, offset_s)));
      if (due > std::chrono::steady_clock::now() + std::chrono::milliseconds(5)) {
        flush();
        while (!out.stopping() && std::chrono::steady_clock::now() < due) {
          std::this_thread::sleep_until(std::min(due, std::chrono::steady_clock::now() + std::chrono::milliseconds(100)));
        }
      }
      chunk.push_back(std::move(rows[i]));
      chunk_pos.push_back(positions[i]);
    }
    flush();
  }

  FileSourceOptions o_;
};

}  // namespace

std::unique_ptr<runtime::SourceDef<Record>> MakeFileSource(FileSourceOptions options) {
  return std::make_unique<FileSource>(std::move(options));
}

void RegisterFileSource(ops::Registry& registry) {
  runtime::ComponentInfo info;
  info.type = "file";
  info.role = runtime::Role::kSource;
  info.doc =
      "Reads telemetry files (JSONL or recordings, recognised by content) once, several files aligned by event "
      "time; at full speed or paced by event time.";
  info.params = {
      {"paths", runtime::ParamType::kStringList, std::nullopt, "Files to read ('-' is standard input).", {}, {}, {}},
      {"speed", runtime::ParamType::kString, "max", "max, realtime, or a factor such as 10x.", {}, {}, {}},
  };
  info.emits = ops::kAllContractKinds;
  registry.add_source(std::move(info), [](const runtime::BuildContext& ctx) {
    FileSourceOptions o;
    o.paths = ctx.params->get_list("paths");
    if (o.paths.empty()) ctx.fail("paths", "paths must name at least one file");
    auto speed = parse_speed(ctx.params->get_string("speed"));
    if (!speed) ctx.fail("speed", "invalid speed '" + ctx.params->get_string("speed") + "' (max, realtime or e.g. 10x)");
    o.speed = *speed;
    return MakeFileSource(std::move(o));
  });
}

}  // namespace runlens::connectors
