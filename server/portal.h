// The portal (portal/ in the source tree: the researcher's debugging UI in
// the browser) as the API server serves it: every file is compiled into the
// binary (cmake/embed_portal.cmake generates the asset table), so `runlens
// serve` needs nothing on disk at run time and works offline.
//
//   GET /               portal/index.html
//   GET /portal/PATH    portal/PATH, with its MIME type, Cache-Control: no-cache
//                       and an ETag (its content's hash; If-None-Match answers 304)
//
// An unknown asset is a 404 with the API's JSON envelope.
#pragma once

#include <cstddef>
#include <string>

#include "server/serve.h"

namespace runlens::api::portal {

struct Asset {
  const char* path;  // relative to portal/, e.g. "pages/runs.js"
  const unsigned char* data;
  size_t size;
  const char* etag;  // quoted, as the header carries it
};

// The generated table (build/generated/portal_assets.cc), sorted by path.
extern const Asset kAssets[];
extern const size_t kAssetCount;

// The asset at `path`, or nullptr.
const Asset* find_asset(const std::string& path);

// The MIME type of a file name, by its extension (text/plain for one unknown).
std::string mime_type(const std::string& path);

void get_index(const HttpRequest& req, HttpResponse& res);  // GET /
void get_asset(const HttpRequest& req, HttpResponse& res);  // GET /portal/(.*)

}  // namespace runlens::api::portal
