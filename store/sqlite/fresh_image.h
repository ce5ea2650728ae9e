// A new SQLite store written as a file, from the image the build makes by
// running the migrations' schema (store/sqlite/gen/fresh_schema_gen.cc), not
// by running that schema's SQL at every start (docs/storage.md, "Versioned
// schema").
#pragma once

#include <string>

namespace runlens::store::sqlite {

// When nothing is at `path`, writes a store of the current schema version
// there, in WAL mode, and returns true. Returns false and writes nothing when
// something is there already, when `path` is not a plain file name
// (":memory:", a "file:" URI), or on any error: the caller then makes the
// store with SQL, and reports what fails there. The file appears whole or not
// at all (written and synced beside it, then linked into place), so two
// processes that make the same store at once both open a whole one.
bool place_fresh_image(const std::string& path);

// Whether `path` names a plain file (not ":memory:" or a "file:" URI) where
// nothing is yet: where a new store can be placed.
bool free_file_path(const std::string& path);

}  // namespace runlens::store::sqlite
