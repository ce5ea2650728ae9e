// Emitter::checkpoint_saved (C++ SDK): SHA-256 against FIPS 180-4's examples,
// the file URI, and the event a real ZeroMQ PULL socket receives.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <doctest/doctest.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "formats/sha256.h"
#include "runlens/sdk.h"
#include "schema/telemetry.capnp.h"
#include "sdk/src/checkpoint_hasher.h"
#include "tests/sdk/pull.h"

namespace {

// The one SHA-256 of the tree (formats/sha256.h; its FIPS 180-4 examples are
// tests/formats/sha256_test.cc), which the SDK links.
std::string Hex(std::string_view data) { return runlens::sha256::hex(data); }

struct Received {
  std::string checkpoint_id, uri, sha256;
  int64_t step = -1, size_bytes = -1;
  bool ok = false, has_sha = false;
};

}  // namespace

TEST_CASE("file URIs are percent-encoded like pathlib's as_uri") {
  CHECK(runlens::sdk::FileUri("/ckpt/step-1.pt") == "file:///ckpt/step-1.pt");
  CHECK(runlens::sdk::FileUri("/a b/c%d") == "file:///a%20b/c%25d");
  CHECK(runlens::sdk::FileUri("/\xc3\xa9") == "file:///%C3%A9");
}

TEST_CASE("checkpoint_saved returns at once and the event carries the file's hash") {
  runlens::testing::Pull pull;

  const auto dir = std::filesystem::temp_directory_path() / ("runlens-ck-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "step 5.pt";
  std::string content(32 << 20, '\0');  // 32 MiB: tens of milliseconds of hashing
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 2654435761u >> 13);
  std::ofstream(file, std::ios::binary).write(content.data(), static_cast<std::streamsize>(content.size()));
  const auto h0 = std::chrono::steady_clock::now();
  const std::string digest = Hex(content);
  const auto hash_time = std::chrono::steady_clock::now() - h0;

  runlens::sdk::EmitterOptions o;
  o.endpoint = pull.endpoint;
  o.run_id = "cxx-ck";
  runlens::sdk::Emitter em(std::move(o));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(em.checkpoint_saved(file.string(), 5));
  const auto call = std::chrono::steady_clock::now() - t0;
  CHECK(em.checkpoint_saved((dir / "missing.pt").string(), 6, "ckpt-6"));
  CHECK(call * 4 < hash_time);  // the call does not hash: it is a small fraction of one hash
  CHECK(em.close(std::chrono::seconds(20)));
  const auto stats = em.stats();
  CHECK(stats.checkpoints_queued == 2);
  CHECK(stats.checkpoints_hashed == 1);
  CHECK(stats.checkpoint_errors == 1);
  CHECK(stats.checkpoints_dropped == 0);
  CHECK_FALSE(em.checkpoint_saved(file.string(), 7));  // after close
  CHECK(em.stats().checkpoints_dropped == 1);

  std::vector<Received> got;
  bool run_end = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!run_end && std::chrono::steady_clock::now() < deadline) {
    std::vector<capnp::word> words;
    if (!pull.next(words)) continue;
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()));
    for (auto e : reader.getRoot<runlens::wire::Batch>().getEvents()) {
      if (e.isRunEnd()) run_end = true;
      if (!e.isCheckpoint()) continue;
      auto c = e.getCheckpoint();
      Received r;
      r.checkpoint_id = c.getCheckpointId();
      r.uri = c.getUri();
      r.sha256 = c.getSha256();
      r.step = c.getStep();
      r.size_bytes = c.getSizeBytes();
      r.ok = c.getOk();
      r.has_sha = !r.sha256.empty();
      got.push_back(r);
    }
  }
  CHECK(run_end);
  REQUIRE(got.size() == 2);
  if (got[0].step != 5) std::swap(got[0], got[1]);
  CHECK(got[0].checkpoint_id == "cxx-ck/step-5");
  CHECK(got[0].sha256 == digest);
  CHECK(got[0].uri == runlens::sdk::FileUri(file.string()));
  CHECK(got[0].uri.find("step%205.pt") != std::string::npos);
  CHECK(got[0].size_bytes == static_cast<int64_t>(content.size()));
  CHECK(got[0].ok);
  CHECK(got[1].checkpoint_id == "ckpt-6");
  CHECK_FALSE(got[1].ok);
  CHECK_FALSE(got[1].has_sha);

  std::filesystem::remove_all(dir);
}
