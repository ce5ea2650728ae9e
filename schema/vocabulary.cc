#include "schema/vocabulary.h"

namespace runlens {

const Term* find_term(std::span<const Term> terms, std::string_view word) {
  for (const Term& t : terms) {
    if (t.name == word) return &t;
  }
  return nullptr;
}

std::string_view alert_owner(std::string_view kind) {
  for (const KindOwner& k : alert_kind::kOwners) {
    if (k.kind == kind) return k.owner;
  }
  return {};
}

bool alert_closes(std::string_view kind) {
  for (const KindOwner& k : alert_kind::kOwners) {
    if (k.kind == kind) return k.closes;
  }
  return false;
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
  md +=
      "**Alert kinds** (an alert's `kind`; the owner it implies until a diagnosis names one; how it is resolved: "
      "`closes` by its closing revision, `hold` by a consumer after a hold time):\n\n"
      "| kind | owner | resolved | meaning |\n|---|---|---|---|\n";
  for (size_t i = 0; i < std::size(alert_kind::kAll); ++i) {
    const Term& t = alert_kind::kAll[i];
    std::string_view o = alert_kind::kOwners[i].owner;
    md += "| `" + std::string(t.name) + "` | " + (o.empty() ? std::string("its own") : "`" + std::string(o) + "`") +
          " | " + (alert_kind::kOwners[i].closes ? "closes" : "hold") + " | " + std::string(t.doc) + " |\n";
  }
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
