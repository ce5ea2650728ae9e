// timeline: the sink that keeps the correlated run graph (store/store.h).
//
// A thin sink: the run-graph builder (timeline/run_graph.h) turns its rows
// into the store's batches (what is kept, tiered retention, commit cadence:
// see there and docs/storage.md), and an asynchronous writer
// (runtime/async_writer.h) writes them on a thread of its own, so that the
// pipeline never waits on the disk unless two commits are already queued. A
// failed write fails the pipeline at the sink's next row, watermark or end.
// The timeline is also written to `timeline_path`, one JSON object per line.
// LR changes and jumps come from a train_marks operator among its inputs.
#pragma once

#include <string>
#include <vector>

#include "schema/row.h"
#include "store/store.h"
#include "timeline/run_graph.h"

namespace runlens::connectors {

struct TimelineSinkOptions {
  std::string store_url;      // store/store.h: open_store()
  std::string timeline_path;  // empty: no JSONL copy
  // A store that does not exist yet: built whole and put in place when the
  // pipeline finishes (store::OpenOptions::build_whole: `new_store: whole`),
  // or written in place, readable from the first commit (`in_place`).
  bool build_whole = false;
  timeline::Options graph;  // retention and commit cadence
};

// Parses a rollup tier "RESOLUTION:RETENTION", e.g. "10s:1d", "1m:30d", "1h:365d".
bool parse_rollup_tier(const std::string& text, store::RollupTier* out, std::string* why);

void RegisterTimelineSink(Registry& registry);
std::unique_ptr<OperatorDef> MakeTimelineSink(TimelineSinkOptions options);

}  // namespace runlens::connectors
