// The instant runner of `runlens eval worker --runner instant`: a C++
// worker that speaks the worker protocol (eval/wire) and scores every item
// at once without a model, for benchmarks of the service (scheduler, shards,
// aggregator, store) with no model in the way. Each item's statistics are a
// deterministic function of its index and its metric's kind that the
// aggregator accepts (instant_stats); the item and response hashes are
// empty and latencies 0. One thread: it answers each assignment as it
// arrives, heartbeats on schedule, says hello again on `reregister`, logs and
// ignores a message it cannot decode, and sends `bye` when stopped.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eval/wire/wire.h"

namespace runlens::cli {

struct InstantWorkerOptions {
  std::string endpoint;
  std::string worker_id;
  std::string pool = "cpu";
  int slots = 1;
  int64_t memory_mib = 0;
};

// Appends an assignment's statistics for items [begin, end) to *stats
// (stride numbers per item, metric after metric); "" on success, else why
// this worker cannot score it (a metric it does not know, or whose `stats`
// differ from eval/metric.h).
std::string instant_stats(const eval::wire::Assign& a, std::vector<double>* stats);

// Runs until `stop()` is true; returns the exit code.
int run_instant_worker(const InstantWorkerOptions& o, const std::function<bool()>& stop);

}  // namespace runlens::cli
