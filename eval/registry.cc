#include "eval/registry.h"

namespace runlens::eval {

namespace {
bool valid_part_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

bool check_part(std::string_view part, const char* what, std::string_view text, std::string* why) {
  const std::string head = "a model version id is MODEL:VERSION (e.g. llama-x:v142), got '" + std::string(text) + "': ";
  if (part.empty()) {
    *why = head + "the " + what + " is empty";
    return false;
  }
  if (part.size() > 128) {
    *why = head + "the " + what + " is longer than 128 characters";
    return false;
  }
  for (size_t i = 0; i < part.size(); ++i) {
    if (!valid_part_char(part[i])) {
      *why = head + "the " + what + " has the character '" + std::string(1, part[i]) +
             "' (allowed: letters, digits, '.', '_', '-')";
      return false;
    }
  }
  if (part[0] == '.' || part[0] == '_' || part[0] == '-') {
    *why = head + "the " + what + " must start with a letter or digit";
    return false;
  }
  return true;
}
}  // namespace

std::optional<ModelVersionId> parse_model_version(std::string_view text, std::string* why) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    *why = "a model version id is MODEL:VERSION (e.g. llama-x:v142), got '" + std::string(text) + "': no ':'";
    return std::nullopt;
  }
  if (text.find(':', colon + 1) != std::string_view::npos) {
    *why =
        "a model version id is MODEL:VERSION (e.g. llama-x:v142), got '" + std::string(text) + "': more than one ':'";
    return std::nullopt;
  }
  std::string_view model = text.substr(0, colon), version = text.substr(colon + 1);
  if (!check_part(model, "model", text, why) || !check_part(version, "version", text, why)) return std::nullopt;
  return ModelVersionId{std::string(model), std::string(version)};
}

std::string_view eval_status_name(EvalStatus s) {
  switch (s) {
    case EvalStatus::kQueued:
      return "QUEUED";
    case EvalStatus::kRunning:
      return "RUNNING";
    case EvalStatus::kPartial:
      return "PARTIAL";
    case EvalStatus::kCompleted:
      return "COMPLETED";
    case EvalStatus::kFailed:
      return "FAILED";
    case EvalStatus::kCached:
      return "CACHED";
  }
  return "?";
}

bool is_terminal(EvalStatus s) { return s != EvalStatus::kQueued && s != EvalStatus::kRunning; }

}  // namespace runlens::eval
