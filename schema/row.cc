#include "schema/row.h"

namespace runlens {

std::vector<std::string> kind_names() {
  std::vector<std::string> names;
  for (int k = 0; k < static_cast<int>(Kind::kCount); ++k) names.emplace_back(kind_name(static_cast<Kind>(k)));
  return names;
}

}  // namespace runlens
