#include "host_sampler.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace runlens::sdk {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// The next unsigned decimal of `s` from `*pos`, after spaces.
bool NextU64(std::string_view s, size_t* pos, uint64_t* out) {
  size_t i = *pos;
  while (i < s.size() && IsSpace(s[i])) ++i;
  const char* begin = s.data() + i;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(begin, end, *out);
  if (ec != std::errc() || p == begin) return false;
  *pos = static_cast<size_t>(p - s.data());
  return true;
}

// The line of `text` that starts with `key` (followed by a space or tab), or empty.
std::string_view LineOf(std::string_view text, std::string_view key) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && IsSpace(line[key.size()])) return line;
    at = end + 1;
  }
  return {};
}

// A meminfo value ("MemTotal:       16318460 kB") in bytes.
std::optional<int64_t> MeminfoBytes(std::string_view text, std::string_view key) {
  std::string_view line = LineOf(text, key);
  if (line.empty()) return std::nullopt;
  size_t pos = key.size();
  uint64_t v = 0;
  if (!NextU64(line, &pos, &v)) return std::nullopt;
  while (pos < line.size() && IsSpace(line[pos])) ++pos;
  const std::string_view unit = line.substr(pos);
  uint64_t scale = unit.empty() ? 1 : unit.starts_with("kB") ? 1024 : 0;
  if (scale == 0 || v > static_cast<uint64_t>(INT64_MAX) / scale) return std::nullopt;
  return static_cast<int64_t>(v * scale);
}

double Pct(uint64_t part, uint64_t total) { return 100.0 * static_cast<double>(part) / static_cast<double>(total); }

}  // namespace

bool ParseProcStat(std::string_view text, CpuTimes* out) noexcept {
  std::string_view line = LineOf(text, "cpu");
  if (line.empty()) return false;
  size_t pos = 3;
  uint64_t v[8] = {};
  // user nice system idle are in every kernel; iowait irq softirq (2.6) and steal (2.6.11) may be missing.
  int n = 0;
  while (n < 8 && NextU64(line, &pos, &v[n])) ++n;
  if (n < 4) return false;
  *out = CpuTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  return true;
}

bool CpuDelta(const CpuTimes& a, const CpuTimes& b, CpuShares* out) noexcept {
  const uint64_t fa[] = {a.user, a.nice, a.system, a.idle, a.iowait, a.irq, a.softirq, a.steal};
  const uint64_t fb[] = {b.user, b.nice, b.system, b.idle, b.iowait, b.irq, b.softirq, b.steal};
  for (size_t i = 0; i < 8; ++i) {
    if (fb[i] < fa[i]) return false;
  }
  const uint64_t total = b.Total() - a.Total();
  if (total == 0) return false;
  const uint64_t idle = (b.idle - a.idle) + (b.iowait - a.iowait);
  out->busy = Pct(total - idle, total);
  out->user = Pct((b.user - a.user) + (b.nice - a.nice), total);
  out->system = Pct((b.system - a.system) + (b.irq - a.irq) + (b.softirq - a.softirq), total);
  out->iowait = Pct(b.iowait - a.iowait, total);
  out->steal = Pct(b.steal - a.steal, total);
  return true;
}

bool ParseMeminfo(std::string_view text, MemUse* out) noexcept {
  const auto total = MeminfoBytes(text, "MemTotal:");
  if (!total) return false;
  int64_t available = 0;
  if (const auto a = MeminfoBytes(text, "MemAvailable:")) {
    available = *a;
  } else if (const auto f = MeminfoBytes(text, "MemFree:")) {
    available = *f + MeminfoBytes(text, "Buffers:").value_or(0) + MeminfoBytes(text, "Cached:").value_or(0);
  } else {
    return false;
  }
  out->total_bytes = *total;
  out->used_bytes = *total > available ? *total - available : 0;
  return true;
}

bool ParseLoadavg(std::string_view text, double* load1) noexcept {
  const char* end = text.data() + text.size();
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p == text.data() || !(v >= 0)) return false;
  *load1 = v;
  return true;
}

std::string_view HostSampler::Read(const char* name) noexcept {
  char path[512];
  const int n = std::snprintf(path, sizeof path, "%s/%s", root_.c_str(), name);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof path) return {};
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  size_t used = 0;
  while (used < sizeof buf_) {
    const ssize_t got = ::read(fd, buf_ + used, sizeof buf_ - used);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    used += static_cast<size_t>(got);
  }
  ::close(fd);
  return {buf_, used};
}

HostSample HostSampler::Sample() noexcept {
  HostSample s;
  CpuTimes now;
  if (ParseProcStat(Read("stat"), &now)) {
    CpuShares shares;
    if (last_ && CpuDelta(*last_, now, &shares)) s.cpu = shares;
    last_ = now;
  } else {
    ++failed_reads_;
  }
  MemUse mem;
  if (ParseMeminfo(Read("meminfo"), &mem)) {
    s.mem = mem;
  } else {
    ++failed_reads_;
  }
  double load1 = 0;
  if (ParseLoadavg(Read("loadavg"), &load1)) {
    s.load1 = load1;
  } else {
    ++failed_reads_;
  }
  return s;
}

}  // namespace runlens::sdk
