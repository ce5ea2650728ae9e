#include "batch_encoder.h"

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "presence.h"
#include "schema/telemetry.capnp.h"

namespace runlens::sdk {
namespace {

namespace p = presence;

capnp::Text::Reader AsText(std::string_view s) { return capnp::Text::Reader(s.data(), s.size()); }

void SetValue(wire::Value::Builder out, const ValueSlot& value, const Slot& slot) {
  switch (value.kind) {
    case ValueKind::kNone:
      out.setNone();
      break;
    case ValueKind::kNumber:
      out.setNumber(value.number);
      break;
    case ValueKind::kText:
      out.setText(AsText(slot.Text(value.text)));
      break;
  }
}

void EncodeRunStart(wire::RunStart::Builder out, const EmitterOptions& o) {
  uint32_t present = p::run_start::kRunId | p::run_start::kWorldSize;
  out.setRunId(o.run_id);
  out.setWorldSize(o.world_size);
  auto text = [&](const std::string& value, uint32_t bit, auto setter) {
    if (value.empty()) return;
    present |= bit;
    (out.*setter)(AsText(value));
  };
  text(o.experiment_id, p::run_start::kExperimentId, &wire::RunStart::Builder::setExperimentId);
  text(o.job_id, p::run_start::kJobId, &wire::RunStart::Builder::setJobId);
  text(o.model_id, p::run_start::kModelId, &wire::RunStart::Builder::setModelId);
  text(o.model_version, p::run_start::kModelVersion, &wire::RunStart::Builder::setModelVersion);
  text(o.dataset_version, p::run_start::kDatasetVersion, &wire::RunStart::Builder::setDatasetVersion);
  text(o.code_commit, p::run_start::kCodeCommit, &wire::RunStart::Builder::setCodeCommit);
  text(o.cluster_id, p::run_start::kClusterId, &wire::RunStart::Builder::setClusterId);
  if (o.gpu_peak_flops) {
    present |= p::run_start::kGpuPeakFlops;
    out.setGpuPeakFlops(*o.gpu_peak_flops);
  }
  if (o.model_flops_per_token) {
    present |= p::run_start::kModelFlopsPerToken;
    out.setModelFlopsPerToken(*o.model_flops_per_token);
  }
  if (!o.config.empty()) {
    present |= p::run_start::kConfig;
    auto list = out.initConfig(static_cast<unsigned>(o.config.size()));
    for (unsigned i = 0; i < o.config.size(); ++i) {
      const ConfigEntry& entry = o.config[i];
      list[i].setKey(entry.key);
      auto value = list[i].initValue();
      if (const double* number = std::get_if<double>(&entry.value)) {
        value.setNumber(*number);
      } else {
        value.setText(std::get<std::string>(entry.value));
      }
    }
  }
  if (!o.ranks.empty()) {
    present |= p::run_start::kRanks;
    auto list = out.initRanks(static_cast<unsigned>(o.ranks.size()));
    for (unsigned i = 0; i < o.ranks.size(); ++i) {
      list[i].setRank(o.ranks[i].rank);
      list[i].setNode(o.ranks[i].node);
      list[i].setGpu(o.ranks[i].gpu);
      if (!o.ranks[i].gpu_model.empty()) list[i].setGpuModel(AsText(o.ranks[i].gpu_model));
      if (!o.ranks[i].node_type.empty()) list[i].setNodeType(AsText(o.ranks[i].node_type));
    }
  }
  out.setPresent(present);
}

void EncodeStep(wire::Step::Builder out, const Slot& slot, const EmitterOptions& o) {
  const StepBody& b = slot.step;
  out.setPresent(b.present);
  out.setRunId(o.run_id);
  out.setRank(o.rank);
  out.setStep(b.step);
  out.setStepMs(b.step_ms);
  if (b.present & p::step::kForwardMs) out.setForwardMs(b.forward_ms);
  if (b.present & p::step::kBackwardMs) out.setBackwardMs(b.backward_ms);
  if (b.present & p::step::kOptimizerMs) out.setOptimizerMs(b.optimizer_ms);
  if (b.present & p::step::kCommMs) out.setCommMs(b.comm_ms);
  if (b.present & p::step::kDataWaitMs) out.setDataWaitMs(b.data_wait_ms);
  if (b.present & p::step::kTokens) out.setTokens(b.tokens);
  if (b.present & p::step::kSamples) out.setSamples(b.samples);
  if (b.present & p::step::kSeqLen) out.setSeqLen(b.seq_len);
  if (b.present & p::step::kDatasetShard) out.setDatasetShard(AsText(slot.Text(b.dataset_shard)));
  if (b.present & p::step::kMemAllocatedBytes) out.setMemAllocatedBytes(b.mem_allocated_bytes);
  if (b.present & p::step::kMemReservedBytes) out.setMemReservedBytes(b.mem_reserved_bytes);
  if (b.present & p::step::kMemPeakBytes) out.setMemPeakBytes(b.mem_peak_bytes);
}

void EncodeTrain(wire::Train::Builder out, const Slot& slot, const EmitterOptions& o) {
  const TrainBody& b = slot.train;
  out.setPresent(b.present);
  out.setRunId(o.run_id);
  out.setStep(b.step);
  out.setRank(o.rank);
  if (b.present & p::train::kLoss) out.setLoss(b.loss);
  if (b.present & p::train::kValLoss) out.setValLoss(b.val_loss);
  if (b.present & p::train::kLr) out.setLr(b.lr);
  if (b.present & p::train::kGradNorm) out.setGradNorm(b.grad_norm);
  if (b.present & p::train::kWeightNorm) out.setWeightNorm(b.weight_norm);
  if (b.present & p::train::kLossScale) out.setLossScale(b.loss_scale);
  if (b.present & p::train::kNanCount) out.setNanCount(b.nan_count);
  if (b.present & p::train::kInfCount) out.setInfCount(b.inf_count);
}

void EncodeData(wire::Data::Builder out, const Slot& slot, const EmitterOptions& o) {
  const DataBody& b = slot.data;
  out.setPresent(b.present);
  out.setRunId(o.run_id);
  out.setRank(o.rank);
  if (b.present & p::data::kStep) out.setStep(b.step);
  if (b.present & p::data::kBatchLoadMs) out.setBatchLoadMs(b.batch_load_ms);
  if (b.present & p::data::kDecodeMs) out.setDecodeMs(b.decode_ms);
  if (b.present & p::data::kTokenizeMs) out.setTokenizeMs(b.tokenize_ms);
  if (b.present & p::data::kPrefetchQueueDepth) out.setPrefetchQueueDepth(b.prefetch_queue_depth);
  if (b.present & p::data::kCacheHitRate) out.setCacheHitRate(b.cache_hit_rate);
  if (b.present & p::data::kStorageReadMs) out.setStorageReadMs(b.storage_read_ms);
  if (b.present & p::data::kBytesRead) out.setBytesRead(b.bytes_read);
  if (b.present & p::data::kDatasetShard) out.setDatasetShard(AsText(slot.Text(b.dataset_shard)));
  if (b.present & p::data::kDatasetVersion) {
    out.setDatasetVersion(AsText(slot.Text(b.dataset_version)));
  }
}

void EncodeCollective(wire::Collective::Builder out, const Slot& slot, const EmitterOptions& o) {
  const CollectiveBody& b = slot.collective;
  out.setPresent(b.present);
  out.setRunId(o.run_id);
  out.setRank(o.rank);
  out.setLatencyMs(b.latency_ms);
  if (b.present & p::collective::kStep) out.setStep(b.step);
  if (b.present & p::collective::kOp) out.setOp(AsText(slot.Text(b.op)));
  if (b.present & p::collective::kBytes) out.setBytes(b.bytes);
}

void EncodeCheckpoint(wire::Checkpoint::Builder out, const Slot& slot, const EmitterOptions& o) {
  const CheckpointBody& b = slot.checkpoint;
  out.setPresent(b.present);
  out.setRunId(o.run_id);
  if (b.present & p::checkpoint::kCheckpointId) {
    out.setCheckpointId(AsText(slot.Text(b.checkpoint_id)));
  }
  if (b.present & p::checkpoint::kStep) out.setStep(b.step);
  if (b.present & p::checkpoint::kDurationMs) out.setDurationMs(b.duration_ms);
  if (b.present & p::checkpoint::kSizeBytes) out.setSizeBytes(b.size_bytes);
  if (b.present & p::checkpoint::kUploadMs) out.setUploadMs(b.upload_ms);
  if (b.present & p::checkpoint::kOk) out.setOk(b.ok);
  if (b.present & p::checkpoint::kUri) out.setUri(AsText(slot.Text(b.uri)));
  if (b.present & p::checkpoint::kSha256) out.setSha256(AsText(slot.Text(b.sha256)));
}

void EncodeEvent(wire::Occurrence::Builder out, const Slot& slot, const EmitterOptions& o) {
  const EventBody& b = slot.event;
  out.setPresent(b.present);
  out.setKind(AsText(slot.Text(b.kind)));
  out.setRunId(o.run_id);
  if (b.present & p::occurrence::kNode) {
    out.setNode(b.node.size != 0 ? AsText(slot.Text(b.node)) : AsText(o.node));
  }
  if (b.present & p::occurrence::kGpu) out.setGpu(b.gpu);
  if (b.present & p::occurrence::kRank) out.setRank(b.rank);
  if (b.present & p::occurrence::kStep) out.setStep(b.step);
  if (b.present & p::occurrence::kCode) out.setCode(b.code);
  if (b.present & p::occurrence::kMessage) out.setMessage(AsText(slot.Text(b.message)));
  if (b.present & p::occurrence::kKey) out.setKey(AsText(slot.Text(b.key)));
  if (b.present & p::occurrence::kOld) SetValue(out.initOld(), b.old_value, slot);
  if (b.present & p::occurrence::kNew) SetValue(out.initNew(), b.new_value, slot);
}

void EncodeNode(wire::Node::Builder out, const Slot& slot) {
  const NodeBody& b = slot.node;
  out.setPresent(b.present);
  out.setNode(AsText(slot.Text(b.node)));
  if (b.present & p::node::kCpuPct) out.setCpuPct(b.cpu_pct);
  if (b.present & p::node::kMemUsedBytes) out.setMemUsedBytes(b.mem_used_bytes);
  if (b.present & p::node::kMemTotalBytes) out.setMemTotalBytes(b.mem_total_bytes);
  if (b.present & p::node::kCpuUserPct) out.setCpuUserPct(b.cpu_user_pct);
  if (b.present & p::node::kCpuSystemPct) out.setCpuSystemPct(b.cpu_system_pct);
  if (b.present & p::node::kCpuIowaitPct) out.setCpuIowaitPct(b.cpu_iowait_pct);
  if (b.present & p::node::kCpuStealPct) out.setCpuStealPct(b.cpu_steal_pct);
  if (b.present & p::node::kLoad1) out.setLoad1(b.load1);
}

void EncodeRunEnd(wire::RunEnd::Builder out, const Slot& slot, const EmitterOptions& o) {
  const RunEndBody& b = slot.run_end;
  uint32_t present = p::run_end::kRunId;
  out.setRunId(o.run_id);
  if (b.status.size != 0) {
    present |= p::run_end::kStatus;
    out.setStatus(AsText(slot.Text(b.status)));
  }
  if (b.reason.size != 0) {
    present |= p::run_end::kReason;
    out.setReason(AsText(slot.Text(b.reason)));
  }
  out.setPresent(present);
}

}  // namespace

kj::Array<capnp::word> BatchEncoder::Encode(std::span<const Slot> slots, const BatchProgress& progress) const {
  // About 40 words per event is what a full step event takes; one first
  // segment of that size keeps a typical batch in a single allocation.
  capnp::MallocMessageBuilder message(static_cast<unsigned>(64 + 40 * slots.size()));
  auto batch = message.initRoot<wire::Batch>();
  batch.setSchemaVersion(wire::SCHEMA_VERSION);
  batch.setProducer(AsText(progress.producer));
  batch.setSeq(progress.seq);
  batch.setWatermarkNs(progress.watermark_ns);
  batch.setFinal(progress.final);
  auto events = batch.initEvents(static_cast<unsigned>(slots.size()));
  for (unsigned i = 0; i < slots.size(); ++i) {
    const Slot& slot = slots[i];
    auto event = events[i];
    event.setTimeNs(slot.time_ns);
    if (!options_.tenant.empty()) event.setTenant(options_.tenant);
    switch (slot.kind) {
      case SlotKind::kRunStart:
        EncodeRunStart(event.initRunStart(), options_);
        break;
      case SlotKind::kStep:
        EncodeStep(event.initStep(), slot, options_);
        break;
      case SlotKind::kTrain:
        EncodeTrain(event.initTrain(), slot, options_);
        break;
      case SlotKind::kData:
        EncodeData(event.initData(), slot, options_);
        break;
      case SlotKind::kCollective:
        EncodeCollective(event.initCollective(), slot, options_);
        break;
      case SlotKind::kCheckpoint:
        EncodeCheckpoint(event.initCheckpoint(), slot, options_);
        break;
      case SlotKind::kEvent:
        EncodeEvent(event.initEvent(), slot, options_);
        break;
      case SlotKind::kRunEnd:
        EncodeRunEnd(event.initRunEnd(), slot, options_);
        break;
      case SlotKind::kNode:
        EncodeNode(event.initNode(), slot);
        break;
    }
  }
  return capnp::messageToFlatArray(message);
}

}  // namespace runlens::sdk
