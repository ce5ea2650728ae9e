// The evaluation routes of the API (docs/api.md, "Evaluations"), served on
// the run-graph API's port: POST /v1/evaluations, GET /v1/evaluations[/{id}
// [/why|/items]], GET /v1/models/{id}/versions/{v}, POST /v1/checkpoints,
// GET /v1/suites, GET /v1/workers. Reads go to the store (a read-only
// connection per request); submissions and registrations to the service.
#pragma once

#include "eval/service/service.h"
#include "server/serve.h"

namespace runlens::eval::service {

// Registers the routes on `server` (before it starts); `service` must outlive it.
void add_routes(api::ApiServer& server, EvalService& service);

}  // namespace runlens::eval::service
