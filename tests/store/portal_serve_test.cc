// The portal, served from the binary by the API server (server/portal.h):
// the index at /, every embedded asset at /portal/PATH with its MIME type,
// Cache-Control: no-cache and an ETag that If-None-Match answers with 304,
// and a JSON 404 for what is not embedded (no file is read from disk).
#include <doctest/doctest.h>
#include <httplib.h>

#include <memory>
#include <set>
#include <string>

#include "server/portal.h"
#include "server/serve.h"

using namespace runlens;

namespace {

struct Portal {
  // No store: the portal's routes never open it.
  Portal() : server(api::ServeOptions{"sqlite:///nonexistent/portal-test.db", "127.0.0.1", 0}) {
    std::string error;
    REQUIRE_MESSAGE(server.start(&error), error);
    client = std::make_unique<httplib::Client>("127.0.0.1", server.port());
  }
  api::ApiServer server;
  std::unique_ptr<httplib::Client> client;
};

}  // namespace

TEST_CASE("the embedded table holds the portal's files, sorted, with quoted content hashes") {
  REQUIRE(api::portal::kAssetCount >= 6);
  std::set<std::string> paths;
  for (size_t i = 0; i < api::portal::kAssetCount; ++i) {
    const auto& a = api::portal::kAssets[i];
    paths.insert(a.path);
    if (i > 0) CHECK(std::string(api::portal::kAssets[i - 1].path) < a.path);
    std::string etag = a.etag;
    CHECK(etag.size() == 18);
    CHECK(etag.front() == '"');
    CHECK(etag.back() == '"');
  }
  for (const char* p : {"index.html", "app.js", "style.css", "pages/index.js", "vendor/uplot/uPlot.iife.min.js",
                        "vendor/uplot/uPlot.min.css", "vendor/uplot/LICENSE"}) {
    CHECK_MESSAGE(paths.count(p) == 1, p);
  }
  CHECK(api::portal::find_asset("app.js") != nullptr);
  CHECK(api::portal::find_asset("nope.js") == nullptr);
  CHECK(api::portal::find_asset("") == nullptr);
}

TEST_CASE("MIME types by extension") {
  CHECK(api::portal::mime_type("index.html") == "text/html; charset=utf-8");
  CHECK(api::portal::mime_type("pages/run.js") == "text/javascript; charset=utf-8");
  CHECK(api::portal::mime_type("style.css") == "text/css; charset=utf-8");
  CHECK(api::portal::mime_type("favicon.svg") == "image/svg+xml");
  CHECK(api::portal::mime_type("vendor/uplot/LICENSE") == "text/plain; charset=utf-8");
}

TEST_CASE("GET / is the index; GET /portal/PATH an asset, with its ETag and 304 on a match") {
  Portal p;
  auto index = p.client->Get("/");
  REQUIRE(index);
  CHECK(index->status == 200);
  CHECK(index->get_header_value("Content-Type") == "text/html; charset=utf-8");
  CHECK(index->body.find("<script type=\"module\" src=\"/portal/app.js\"></script>") != std::string::npos);

  auto js = p.client->Get("/portal/app.js");
  REQUIRE(js);
  CHECK(js->status == 200);
  CHECK(js->get_header_value("Content-Type") == "text/javascript; charset=utf-8");
  CHECK(js->get_header_value("Cache-Control") == "no-cache");
  const auto* asset = api::portal::find_asset("app.js");
  REQUIRE(asset);
  CHECK(js->get_header_value("ETag") == asset->etag);
  CHECK(js->body.size() == asset->size);
  CHECK(js->body == std::string(reinterpret_cast<const char*>(asset->data), asset->size));

  auto again = p.client->Get("/portal/app.js", {{"If-None-Match", asset->etag}});
  REQUIRE(again);
  CHECK(again->status == 304);
  CHECK(again->body.empty());
  auto stale = p.client->Get("/portal/app.js", {{"If-None-Match", "\"0000000000000000\""}});
  REQUIRE(stale);
  CHECK(stale->status == 200);
}

TEST_CASE("what is not embedded is a JSON 404, whatever the path says") {
  Portal p;
  for (const char* path : {"/portal/nope.js", "/portal/", "/portal/../CMakeLists.txt", "/portal/%2e%2e/CMakeLists.txt",
                           "/portal//app.js"}) {
    auto res = p.client->Get(path);
    REQUIRE_MESSAGE(res, path);
    CHECK_MESSAGE(res->status == 404, path);
    CHECK_MESSAGE(res->get_header_value("Content-Type") == "application/json", path);
    CHECK_MESSAGE(res->body.find("\"status\":404") != std::string::npos, path);
  }
  auto res = p.client->Get("/portal/nope.js");
  REQUIRE(res);
  CHECK(res->body == R"({"error":"no such portal asset: nope.js","status":404})");
}
