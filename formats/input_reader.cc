#include "formats/input_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <iostream>
#include <iterator>
#include <mutex>
#include <thread>

#include "formats/capnp_codec.h"
#include "formats/jsonl_codec.h"
#include "formats/recording.h"

namespace runlens {
namespace {

constexpr size_t kMaxRawBytes = 4096;

// The bytes of a pipe or standard input, whole (a regular file is read a
// window at a time instead).
class Bytes {
 public:
  // Standard input.
  void load_stdin() { buf_.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()); }
  // What can be read from `fd`, which it closes.
  void load(int fd) {
    char chunk[1 << 16];
    ssize_t n;
    while ((n = ::read(fd, chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) buf_.append(chunk, static_cast<size_t>(n));
    }
    ::close(fd);
  }
  const char* data() const { return buf_.data(); }
  size_t size() const { return buf_.size(); }

 private:
  std::string buf_;
};

void dead_letter(runtime::DeadLetterSink& dl, const std::string& component, std::string position, std::string reason,
                 std::string_view raw) {
  runtime::DeadLetter d;
  d.component = component;
  d.position = std::move(position);
  d.reason = std::move(reason);
  d.raw = std::string(raw.substr(0, kMaxRawBytes));
  dl.write(d);
}

// One line of a JSONL call: its text and its number in the file.
struct Line {
  std::string_view text;
  uint64_t number;
};
// A line that did not decode: its index in the call's lines and the reason.
struct Failure {
  size_t index;
  std::string why;
};

void decode_lines(const Line* lines, size_t n, Record* rows, size_t index_base, std::vector<Failure>* failed) {
  std::string why;
  for (size_t i = 0; i < n; ++i) {
    if (!jsonl::decode_record(lines[i].text, &rows[i], &why)) failed->push_back({index_base + i, why});
  }
}

// A second thread for a JSONL reader's decoding, which starts on a batch's
// lines as soon as they are split, while the reader's caller is still routing
// the batch before, and which the caller joins when it comes back for them:
// the two claim chunks of lines from a shared counter, so neither waits on the
// other's fixed share. Decoding is most of a JSONL replay's source thread,
// and a split into halves left a core idle whenever that thread routed
// (docs/performance.md).
class AheadDecoder {
 public:
  AheadDecoder() : thread_([this] { loop(); }) {}
  ~AheadDecoder() {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  // Starts decoding lines[0, n) into rows[0, n) on the thread; both must
  // stay put until finish().
  void start(const Line* lines, size_t n, Record* rows) {
    lines_ = lines;
    n_ = n;
    rows_ = rows;
    next_.store(0, std::memory_order_relaxed);
    {
      std::lock_guard l(mu_);
      posted_ = true;
    }
    wake_.notify_one();
  }
  // Decodes on the calling thread what the helper has not claimed and waits
  // for what it has; the failures (indexes into the lines), in line order,
  // go to `failed`.
  void finish(std::vector<Failure>* failed) {
    work(failed);
    {
      std::unique_lock l(mu_);
      if (posted_) {
        posted_ = false;  // the helper never woke for it: nothing of it is the helper's
      } else {
        done_cv_.wait(l, [&] { return !busy_; });
      }
    }
    if (!theirs_.empty()) {
      failed->insert(failed->end(), std::make_move_iterator(theirs_.begin()), std::make_move_iterator(theirs_.end()));
      theirs_.clear();
      std::sort(failed->begin(), failed->end(), [](const Failure& a, const Failure& b) { return a.index < b.index; });
    }
  }

 private:
  static constexpr size_t kChunk = 64;  // lines a claim: about 20 us of decoding

  void work(std::vector<Failure>* failed) {
    for (;;) {
      const size_t i = next_.fetch_add(kChunk, std::memory_order_relaxed);
      if (i >= n_) return;
      decode_lines(lines_ + i, std::min(kChunk, n_ - i), rows_ + i, i, failed);
    }
  }
  void loop() {
    std::unique_lock l(mu_);
    for (;;) {
      wake_.wait(l, [&] { return posted_ || stop_; });
      if (stop_) return;
      posted_ = false;
      busy_ = true;
      l.unlock();
      work(&theirs_);
      l.lock();
      busy_ = false;
      done_cv_.notify_one();
    }
  }

  // The batch: set by start() before it posts under mu_, read by the helper after it takes the post under mu_.
  const Line* lines_ = nullptr;
  size_t n_ = 0;
  Record* rows_ = nullptr;
  std::atomic<size_t> next_{0};  // the first line not yet claimed
  std::vector<Failure> theirs_;  // the helper's failures: its own while busy_
  std::mutex mu_;
  std::condition_variable wake_, done_cv_;
  bool posted_ = false, busy_ = false, stop_ = false;
  std::thread thread_;
};

// A JSONL input's bytes: a regular file is read a window at a time into a
// buffer the reader reuses (mapping it instead cost four times the CPU of
// the line scan in page faults and TLB misses; docs/performance.md), a pipe
// is held whole (Bytes).
class JsonlReader final : public InputReader {
 public:
  JsonlReader(std::string path, std::unique_ptr<Bytes> bytes, int decode_threads)
      : path_(std::move(path)), bytes_(std::move(bytes)) {
    d_ = bytes_->data();
    len_ = total_ = bytes_->size();
    eof_ = true;
    start_helper(decode_threads);
  }
  // Takes `fd`, a regular file of `size` bytes.
  JsonlReader(std::string path, int fd, uint64_t size, int decode_threads)
      : path_(std::move(path)), fd_(fd), total_(size) {
    start_helper(decode_threads);
  }
  ~JsonlReader() override {
    if (fd_ >= 0) ::close(fd_);
  }

  bool next(std::vector<Record>* rows, std::vector<uint64_t>* positions, size_t max_rows, runtime::DeadLetterSink& dl,
            const std::string& component, std::vector<ProgressSegment>*) override {
    if (!helper_) {
      split(max_rows, dl, component);
      const size_t first = rows->size();
      // Decoded in place: a Record is large enough that moving it in shows.
      rows->resize(first + lines_.size());
      failed_.clear();
      decode_lines(lines_.data(), lines_.size(), rows->data() + first, 0, &failed_);
      deliver(rows, first, positions, dl, component);
      return !(eof_ && pos_ >= len_);
    }
    // With the helper, a call hands over the batch the call before split and
    // started, and splits and starts the next before it returns: the helper
    // decodes it while the caller routes this one. The first call splits its own.
    if (!started_) {
      started_ = true;
      split_ahead(max_rows, dl, component);
    }
    if (lines_.empty()) return false;  // a split finds no lines only at the end
    failed_.clear();
    helper_->finish(&failed_);
    const size_t first = rows->size();
    if (first == 0) {
      rows->swap(ahead_);  // the caller's vector, empty, is the next batch's
    } else {
      rows->insert(rows->end(), std::make_move_iterator(ahead_.begin()), std::make_move_iterator(ahead_.end()));
    }
    deliver(rows, first, positions, dl, component);
    split_ahead(max_rows, dl, component);
    return !lines_.empty();
  }
  std::string describe_position(uint64_t p) const override { return path_ + ":" + std::to_string(p); }
  const char* format() const override { return "jsonl"; }
  // Bytes split into lines (with the helper, a batch ahead of those handed over).
  double progress() const override {
    return total_ ? std::min(1.0, static_cast<double>(base_ + std::min(pos_, len_)) / static_cast<double>(total_))
                  : 1.0;
  }
  uint64_t dead_lettered() const override { return dead_; }
  uint64_t bytes() const override { return total_; }

 private:
  static constexpr size_t kWindow = 4u << 20;  // 8 MiB held 5 MiB more and was no faster
  // A call's lines end where the window does: 16384 of 260 bytes (the
  // default batch) are 4.2 MB, so a call takes about a window's worth.
  static constexpr size_t kRefillBelow = 2u << 20;

  void start_helper(int decode_threads) {
    // Worth a thread only for a file of many batches.
    if (decode_threads > 1 && total_ >= (4u << 20)) helper_ = std::make_unique<AheadDecoder>();
  }

  // The next lines (up to max_rows that are not blank) into lines_: views
  // into the window, valid until the next split. None only at the end.
  void split(size_t max_rows, runtime::DeadLetterSink& dl, const std::string& component) {
    // A call's lines are views into the window, so it takes them from the
    // window as it is; the window moves on between calls, while at least a
    // call's worth is left in it, or when a line does not fit in what is.
    if (!eof_ && len_ - pos_ < kRefillBelow) refill(dl, component);
    lines_.clear();
    while (lines_.size() < max_rows && !(eof_ && pos_ >= len_)) {
      const void* nl = std::memchr(d_ + pos_, '\n', len_ - pos_);
      if (!nl && !eof_) {
        if (!lines_.empty()) break;  // the rest of the window is the start of a line: the next call's
        refill(dl, component);
        continue;
      }
      size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - d_) : len_;
      std::string_view line(d_ + pos_, end - pos_);
      pos_ = end + 1;
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      lines_.push_back({line, line_no_});
    }
  }
  // The next batch split and started on the helper, into ahead_.
  void split_ahead(size_t max_rows, runtime::DeadLetterSink& dl, const std::string& component) {
    split(max_rows, dl, component);
    ahead_.clear();
    ahead_.resize(lines_.size());
    if (!lines_.empty()) helper_->start(lines_.data(), lines_.size(), ahead_.data());
  }
  // rows[first, first + lines_.size()) hold lines_ decoded, failed_ the lines
  // that did not decode: those leave their slots and are dead-lettered, in
  // line order; the others' line numbers go to positions.
  void deliver(std::vector<Record>* rows, size_t first, std::vector<uint64_t>* positions, runtime::DeadLetterSink& dl,
               const std::string& component) {
    const size_t count = lines_.size();
    size_t out = first, f = 0;
    for (size_t i = 0; i < count; ++i) {
      if (f < failed_.size() && failed_[f].index == i) {
        ++dead_;
        dead_letter(dl, component, path_ + ":" + std::to_string(lines_[i].number), std::move(failed_[f].why),
                    lines_[i].text);
        ++f;
        continue;
      }
      if (out != first + i) (*rows)[out] = std::move((*rows)[first + i]);
      positions->push_back(lines_[i].number);
      ++out;
    }
    rows->resize(out);
  }

  // Moves what is left of the window to the front of the buffer (growing it
  // when that is all of it: a line longer than the window) and reads after it.
  void refill(runtime::DeadLetterSink& dl, const std::string& component) {
    const size_t keep = len_ - pos_;
    if (buf_.size() < kWindow) buf_.resize(kWindow);
    if (keep * 2 > buf_.size()) buf_.resize(std::max(buf_.size() * 2, keep * 2));
    if (keep && pos_) std::memmove(buf_.data(), buf_.data() + pos_, keep);
    base_ += pos_;
    pos_ = 0;
    len_ = keep;
    d_ = buf_.data();
    while (len_ < buf_.size()) {
      ssize_t got = ::read(fd_, buf_.data() + len_, buf_.size() - len_);
      if (got > 0) {
        len_ += static_cast<size_t>(got);
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        // What was read stays; the rest of the file is one dead letter.
        ++dead_;
        dead_letter(dl, component, path_ + ":" + std::to_string(line_no_ + 1),
                    std::string("cannot read further: ") + std::strerror(errno), {});
      }
      eof_ = true;
      break;
    }
  }

  std::string path_;
  std::unique_ptr<Bytes> bytes_;  // a pipe's bytes, whole
  int fd_ = -1;                   // a regular file, read a window at a time
  std::vector<char> buf_;
  const char* d_ = "";
  size_t len_ = 0, pos_ = 0;  // the window and where in it the next line starts
  uint64_t base_ = 0;         // the window's offset in the file
  uint64_t total_ = 0;
  bool eof_ = false;
  uint64_t line_no_ = 0;
  uint64_t dead_ = 0;
  std::vector<Line> lines_;    // the batch split last
  std::vector<Record> ahead_;  // with the helper: lines_ decoding into it
  bool started_ = false;       // with the helper: the first batch split
  std::vector<Failure> failed_;
  std::unique_ptr<AheadDecoder> helper_;  // last: it stops before what it decodes goes
};

// A recording is recognised by its magic, also when only part of the header survived.
bool starts_as_recording(const char* head, size_t size) {
  size_t probe = std::min(size, sizeof recording::kMagic);
  return probe >= 4 && std::memcmp(head, recording::kMagic, probe) == 0;
}

class RecordingReader final : public InputReader {
 public:
  // A regular file, through a cursor open on it.
  RecordingReader(std::string path, std::unique_ptr<recording::FrameCursor> cursor)
      : path_(std::move(path)), cursor_(std::move(cursor)) {}
  // A pipe's bytes, whole.
  RecordingReader(std::string path, std::unique_ptr<Bytes> bytes)
      : path_(std::move(path)), bytes_(std::move(bytes)), cursor_(std::make_unique<recording::FrameCursor>()) {
    cursor_->open(bytes_->data(), bytes_->size());
  }

  bool next(std::vector<Record>* rows, std::vector<uint64_t>* positions, size_t max_rows, runtime::DeadLetterSink& dl,
            const std::string& component, std::vector<ProgressSegment>* segments) override {
    const uint64_t n = cursor_->size();
    size_t produced = 0;
    if (!header_checked_) {
      header_checked_ = true;
      std::string_view head = cursor_->head(recording::kHeaderBytes);
      std::string problem = recording::header_problem(head.data(), head.size(), n);
      if (!problem.empty()) {
        ++dead_;
        dead_letter(dl, component, at(0), std::move(problem), {});
        cursor_->seek(n);
        return false;
      }
      cursor_->seek(recording::kHeaderBytes);
    }
    while (cursor_->pos() < n && produced < max_rows) {
      recording::FrameStep step = cursor_->next();
      if (step.kind == recording::FrameStep::Kind::kEnd) break;
      const size_t frame = step.offset;
      if (step.kind == recording::FrameStep::Kind::kDamage) {
        ++dead_;
        dead_letter(dl, component, at(frame), step.reason, {});
        continue;
      }
      issues_.clear();
      std::string error;
      size_t first = rows->size();
      if (!capnpc::decode_batch(step.payload, step.size, rows, &issues_, &error, &progress_)) {
        ++dead_;
        dead_letter(dl, component, at(frame), error, {});
        continue;
      }
      if (segments && !progress_.producer.empty()) segments->push_back({first, rows->size(), progress_});
      for (const auto& issue : issues_) {
        ++dead_;
        dead_letter(dl, component, at(frame) + "#" + std::to_string(issue.index), issue.reason, {});
      }
      // Position token: frame offset in the high bits, event index in the low 20.
      uint32_t index = 0;
      size_t issue_i = 0;
      for (size_t k = first; k < rows->size(); ++k) {
        while (issue_i < issues_.size() && issues_[issue_i].index == index) ++index, ++issue_i;
        positions->push_back((static_cast<uint64_t>(frame) << 20) | std::min<uint32_t>(index, (1u << 20) - 1));
        ++index;
        ++produced;
      }
    }
    return cursor_->pos() < n;
  }

  std::string describe_position(uint64_t p) const override {
    return at(static_cast<size_t>(p >> 20)) + "#" + std::to_string(p & ((1u << 20) - 1));
  }
  const char* format() const override { return "recording"; }
  double progress() const override {
    const uint64_t n = cursor_->size();
    return n ? static_cast<double>(std::min(cursor_->pos(), n)) / static_cast<double>(n) : 1.0;
  }
  uint64_t dead_lettered() const override { return dead_; }
  uint64_t bytes() const override { return cursor_->size(); }

 private:
  std::string at(size_t offset) const { return path_ + "@" + std::to_string(offset); }

  std::string path_;
  std::unique_ptr<Bytes> bytes_;  // a pipe's, which the cursor steps through
  std::unique_ptr<recording::FrameCursor> cursor_;
  bool header_checked_ = false;
  uint64_t dead_ = 0;
  std::vector<capnpc::EventIssue> issues_;
  capnpc::BatchProgress progress_;
};

}  // namespace

int InputReader::parallel_decode_threads() { return std::thread::hardware_concurrency() > 1 ? 2 : 1; }

std::unique_ptr<InputReader> InputReader::open(const std::string& path, std::string* error, int decode_threads) {
  auto bytes = std::make_unique<Bytes>();
  if (path == "-") {
    bytes->load_stdin();
  } else {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return *error = "cannot open " + path + ": " + std::strerror(errno), nullptr;
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
      ::close(fd);
      return *error = "cannot read " + path + ": not a regular file", nullptr;
    }
    // A regular file is read a window at a time, a recording's and JSONL's.
    if (S_ISREG(st.st_mode)) {
      char head[sizeof recording::kMagic];
      ssize_t got = ::pread(fd, head, sizeof head, 0);
      const auto size = static_cast<uint64_t>(st.st_size);
      if (starts_as_recording(head, got > 0 ? static_cast<size_t>(got) : 0)) {
        auto cursor = std::make_unique<recording::FrameCursor>();
        if (!cursor->open(fd, size, path, error)) return nullptr;
        return std::make_unique<RecordingReader>(path, std::move(cursor));
      }
      posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      return std::make_unique<JsonlReader>(path, fd, size, decode_threads);
    }
    bytes->load(fd);
  }
  if (starts_as_recording(bytes->data(), bytes->size())) {
    return std::make_unique<RecordingReader>(path, std::move(bytes));
  }
  return std::make_unique<JsonlReader>(path, std::move(bytes), decode_threads);
}

}  // namespace runlens
