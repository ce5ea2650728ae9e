#include "server/route.h"

#include <algorithm>
#include <charconv>
#include <climits>

namespace runlens::api {

Args::Args(const std::multimap<std::string, std::string>& params, std::initializer_list<const char*> allowed)
    : params_(params) {
  for (const auto& [k, v] : params) {
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; }) == allowed.end()) {
      std::string list;
      for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      throw HttpError{400, "unknown parameter '" + k + "'" + (list.empty() ? "" : " (this route takes: " + list + ")")};
    }
    if (params.count(k) > 1) throw HttpError{400, "parameter '" + k + "' given more than once"};
  }
}

std::optional<std::string> Args::text(const std::string& name) const {
  auto it = params_.find(name);
  if (it == params_.end()) return std::nullopt;
  return it->second;
}

std::string Args::required(const std::string& name) const {
  auto v = text(name);
  if (!v || v->empty()) throw HttpError{400, "missing parameter '" + name + "'"};
  return *v;
}

std::optional<int64_t> Args::integer(const std::string& name, int64_t min, int64_t max) const {
  auto v = text(name);
  if (!v) return std::nullopt;
  int64_t out = 0;
  const std::string& s = *v;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  bool ok = !s.empty() && ec == std::errc() && end == s.data() + s.size();
  if (!ok || out < min || out > max) {
    throw HttpError{400, "parameter '" + name + "' must be an integer from " + std::to_string(min) + " to " +
                             std::to_string(max) + ", got '" + s + "'"};
  }
  return out;
}

std::string Args::choice(const std::string& name, const std::string& fallback,
                         const std::vector<std::string>& choices) const {
  auto v = text(name);
  if (!v) return fallback;
  std::string low = *v;
  std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return std::tolower(c); });
  if (std::find(choices.begin(), choices.end(), low) != choices.end()) return low;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  throw HttpError{400, "parameter '" + name + "' must be one of " + list + ", got '" + *v + "'"};
}

store::StepRange Args::steps() const {
  store::StepRange r{integer("fromStep", 0, INT64_MAX / 2), integer("toStep", 0, INT64_MAX / 2)};
  if (r.from && r.to && *r.from > *r.to) throw HttpError{400, "fromStep is after toStep"};
  return r;
}

std::optional<int64_t> time_ns(const Args& a, const char* name) { return a.integer(name, 0, INT64_MAX); }

store::Store Call::open() const {
  try {
    return store::open_store(store_url_, {store::OpenMode::kReadOnly});
  } catch (const store::StoreError& e) {
    throw HttpError{503, e.what()};
  }
}

store::RunRow run_or_404(store::Store& s, const std::string& id) {
  auto r = s.graph->run(id);
  if (!r) throw HttpError{404, "unknown run '" + id + "'"};
  return *r;
}

}  // namespace runlens::api
