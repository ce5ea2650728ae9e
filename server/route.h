// What the resources of the API share (server/*.cc, one file per resource):
// the query parameters a route takes, checked; the store a request reads;
// and each route's handler, which returns the JSON body of a 200 or throws
// HttpError. server/serve.cc lists the routes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "server/serve.h"
#include "store/store.h"

namespace runlens::api {

// The query parameters of one request, checked against what the route takes.
class Args {
 public:
  // Throws HttpError 400 for a parameter the route does not take, or one given twice.
  Args(const std::multimap<std::string, std::string>& params, std::initializer_list<const char*> allowed);

  std::optional<std::string> text(const std::string& name) const;
  std::string required(const std::string& name) const;
  std::optional<int64_t> integer(const std::string& name, int64_t min, int64_t max) const;
  std::string choice(const std::string& name, const std::string& fallback,
                     const std::vector<std::string>& choices) const;
  store::StepRange steps() const;  // fromStep, toStep

 private:
  const std::multimap<std::string, std::string>& params_;
};

// One request to a route.
class Call {
 public:
  Call(const HttpRequest& request, const std::string& store_url) : request_(request), store_url_(store_url) {}
  const HttpRequest& request() const { return request_; }
  const std::string& match(size_t i) const { return request_.matches.at(i); }
  Args args(std::initializer_list<const char*> allowed) const { return Args(request_.params, allowed); }
  // The store, read-only; 503 when it cannot be opened.
  store::Store open() const;
  const std::string& store_url() const { return store_url_; }

 private:
  const HttpRequest& request_;
  const std::string& store_url_;
};

// The run, or 404.
store::RunRow run_or_404(store::Store& s, const std::string& id);

using Handler = std::string (*)(const Call&);

std::string get_health(const Call& call);    // server/health.cc
std::string get_runs(const Call& call);      // server/runs.cc
std::string get_run(const Call& call);       // server/runs.cc
std::string get_ranks(const Call& call);     // server/ranks.cc
std::string get_timeline(const Call& call);  // server/timeline.cc
std::string get_steps(const Call& call);     // server/steps.cc
std::string get_alerts(const Call& call);    // server/alerts.cc
std::string get_compare(const Call& call);   // server/compare.cc
std::string get_lineage(const Call& call);   // server/lineage.cc
std::string get_report(const Call& call);    // server/report.cc
std::string get_heatmap(const Call& call);   // server/heatmap.cc
std::string get_rank(const Call& call);      // server/rank_detail.cc
std::string get_gpus(const Call& call);      // server/gpus.cc
std::string get_search(const Call& call);    // server/search.cc

// Integer parameter `name` given in nanoseconds (since, until), or nullopt.
std::optional<int64_t> time_ns(const Args& a, const char* name);

}  // namespace runlens::api
