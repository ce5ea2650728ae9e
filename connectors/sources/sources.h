// Sources: `file` (JSONL or recordings, read once, at full speed or paced by
// event time; also what `runlens replay` substitutes for a pipeline's live
// sources) and `zmq` (Cap'n Proto batches from many senders over ZeroMQ).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "runtime/pipeline_spec.h"
#include "schema/row.h"

namespace runlens::connectors {

struct FileSourceOptions {
  std::vector<std::string> paths;
  double speed = 0;  // 0 = as fast as possible; 1 = real time; N = N x real time
  // The pipelines' default (written once, in PipelineSettings).
  size_t batch_size = static_cast<size_t>(runtime::PipelineSettings{}.batch_size);
  bool progress = false;  // draw a progress bar on stderr (a terminal)
};

// Parses --speed: "max", "realtime", "10x" or a bare factor. nullopt if invalid.
std::optional<double> parse_speed(const std::string& text);

std::unique_ptr<runtime::SourceDef<Record>> MakeFileSource(FileSourceOptions options);

struct ZmqSourceOptions {
  std::string bind;  // one of bind / connect
  std::string connect;
  bool subscribe = false;  // SUB instead of PULL
  std::string topic;       // SUB prefix
  int64_t max_frame_bytes = 64 << 20;
  int64_t rcvhwm = 1000;
  // Connections waiting to be accepted (ZeroMQ's default is 100). A job's
  // ranks connect at once; past the backlog the kernel drops their SYNs and
  // they retry a second later, when the first events they queued (rank 0's
  // run_start) are already behind the watermark.
  int64_t backlog = 4096;
  int64_t max_future_ns = 600'000'000'000;
  std::string record;  // recording file for every frame received; empty = none
};
std::unique_ptr<runtime::SourceDef<Record>> MakeZmqSource(ZmqSourceOptions options);

void RegisterFileSource(Registry& registry);
void RegisterZmqSource(Registry& registry);

}  // namespace runlens::connectors
