// What a store backend gives open_store() (store/open_store.cc keeps the
// list, one line per backend). A backend lives in a folder of its own
// (store/sqlite/) and is reached only through this table, so a second one
// (ClickHouse) is a new folder plus one line there.
#pragma once

#include <optional>
#include <string>

#include "store/store.h"

namespace runlens::store {

struct Backend {
  const char* scheme;    // the URL scheme, lower case: "sqlite"
  const char* url_form;  // for messages: "sqlite:///ABSOLUTE/PATH.db or sqlite://RELATIVE/PATH.db"
  // Why `location` (what follows SCHEME://) names no store of this backend, or
  // nullopt when it is well formed.
  std::optional<std::string> (*location_error)(const std::string& location);
  // Opens the store at `location` (already checked). Throws StoreError.
  Store (*open)(const std::string& location, const OpenOptions& options);
  // Whether the store at `location` (already checked) exists.
  bool (*exists)(const std::string& location);
  // The location of the store held in local file `path`, when it is one of
  // this backend's, else nullopt.
  std::optional<std::string> (*probe)(const std::string& path);
};

}  // namespace runlens::store
