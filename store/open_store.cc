// Store URLs: SCHEME://LOCATION. The scheme (case-insensitive) picks the
// backend from kBackends; the backend checks and reads the location.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "store/backend.h"
#include "store/sqlite/sqlite_store.h"

namespace runlens::store {

namespace {

// Every backend this build has, one line each; the first is the default one
// (default_store_url, store_url_of_file).
const Backend* const kBackends[] = {
    &sqlite::backend(),
};

struct Parsed {
  const Backend* backend;
  std::string location;
};

std::string known_schemes() {
  std::string s;
  for (const Backend* b : kBackends) s += std::string(s.empty() ? "" : ", ") + b->scheme + "://";
  return s;
}

// The backend and location of `url`, or why there are none.
std::optional<Parsed> parse(const std::string& url, std::string* why) {
  size_t sep = url.find("://");
  std::string scheme = sep == std::string::npos ? "" : url.substr(0, sep);
  bool scheme_ok = !scheme.empty() && std::isalpha(static_cast<unsigned char>(scheme[0])) &&
                   std::all_of(scheme.begin(), scheme.end(),
                               [](unsigned char c) { return std::isalnum(c) || c == '+' || c == '-' || c == '.'; });
  if (!scheme_ok) {
    *why = "store URL '" + url + "' has no scheme: expected SCHEME://LOCATION, e.g. " + kBackends[0]->url_form;
    return std::nullopt;
  }
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  const Backend* backend = nullptr;
  for (const Backend* b : kBackends) {
    if (scheme == b->scheme) backend = b;
  }
  if (!backend) {
    *why = "store URL '" + url + "' has an unknown scheme '" + scheme + "' (this build knows " + known_schemes() + ")";
    return std::nullopt;
  }
  std::string location = url.substr(sep + 3);
  if (auto e = backend->location_error(location)) {
    *why = "store URL '" + url + "': " + *e + " (expected " + backend->url_form + ")";
    return std::nullopt;
  }
  return Parsed{backend, std::move(location)};
}

Parsed parse_or_throw(const std::string& url) {
  std::string why;
  auto p = parse(url, &why);
  if (!p) throw StoreError(why);
  return *p;
}

}  // namespace

std::optional<std::string> store_url_error(const std::string& url) {
  std::string why;
  if (parse(url, &why)) return std::nullopt;
  return why;
}

Store open_store(const std::string& url, const OpenOptions& options) {
  Parsed p = parse_or_throw(url);
  Store s = p.backend->open(p.location, options);
  if (s.read_url.empty()) s.read_url = url;
  return s;
}

bool store_exists(const std::string& url) {
  Parsed p = parse_or_throw(url);
  return p.backend->exists(p.location);
}

std::optional<std::string> probe_store(const std::string& path) {
  for (const Backend* b : kBackends) {
    if (auto location = b->probe(path)) return std::string(b->scheme) + "://" + *location;
  }
  return std::nullopt;
}

std::string default_store_url(const std::string& dir) {
  return store_url_of_file((std::filesystem::path(dir) / "runlens.db").string());
}

std::string store_url_of_file(const std::string& path) { return std::string(kBackends[0]->scheme) + "://" + path; }

}  // namespace runlens::store
