// Sample telemetry lines, one or more per contract type with every field set,
// written exactly as jsonl::encode_record writes them (contract order, shortest
// numbers, minimal escapes), so that a round trip must reproduce them byte for
// byte. Shared by the JSONL, Cap'n Proto and recording tests.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "formats/jsonl_codec.h"

namespace runlens::test {

inline constexpr std::string_view kSampleLines[] = {
    R"({"type":"run_start","time_ns":1700000000000000000,"tenant":"team-a","run_id":"run-1","experiment_id":"exp-7","job_id":"job-42","model_id":"llama-7b","model_version":"v2","dataset_version":"ds-2024-01","code_commit":"3f2a9c1","world_size":4,"gpu_peak_flops":9.89e+14,"model_flops_per_token":4.2e+10,"config":{"lr":0.5,"optimizer":"adamw","layers":32,"warmup":"NaN","beta2":-0.999},"ranks":[{"rank":0,"node":"node-a","gpu":0},{"rank":1,"node":"node-a","gpu":1},{"rank":2,"node":"node-b"},{"rank":3}],"cluster_id":"cluster-east"})",
    R"({"type":"step","time_ns":1700000000100000000,"run_id":"run-1","rank":3,"step":1200,"step_ms":512.25,"forward_ms":150.5,"backward_ms":300.125,"optimizer_ms":20,"comm_ms":35.75,"data_wait_ms":6,"tokens":524288,"samples":128,"seq_len":4096,"dataset_shard":"shard-0007","mem_allocated_bytes":60129542144,"mem_reserved_bytes":68719476736,"mem_peak_bytes":64424509440})",
    R"({"type":"train","time_ns":1700000000200000000,"tenant":"team-a","run_id":"run-1","step":1200,"rank":0,"loss":2.375,"val_loss":2.5,"lr":0.25,"grad_norm":1.25,"weight_norm":812.5,"loss_scale":65536,"nan_count":0,"inf_count":2})",
    R"({"type":"gpu","time_ns":1700000000300000000,"node":"node-a","gpu":7,"util_pct":98.5,"sm_active_pct":91.25,"tensor_active_pct":60.5,"mem_used_bytes":75161927680,"mem_total_bytes":85899345920,"temp_c":71,"power_w":650.5,"power_limit_w":700,"sm_clock_mhz":1980,"mem_clock_mhz":2619,"throttle_reasons":4,"ecc_sbe_total":12,"ecc_dbe_total":0,"xid":79,"pcie_replay_total":3,"nvlink_errors_total":1,"nvlink_tx_bps":1.5e+11,"nvlink_rx_bps":1.25e+11})",
    R"({"type":"node","time_ns":1700000000400000000,"node":"node-b","cpu_pct":45.5,"mem_used_bytes":274877906944,"mem_total_bytes":1099511627776,"disk_read_bps":1048576,"disk_write_bps":2097152,"net_tx_bps":1.25e+09,"net_rx_bps":2.5e+09,"tcp_retransmits_total":17,"rdma_errors_total":0,"cpu_user_pct":30.5,"cpu_system_pct":10.25,"cpu_iowait_pct":4.5,"cpu_steal_pct":0.25,"load1":12.75})",
    R"({"type":"collective","time_ns":1700000000500000000,"run_id":"run-1","rank":2,"step":1200,"op":"all_reduce","latency_ms":35.5,"bytes":268435456})",
    R"({"type":"data","time_ns":1700000000600000000,"run_id":"run-1","rank":1,"step":1200,"batch_load_ms":12.5,"decode_ms":3.25,"tokenize_ms":4.75,"prefetch_queue_depth":8,"cache_hit_rate":0.875,"storage_read_ms":9.5,"bytes_read":33554432,"dataset_shard":"shard-0007","dataset_version":"ds-2024-01"})",
    R"({"type":"checkpoint","time_ns":1700000000700000000,"run_id":"run-1","checkpoint_id":"ckpt-1200","step":1200,"duration_ms":45000.5,"size_bytes":14000000000,"upload_ms":120000,"ok":false,"uri":"s3://bucket/run-1/ckpt-1200","sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"})",
    // event: old as a number, new as a string; escapes in the message.
    R"({"type":"event","time_ns":1700000000800000000,"tenant":"team-b","kind":"config_change","run_id":"run-1","node":"node-a","gpu":3,"rank":3,"step":1200,"code":0,"message":"lr changed by \"scheduler\"\n\tsee logs \\ here","key":"lr","old":0.5,"new":"cosine"})",
    // event: old as a string, new as a number; a control character escaped as \u0001.
    R"({"type":"event","time_ns":1700000000900000000,"kind":"xid","run_id":"run-2","node":"node-a","gpu":3,"rank":0,"step":7,"code":79,"message":"GPU has fallen off the bus \u0001","key":"mode","old":"fast","new":-1.5})",
    R"({"type":"run_end","time_ns":1700000001000000000,"run_id":"run-1","status":"failed","reason":"NCCL timeout on rank 3 — node-a ✓"})",
};

// The sample lines, decoded.
inline std::vector<Record> sample_records() {
  std::vector<Record> out;
  for (std::string_view line : kSampleLines) {
    Record r;
    std::string why;
    REQUIRE(jsonl::decode_record(line, &r, &why));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace runlens::test
