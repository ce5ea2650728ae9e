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

// Bytes read from a file, grown without zeroing what the reads overwrite.
class ReadBuffer {
 public:
  char* data() { return d_.get(); }
  size_t size() const { return size_; }
  // Room for `cap` bytes; what it holds stays.
  void reserve(size_t cap) {
    if (cap <= cap_) return;
    auto d = std::make_unique_for_overwrite<char[]>(cap);
    if (size_) std::memcpy(d.get(), d_.get(), size_);
    d_ = std::move(d);
    cap_ = cap;
  }
  void set_size(size_t n) { size_ = n; }  // n <= the room reserved
  // n bytes from p, which is not inside this buffer.
  void assign(const char* p, size_t n) {
    reserve(n);
    if (n) std::memcpy(d_.get(), p, n);
    size_ = n;
  }
  void drop_front(size_t n) {
    std::memmove(d_.get(), d_.get() + n, size_ - n);
    size_ -= n;
  }

 private:
  std::unique_ptr<char[]> d_;
  size_t size_ = 0, cap_ = 0;
};

// A JSONL input, read and decoded a batch (a Slot) at a time.
//
// With a second decoding thread (the filler), that thread reads and splits
// the batches ahead of the caller, into a ring of kSlots slots, and decodes
// each; the caller, when it comes for a batch, decodes the lines of it the
// filler has not claimed yet (the two claim chunks of lines from a shared
// counter), waits for the filler's last chunk, and hands the rows over. So
// while the caller routes one batch the filler is on the next two, and the
// caller's own share of the decoding is what the filler has not got to: a
// reader one batch ahead left the filler idle while the caller routed, and
// the caller decoding half of every batch left the executor without rows
// (docs/performance.md, "The JSONL reader reads two batches ahead").
// Without one, the caller fills and decodes each batch itself.
//
// A regular file is read up to a window a batch into the slot's buffer (mapping
// it instead cost four times the CPU of the line scan in page faults and TLB
// misses; docs/performance.md), a pipe is held whole (Bytes) and its lines
// are views into it.
class JsonlReader final : public InputReader {
 public:
  JsonlReader(std::string path, std::unique_ptr<Bytes> bytes, int decode_threads)
      : path_(std::move(path)), bytes_(std::move(bytes)) {
    total_ = bytes_->size();
    eof_ = true;
    threaded_ = wants_filler(decode_threads);
  }
  // Takes `fd`, a regular file of `size` bytes.
  JsonlReader(std::string path, int fd, uint64_t size, int decode_threads)
      : path_(std::move(path)), fd_(fd), total_(size) {
    threaded_ = wants_filler(decode_threads);
  }
  ~JsonlReader() override {
    if (filler_.joinable()) {
      {
        std::lock_guard l(mu_);
        stop_ = true;
      }
      free_cv_.notify_all();
      filler_.join();
    }
    if (fd_ >= 0) ::close(fd_);
  }

  bool next(std::vector<Record>* rows, std::vector<uint64_t>* positions, size_t max_rows, runtime::DeadLetterSink& dl,
            const std::string& component, std::vector<ProgressSegment>*) override {
    if (finished_) return false;
    Slot& s = slots_[head_];
    if (!threaded_) {
      fill(s, max_rows);
    } else {
      std::unique_lock l(mu_);
      max_rows_ = max_rows;  // the batches the filler splits from now on
      if (!filler_.joinable()) filler_ = std::thread([this] { fill_ahead(); });
      ready_cv_.wait(l, [&] { return s.state == Slot::kSplit; });
    }
    failed_.clear();
    work(s, &failed_);
    if (threaded_) {
      std::unique_lock l(mu_);
      ready_cv_.wait(l, [&] { return s.done.load(std::memory_order_acquire) == s.lines.size(); });
    }
    if (!s.theirs.empty()) {
      failed_.insert(failed_.end(), std::make_move_iterator(s.theirs.begin()), std::make_move_iterator(s.theirs.end()));
      s.theirs.clear();
      std::sort(failed_.begin(), failed_.end(), [](const Failure& a, const Failure& b) { return a.index < b.index; });
    }
    if (!s.read_error.empty()) {
      // What was read stays; the rest of the file is one dead letter.
      ++dead_;
      dead_letter(dl, component, path_ + ":" + std::to_string(s.read_error_line), std::move(s.read_error), {});
      s.read_error.clear();
    }
    deliver(s, rows, positions, dl, component);
    delivered_ = s.end;
    finished_ = s.last;
    if (threaded_) {
      {
        std::lock_guard l(mu_);
        s.state = Slot::kFree;
      }
      free_cv_.notify_one();
    }
    head_ = (head_ + 1) % kSlots;
    return !finished_;
  }
  std::string describe_position(uint64_t p) const override { return path_ + ":" + std::to_string(p); }
  const char* format() const override { return "jsonl"; }
  // Bytes of the lines handed over.
  double progress() const override {
    return total_ ? std::min(1.0, static_cast<double>(delivered_) / static_cast<double>(total_)) : 1.0;
  }
  uint64_t dead_lettered() const override { return dead_; }
  uint64_t bytes() const override { return total_; }

 private:
  static constexpr size_t kWindow = 4u << 20;  // bytes read for a batch: 16384 lines of 260 bytes are 4.2 MB
  static constexpr size_t kSlots = 2;          // the batch handed over last is free again: two ahead
  static constexpr size_t kChunk = 64;         // lines a claim: about 20 us of decoding

  struct Slot {
    enum State { kFree, kSplit };
    ReadBuffer buf;               // a regular file's bytes of these lines (a pipe's lines view its Bytes)
    std::vector<Line> lines;      // views into buf or the Bytes
    std::vector<Record> rows;     // rows[i]: lines[i] decoded (where it decodes)
    std::vector<Failure> theirs;  // the filler thread's failures, its own until done
    std::string read_error;       // a read that failed while these lines were read: dead-lettered before them
    uint64_t read_error_line = 0;
    uint64_t end = 0;             // the input's offset after these lines
    bool last = false;            // the input ends with them
    std::atomic<size_t> next{0};  // the first line not yet claimed
    std::atomic<size_t> done{0};  // lines decoded
    State state = kFree;          // with the filler thread: under mu_
  };

  // Worth a thread only for a file of many batches.
  bool wants_filler(int decode_threads) const { return decode_threads > 1 && total_ >= (4u << 20); }

  // The filler thread: fills the slots in turn as they come free, then decodes its share of each.
  void fill_ahead() {
    for (size_t k = 0;; k = (k + 1) % kSlots) {
      Slot& s = slots_[k];
      size_t max_rows;
      {
        std::unique_lock l(mu_);
        free_cv_.wait(l, [&] { return stop_ || s.state == Slot::kFree; });
        if (stop_) return;
        max_rows = max_rows_;
      }
      fill(s, max_rows);
      {
        std::lock_guard l(mu_);
        s.state = Slot::kSplit;
      }
      ready_cv_.notify_all();
      work(s, &s.theirs);
      if (s.last) return;
    }
  }

  // Decodes chunks of s's lines until none is left to claim.
  void work(Slot& s, std::vector<Failure>* failed) {
    const size_t n = s.lines.size();
    for (;;) {
      const size_t i = s.next.fetch_add(kChunk, std::memory_order_relaxed);
      if (i >= n) return;
      const size_t c = std::min(kChunk, n - i);
      decode_lines(s.lines.data() + i, c, s.rows.data() + i, i, failed);
      if (s.done.fetch_add(c, std::memory_order_acq_rel) + c == n && threaded_) {
        std::lock_guard l(mu_);  // the caller checks done under it: no lost wake-up
        ready_cv_.notify_all();
      }
    }
  }

  // The next lines (up to max_rows that are not blank) into s, with room for
  // their rows. A batch ends where the bytes read for it do; a slot without
  // lines is the input's end.
  void fill(Slot& s, size_t max_rows) {
    s.lines.clear();
    s.last = false;
    if (bytes_) {
      split(s, bytes_->data(), bytes_->size(), &pos_, max_rows);
      s.end = pos_;
      s.last = pos_ >= bytes_->size();
    } else {
      ReadBuffer& b = s.buf;
      const uint64_t line_base = line_no_ + 1;
      b.assign(carry_.data(), carry_.size());
      carry_.clear();
      // About the batch's bytes, from the lines so far: a small batch does
      // not read (and carry to the next) a whole window.
      const size_t want =
          std::min<uint64_t>(kWindow, max_rows * bytes_per_line_ + bytes_per_line_ / 4 * max_rows + 4096);
      size_t room = std::max(want, b.size());
      size_t pos = 0;
      for (;;) {
        read(s, room);
        if (split(s, b.data(), b.size(), &pos, max_rows)) break;
        // No whole line in what is here: the rest is the start of a line
        // longer than the buffer (blank lines before it are dropped).
        b.drop_front(pos);
        offset_ += pos;
        pos = 0;
        if (b.size() == room) room *= 2;
      }
      if (!s.lines.empty()) {
        bytes_per_line_ = std::max<uint64_t>(1, (pos + 1) / (s.lines.back().number - line_base + 1));
      }
      carry_.assign(b.data() + pos, b.data() + b.size());
      offset_ += pos;
      s.end = offset_;
      s.last = eof_ && carry_.empty();
    }
    s.rows.clear();
    s.rows.resize(s.lines.size());  // decoded in place: a Record is large enough that moving it in shows
    s.next.store(0, std::memory_order_relaxed);
    s.done.store(0, std::memory_order_relaxed);
  }
  // Splits the lines of d[*pos, size) into s until it holds max_rows or the
  // bytes end; false where it needs more bytes for a first line.
  bool split(Slot& s, const char* d, size_t size, size_t* pos, size_t max_rows) {
    size_t p = *pos;
    while (s.lines.size() < max_rows && p < size) {
      const void* nl = std::memchr(d + p, '\n', size - p);
      if (!nl && !eof_) break;  // the start of a line: the next batch's (or more bytes for it)
      const size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - d) : size;
      std::string_view line(d + p, end - p);
      p = nl ? end + 1 : end;
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      s.lines.push_back({line, line_no_});
    }
    *pos = p;
    return !s.lines.empty() || (eof_ && p >= size);
  }
  // Reads into s.buf until it holds `room` bytes or the file ends.
  void read(Slot& s, size_t room) {
    ReadBuffer& b = s.buf;
    size_t len = b.size();
    b.reserve(room);
    while (!eof_ && len < room) {
      ssize_t got = ::read(fd_, b.data() + len, room - len);
      if (got > 0) {
        len += static_cast<size_t>(got);
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        s.read_error = std::string("cannot read further: ") + std::strerror(errno);
        s.read_error_line = line_no_ + 1;
      }
      eof_ = true;
    }
    b.set_size(len);
  }
  // s.rows hold s.lines decoded, failed_ the lines that did not decode: those
  // leave their slots and are dead-lettered, in line order; the others'
  // line numbers go to positions.
  void deliver(Slot& s, std::vector<Record>* rows, std::vector<uint64_t>* positions, runtime::DeadLetterSink& dl,
               const std::string& component) {
    const size_t first = rows->size();
    if (first == 0) {
      rows->swap(s.rows);  // the caller's vector, empty, is the slot's next
    } else {
      rows->insert(rows->end(), std::make_move_iterator(s.rows.begin()), std::make_move_iterator(s.rows.end()));
    }
    const size_t count = s.lines.size();
    size_t out = first, f = 0;
    for (size_t i = 0; i < count; ++i) {
      if (f < failed_.size() && failed_[f].index == i) {
        ++dead_;
        dead_letter(dl, component, path_ + ":" + std::to_string(s.lines[i].number), std::move(failed_[f].why),
                    s.lines[i].text);
        ++f;
        continue;
      }
      if (out != first + i) (*rows)[out] = std::move((*rows)[first + i]);
      positions->push_back(s.lines[i].number);
      ++out;
    }
    rows->resize(out);
  }

  std::string path_;
  std::unique_ptr<Bytes> bytes_;  // a pipe's bytes, whole
  int fd_ = -1;                   // a regular file, read a window at a time
  uint64_t total_ = 0;
  bool threaded_ = false;

  // The filling side (the filler thread's, or the caller's without one).
  std::vector<char> carry_;  // the start of the next batch's first line, read with the batch before
  uint64_t offset_ = 0;      // a regular file's offset of carry_
  size_t pos_ = 0;           // a pipe's: where the next line starts
  bool eof_ = false;
  uint64_t line_no_ = 0;
  uint64_t bytes_per_line_ = 256;  // of the batch before

  // The caller's side.
  size_t head_ = 0;  // the slot handed over next
  bool finished_ = false;
  uint64_t delivered_ = 0;
  uint64_t dead_ = 0;
  std::vector<Failure> failed_;

  Slot slots_[kSlots];
  std::mutex mu_;
  std::condition_variable free_cv_, ready_cv_;  // a slot came free; a slot was split or decoded
  size_t max_rows_ = 0;                         // under mu_
  bool stop_ = false;                           // under mu_
  std::thread filler_;
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
