// The SQLite backend of the store (store/store.h): one file in WAL mode.
//
// URL: sqlite://PATH, where PATH is the file, taken literally (no host, no
// percent-decoding): sqlite:///ABSOLUTE/PATH.db, or sqlite://RELATIVE/PATH.db
// relative to the working directory. '?' and '#' are refused (kept for
// options later). A read-write open creates the file and its directory.
#pragma once

#include <string>

#include "store/backend.h"
#include "store/store.h"

namespace runlens::store::sqlite {

// The schema version this build writes (store/sqlite/sqlite_schema.cc).
constexpr int kSchemaVersion = 10;

// The backend's entry for open_store().
const Backend& backend();

// Opens the store file at `path`. Read-write creates it and migrates it up to
// `target_version` (tests build stores of older versions); read-only needs it
// at kSchemaVersion. Throws StoreError.
Store open(const std::string& path, OpenMode mode, int target_version = kSchemaVersion);
// The same with every open option (OpenOptions::build_whole builds a new store
// beside `path`, as PATH.building-PID-N, with no log and no syncs).
Store open(const std::string& path, const OpenOptions& options, int target_version = kSchemaVersion);

// The schema version of an existing store file (0 when it has none). Throws StoreError.
int schema_version(const std::string& path);

}  // namespace runlens::store::sqlite
