// The versioned schema of the SQLite store: one migration per version, applied
// in order, each in its own transaction, and recorded in `schema_version`.
// A migration, once released, never changes: a new version appends one
// (tests/store/migration_test.cc upgrades a database made by version 1).
#pragma once

#include <vector>

namespace runlens::store {

struct Migration {
  int version;
  const char* description;
  const char* sql;  // statements separated by ';'
};

// Every migration, by ascending version (1, 2, ...).
const std::vector<Migration>& sqlite_migrations();

// The page size of a new store (an existing one keeps its own: SQLite sets it
// when the file is first written). A block of a node's GPU samples (about
// 6 KB) then fits a page instead of a chain of overflow pages
// (docs/performance.md: a replay of a 1024-GPU run, 7 % less CPU).
constexpr int kSqlitePageSize = 16384;

}  // namespace runlens::store
