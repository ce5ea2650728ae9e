// How the command line names the store (docs/storage.md): `--store URL`
// (store/store.h), the environment's RUNLENS_STORE, else runlens.db in the
// output directory. The command line resolves the URL and hands it on (to the
// pipeline as the variable RUNLENS_STORE, to the API server as a URL); nothing
// below it looks for a store in a pipeline's parameters.
//
// The forms of the previous release keep working until the next one, each
// with one deprecation line on stderr naming its replacement: `--db PATH`
// (serve, report) and the pipeline variable RUNLENS_DB (--set or the
// environment); the timeline sink's `db` parameter prints its own.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "runtime/pipeline_spec.h"

namespace runlens::cli {

// --- replay and run: the store the pipeline writes -----------------------------------

void add_pipeline_store_option(CLI::App* sub, std::string* url);

// Sets the pipeline variable RUNLENS_STORE from `store_flag` (--store) when
// given; takes a deprecated RUNLENS_DB (from `vars` or the environment) where
// no RUNLENS_STORE is given. Throws CLI::ValidationError for a malformed URL in
// --store or RUNLENS_STORE, naming it.
void set_store_variable(const std::string& command, const std::string& store_flag,
                        std::map<std::string, std::string>* vars);

// The URL of the store the pipeline's (first) timeline sink writes, or empty
// when it has none: what `runlens run --api-port` serves.
std::string pipeline_store_url(const runtime::PipelineSpec& spec);

// --- serve and report: the store they read --------------------------------------------

struct StoreFlags {
  std::string url;  // --store
  std::string db;   // --db (deprecated)
};

void add_store_flags(CLI::App* sub, StoreFlags* flags);

// The URL that --store or --db give (--db with a deprecation line), else
// empty. Throws CLI::ValidationError for a malformed URL.
std::string flag_store_url(const std::string& command, const StoreFlags& flags);

// RUNLENS_STORE from the environment, else empty. Throws CLI::ValidationError
// for a malformed URL.
std::string env_store_url();

}  // namespace runlens::cli
