// The vocabulary (schema/vocabulary.h) is a public contract: its words are
// unique within each table, spelled as the contract spells words, and each
// has a doc line that fits one row of a markdown table.
#include "schema/vocabulary.h"

#include <doctest/doctest.h>

#include <cctype>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace runlens {
namespace {

struct Table {
  const char* name;
  std::span<const Term> terms;
};

const std::vector<Table>& tables() {
  static const std::vector<Table> t = {{"alert kinds", alert_kind::kAll},
                                       {"causes", cause::kAll},
                                       {"owners", owner::kAll},
                                       {"event kinds", event_kind::kAll},
                                       {"timeline kinds", timeline_kind::kAll}};
  return t;
}

bool snake_case(std::string_view w) {
  if (w.empty() || !std::islower(static_cast<unsigned char>(w.front())) || w.back() == '_') return false;
  for (char c : w) {
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_')
      return false;
  }
  return w.find("__") == std::string_view::npos;
}

TEST_CASE("vocabulary: each table has words, each word once, snake_case") {
  for (const Table& t : tables()) {
    CAPTURE(t.name);
    CHECK(!t.terms.empty());
    std::set<std::string_view> seen;
    for (const Term& term : t.terms) {
      CAPTURE(term.name);
      CHECK(snake_case(term.name));
      CHECK(seen.insert(term.name).second);
    }
  }
}

TEST_CASE("vocabulary: a timeline kind is never an event kind (events are entered under their own kind)") {
  for (const Term& t : timeline_kind::kAll) {
    CAPTURE(t.name);
    CHECK(find_term(event_kind::kAll, t.name) == nullptr);
  }
}

TEST_CASE("vocabulary: every doc line is one sentence that fits a markdown table row") {
  for (const Table& t : tables()) {
    for (const Term& term : t.terms) {
      CAPTURE(term.name);
      REQUIRE(!term.doc.empty());
      CHECK(std::isupper(static_cast<unsigned char>(term.doc.front())));
      CHECK(term.doc.back() == '.');
      CHECK(term.doc.find('|') == std::string_view::npos);
      CHECK(term.doc.find('\n') == std::string_view::npos);
      CHECK(term.doc.size() <= 120);
    }
  }
}

TEST_CASE("vocabulary: the named constants are the tables' words, in order") {
  CHECK(alert_kind::kAll[0].name == alert_kind::kStraggler);
  CHECK(alert_kind::kAll[std::size(alert_kind::kAll) - 1].name == alert_kind::kDiagnosis);
  CHECK(cause::kAll[std::size(cause::kAll) - 1].name == cause::kUnknown);
  CHECK(owner::kAll[0].name == owner::kTraining);
  CHECK(event_kind::kAll[0].name == event_kind::kXid);
  // The spellings that alerts.jsonl, the store and the rules carry today.
  CHECK(alert_kind::kXidError == "xid_error");
  CHECK(alert_kind::kRankMissing == "rank_missing");
  CHECK(cause::kHardwareThrottle == "hardware_throttle");
  CHECK(owner::kInfrastructure == "infrastructure");
  CHECK(event_kind::kNcclTimeout == "nccl_timeout");
  CHECK(event_kind::kConfigChange == "config_change");
}

TEST_CASE("vocabulary: every alert kind implies an owner of the owners' table, but a diagnosis, which names its own") {
  for (const Term& k : alert_kind::kAll) {
    CAPTURE(k.name);
    std::string_view o = alert_owner(k.name);
    if (k.name == alert_kind::kDiagnosis) {
      CHECK(o.empty());
      CHECK(alert_closes(k.name));
    } else {
      CHECK(find_term(owner::kAll, o) != nullptr);
    }
  }
  CHECK(alert_owner(alert_kind::kStraggler) == owner::kInfrastructure);
  CHECK(alert_owner(alert_kind::kNanLoss) == owner::kTraining);
  CHECK(alert_owner(alert_kind::kDataStarvation) == owner::kData);
  CHECK(alert_owner("no_such_kind").empty());
  CHECK(alert_closes(alert_kind::kStraggler));
  CHECK_FALSE(alert_closes(alert_kind::kNanLoss));
  CHECK_FALSE(alert_closes(alert_kind::kXidError));
}

TEST_CASE("vocabulary: find_term") {
  const Term* t = find_term(alert_kind::kAll, "straggler");
  REQUIRE(t != nullptr);
  CHECK(t->name == alert_kind::kStraggler);
  CHECK(t->doc.find("median") != std::string_view::npos);
  CHECK(find_term(alert_kind::kAll, "stragler") == nullptr);
  CHECK(find_term(alert_kind::kAll, "") == nullptr);
  // A word of one table is not a word of another: "network" is a cause and an
  // owner, not an alert kind; "oom" an alert kind and an event kind.
  CHECK(find_term(cause::kAll, "network") != nullptr);
  CHECK(find_term(owner::kAll, "network") != nullptr);
  CHECK(find_term(alert_kind::kAll, "network") == nullptr);
  CHECK(find_term(event_kind::kAll, alert_kind::kOom) != nullptr);
  CHECK(find_term(event_kind::kAll, alert_kind::kXidError) == nullptr);
}

TEST_CASE("vocabulary: the markdown holds one row per word, with its doc line") {
  std::string md = vocabulary_markdown();
  size_t rows = 0;
  for (size_t at = md.find("\n| `"); at != std::string::npos; at = md.find("\n| `", at + 1)) ++rows;
  size_t words = 0;
  for (const Table& t : tables()) {
    words += t.terms.size();
    for (const Term& term : t.terms) {
      std::string row = "| `" + std::string(term.name) + "` | " + std::string(term.doc) + " |\n";
      if (t.terms.data() == alert_kind::kAll) {
        // The alert kinds' table also says each kind's owner and how it is resolved.
        std::string_view o = alert_owner(term.name);
        row = "| `" + std::string(term.name) + "` | " + (o.empty() ? "its own" : "`" + std::string(o) + "`") + " | " +
              (alert_closes(term.name) ? "closes" : "hold") + " | " + std::string(term.doc) + " |\n";
      }
      CAPTURE(row);
      CHECK(md.find(row) != std::string::npos);
    }
  }
  CHECK(rows == words);
  CHECK(md.find("**Alert kinds**") < md.find("**Causes**"));
  CHECK(md.find("**Causes**") < md.find("**Owners**"));
  CHECK(md.find("**Owners**") < md.find("**Event kinds**"));
}

}  // namespace
}  // namespace runlens
