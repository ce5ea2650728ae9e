// Host samples from /proc for the SDK's exporter thread (docs/sdk.md, "Host
// samples"): the CPU split of the interval between two readings of
// /proc/stat, used memory from /proc/meminfo and load1 from /proc/loadavg,
// sent as the contract's `node` records when no node exporter does.
//
// The parsers are pure functions of the files' text (tested on fixed text);
// HostSampler reads the files with plain read(2) into a fixed buffer (no
// allocation, no exception); a file that cannot be read or parsed is
// counted and its fields are left out of that sample.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace runlens::sdk {

// The aggregate "cpu" line of /proc/stat, in clock ticks.
struct CpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  uint64_t Total() const noexcept { return user + nice + system + idle + iowait + irq + softirq + steal; }
};

// Percentages (0-100) of the interval between two readings.
struct CpuShares {
  double busy = 0;    // everything but idle and iowait (the contract's cpu_pct)
  double user = 0;    // user + nice
  double system = 0;  // system + irq + softirq
  double iowait = 0;
  double steal = 0;
};

struct MemUse {
  int64_t total_bytes = 0;
  int64_t used_bytes = 0;  // MemTotal - MemAvailable (MemFree + Buffers + Cached before Linux 3.14)
};

// false when the text has no well-formed aggregate "cpu" line.
bool ParseProcStat(std::string_view text, CpuTimes* out) noexcept;
// false when no time passed between the readings or a counter went backwards.
bool CpuDelta(const CpuTimes& before, const CpuTimes& after, CpuShares* out) noexcept;
// false without MemTotal (or without both MemAvailable and MemFree).
bool ParseMeminfo(std::string_view text, MemUse* out) noexcept;
// false unless the text starts with a non-negative number.
bool ParseLoadavg(std::string_view text, double* load1) noexcept;

struct HostSample {
  std::optional<CpuShares> cpu;  // absent on the first reading and when /proc/stat failed
  std::optional<MemUse> mem;
  std::optional<double> load1;
  bool Empty() const noexcept { return !cpu && !mem && !load1; }
};

class HostSampler {
 public:
  explicit HostSampler(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}
  // Reads the three files once. Never throws.
  HostSample Sample() noexcept;
  uint64_t failed_reads() const noexcept { return failed_reads_; }

 private:
  // The file's text in buf_ (cut at its size), or an empty view when it could not be read.
  std::string_view Read(const char* name) noexcept;

  std::string root_;
  std::optional<CpuTimes> last_;
  uint64_t failed_reads_ = 0;
  char buf_[8192];
};

}  // namespace runlens::sdk
