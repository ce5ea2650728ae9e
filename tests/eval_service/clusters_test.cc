// Clustered items in the service (docs/evaluation-service.md, "Clustered
// items"): a policy metric with `cluster: passage` is compared with the
// cluster-robust standard error over the dataset items' `passage` values,
// which the service reads from the hash-checked dataset, stores with each
// item (evaluation_items.clusters_json) and gives to the gate.
#include "eval/service/clusters.h"

#include <httplib.h>

#include <cmath>

#include "eval/service/http.h"
#include "formats/json_reader.h"
#include "tests/eval_service/eval_fixture.h"
#include "tests/eval_service/http_client.h"

using namespace runlens;
using namespace runlens::testing;

namespace {

// 40 items, four questions per passage: passage "p0" holds items 0-3, ...
std::string write_passages(const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < 40; ++i)
    out << "{\"x\":" << i << ",\"label\":" << i % 3 << ",\"passage\":\"p" << i / 4 << "\"}\n";
  out.close();
  return sha_of_file(path);
}

// The candidate misses every question of passages 0, 2 and 5 (it misread them) and none else.
bool candidate_wrong(int64_t item) { return item / 4 == 0 || item / 4 == 2 || item / 4 == 5; }

}  // namespace

TEST_CASE("clustered items: the service's gate uses the clustered standard error of the dataset's passages") {
  std::string dir = temp_dir("clusters");
  std::filesystem::create_directories(dir + "/suites");
  std::filesystem::create_directories(dir + "/gates");
  SuiteSpec spec;
  spec.dataset_path = dir + "/passages.jsonl";
  spec.sha256 = write_passages(spec.dataset_path);
  spec.on_checkpoint = "[toy-*]";
  write_file(dir + "/suites/toy.yaml", suite_yaml(spec));
  write_file(dir + "/gates/clustered.yaml",
             "gate: toy-clustered\nversion: \"1\"\nsuite: toy-v1\nalpha: 0.05\ndimensions:\n  quality:\n"
             "    - metric: accuracy\n      margin: 0.05\n      cluster: passage\n");
  write_file(dir + "/gates/flat.yaml",
             "gate: toy-flat\nversion: \"1\"\nsuite: toy-v1\nalpha: 0.05\ndimensions:\n  quality:\n"
             "    - metric: accuracy\n      margin: 0.05\n");

  eval::service::ServiceOptions so = service_options(dir);
  const std::string url = so.store_url;
  ServedEval served(so);
  auto& svc = served.svc;
  Http& http = *served.http;

  std::map<std::string, std::string> ev;
  for (const char* v : {"v1", "v2"}) {
    auto [cs, ck] = http.post("/v1/checkpoints", std::string(R"({"checkpointId":"ck-)") + v + R"(","sha256":")" +
                                                     std::string(64, v[1] == '1' ? 'a' : 'b') +
                                                     R"(","modelVersion":"toy-mlp:)" + v + R"("})");
    REQUIRE(cs == 201);
    ev[v] = at(at(ck, "evaluations").items.at(0), "evaluationId").text;
  }
  TestWorker w(svc.endpoint(), "w1");
  w.hello();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto done = [&] { return status_of(url, ev["v1"]) == "COMPLETED" && status_of(url, ev["v2"]) == "COMPLETED"; };
  while (!done() && std::chrono::steady_clock::now() < until) {
    auto a = w.assignment(50);
    if (!a) continue;
    eval::wire::Result r = w.result(*a);
    for (int64_t i = a->begin; i < a->end; ++i) {
      // Both answer every question right, except the candidate on its three passages.
      r.stats[static_cast<size_t>(i - a->begin) * 3] = a->evaluation_id == ev["v2"] && candidate_wrong(i) ? 0 : 1;
    }
    w.send(r);
    REQUIRE(w.ack().has_value());
  }
  REQUIRE(done());

  // Stored with each item.
  {
    store::Store s = store::open_store(url, {store::OpenMode::kReadOnly});
    auto items = s.evals->items(ev["v2"], std::nullopt);
    REQUIRE(items.size() == 40);
    for (const auto& it : items) {
      REQUIRE(it.clusters.size() == 1);
      CHECK(it.clusters[0].first == "passage");
      CHECK(it.clusters[0].second == "p" + std::to_string(it.item / 4));
    }
  }

  // The direct computation: d_i = -1 on the 12 items of passages 0, 2, 5, else 0.
  std::vector<double> d;
  for (int i = 0; i < 40; ++i) d.push_back(candidate_wrong(i) ? -1.0 : 0.0);
  double mean = 0;
  for (double x : d) mean += x / 40;
  double sum_g2 = 0;
  for (int g = 0; g < 10; ++g) {
    double sg = 0;
    for (int i = 4 * g; i < 4 * g + 4; ++i) sg += d[i] - mean;
    sum_g2 += sg * sg;
  }
  const double clustered_se = std::sqrt(10.0 / 9.0 * sum_g2) / 40;
  double ss = 0;
  for (double x : d) ss += (x - mean) * (x - mean);
  const double paired_se = std::sqrt(ss / 39) / std::sqrt(40.0);
  REQUIRE(clustered_se > 1.5 * paired_se);  // the clusters matter here

  auto decide = [&](const std::string& policy) {
    auto [st, body] = http.post("/v1/gates/evaluate", R"({"policy":")" + policy + R"(","candidate":")" + ev["v2"] +
                                                          R"(","baseline":")" + ev["v1"] + R"("})");
    REQUIRE(st == 201);
    return body;
  };
  json::Value c = decide("toy-clustered");
  const json::Value& m = at(c, "metrics").items.at(0);
  CHECK(at(m, "method").text == "clustered");
  CHECK(at(m, "clusters").number == 10);
  CHECK(at(m, "n").number == 40);
  CHECK(at(m, "difference").number == doctest::Approx(mean));
  CHECK(at(m, "stdError").number == doctest::Approx(clustered_se));
  json::Value f = decide("toy-flat");
  const json::Value& fm = at(f, "metrics").items.at(0);
  CHECK(at(fm, "method").text == "paired-mean");
  CHECK(at(fm, "stdError").number == doctest::Approx(paired_se));

  served.stop();
  std::filesystem::remove_all(dir);
}

TEST_CASE("clustered items: read from a JSON-lines dataset, with the reasons they cannot be") {
  std::string dir = temp_dir("cluster-ids");
  const std::string p = dir + "/d.jsonl";
  write_file(p, "{\"passage\":\"a\",\"n\":7}\n\n{\"passage\":\"b\",\"n\":true}\n{\"n\":1.5}\n{\"passage\":3}\n");
  eval::service::ClusterIds ids;
  REQUIRE(eval::service::read_cluster_ids(p, {"passage", "n"}, &ids).empty());
  CHECK(ids["passage"] == std::map<int64_t, std::string>{{0, "a"}, {1, "b"}, {3, "3"}});  // item 2 has none
  CHECK(ids["n"] == std::map<int64_t, std::string>{{0, "7"}, {1, "true"}});               // 1.5 is not an id
  write_file(p, "{\"passage\":\"a\"}\n[1]\n");
  CHECK(eval::service::read_cluster_ids(p, {"passage"}, &ids) ==
        p + ":2: not a JSON object, so its cluster ids cannot be read");
  CHECK(eval::service::read_cluster_ids(dir + "/d.csv", {"passage"}, &ids) ==
        "cluster ids are read from JSON-lines (.jsonl) datasets only, not " + dir + "/d.csv");
  CHECK(eval::service::read_cluster_ids(dir + "/d.csv", {}, &ids).empty());  // nothing needed, nothing read
  std::filesystem::remove_all(dir);
}
