#include "operators/telemetry_gaps.h"

#include <algorithm>

#include "operators/run_state.h"

namespace runlens::ops {
namespace {

struct RunState {
  int64_t lost = 0;               // batches lost, all producers of the run
  int64_t published_lost = 0;     // `lost` as last published
  std::vector<Symbol> producers;  // those that lost batches, sorted
  int32_t revision = -1;          // of the last publication; -1: none yet
  template <class Io>
  void fields(Io& io) {
    io(lost, published_lost, producers, revision);
  }
};

class TelemetryGaps final : public PerRunOperator<TelemetryGaps, RunState> {
 public:
  static constexpr runtime::state::StateType kState{"telemetry_gaps", 1};
  explicit TelemetryGaps(const TelemetryGapsOptions&) {}
  template <class Io>
  void state_fields(Io& io) {
    io(runs_);
  }

  // Lost telemetry is the run's, whatever attempt: a restart resets nothing.
  void on_restart(Symbol, const Record&, Emitter&) {}

  void handle(const Record& r, Emitter& out) {
    static const Symbol kGap = Symbol::intern(event_kind::kTelemetryGap);
    if (r.kind() != Kind::kEvent) return;
    const Occurrence& e = r.as<Occurrence>();
    if (e.kind != kGap || !e.has(Occurrence::F::code) || e.code <= 0) return;
    RunState& st = runs_[e.run_id];
    st.lost += e.code;
    bool new_producer = false;
    if (e.has(Occurrence::F::key)) {
      auto at = std::lower_bound(st.producers.begin(), st.producers.end(), e.key, symbol_less);
      if (at == st.producers.end() || *at != e.key) {
        st.producers.insert(at, e.key);
        new_producer = true;
      }
    }
    if (st.revision >= 0 && !new_producer && st.lost < 2 * st.published_lost) return;
    ++st.revision;
    st.published_lost = st.lost;
    out.emit(alert_record(make_alert(r, e, st)));
  }

 private:
  static bool symbol_less(Symbol a, Symbol b) { return Symbol::compare(a, b) < 0; }

  static Alert make_alert(const Record& r, const Occurrence& e, const RunState& st) {
    Alert a;
    a.kind = alert_kind::kTelemetryGap;
    a.severity = Severity::kInfo;
    a.revision = st.revision;
    a.time_ns = r.time_ns;
    a.tenant = r.tenant;
    a.run_id = e.run_id;
    a.value = static_cast<double>(st.lost);
    size_t producers = std::max<size_t>(st.producers.size(), 1);
    a.summary = std::to_string(st.lost) + (st.lost == 1 ? " batch" : " batches") + " of telemetry lost between " +
                std::to_string(producers) + (producers == 1 ? " producer" : " producers") +
                " and the collector; what they held is missing from this run's analysis";
    a.attrs.push_back({"lost_batches", static_cast<double>(st.lost)});
    a.attrs.push_back({"producers", static_cast<double>(producers)});
    a.alert_id = make_alert_id(a, 0);
    return a;
  }
};

std::string describe_options(const TelemetryGapsOptions&) { return {}; }

}  // namespace

std::unique_ptr<OperatorDef> MakeTelemetryGaps(const TelemetryGapsOptions& options) {
  return std::make_unique<PerRunDef<TelemetryGaps, TelemetryGapsOptions>>(options, &describe_options);
}

void RegisterTelemetryGaps(Registry& registry) {
  ComponentInfo info;
  info.type = "telemetry_gaps";
  info.role = Role::kOperator;
  info.doc =
      "Raises `telemetry_gap` (info) for a run whose producers lost batches on the way to the collector (the "
      "`telemetry_gap` events a source writes for gaps in a producer's sequence numbers): one alert per run, "
      "revised when the count of lost batches doubles or another producer loses batches.";
  info.accepts = mask(Kind::kEvent);
  info.emits = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const BuildContext&) { return MakeTelemetryGaps({}); });
}

}  // namespace runlens::ops
