#include "server/portal.h"

#include <algorithm>
#include <cstring>

namespace runlens::api::portal {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Whether an If-None-Match header names this ETag (a list, or *).
bool not_modified(const HttpRequest& req, const Asset& asset) {
  auto it = req.headers.find("If-None-Match");
  if (it == req.headers.end()) return false;
  const std::string& v = it->second;
  if (v.find('*') != std::string::npos) return true;
  return v.find(asset.etag) != std::string::npos;
}

void answer(const HttpRequest& req, HttpResponse& res, const Asset& asset) {
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.headers.emplace_back("ETag", asset.etag);
  res.content_type = mime_type(asset.path);
  if (not_modified(req, asset)) {
    res.status = 304;
    res.body.clear();
    return;
  }
  res.body.assign(reinterpret_cast<const char*>(asset.data), asset.size);
}

}  // namespace

const Asset* find_asset(const std::string& path) {
  const Asset* end = kAssets + kAssetCount;
  const Asset* it =
      std::lower_bound(kAssets, end, path, [](const Asset& a, const std::string& p) { return a.path < p; });
  return it != end && it->path == path ? it : nullptr;
}

std::string mime_type(const std::string& path) {
  if (ends_with(path, ".html")) return "text/html; charset=utf-8";
  if (ends_with(path, ".js") || ends_with(path, ".mjs")) return "text/javascript; charset=utf-8";
  if (ends_with(path, ".css")) return "text/css; charset=utf-8";
  if (ends_with(path, ".svg")) return "image/svg+xml";
  if (ends_with(path, ".png")) return "image/png";
  if (ends_with(path, ".json")) return "application/json";
  if (ends_with(path, ".ico")) return "image/x-icon";
  return "text/plain; charset=utf-8";
}

void get_index(const HttpRequest& req, HttpResponse& res) {
  const Asset* a = find_asset("index.html");
  if (!a) throw HttpError{404, "this runlens was built without the portal"};
  answer(req, res, *a);
}

void get_asset(const HttpRequest& req, HttpResponse& res) {
  const std::string& path = req.matches.at(1);
  const Asset* a = find_asset(path);
  if (!a) throw HttpError{404, "no such portal asset: " + path};
  answer(req, res, *a);
}

}  // namespace runlens::api::portal
