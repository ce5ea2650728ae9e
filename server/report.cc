// GET /v1/runs/{runId}/report: the failure page of spec section 24, as
// `runlens report --format json` writes it (reports/report.h), unchanged.
#include "reports/report.h"

#include "server/route.h"

namespace runlens::api {

std::string get_report(const Call& call) {
  Args a = call.args({"window"});
  report::ReportOptions o;
  o.store_url = call.store_url();
  o.run_id = call.match(1);
  o.json = true;
  o.read_only = true;
  o.window = a.integer("window", 1, 100'000).value_or(100);
  std::optional<std::string> page;
  try {
    page = report::failure_page(o);
  } catch (const store::StoreError& e) {
    throw HttpError{503, e.what()};
  }
  if (!page) throw HttpError{404, "unknown run '" + o.run_id + "'"};
  while (!page->empty() && page->back() == '\n') page->pop_back();
  return *page;
}

}  // namespace runlens::api
