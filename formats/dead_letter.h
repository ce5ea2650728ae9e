// The dead-letter file: one JSON object per rejected input, with who
// rejected it, where it was (line or byte offset) and why.
//   {"component":"telemetry","position":"run.jsonl:12","reason":"...","raw":"..."}
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include "runtime/operator.h"

namespace runlens {

class DeadLetterFile final : public runtime::DeadLetterSink {
 public:
  // The file is created on the first dead letter, so a clean run leaves none;
  // an empty path counts without writing.
  explicit DeadLetterFile(std::string path) : path_(std::move(path)) {}
  ~DeadLetterFile() override;
  void write(const runtime::DeadLetter& d) override;
  void flush() override;
  uint64_t count() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  mutable std::mutex mu_;
  std::FILE* f_ = nullptr;
  bool failed_ = false;
  uint64_t count_ = 0;
};

}  // namespace runlens
