// The evaluation worker protocol, version 1 (docs/eval-protocol.md): each
// message as a struct, with its JSON encoding and decoding. One ZeroMQ frame
// holds one JSON object with a "type" member; names are camelCase; unknown
// members are ignored; a missing required member or a wrong type is a
// DecodeError value naming the member (decoding never throws and never
// crashes, whatever the bytes).
//
// The service side (eval/service) and the C++ worker (`runlens eval worker`)
// both use this file, so the two ends agree by construction; the Python
// worker follows the document.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace runlens::eval {
struct Suite;
}

namespace runlens::eval::wire {

constexpr int kProtocolVersion = 1;

using Libraries = std::vector<std::pair<std::string, std::string>>;  // name -> version, in the order sent

// --- worker -> service -------------------------------------------------------------

struct Hello {
  int protocol = kProtocolVersion;
  std::string worker;
  std::string pool = "cpu";  // "cpu" | "gpu"
  int64_t memory_mib = 0;
  int slots = 1;
  std::string worker_version, code_commit;
  Libraries libraries;
  std::vector<std::string> evaluators;  // empty = any
};

struct Heartbeat {
  std::string worker;
  bool has_loaded = false;  // whether `loaded` was sent
  std::vector<std::string> loaded;
};

struct Provenance {
  std::string worker_version, code_commit;
  Libraries libraries;
};

// One item of a result; its statistics are in Result::stats.
struct ResultItem {
  int64_t item = 0;
  std::string item_hash, response_hash;
  double latency_ms = 0;
  std::string error;
};

struct Result {
  std::string worker, evaluation_id;
  int shard = 0;
  int attempt = 0;
  std::vector<ResultItem> items;
  // Every item's stats, item after item: items.size() * stats_per_item numbers.
  std::vector<double> stats;
  int stats_per_item = 0;  // how many each item carried (all items carry the same number, or decoding fails)
  Provenance provenance;
};

struct Fail {
  std::string worker, evaluation_id;
  int shard = 0;
  int attempt = 0;
  std::string reason;
  bool retryable = true;
};

struct Bye {
  std::string worker;
};

using WorkerMessage = std::variant<Hello, Heartbeat, Result, Fail, Bye>;

// --- service -> worker -------------------------------------------------------------

struct Welcome {
  int protocol = kProtocolVersion;
  int64_t heartbeat_ms = 1000;
  int64_t timeout_ms = 10000;
};

struct Reregister {
  std::string reason;
};

struct CheckpointRef {
  std::string id, uri, sha256;
};

struct DatasetInfo {
  std::string id, version, sha256, path;  // path: absolute, as the service resolved it
  int64_t first_item = 0, items = 0;
};

struct PromptInfo {
  std::string template_text, version, sha256;
};

struct JudgeInfo {
  std::string model, version, prompt, prompt_version, rubric_version;
  std::vector<std::string> criteria;
  double scale_lo = 1, scale_hi = 5;
  double temperature = 0;
  std::string sampling_json = "{}";  // a JSON object, canonical
};

struct SuiteInfo {
  std::string name, benchmark, version, evaluator;
  DatasetInfo dataset;
  PromptInfo prompt;
  std::string decoding_json = "{}";  // a JSON object, canonical
  std::optional<JudgeInfo> judge;
};

struct MetricInfo {
  std::string name;
  std::vector<std::pair<std::string, std::string>> args;  // "true"/"false" for booleans
  std::vector<int64_t> k;
  int stats = 1;  // statistics per item
};

struct Assign {
  std::string evaluation_id;
  int shard = 0;
  int attempt = 1;
  int64_t begin = 0, end = 0;  // items [begin, end)
  std::string model_version;
  CheckpointRef checkpoint;
  SuiteInfo suite;
  std::vector<MetricInfo> metrics;
  int stride = 0;
};

enum class AckOutcome : uint8_t { kAccepted, kDuplicate, kRejected };
std::string_view ack_outcome_name(AckOutcome o);  // "accepted", ...

struct Ack {
  std::string evaluation_id;
  int shard = 0;
  int attempt = 0;
  AckOutcome outcome = AckOutcome::kAccepted;
  std::string reason;
};

struct Error {
  std::string error;
  std::string about;  // the type of the message it answers ("" when it had none)
};

using ServiceMessage = std::variant<Welcome, Reregister, Assign, Ack, Error>;

// --- encoding ------------------------------------------------------------------------

std::string encode(const Hello& m);
std::string encode(const Heartbeat& m);
std::string encode(const Result& m);
std::string encode(const Fail& m);
std::string encode(const Bye& m);
std::string encode(const Welcome& m);
std::string encode(const Reregister& m);
std::string encode(const Assign& m);
std::string encode(const Ack& m);
std::string encode(const Error& m);
std::string encode(const WorkerMessage& m);
std::string encode(const ServiceMessage& m);

// The `suite` and `metrics` of an assignment for a suite whose item count is resolved.
SuiteInfo suite_info(const Suite& suite);
std::vector<MetricInfo> metric_infos(const Suite& suite);

// --- decoding ------------------------------------------------------------------------

struct DecodeError {
  std::string error;  // "result: member 'shard' must be an integer, got a string"
  std::string about;  // the message's "type" when it had a readable one, else ""
};

// A message from a worker, or why the bytes are not one.
std::optional<WorkerMessage> decode_worker_message(std::string_view bytes, DecodeError* err);
// A message from the service, or why the bytes are not one.
std::optional<ServiceMessage> decode_service_message(std::string_view bytes, DecodeError* err);

// The type member of each message ("hello", "assign", ...).
std::string_view type_name(const WorkerMessage& m);
std::string_view type_name(const ServiceMessage& m);

}  // namespace runlens::eval::wire
