#include "formats/dead_letter.h"

#include <filesystem>

#include "formats/json_writer.h"

namespace runlens {

DeadLetterFile::~DeadLetterFile() {
  if (f_) std::fclose(f_);
}

void DeadLetterFile::write(const runtime::DeadLetter& d) {
  std::string line;
  json::Writer w(&line);
  w.begin_object();
  w.key("component").str(d.component);
  w.key("position").str(d.position);
  w.key("reason").str(d.reason);
  if (!d.raw.empty()) w.key("raw").str(d.raw);
  w.end_object();
  line.push_back('\n');
  std::lock_guard lock(mu_);
  ++count_;
  if (path_.empty() || failed_) return;
  if (!f_) {
    std::error_code ec;
    auto parent = std::filesystem::path(path_).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    f_ = std::fopen(path_.c_str(), "wb");
    if (!f_) {
      failed_ = true;  // counted all the same; the summary names the path
      return;
    }
  }
  std::fwrite(line.data(), 1, line.size(), f_);
}

void DeadLetterFile::flush() {
  std::lock_guard lock(mu_);
  if (f_) std::fflush(f_);
}

uint64_t DeadLetterFile::count() const {
  std::lock_guard lock(mu_);
  return count_;
}

}  // namespace runlens
