#include "schema/vocabulary.h"

namespace runlens {

const Term* find_term(std::span<const Term> terms, std::string_view word) {
  for (const Term& t : terms) {
    if (t.name == word) return &t;
  }
  return nullptr;
}

namespace {
void table(std::string* md, std::string_view caption, std::string_view column, std::span<const Term> terms) {
  *md += caption;
  *md += "\n\n| ";
  *md += column;
  *md += " | meaning |\n|---|---|\n";
  for (const Term& t : terms) {
    *md += "| `";
    *md += t.name;
    *md += "` | ";
    *md += t.doc;
    *md += " |\n";
  }
}
}  // namespace

std::string vocabulary_markdown() {
  std::string md;
  table(&md, "**Alert kinds** (an alert's `kind`):", "kind", alert_kind::kAll);
  md += "\n";
  table(&md, "**Causes** (a diagnosis's `cause`):", "cause", cause::kAll);
  md += "\n";
  table(&md, "**Owners** (a diagnosis's `owner`: who acts on it):", "owner", owner::kAll);
  md += "\n";
  table(&md, "**Event kinds** (`event.kind` in the telemetry contract; runs may send other words too):", "event kind",
        event_kind::kAll);
  md += "\n";
  table(&md, "**Timeline entry kinds** (a timeline entry's `kind`, besides the event kinds above):", "timeline kind",
        timeline_kind::kAll);
  return md;
}

}  // namespace runlens
