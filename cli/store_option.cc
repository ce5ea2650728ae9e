#include "cli/store_option.h"

#include <cstdio>
#include <cstdlib>

#include "store/store.h"

namespace runlens::cli {

namespace {

constexpr const char* kDeprecated = "is deprecated and goes away in the next release";

void check_url(const std::string& what, const std::string& url) {
  if (auto why = store::store_url_error(url)) throw CLI::ValidationError(what, *why);
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

void add_pipeline_store_option(CLI::App* sub, std::string* url) {
  sub->add_option("--store", *url,
                  "The store the pipeline's timeline sink writes, as a URL (sqlite:///ABSOLUTE/PATH.db or "
                  "sqlite://RELATIVE/PATH.db); sets RUNLENS_STORE (default: $RUNLENS_STORE, else "
                  "sqlite://OUT/runlens.db)");
}

void set_store_variable(const std::string& command, const std::string& store_flag,
                        std::map<std::string, std::string>* vars) {
  if (!store_flag.empty()) {
    check_url("--store", store_flag);
    (*vars)["RUNLENS_STORE"] = store_flag;
  }
  // The pipeline reads its variables from `vars`, then the environment; an empty value counts as unset.
  auto lookup = [&](const char* name) {
    auto it = vars->find(name);
    return it != vars->end() && !it->second.empty() ? it->second : env(name);
  };
  std::string store = lookup("RUNLENS_STORE"), db = lookup("RUNLENS_DB");
  if (!store.empty()) check_url("RUNLENS_STORE", store);
  if (db.empty()) return;
  if (!store.empty()) {
    std::fprintf(stderr, "runlens %s: RUNLENS_DB %s; ignored here, as the store is named by --store or RUNLENS_STORE\n",
                 command.c_str(), kDeprecated);
    return;
  }
  std::string url = store::store_url_of_file(db);
  std::fprintf(stderr, "runlens %s: RUNLENS_DB %s; use --store %s (or RUNLENS_STORE=%s)\n", command.c_str(),
               kDeprecated, url.c_str(), url.c_str());
  (*vars)["RUNLENS_STORE"] = url;
}

std::string pipeline_store_url(const runtime::PipelineSpec& spec) {
  for (const auto& c : spec.components) {
    if (c.type != "timeline") continue;
    // As the sink reads them (connectors/sinks/timeline/): a deprecated `db` wins.
    if (c.params.has("db") && !c.params.get_string("db").empty())
      return store::store_url_of_file(c.params.get_string("db"));
    if (c.params.has("store")) return c.params.get_string("store");
  }
  return {};
}

void add_store_flags(CLI::App* sub, StoreFlags* flags) {
  auto* s = sub->add_option("--store", flags->url,
                            "The store, as a URL: sqlite:///ABSOLUTE/PATH.db or sqlite://RELATIVE/PATH.db (default: "
                            "$RUNLENS_STORE)");
  auto* d = sub->add_option("--db", flags->db, "Deprecated: the store file; use --store sqlite://PATH");
  s->excludes(d);
}

std::string flag_store_url(const std::string& command, const StoreFlags& flags) {
  if (!flags.url.empty()) {
    check_url("--store", flags.url);
    return flags.url;
  }
  if (flags.db.empty()) return {};
  std::string url = store::store_url_of_file(flags.db);
  std::fprintf(stderr, "runlens %s: --db %s; use --store %s\n", command.c_str(), kDeprecated, url.c_str());
  check_url("--db", url);
  return url;
}

std::string env_store_url() {
  std::string url = env("RUNLENS_STORE");
  if (!url.empty()) check_url("RUNLENS_STORE", url);
  return url;
}

}  // namespace runlens::cli
