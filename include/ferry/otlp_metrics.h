// ferry/otlp_metrics.h: pushes ferry::metrics' instruments (ferry/metrics.h) to an OpenTelemetry
// Collector over OTLP/gRPC (library ferry::otlp_metrics, built with ferry::metrics): one set of
// instruments, two ways out. The registry the metrics interceptors record into is both scraped
// as Prometheus text (/metrics, as before) and pushed every interval as OTLP, under gRFC A66's
// names ("grpc.server.call.duration", unit "s", attributes grpc.method, grpc.status,
// grpc.target), as cumulative sums and explicit-bucket histograms. docs/observability.md has
// the table and the guide.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   options.interceptors.push_back(ferry::make_server_metrics(*registry));
//   auto exporter = ferry::OtlpMetricsExporter::create(
//       *registry, ferry::otlp_metrics_options_from_environment());   // OTEL_* variables
//
// It never blocks or slows a call: the push runs on the exporter's own thread, reads the
// instruments as a scrape does, and keeps at most one export in flight; while one is (a slow or
// absent Collector) the next interval's is skipped and counted, so memory stays at one request.
// The values are cumulative, so a skipped push loses no counts, only resolution.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/otlp.h"

namespace prometheus {
class Registry;
}

namespace ferry {

struct OtlpMetricsOptions {
  // Where the Collector is (ferry/otlp.h).
  OtlpExporterOptions exporter;
  // Time between pushes (OTEL_METRIC_EXPORT_INTERVAL, default 60 s).
  std::chrono::milliseconds interval = std::chrono::seconds(60);
  // How long the destructor's final push may take (OTEL_METRIC_EXPORT_TIMEOUT bounds it too).
  std::chrono::milliseconds shutdown_timeout = std::chrono::seconds(5);
};

// OtlpMetricsOptions from the environment: the exporter's as otlp_options_from_environment
// ("METRICS") reads them, interval from OTEL_METRIC_EXPORT_INTERVAL and the export timeout from
// OTEL_METRIC_EXPORT_TIMEOUT (milliseconds) when set (the OTLP timeout variables win for the
// call's deadline).
OtlpMetricsOptions otlp_metrics_options_from_environment();

// What the exporter did so far.
struct OtlpExportStats {
  std::uint64_t exports_ok = 0;       // the Collector took the push (maybe in part)
  std::uint64_t exports_failed = 0;   // the call failed (down, refused, deadline, bad answer)
  std::uint64_t exports_skipped = 0;  // an interval came while the previous push was in flight
  std::uint64_t points_rejected = 0;  // partial_success.rejected_data_points, added up
  std::string last_error;             // the last failure or partial_success message (<= 256 B)
};

class OtlpMetricsExporter {
 public:
  // Starts pushing registry's instruments (registry must outlive the exporter) every interval.
  // The points' start time is now: create the exporter with the registry, before the calls it
  // measures. Fails as OtlpClient::create does (a bad endpoint, TLS).
  static absl::StatusOr<std::unique_ptr<OtlpMetricsExporter>> create(prometheus::Registry& registry,
                                                                     OtlpMetricsOptions options);

  // shutdown(options.shutdown_timeout).
  ~OtlpMetricsExporter();
  OtlpMetricsExporter(const OtlpMetricsExporter&) = delete;
  OtlpMetricsExporter& operator=(const OtlpMetricsExporter&) = delete;

  // Pushes now (after the export in flight, if any, ended) and waits for the Collector's answer,
  // at most timeout: its status (DEADLINE_EXCEEDED when timeout passed first; the push still
  // ends by its own deadline). Any thread but the exporter's.
  absl::Status flush(std::chrono::milliseconds timeout);

  // Stops the pushes, makes a last one (flush(timeout)), then cancels what is still in flight
  // and joins the exporter's thread. Idempotent; any thread but the exporter's.
  void shutdown(std::chrono::milliseconds timeout);

  OtlpExportStats stats() const;

 private:
  struct State;
  OtlpMetricsExporter(prometheus::Registry& registry, OtlpMetricsOptions options,
                      std::unique_ptr<OtlpClient> client);
  void start_timer();

  OtlpMetricsOptions options_;
  std::unique_ptr<OtlpClient> client_;
  std::shared_ptr<State> state_;
};

}  // namespace ferry
