#include "schema/alert.h"

#include <cstdio>

namespace runlens {

std::shared_ptr<const RunInfo> RunInfo::from(const RunStart& rs) {
  auto info = std::make_shared<RunInfo>();
  info->start = rs;
  int32_t n = rs.world_size > 0 ? rs.world_size : 0;
  for (const RankPlacement& p : rs.ranks) n = std::max(n, p.rank + 1);
  // A world size in the millions is bad input, not a cluster: cap the table.
  n = std::min<int32_t>(n, 1 << 20);
  info->placement.resize(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) info->placement[r].rank = r;
  for (const RankPlacement& p : rs.ranks) {
    if (p.rank >= 0 && p.rank < n) info->placement[p.rank] = p;
  }
  return info;
}

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "?";
}

std::string make_alert_id(std::string_view kind, Symbol run_id, std::optional<int32_t> rank, Symbol node,
                          std::optional<int32_t> gpu, int64_t discriminator) {
  uint64_t h = fnv1a(kind);
  h = fnv1a("|", h);
  h = fnv1a(run_id.str(), h);
  h = fnv1a("|", h);
  h = fnv1a(rank ? std::to_string(*rank) : "-", h);
  h = fnv1a("|", h);
  h = fnv1a(node.str(), h);
  h = fnv1a("|", h);
  h = fnv1a(gpu ? std::to_string(*gpu) : "-", h);
  h = fnv1a("|", h);
  h = fnv1a(std::to_string(discriminator), h);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string make_alert_id(const Alert& a, int64_t discriminator) {
  return make_alert_id(a.kind, a.run_id, a.rank, a.node, a.gpu, discriminator);
}

std::string make_evaluation_alert_id(std::string_view kind, std::string_view model_id, std::string_view model_version,
                                     std::string_view evaluation_id, std::string_view metric) {
  // "eval|" keeps these ids apart from any training id of the same kind.
  uint64_t h = fnv1a("eval|");
  for (std::string_view part : {kind, model_id, model_version, evaluation_id, metric}) {
    h = fnv1a(part, h);
    h = fnv1a("|", h);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace runlens

namespace runlens {

Record closing_record(const Alert& open, int64_t end_ns) {
  auto a = std::make_shared<Alert>(open);
  a->revision = open.revision + 1;
  a->ends_ns = std::max(end_ns, open.time_ns);
  Record r;
  r.time_ns = *a->ends_ns;
  r.tenant = a->tenant;
  r.body = std::shared_ptr<const Alert>(std::move(a));
  return r;
}

}  // namespace runlens
