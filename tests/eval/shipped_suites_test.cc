// configs/eval/*.yaml: the suites shipped for the demo parse, and each
// dataset present on this machine has the content hash and item count its
// suite expects (a changed dataset is caught before any worker runs).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "eval/cache_key.h"
#include "eval/shard_plan.h"
#include "eval/suite.h"
#include "formats/sha256.h"

namespace runlens::eval {
namespace {

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  sha256::Hasher h;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) h.update(buf, static_cast<size_t>(in.gcount()));
  return sha256::to_hex(h.digest());
}

// Items of the text formats shipped here: JSON lines, or '%'-separated fortunes.
int64_t count_items(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int64_t lines = 0, percents = 0;
  while (std::getline(in, line)) {
    lines += !line.empty();
    percents += line == "%";
  }
  return percents > 0 ? percents : lines;
}

TEST_CASE("shipped suites: parse, and their datasets match their hashes and item counts") {
  const std::string dir = std::string(RUNLENS_SOURCE_DIR) + "/configs/eval";
  int suites = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++suites;
    CAPTURE(entry.path().string());
    Suite s;
    try {
      s = load_suite(entry.path().string());
    } catch (const runtime::ConfigError& e) {
      FAIL(e.what());
    }
    CHECK(s.dataset.items.has_value());
    auto plan = plan_shards(s.name, *s.dataset.items, s.partition_size, s.dataset.first_item);
    CHECK(plan.back().items.end == s.dataset.first_item + *s.dataset.items);
    CHECK(sha256::is_hex_digest(cache_key(cache_key_inputs(s, "demo:v1", std::string(64, '0')))));
    const std::string path = s.dataset_path();
    if (!std::filesystem::exists(path)) {
      MESSAGE("dataset not installed here, hash not checked: " << path);
      continue;
    }
    CHECK(file_sha256(path) == s.dataset.sha256);
    if (path.size() > 3 && path.substr(path.size() - 3) == ".gz") continue;  // counted by the worker
    CHECK(count_items(path) == s.dataset.first_item + *s.dataset.items);
  }
  CHECK(suites >= 4);
}

TEST_CASE("shipped suites: relative dataset paths resolve against the suite file") {
  Suite s;
  s.file = "/a/b/suite.yaml";
  s.dataset.path = "../data/x.jsonl";
  CHECK(s.dataset_path() == "/a/b/../data/x.jsonl");
  s.dataset.path = "/abs/x";
  CHECK(s.dataset_path() == "/abs/x");
  s.file = "suite.yaml";
  s.dataset.path = "x";
  CHECK(s.dataset_path() == "x");
}

}  // namespace
}  // namespace runlens::eval
