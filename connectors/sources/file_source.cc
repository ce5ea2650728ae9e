#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "connectors/sources/producer_ledger.h"
#include "connectors/sources/sources.h"
#include "formats/input_reader.h"
#include "runtime/params.h"

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

// What parse_speed reads back as `speed`: for rendering the default.
std::string speed_text(double speed) {
  return speed == 0 ? "max" : speed == 1 ? "realtime" : runtime::number_text(speed) + "x";
}

struct Input {
  std::unique_ptr<InputReader> reader;
  std::vector<Record> rows;  // read ahead, not yet sent
  std::vector<uint64_t> positions;
  std::vector<ProgressSegment> segments;  // batches of `rows` with producer progress
  size_t next = 0;
  size_t segment = 0;  // the first of `segments` not yet sent
  bool eof = false;

  // The segment starting at row `next`, if one does (an empty one, a final
  // batch without events, starts where the row after it does).
  const ProgressSegment* segment_here() const {
    return segment < segments.size() && segments[segment].begin == next ? &segments[segment] : nullptr;
  }
};

class FileSource final : public runtime::SourceDef<Record> {
 public:
  explicit FileSource(FileSourceOptions o) : o_(std::move(o)) {}

  void run(runtime::SourceOutput<Record>& out) override {
    std::vector<Input> inputs;
    uint64_t total_bytes = 0;
    for (const auto& p : o_.paths) {
      std::string error;
      auto r = InputReader::open(p, &error, decode_threads());
      if (!r) throw runtime::ConfigError({runtime::Diagnostic{{}, "", error}});
      total_bytes += r->bytes();
      Input in;
      in.reader = std::move(r);
      inputs.push_back(std::move(in));
    }
    std::vector<Record> rows;
    // Where each row of `rows` came from: its position in its input, and the
    // input (input_of empty: every row is of input `only_input`).
    std::vector<uint64_t> position_of;
    std::vector<uint32_t> input_of;
    size_t only_input = 0;
    auto started = std::chrono::steady_clock::now();
    auto last_draw = started;
    uint64_t total_rows = 0;
    int64_t first_event = runtime::kBeginningOfTime;
    auto where = [&](size_t i) {
      // A telemetry_gap event the ledger added has no position of its own: the batch's last row's.
      if (position_of.empty()) return std::string();
      if (i >= position_of.size()) i = position_of.size() - 1;
      return inputs[input_of.empty() ? only_input : input_of[i]].reader->describe_position(position_of[i]);
    };
    // Sends `rows` (with the progress of the batch they are, when they are one).
    auto send = [&](const ProgressSegment* seg) {
      if (rows.empty() && !seg) return;
      total_rows += rows.size();
      runtime::Progress progress;
      if (seg) {
        ledger_.observe(seg->progress, rows, out.counters());
        progress = {seg->progress.producer, seg->progress.seq, seg->progress.watermark_ns, seg->progress.final};
      }
      if (o_.speed > 0) {
        paced_push(out, rows, where, first_event, started, seg ? &progress : nullptr);
      } else {
        out.push(rows, where, seg ? &progress : nullptr);
      }
      rows.clear();
      position_of.clear();
      input_of.clear();
    };
    // Moves the rows [in.next, end) of input k to `rows`: a whole batch read
    // by swapping the vectors (a row is large: moving each was a copy of
    // every byte read), a part row by row.
    auto take = [&](Input& in, size_t k, size_t end) {
      if (rows.empty() && in.next == 0 && end == in.rows.size() && in.segments.empty()) {
        rows.swap(in.rows);
        position_of.swap(in.positions);
        input_of.clear();
        only_input = k;
        in.rows.clear();
        in.positions.clear();
        in.next = 0;
        return;
      }
      if (input_of.size() < position_of.size()) input_of.resize(position_of.size(), static_cast<uint32_t>(only_input));
      for (size_t i = in.next; i < end; ++i) {
        rows.push_back(std::move(in.rows[i]));
        position_of.push_back(in.positions[i]);
        input_of.push_back(static_cast<uint32_t>(k));
      }
      in.next = end;
    };
    for (;;) {
      if (out.stopping()) break;
      rows.clear();
      position_of.clear();
      input_of.clear();
      if (inputs.size() == 1) {
        // One file: pass its batches through as they are; a batch with
        // producer progress is pushed alone, with its progress, as live.
        Input& in = inputs[0];
        if (!fill(in, out)) break;
        while (in.next < in.rows.size() || in.segment < in.segments.size()) {
          if (const ProgressSegment* seg = in.segment_here()) {
            take(in, 0, seg->end);
            ++in.segment;
            send(seg);
            continue;
          }
          size_t end = in.segment < in.segments.size() ? in.segments[in.segment].begin : in.rows.size();
          take(in, 0, end);
          send(nullptr);
        }
      } else {
        // Several files (of one run, or of runs side by side): merge them by
        // event time row by row, so that the source's watermark and lateness
        // apply to one time-ordered stream. A batch with producer progress is
        // one unit of the merge (at its first event's time), pushed alone.
        while (rows.size() < o_.batch_size) {
          Input* best = nullptr;
          size_t best_i = 0;
          int64_t best_t = 0;
          for (size_t k = 0; k < inputs.size(); ++k) {
            Input& in = inputs[k];
            if (!fill(in, out)) continue;
            const ProgressSegment* seg = in.segment_here();
            int64_t t = seg && seg->begin == seg->end ? runtime::kBeginningOfTime : in.rows[in.next].time_ns;
            if (!best || t < best_t) best = &in, best_i = k, best_t = t;
          }
          if (!best) break;
          if (const ProgressSegment* seg = best->segment_here()) {
            send(nullptr);  // the rows merged so far go first
            take(*best, best_i, seg->end);
            ++best->segment;
            send(seg);
            continue;
          }
          take(*best, best_i, best->next + 1);
        }
        if (rows.empty() && std::none_of(inputs.begin(), inputs.end(), [&](Input& in) { return fill(in, out); })) break;
        send(nullptr);
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
  // A JSONL file's lines are decoded on two threads at --speed max on more
  // than one core: its decoding is then the replay's critical path. Paced, the
  // source mostly waits.
  int decode_threads() const { return o_.speed == 0 ? InputReader::parallel_decode_threads() : 1; }

  // Makes sure `in` has a row to give (reading more if needed); false at its end.
  bool fill(Input& in, runtime::SourceOutput<Record>& out) {
    while (in.next >= in.rows.size() && in.segment >= in.segments.size()) {
      if (in.eof) return false;
      in.rows.clear();
      in.positions.clear();
      in.segments.clear();
      in.next = 0;
      in.segment = 0;
      // Room for a batch up front (a batch taken whole leaves this vector
      // without its storage): growing it would move every row read so far.
      in.rows.reserve(std::min<size_t>(o_.batch_size, 65536));
      uint64_t dead_before = in.reader->dead_lettered();
      in.eof =
          !in.reader->next(&in.rows, &in.positions, o_.batch_size, out.dead_letters(), out.node_id(), &in.segments);
      if (uint64_t dead = in.reader->dead_lettered() - dead_before) {
        out.counters().add(out.counters().dead_lettered, dead);
        out.counters().add(out.counters().in, dead);
      }
    }
    return true;
  }

  static double inputs_progress(const std::vector<Input>& inputs, uint64_t total_bytes) {
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
  // A batch with producer progress is paced as a whole, by its first event.
  void paced_push(runtime::SourceOutput<Record>& out, std::vector<Record>& rows,
                  const std::function<std::string(size_t)>& where, int64_t& first_event,
                  std::chrono::steady_clock::time_point started, const runtime::Progress* progress) {
    if (progress) {
      if (!rows.empty()) wait_due(out, rows[0].time_ns, first_event, started);
      out.push(rows, where, progress);
      return;
    }
    std::vector<Record> chunk;
    std::vector<size_t> chunk_pos;  // index into rows, for positions
    auto flush = [&] {
      if (chunk.empty()) return;
      out.push(chunk, [&](size_t i) { return where(chunk_pos[i]); });
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
          std::this_thread::sleep_until(
              std::min(due, std::chrono::steady_clock::now() + std::chrono::milliseconds(100)));
        }
      }
      chunk.push_back(std::move(rows[i]));
      chunk_pos.push_back(i);
    }
    flush();
  }

  void wait_due(runtime::SourceOutput<Record>& out, int64_t time_ns, int64_t& first_event,
                std::chrono::steady_clock::time_point started) {
    if (first_event == runtime::kBeginningOfTime) first_event = time_ns;
    double offset_s = static_cast<double>(time_ns - first_event) / 1e9 / o_.speed;
    auto due = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(std::max(0.0, offset_s)));
    while (!out.stopping() && std::chrono::steady_clock::now() < due) {
      std::this_thread::sleep_until(std::min(due, std::chrono::steady_clock::now() + std::chrono::milliseconds(100)));
    }
  }

  FileSourceOptions o_;
  ProducerLedger ledger_;
};

}  // namespace

std::unique_ptr<runtime::SourceDef<Record>> MakeFileSource(FileSourceOptions options) {
  return std::make_unique<FileSource>(std::move(options));
}

void RegisterFileSource(Registry& registry) {
  runtime::ComponentInfo info;
  info.type = "file";
  info.role = runtime::Role::kSource;
  info.doc =
      "Reads telemetry files (JSONL or recordings, recognised by content) once, several files aligned by event "
      "time; at full speed or paced by event time.";
  const FileSourceOptions defaults;  // each default is written once, in FileSourceOptions
  info.params = {
      {.name = "paths", .type = runtime::ParamType::kStringList, .doc = "Files to read ('-' is standard input)."},
      {.name = "speed",
       .type = runtime::ParamType::kString,
       .default_value = speed_text(defaults.speed),
       .doc = "max, realtime, or a factor such as 10x."},
  };
  info.emits = kAllContractKinds;
  registry.add_source(std::move(info), [](const runtime::BuildContext& ctx) {
    FileSourceOptions o;
    o.paths = ctx.params->get_list("paths");
    if (o.paths.empty()) ctx.fail("paths", "paths must name at least one file");
    auto speed = parse_speed(ctx.params->get_string("speed"));
    if (!speed)
      ctx.fail("speed", "invalid speed '" + ctx.params->get_string("speed") + "' (max, realtime or e.g. 10x)");
    o.speed = *speed;
    return MakeFileSource(std::move(o));
  });
}

}  // namespace runlens::connectors
