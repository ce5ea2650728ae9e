# runlens telemetry contract v2, Cap'n Proto form.
#
# This schema mirrors the JSONL contract in docs/telemetry.md field for field:
# the JSONL name `step_ms` is the field `stepMs` here. Every struct starts with
# `present`, a bitmask of which optional fields carry a value (bit i is the
# i-th field of the struct after `present`, in declaration order), because
# Cap'n Proto has no "absent" for numbers and absent must never read as 0.
#
# Evolution rules: add fields at the end of a struct (new ordinal, next bit),
# add new event bodies as new union members; never renumber, never reuse.
# Bump Batch.schemaVersion only for a change old readers cannot skip.

@0x8795a7ddc06cdf39;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("runlens::wire");

const schemaVersion :UInt16 = 1;

# Many events per message: the unit sent over ZeroMQ and stored in recordings.
#
# Contract v2 adds the producer's progress (docs/telemetry.md, "Producers and
# their watermarks"). A batch without `producer` is an old sender's: the
# collector applies its `lateness` rule to its events.
struct Batch {
  schemaVersion @0 :UInt16;
  events @1 :List(Event);
  # Who sent the batch: stable for the life of one emitter, unique across
  # emitters (the SDK uses run id, rank, host, process and emitter).
  producer @2 :Text;
  # 1, 2, ... per producer, one per batch handed to ZeroMQ: a gap is
  # telemetry lost between the producer and the collector.
  seq @3 :UInt64;
  # The producer's promise: no event it sends after this batch is older
  # (event time, ns). Events of this batch may be older or newer.
  watermarkNs @4 :Int64;
  # The producer's last batch: it stops holding the collector's watermark.
  final @5 :Bool;
}

struct Event {
  timeNs @0 :Int64;
  tenant @1 :Text;
  union {
    runStart @2 :RunStart;
    step @3 :Step;
    train @4 :Train;
    gpu @5 :Gpu;
    node @6 :Node;
    collective @7 :Collective;
    data @8 :Data;
    checkpoint @9 :Checkpoint;
    event @10 :Occurrence;
    runEnd @11 :RunEnd;
  }
}

# A number or a string (config values, config_change old/new).
struct Value {
  union {
    none @0 :Void;
    number @1 :Float64;
    text @2 :Text;
  }
}

struct ConfigEntry {
  key @0 :Text;
  value @1 :Value;
}

struct RankEntry {
  rank @0 :Int32;
  node @1 :Text;
  gpu @2 :Int32;
  gpuModel @3 :Text;  # optional (empty: absent): the GPU's model name
  nodeType @4 :Text;  # optional (empty: absent): the node's type (an instance type, a SKU)
}

struct RunStart {
  present @0 :UInt32;
  runId @1 :Text;
  experimentId @2 :Text;
  jobId @3 :Text;
  modelId @4 :Text;
  modelVersion @5 :Text;
  datasetVersion @6 :Text;
  codeCommit @7 :Text;
  worldSize @8 :Int32;
  gpuPeakFlops @9 :Float64;
  modelFlopsPerToken @10 :Float64;
  config @11 :List(ConfigEntry);
  ranks @12 :List(RankEntry);
  clusterId @13 :Text;  # optional: the cluster the job runs on (a Prometheus label)
}

struct Step {
  present @0 :UInt32;
  runId @1 :Text;
  rank @2 :Int32;
  step @3 :Int64;
  stepMs @4 :Float64;
  forwardMs @5 :Float64;
  backwardMs @6 :Float64;
  optimizerMs @7 :Float64;
  commMs @8 :Float64;
  dataWaitMs @9 :Float64;
  tokens @10 :Int64;
  samples @11 :Int64;
  seqLen @12 :Int64;
  datasetShard @13 :Text;
  memAllocatedBytes @14 :Int64;
  memReservedBytes @15 :Int64;
  memPeakBytes @16 :Int64;
}

struct Train {
  present @0 :UInt32;
  runId @1 :Text;
  step @2 :Int64;
  rank @3 :Int32;
  loss @4 :Float64;
  valLoss @5 :Float64;
  lr @6 :Float64;
  gradNorm @7 :Float64;
  weightNorm @8 :Float64;
  lossScale @9 :Float64;
  nanCount @10 :Int64;
  infCount @11 :Int64;
}

struct Gpu {
  present @0 :UInt32;
  node @1 :Text;
  gpu @2 :Int32;
  utilPct @3 :Float64;
  smActivePct @4 :Float64;
  tensorActivePct @5 :Float64;
  memUsedBytes @6 :Int64;
  memTotalBytes @7 :Int64;
  tempC @8 :Float64;
  powerW @9 :Float64;
  powerLimitW @10 :Float64;
  smClockMhz @11 :Float64;
  memClockMhz @12 :Float64;
  throttleReasons @13 :Int64;
  eccSbeTotal @14 :Int64;
  eccDbeTotal @15 :Int64;
  xid @16 :Int64;
  pcieReplayTotal @17 :Int64;
  nvlinkErrorsTotal @18 :Int64;
  nvlinkTxBps @19 :Float64;
  nvlinkRxBps @20 :Float64;
}

struct Node {
  present @0 :UInt32;
  node @1 :Text;
  cpuPct @2 :Float64;
  memUsedBytes @3 :Int64;
  memTotalBytes @4 :Int64;
  diskReadBps @5 :Float64;
  diskWriteBps @6 :Float64;
  netTxBps @7 :Float64;
  netRxBps @8 :Float64;
  tcpRetransmitsTotal @9 :Int64;
  rdmaErrorsTotal @10 :Int64;
  cpuUserPct @11 :Float64;
  cpuSystemPct @12 :Float64;
  cpuIowaitPct @13 :Float64;
  cpuStealPct @14 :Float64;
  load1 @15 :Float64;
}

struct Collective {
  present @0 :UInt32;
  runId @1 :Text;
  rank @2 :Int32;
  step @3 :Int64;
  op @4 :Text;
  latencyMs @5 :Float64;
  bytes @6 :Int64;
}

struct Data {
  present @0 :UInt32;
  runId @1 :Text;
  rank @2 :Int32;
  step @3 :Int64;
  batchLoadMs @4 :Float64;
  decodeMs @5 :Float64;
  tokenizeMs @6 :Float64;
  prefetchQueueDepth @7 :Int64;
  cacheHitRate @8 :Float64;
  storageReadMs @9 :Float64;
  bytesRead @10 :Int64;
  datasetShard @11 :Text;
  datasetVersion @12 :Text;
}

struct Checkpoint {
  present @0 :UInt32;
  runId @1 :Text;
  checkpointId @2 :Text;
  step @3 :Int64;
  durationMs @4 :Float64;
  sizeBytes @5 :Int64;
  uploadMs @6 :Float64;
  ok @7 :Bool;
  uri @8 :Text;
  sha256 @9 :Text;
}

# The contract's `event` type (xid, oom, nccl_timeout, exception, config_change, ...).
struct Occurrence {
  present @0 :UInt32;
  kind @1 :Text;
  runId @2 :Text;
  node @3 :Text;
  gpu @4 :Int32;
  rank @5 :Int32;
  step @6 :Int64;
  code @7 :Int64;
  message @8 :Text;
  key @9 :Text;
  old @10 :Value;
  new @11 :Value;
}

struct RunEnd {
  present @0 :UInt32;
  runId @1 :Text;
  status @2 :Text;
  reason @3 :Text;
}
