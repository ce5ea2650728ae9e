#include "connectors/sources/producer_ledger.h"

#include <algorithm>

#include "schema/vocabulary.h"

namespace runlens::connectors {

uint64_t ProducerLedger::observe(const capnpc::BatchProgress& progress, std::vector<Record>& rows,
                                 runtime::NodeCounters& counters) {
  if (progress.producer.empty()) return 0;
  auto it = producers_.find(progress.producer);
  bool first = it == producers_.end();
  if (first) it = producers_.emplace(progress.producer, Entry{}).first;
  Entry& e = it->second;
  int64_t earliest = INT64_MAX;
  for (const Record& r : rows) {
    earliest = std::min(earliest, r.time_ns);
    if (e.run.empty()) {
      if (Symbol run = r.run_id(); !run.empty()) e.run = run, e.tenant = r.tenant;
    }
  }
  uint64_t lost = 0;
  // A repeated or older seq (a sender restarted under the same id) is no gap.
  if (!first && progress.seq > e.seq + 1) lost = progress.seq - e.seq - 1;
  int64_t before = e.watermark_ns;
  e.seq = std::max(e.seq, progress.seq);
  e.watermark_ns = std::max(e.watermark_ns, progress.watermark_ns);
  Symbol run = e.run, tenant = e.tenant;
  if (progress.final) producers_.erase(it);  // its last batch: forgotten (a long-lived source meets many)
  if (lost == 0) return 0;
  counters.add(counters.lost_batches, lost);
  // At the earliest time the batch speaks for, but not before what the producer
  // had promised: the event is then not late where the producer's rows are not.
  int64_t t = earliest != INT64_MAX ? earliest : progress.watermark_ns;
  if (before != INT64_MIN) t = std::max(t, before);
  Occurrence o;
  o.kind = Symbol::intern(event_kind::kTelemetryGap);
  o.set_present(Occurrence::F::kind);
  if (!run.empty()) {
    o.run_id = run;
    o.set_present(Occurrence::F::run_id);
  }
  o.key = Symbol::intern(progress.producer);
  o.set_present(Occurrence::F::key);
  o.code = static_cast<int64_t>(lost);
  o.set_present(Occurrence::F::code);
  o.message = "batches " + std::to_string(progress.seq - lost) + ".." + std::to_string(progress.seq - 1) +
              " of producer " + progress.producer + " were lost before the collector";
  o.set_present(Occurrence::F::message);
  Record r;
  r.time_ns = t;
  r.tenant = tenant;
  r.body = std::move(o);
  rows.push_back(std::move(r));
  return lost;
}

}  // namespace runlens::connectors
