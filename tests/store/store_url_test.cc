// Store URLs (store/store.h, store/open_store.cc): the scheme picks the
// backend, the backend reads the location; a malformed URL is an error that
// names it; a store file is recognised without the caller knowing its format.
#include <unistd.h>

#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "tests/store/store_scenarios.h"

using namespace runlens;
using namespace runlens::testing;

TEST_CASE("store URL: malformed and unknown URLs are errors that name the URL") {
  struct Case {
    const char* url;
    const char* message;
  };
  const Case cases[] = {
      {"", "store URL '' has no scheme: expected SCHEME://LOCATION, e.g. sqlite:///ABSOLUTE/PATH.db"},
      {"out/runlens.db", "store URL 'out/runlens.db' has no scheme: expected SCHEME://LOCATION"},
      {"://x.db", "store URL '://x.db' has no scheme"},
      {"sqlite:/x.db", "store URL 'sqlite:/x.db' has no scheme"},
      {"1sqlite:///x.db", "store URL '1sqlite:///x.db' has no scheme"},
      {"clickhouse://host/db",
       "store URL 'clickhouse://host/db' has an unknown scheme 'clickhouse' (this build "
       "knows sqlite://)"},
      {"sqlite://",
       "store URL 'sqlite://': no path (expected sqlite:///ABSOLUTE/PATH.db or "
       "sqlite://RELATIVE/PATH.db)"},
      {"sqlite:///x.db?mode=ro", "store URL 'sqlite:///x.db?mode=ro': '?' and '#' are not allowed"},
      {"sqlite:///x.db#frag", "store URL 'sqlite:///x.db#frag': '?' and '#' are not allowed"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.url);
    auto why = store::store_url_error(c.url);
    REQUIRE(why);
    CHECK(why->find(c.message) == 0);
    CHECK_THROWS_WITH_AS(store::open_store(c.url), doctest::Contains(c.message), store::StoreError);
    CHECK_THROWS_WITH_AS(store::store_exists(c.url), doctest::Contains(c.message), store::StoreError);
  }
  for (const char* good : {"sqlite:///tmp/x.db", "sqlite://x.db", "sqlite://out/runlens.db", "SQLite:///tmp/x.db"}) {
    CAPTURE(good);
    CHECK_FALSE(store::store_url_error(good));
  }
}

TEST_CASE("store URL: sqlite:///ABSOLUTE and sqlite://RELATIVE name the same file; read-write creates it") {
  std::string dir = fresh_dir("store-url");
  std::string abs_url = "sqlite://" + dir + "/sub/dir/a.db";  // sqlite:///tmp/...
  REQUIRE(abs_url.rfind("sqlite:///", 0) == 0);
  CHECK_FALSE(store::store_exists(abs_url));
  CHECK_THROWS_AS(store::open_store(abs_url, {store::OpenMode::kReadOnly}), store::StoreError);
  {
    store::Store s = store::open_store(abs_url);  // creates the directories and the file
    CHECK(s.schema_version == store::sqlite::kSchemaVersion);
    store::GraphBatch b;
    store::RunRow r;
    r.run_id = "url-run";
    b.runs.push_back(r);
    s.graph->write(b);
  }
  CHECK(store::store_exists(abs_url));
  CHECK(std::filesystem::is_regular_file(dir + "/sub/dir/a.db"));

  // Relative to the working directory.
  auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  CHECK(store::store_exists("sqlite://sub/dir/a.db"));
  {
    store::Store s = store::open_store("sqlite://sub/dir/a.db", {store::OpenMode::kReadOnly});
    CHECK(s.graph->run("url-run"));
  }
  CHECK(store::probe_store("sub/dir/a.db") == std::optional<std::string>("sqlite://sub/dir/a.db"));
  std::filesystem::current_path(cwd);

  // The scheme is case-insensitive.
  store::Store s = store::open_store("SQLITE://" + dir + "/sub/dir/a.db", {store::OpenMode::kReadOnly});
  CHECK(s.graph->run("url-run"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("store URL: probe_store recognises a store file and nothing else") {
  std::string dir = fresh_dir("store-probe");
  { store::open_store(url_of(dir + "/s.db")); }
  CHECK(store::probe_store(dir + "/s.db") == std::optional<std::string>(url_of(dir + "/s.db")));
  std::ofstream(dir + "/run.jsonl") << "{\"kind\":\"train\"}\n";
  CHECK_FALSE(store::probe_store(dir + "/run.jsonl"));
  std::ofstream(dir + "/short") << "SQLite";
  CHECK_FALSE(store::probe_store(dir + "/short"));
  CHECK_FALSE(store::probe_store(dir));  // a directory
  CHECK_FALSE(store::probe_store(dir + "/missing"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("store URL: the default store of an output directory, and the URL of a store file") {
  CHECK(store::default_store_url("out") == "sqlite://out/runlens.db");
  CHECK(store::default_store_url("/tmp/o") == "sqlite:///tmp/o/runlens.db");
  CHECK(store::store_url_of_file("/data/all.db") == "sqlite:///data/all.db");
  CHECK(store::store_url_of_file("rel.db") == "sqlite://rel.db");
}
