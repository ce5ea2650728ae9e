#include "eval/cache_key.h"

#include <algorithm>
#include <stdexcept>

#include "eval/suite.h"
#include "formats/canonical_json.h"
#include "formats/json_writer.h"
#include "formats/sha256.h"

namespace runlens::eval {

CacheKeyInputs cache_key_inputs(const Suite& s, const std::string& model_version, const std::string& checkpoint_hash) {
  CacheKeyInputs in;
  in.model_version = model_version;
  in.checkpoint_hash = checkpoint_hash;
  in.dataset_hash = s.dataset.sha256;
  in.evaluator_version = s.evaluator_version;
  in.prompt_template_version = s.prompt.version;
  in.prompt_template_hash = s.prompt.sha256;
  in.decoding_json = s.decoding_json;
  in.benchmark = s.benchmark;
  in.benchmark_version = s.version;
  if (s.judge) {
    in.judge_model = s.judge->model;
    in.judge_model_version = s.judge->model_version;
    in.judge_prompt_version = s.judge->prompt_version;
    in.judge_prompt_hash = s.judge->prompt_sha256;
    in.rubric_version = s.judge->rubric_version;
    std::string sampling = "{\"sampling\":" + s.judge->sampling_json + ",\"temperature\":";
    json::append_canonical_number(&sampling, s.judge->temperature);
    in.judge_sampling_json = sampling + "}";
  }
  for (const auto& m : s.metrics) in.metrics.push_back(m.canonical_json());
  const int64_t first = s.dataset.first_item;
  in.items = ItemRange{first, first + s.dataset.items.value_or(0)};
  return in;
}

namespace {
std::string canonical_object(const std::string& text, const char* field) {
  json::Value v;
  json::ParseError err;
  if (!json::parse(text, &v, &err))
    throw std::invalid_argument(std::string(field) + " is not valid JSON: " + err.message + " at byte " +
                                std::to_string(err.offset));
  if (v.type != json::Value::Type::kObject)
    throw std::invalid_argument(std::string(field) + " must be a JSON object, got " + std::string(v.type_name()));
  std::string out, why;
  if (!json::append_canonical(&out, v, &why)) throw std::invalid_argument(std::string(field) + ": " + why);
  return out;
}
}  // namespace

std::string canonical_encoding(const CacheKeyInputs& in) {
  // Members in sorted key order, so this is the canonical JSON of the object.
  std::vector<std::string> metrics;
  for (const auto& m : in.metrics) metrics.push_back(canonical_object(m, "a metric"));
  std::sort(metrics.begin(), metrics.end());
  std::string s;
  auto field = [&](const char* key, const std::string& value) {
    s += s.empty() ? "{" : ",";
    json::append_escaped(&s, key);
    s += ':';
    json::append_escaped(&s, value);
  };
  auto raw = [&](const char* key, const std::string& value) {
    s += s.empty() ? "{" : ",";
    json::append_escaped(&s, key);
    s += ':';
    s += value;
  };
  field("benchmark", in.benchmark);
  field("benchmark_version", in.benchmark_version);
  field("checkpoint_hash", in.checkpoint_hash);
  field("dataset_hash", in.dataset_hash);
  raw("decoding", canonical_object(in.decoding_json, "the decoding configuration"));
  field("evaluator_version", in.evaluator_version);
  raw("items", "[" + std::to_string(in.items.begin) + "," + std::to_string(in.items.end) + "]");
  field("judge_model", in.judge_model);
  field("judge_model_version", in.judge_model_version);
  field("judge_prompt_hash", in.judge_prompt_hash);
  field("judge_prompt_version", in.judge_prompt_version);
  raw("judge_sampling", canonical_object(in.judge_sampling_json, "the judge's sampling configuration"));
  std::string list = "[";
  for (size_t i = 0; i < metrics.size(); ++i) list += (i ? "," : "") + metrics[i];
  raw("metrics", list + "]");
  field("model_version", in.model_version);
  field("prompt_template_hash", in.prompt_template_hash);
  field("prompt_template_version", in.prompt_template_version);
  field("rubric_version", in.rubric_version);
  raw("v", "1");  // the encoding's own version: bump it when the encoding changes
  return s + "}";
}

std::string cache_key(const CacheKeyInputs& in) { return sha256::hex(canonical_encoding(in)); }

std::string shard_cache_key(CacheKeyInputs in, const ItemRange& shard_items) {
  in.items = shard_items;
  return cache_key(in);
}

}  // namespace runlens::eval
