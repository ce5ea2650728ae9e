#include "connectors/metrics/metrics_hub.h"

namespace runlens::connectors::metrics {

namespace {

constexpr Family kRowsIn{"runlens_pipeline_rows_in_total", MetricType::kCounter,
                         "Rows a pipeline node received (a source: rows read)."};
constexpr Family kRowsOut{"runlens_pipeline_rows_out_total", MetricType::kCounter, "Rows a pipeline node emitted."};
constexpr Family kDropped{"runlens_pipeline_rows_dropped_total", MetricType::kCounter,
                          "Rows shed from a pipeline node's inbox (overflow: shed), by priority (P0 most important)."};
constexpr Family kLate{"runlens_pipeline_rows_late_total", MetricType::kCounter,
                       "Rows older than their source's watermark (dead-lettered)."};
constexpr Family kDeadLetters{"runlens_pipeline_dead_letters_total", MetricType::kCounter,
                              "Rows and bytes a pipeline node could not use, written to the dead-letter file."};
constexpr Family kQueueRows{"runlens_pipeline_queue_rows", MetricType::kGauge,
                            "Rows queued now in a pipeline node's inboxes, over all its partitions."};
constexpr Family kQueueCapacity{"runlens_pipeline_queue_capacity_rows", MetricType::kGauge,
                                "Rows one partition's inbox holds (queue_capacity)."};
constexpr Family kQueuePeak{"runlens_pipeline_queue_peak_rows", MetricType::kGauge,
                            "Most rows ever queued in one partition's inbox of a pipeline node."};
constexpr Family kProducers{"runlens_pipeline_producers", MetricType::kGauge,
                            "Producers holding a source's watermark now."};
constexpr Family kProducersIdle{"runlens_pipeline_producer_idle_total", MetricType::kCounter,
                                "Times a producer of a source went silent for idle_timeout."};
constexpr Family kLostBatches{"runlens_pipeline_lost_batches_total", MetricType::kCounter,
                              "Batches lost between producers and a source (gaps in their sequence numbers)."};
constexpr Family kWriterWritten{"runlens_pipeline_writer_batches_written_total", MetricType::kCounter,
                                "Batches a sink's asynchronous writer wrote."};
constexpr Family kWriterErrors{"runlens_pipeline_writer_errors_total", MetricType::kCounter,
                               "Writes of a sink's asynchronous writer that failed."};
constexpr Family kDeliveryAccepted{"runlens_alert_delivery_accepted_total", MetricType::kCounter,
                                   "Alert publications a delivering sink (alertmanager) took in."};
constexpr Family kDeliveryPosts{"runlens_alert_delivery_posts_total", MetricType::kCounter,
                                "Posts a delivering sink made that the remote service accepted."};
constexpr Family kDeliveryPostErrors{"runlens_alert_delivery_post_errors_total", MetricType::kCounter,
                                     "Posts a delivering sink made that failed (retried with backoff)."};
constexpr Family kDeliveryDropped{"runlens_alert_delivery_dropped_total", MetricType::kCounter,
                                  "Alerts a delivering sink dropped from its full queue, by severity (info first)."};
constexpr Family kDeliveryUndelivered{"runlens_alert_delivery_undelivered_total", MetricType::kCounter,
                                      "Alerts a delivering sink still held when it stopped (flush_timeout passed)."};

}  // namespace

Snapshot counters_snapshot(const std::vector<runtime::CounterSnapshot>& counters) {
  Snapshot s;
  auto add = [&](const Family& f, const std::string& labels, double v) {
    s.entries.push_back(Snapshot::Entry{&f, labels, Series{v, 0}});
  };
  for (const auto& c : counters) {
    std::string l = label_text({{"component", c.node}, {"type", c.type}});
    add(kRowsIn, l, static_cast<double>(c.in));
    add(kRowsOut, l, static_cast<double>(c.out));
    for (int p = 0; p < runtime::kPriorities; ++p) {
      add(kDropped, label_text({{"component", c.node}, {"type", c.type}, {"priority", "P" + std::to_string(p)}}),
          static_cast<double>(c.dropped[p]));
    }
    add(kLate, l, static_cast<double>(c.late));
    add(kDeadLetters, l, static_cast<double>(c.dead_lettered));
    add(kQueueRows, l, static_cast<double>(c.queue_rows));
    add(kQueueCapacity, l, static_cast<double>(c.queue_capacity));
    add(kQueuePeak, l, static_cast<double>(c.queue_peak));
    add(kProducers, l, static_cast<double>(c.producers));
    add(kProducersIdle, l, static_cast<double>(c.producers_idle));
    add(kLostBatches, l, static_cast<double>(c.lost_batches));
    add(kWriterWritten, l, static_cast<double>(c.writer_written));
    add(kWriterErrors, l, static_cast<double>(c.writer_errors));
    if (c.type == "alertmanager") {
      add(kDeliveryAccepted, l, static_cast<double>(c.delivery_accepted));
      add(kDeliveryPosts, l, static_cast<double>(c.delivery_posts));
      add(kDeliveryPostErrors, l, static_cast<double>(c.delivery_post_errors));
      static constexpr const char* kSeverities[] = {"info", "warning", "critical"};
      for (size_t i = 0; i < c.delivery_dropped.size(); ++i) {
        add(kDeliveryDropped, label_text({{"component", c.node}, {"type", c.type}, {"severity", kSeverities[i]}}),
            static_cast<double>(c.delivery_dropped[i]));
      }
      add(kDeliveryUndelivered, l, static_cast<double>(c.delivery_undelivered));
    }
  }
  return s;
}

void MetricsHub::publish(const std::string& writer, std::shared_ptr<const Snapshot> snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshots_[writer] = std::move(snapshot);
}

void MetricsHub::set_counters(CounterSource source) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!source && counters_) last_counters_ = counters_();
  counters_ = std::move(source);
}

std::string MetricsHub::render() const {
  std::vector<std::shared_ptr<const Snapshot>> held;
  std::vector<runtime::CounterSnapshot> counters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : snapshots_) held.push_back(v);
    if (counters_) last_counters_ = counters_();
    counters = last_counters_;
  }
  Snapshot health = counters_snapshot(counters);
  std::vector<const Snapshot*> all{&health};
  for (const auto& s : held) all.push_back(s.get());
  return metrics::render(all);
}

}  // namespace runlens::connectors::metrics
