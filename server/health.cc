// GET /v1/health: the store opens; its schema version.
#include <algorithm>
#include <cmath>

#include "server/render.h"
#include "server/route.h"

namespace runlens::api {

std::string get_health(const Call& call) {
  call.args({});  // it takes no parameters
  int version = call.open().schema_version;
  std::string s;
  json::Writer(&s).begin_object().key("status").str("ok").key("schemaVersion").integer(version).end_object();
  return s;
}

}  // namespace runlens::api
