#include "formats/canonical_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "formats/json_writer.h"

namespace runlens::json {

void append_canonical_number(std::string* out, double v) {
  if (v == 0) v = 0;  // -0 is 0
  if (std::nearbyint(v) == v && std::fabs(v) < 9007199254740992.0) {
    append_int(out, static_cast<int64_t>(v));
    return;
  }
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, p);
}

namespace {
bool append_at(std::string* out, const Value& v, const std::string& path, std::string* why) {
  switch (v.type) {
    case Value::Type::kNull:
      out->append("null");
      return true;
    case Value::Type::kBool:
      out->append(v.boolean ? "true" : "false");
      return true;
    case Value::Type::kNumber:
      if (!std::isfinite(v.number)) {
        *why = "a canonical JSON number must be finite, got " + std::string(std::isnan(v.number) ? "NaN" : "Infinity") +
               " at " + (path.empty() ? "the top level" : path);
        return false;
      }
      if (v.integral && (v.integer >= (int64_t(1) << 53) || v.integer <= -(int64_t(1) << 53))) {
        append_int(out, v.integer);  // an exact large integer stays exact
      } else {
        append_canonical_number(out, v.number);
      }
      return true;
    case Value::Type::kString:
      append_escaped(out, v.text);
      return true;
    case Value::Type::kArray: {
      out->push_back('[');
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out->push_back(',');
        if (!append_at(out, v.items[i], path + "[" + std::to_string(i) + "]", why)) return false;
      }
      out->push_back(']');
      return true;
    }
    case Value::Type::kObject: {
      std::vector<const std::pair<std::string, Value>*> members;
      members.reserve(v.members.size());
      for (const auto& m : v.members) members.push_back(&m);
      std::sort(members.begin(), members.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out->push_back('{');
      for (size_t i = 0; i < members.size(); ++i) {
        const std::string member_path = path.empty() ? members[i]->first : path + "." + members[i]->first;
        if (i > 0 && members[i]->first == members[i - 1]->first) {
          *why = "duplicate key '" + members[i]->first + "' at " + member_path;
          return false;
        }
        if (i) out->push_back(',');
        append_escaped(out, members[i]->first);
        out->push_back(':');
        if (!append_at(out, members[i]->second, member_path, why)) return false;
      }
      out->push_back('}');
      return true;
    }
  }
  return false;
}
}  // namespace

bool append_canonical(std::string* out, const Value& v, std::string* why) { return append_at(out, v, "", why); }

bool canonicalize(std::string_view text, std::string* out, std::string* why) {
  Value v;
  ParseError err;
  if (!parse(text, &v, &err)) {
    *why = "invalid JSON at byte " + std::to_string(err.offset) + ": " + err.message;
    return false;
  }
  out->clear();
  return append_canonical(out, v, why);
}

}  // namespace runlens::json
