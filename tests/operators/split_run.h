// Runs an operator split over partitions as the executor does: each row to
// the partition of its key (every partition when the key is nullopt), rows in
// canonical order, a watermark after each distinct event time (or only at
// the end), then finish(). Unlike run_partitioned (telemetry_rows.h), the
// emit floor is the previous watermark, as in the runtime, so operators whose
// timers fire at deadlines earlier than the row that triggers them can run.
#pragma once

#include "tests/operators/operator_run.h"

namespace runlens::testing {

inline std::vector<Record> run_split(const ops::OperatorDef& def, std::vector<Record> rows, int parts,
                                     bool watermark_each_row = true) {
  std::sort(rows.begin(), rows.end(), [](const Record& a, const Record& b) { return compare_canonical(a, b) < 0; });
  std::vector<Record> all;
  for (int p = 0; p < parts; ++p) {
    std::vector<Record> mine;
    for (const Record& r : rows) {
      auto key = def.key(r);
      if (!key || static_cast<int>(*key % static_cast<uint64_t>(parts)) == p) mine.push_back(r);
    }
    OperatorRun run;
    runtime::OperatorContext ctx{"op", p, parts, &run.dead, &run.counters};
    auto op = def.open(ctx);
    int64_t floor = runtime::kBeginningOfTime;
    size_t i = 0;
    while (i < mine.size()) {
      int64_t t = mine[i].time_ns;
      runtime::Emitter<Record> out(&run.out, floor);
      while (i < mine.size() && mine[i].time_ns == t) op->process(mine[i++], out);
      if (watermark_each_row) {
        op->on_watermark(t + 1, out);
        floor = t + 1;
      }
    }
    runtime::Emitter<Record> out(&run.out, floor);
    op->on_watermark(runtime::kEndOfTime, out);
    op->finish(out);
    for (auto& r : run.out) all.push_back(std::move(r));
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Record& a, const Record& b) { return compare_canonical(a, b) < 0; });
  return all;
}

}  // namespace runlens::testing
