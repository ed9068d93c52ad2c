// ferry/otlp_tracing.h: ferry::tracing's spans (ferry/tracing.h) exported to an OpenTelemetry
// Collector over OTLP/gRPC (library ferry::otlp_tracing, above ferry::tracing and ferry::otlp):
// a SpanExporter for the BatchSpanProcessor that sends each batch as one
// ExportTraceServiceRequest through an OtlpClient (ferry's own Channel). docs/observability.md
// has the guide.
//
//   auto exporter =
//   ferry::OtlpSpanExporter::create(ferry::otlp_span_exporter_options_from_environment()); auto
//   processor = std::make_shared<ferry::BatchSpanProcessor>(*exporter); ferry::TracingOptions
//   tracing{.processor = processor}; ferry::tracing_sampler_from_environment(tracing);   //
//   OTEL_TRACES_SAMPLER(_ARG)
//
// It never blocks or slows a call: the processor's thread exports, one batch at a time, and
// waits for the Collector's answer (at most the export's deadline); meanwhile the calls queue
// their spans into the processor's bounded queue, or drop them (counted) when it is full. So a
// down, slow or stalled Collector costs the calls nothing, and memory stays within the queue and
// one request.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ferry/otlp.h"
#include "ferry/tracing.h"

namespace ferry {

struct OtlpSpanExporterOptions {
  // Where the Collector is (ferry/otlp.h); its timeout is each export's deadline.
  OtlpExporterOptions exporter;
  // How long the exports the processor's shutdown makes may take in all: after it, what is left
  // is dropped (counted) and the export in flight cancelled.
  std::chrono::milliseconds shutdown_timeout = std::chrono::seconds(5);
};

// The exporter's options as otlp_options_from_environment("TRACES") reads them
// (OTEL_EXPORTER_OTLP_TRACES_* over OTEL_EXPORTER_OTLP_*, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES).
OtlpSpanExporterOptions otlp_span_exporter_options_from_environment();

// What the exporter did so far.
struct OtlpSpanExportStats {
  std::uint64_t exports_ok = 0;      // the Collector took the batch (maybe in part)
  std::uint64_t exports_failed = 0;  // the call failed (down, refused, deadline, bad answer)
  std::uint64_t spans_exported = 0;  // spans in the batches the Collector took
  std::uint64_t spans_failed = 0;    // spans in batches that failed or were dropped unsent
  std::uint64_t spans_rejected = 0;  // partial_success.rejected_spans, added up
  std::string last_error;            // the last failure or partial_success message (<= 256 B)
};

// A SpanExporter that sends OTLP/gRPC (opentelemetry.proto.collector.trace.v1.TraceService/
// Export). Each batch: one ResourceSpans (the options' resource, then service.name =
// unknown_service and telemetry.sdk.* when not given), one ScopeSpans (scope "ferry"), a Span
// per SpanData with its ids, parent, kind, times, attributes, events and status. A failed
// export is counted and its spans are lost (the next batch goes out as usual); the OTLP
// exporter specification's retry is left to the Collector's side. Thread-safe.
class OtlpSpanExporter final : public SpanExporter {
 public:
  // Fails as OtlpClient::create does (a bad endpoint, TLS).
  static absl::StatusOr<std::shared_ptr<OtlpSpanExporter>> create(OtlpSpanExporterOptions options);
  ~OtlpSpanExporter() override;

  // Encodes batch, sends it and waits for the answer or the deadline (the processor's thread).
  void export_spans(std::vector<SpanData>& batch) override;
  // From now on exports wait at most until shutdown_timeout has passed.
  void shutdown_started() override;
  // Cancels the export still in flight and stops the client's thread.
  void shutdown() override;

  OtlpSpanExportStats stats() const;

 private:
  struct State;
  OtlpSpanExporter(OtlpSpanExporterOptions options, std::unique_ptr<OtlpClient> client);

  const OtlpSpanExporterOptions options_;
  std::shared_ptr<State> state_;
  std::unique_ptr<OtlpClient> client_;  // reset by shutdown (on the processor's thread)
};

}  // namespace ferry
