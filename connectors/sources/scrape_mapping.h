// From what node_exporter and dcgm-exporter expose (the Prometheus text
// format, formats/prom_text.h) to runlens's node and gpu samples: the mapping
// of the `prometheus_scrape` source (docs/integrations.md, "Scraping
// node_exporter and dcgm-exporter", has the table). One ScrapeMapper per
// target keeps what rates and counters need between its scrapes:
//  - rates (CPU shares, disk and network bytes/s) come only from two
//    consecutive scrapes of the target;
//  - a counter that decreases was reset (the exporter or the host
//    restarted): the interval's rate is skipped, and a running total
//    (tcp_retransmits_total, ecc_*_total, pcie_replay_total,
//    nvlink_errors_total) continues from the new base, so it never goes down;
//  - dcgm-exporter's XID gauge holds the last XID code: a change to a
//    non-zero code is a new XID (the row gets `xid`), the same code again is
//    not; the first value seen is the baseline (an XID from before is not
//    raised again).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "formats/prom_text.h"
#include "schema/record.h"

namespace runlens::connectors {

enum class ScrapeFormat { kDetect, kNodeExporter, kDcgm };
const char* scrape_format_name(ScrapeFormat f);  // "detect", "node_exporter", "dcgm"

// A counter's running total across resets.
class RunningTotal {
 public:
  // Takes the exporter's value; returns the increase since the previous one,
  // or nullopt for the first value and after a reset (a decrease).
  std::optional<double> update(double raw);
  bool seen() const { return seen_; }
  double total() const { return total_; }

 private:
  bool seen_ = false;
  double raw_ = 0, total_ = 0;
};

class ScrapeMapper {
 public:
  // `node`: the node a node_exporter target's samples name (and dcgm's
  // without a Hostname label). `format` kDetect looks at the families:
  // DCGM_FI_* is dcgm-exporter, node_* node_exporter.
  // `node_given`: `node` was configured; otherwise node_exporter's
  // node_uname_info nodename, where exported, names the node instead.
  ScrapeMapper(Symbol node, ScrapeFormat format, bool node_given = true)
      : node_(node), format_(format), node_given_(node_given) {}

  // Maps one scrape taken at `scrape_ns` (event time where samples carry no
  // timestamp) to rows appended to `rows`. False with `why` when the
  // exposition is neither format.
  bool map(const prom::Exposition& e, int64_t scrape_ns, std::vector<Record>* rows, std::string* why);

  // The format of the last scrape mapped.
  ScrapeFormat format() const { return detected_; }
  // Whether the last scrape's rows took their time from sample timestamps.
  bool stamped() const { return stamped_; }

 private:
  void map_node(const prom::Exposition& e, int64_t scrape_ns, std::vector<Record>* rows);
  void map_dcgm(const prom::Exposition& e, int64_t scrape_ns, std::vector<Record>* rows);

  struct Rate {  // a byte counter summed over devices, as a rate
    std::map<std::string, RunningTotal> devices;
  };
  struct GpuState {
    std::map<std::string, RunningTotal> counters;  // by family (and link) name
    std::optional<int64_t> xid;                    // the last XID code seen
  };

  Symbol node_;
  ScrapeFormat format_, detected_ = ScrapeFormat::kDetect;
  bool node_given_ = true;
  bool stamped_ = false;
  // node_exporter
  int64_t node_time_ = 0;
  bool have_node_time_ = false;
  std::map<std::string, std::map<std::string, double>> cpu_;  // cpu -> mode -> seconds
  Rate disk_read_, disk_write_, net_rx_, net_tx_;
  RunningTotal retrans_;
  // dcgm-exporter, by node and GPU index
  std::map<std::pair<std::string, int32_t>, GpuState> gpus_;
};

}  // namespace runlens::connectors
