// The researcher failure page of spec section 24, built from the store:
// status and failure, model and GPUs, the training series around the
// failure, an infrastructure summary, the likely cause (from a diagnosis
// alert when the store holds one; otherwise "unknown" with the evidence),
// related events with their steps, and the recommendation.
#pragma once

#include <optional>
#include <string>

namespace runlens::report {

struct ReportOptions {
  std::string store_url;  // store/store.h: open_store()
  std::string run_id;
  bool json = false;       // --format json
  int64_t window = 100;    // steps before the failure searched for related events
  bool read_only = false;  // open the store read-only (the API server's GET /v1/runs/{runId}/report)
};

// The page as text or JSON; nullopt when the store has no such run. Throws store::StoreError.
std::optional<std::string> failure_page(const ReportOptions& options);

}  // namespace runlens::report
