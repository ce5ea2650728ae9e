// The evaluation cache key (seed section 49): SHA-256 over the canonical
// JSON (formats/canonical_json.h) of every input that can change a score:
// the model's identity (MODEL:VERSION and the checkpoint's content hash; a
// harness once returned one model's cached answers for another because its
// key left the model out), the dataset hash, the evaluator version, the
// prompt template version and hash, the decoding configuration, the
// benchmark and its version, the judge (model, version, prompt version and
// hash, rubric version, temperature, sampling), the metric set (a set: the
// order metrics are listed in does not matter) and the item range. A shard's
// key is the same with the shard's item range, so a changed item range
// re-runs only the shards that are new. The encoding is documented in
// docs/evaluation-service.md and pinned by tests/eval/cache_key_test.cc.
#pragma once

#include <string>
#include <vector>

#include "eval/shard_plan.h"

namespace runlens::eval {

struct Suite;

struct CacheKeyInputs {
  std::string model_version;    // MODEL:VERSION
  std::string checkpoint_hash;  // SHA-256 of the checkpoint
  std::string dataset_hash;
  std::string evaluator_version;
  std::string prompt_template_version;
  std::string prompt_template_hash;
  std::string decoding_json = "{}";  // any JSON object; canonicalized
  std::string benchmark;
  std::string benchmark_version;
  // The judge; all empty when no metric uses one.
  std::string judge_model;
  std::string judge_model_version;
  std::string judge_prompt_version;
  std::string judge_prompt_hash;
  std::string rubric_version;
  std::string judge_sampling_json = "{}";  // temperature and sampling, canonicalized
  std::vector<std::string> metrics;        // canonical JSON of each metric with its arguments
  ItemRange items;
};

// The inputs of a suite run on a model version and checkpoint, over the suite's whole item range.
CacheKeyInputs cache_key_inputs(const Suite& suite, const std::string& model_version,
                                const std::string& checkpoint_hash);

// The canonical encoding that is hashed. Throws std::invalid_argument when
// decoding_json or judge_sampling_json is not a JSON object, or has
// non-finite numbers or duplicate keys.
std::string canonical_encoding(const CacheKeyInputs& in);

std::string cache_key(const CacheKeyInputs& in);  // 64 hex digits
std::string shard_cache_key(CacheKeyInputs in, const ItemRange& shard_items);

}  // namespace runlens::eval
