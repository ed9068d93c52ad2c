// ferry/otlp.h: OTLP/gRPC export over ferry's own Channel (library ferry::otlp, above the core):
// where the OpenTelemetry Collector is and how to reach it (endpoint, headers, TLS, timeout), the
// resource that names this process (service.name, ...), read from code or from the standard
// OTEL_* environment variables, and OtlpClient, the one client that sends an export. The metrics
// pusher (ferry/otlp_metrics.h) and the span exporter (ferry/otlp_tracing.h) export through it.
// docs/observability.md has the guide.
//
//   ferry::OtlpExporterOptions options = ferry::otlp_options_from_environment("METRICS");
//   options.resource.emplace_back("service.name", "checkout");   // or OTEL_SERVICE_NAME
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/tls.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

class Channel;

// Where OTLP goes and how. Options are values: copy and change them freely.
struct OtlpExporterOptions {
  // The Collector's OTLP/gRPC endpoint as OpenTelemetry writes it ("http://host:4317",
  // "https://host:4317") or a ferry target ("host:port", "dns:///host:port", "unix:/path").
  // https:// connects with TLS (credentials below, or the system's CA store if null).
  std::string endpoint = "http://localhost:4317";
  // Metadata sent with every export (an API key, a tenant), lower-case keys.
  std::vector<std::pair<std::string, std::string>> headers;
  // TLS: null is cleartext unless the endpoint is https://.
  std::shared_ptr<ChannelCredentials> credentials;
  // Each export's deadline (OTEL_EXPORTER_OTLP_TIMEOUT, default 10 s).
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  // The resource: attributes naming this process (service.name, service.version, ...), after
  // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME when read from the environment. Without a
  // service.name, "unknown_service" is sent, as the OpenTelemetry SDKs do. ferry adds
  // telemetry.sdk.{name,language,version} unless given.
  std::vector<std::pair<std::string, std::string>> resource;
  // The largest export response taken from the Collector: a larger one fails the export
  // (RESOURCE_EXHAUSTED) without being buffered. A Collector's answer is a few bytes.
  std::size_t max_response_bytes = 64 * 1024;
};

// The options as the OpenTelemetry environment variables give them, for signal "METRICS" or
// "TRACES" (the signal's own variable wins over the general one):
//   OTEL_EXPORTER_OTLP_[signal_]ENDPOINT   endpoint
//   OTEL_EXPORTER_OTLP_[signal_]HEADERS    "key=value,key2=value2" (values percent-decoded)
//   OTEL_EXPORTER_OTLP_[signal_]TIMEOUT    milliseconds
//   OTEL_EXPORTER_OTLP_[signal_]CERTIFICATE  a PEM file of CA certificates (TLS)
//   OTEL_RESOURCE_ATTRIBUTES               "key=value,..." (values percent-decoded)
//   OTEL_SERVICE_NAME                      service.name (wins over OTEL_RESOURCE_ATTRIBUTES')
// Unset variables keep the defaults above; a malformed entry of a list is skipped, a malformed
// number keeps the default (the OpenTelemetry specification's rule: warn, never fail). Change
// the result in code to override any of them. Reads the environment: call it before threads
// that may setenv.
OtlpExporterOptions otlp_options_from_environment(std::string_view signal);

// Parses "key=value,key2=value2" as the OTEL_* list variables hold it: entries trimmed,
// values percent-decoded, entries without '=' or with an empty key skipped.
std::vector<std::pair<std::string, std::string>> parse_otlp_key_values(std::string_view text);

// One OTLP/gRPC client: a ferry Channel to the Collector, on its own I/O thread, that sends
// exports (unary calls with the options' headers and timeout). At most max_in_flight exports
// at once: another is refused, not queued, so a slow or absent Collector holds at most that
// many requests in memory and never holds up the caller. Thread-safe.
class OtlpClient {
 public:
  // Fails (INVALID_ARGUMENT) on an endpoint that is neither a URL nor a target, or when TLS
  // credentials cannot be made.
  static absl::StatusOr<std::unique_ptr<OtlpClient>> create(OtlpExporterOptions options,
                                                            std::size_t max_in_flight = 1);
  // Cancels the exports in flight and joins the I/O thread (their callbacks run first, with a
  // failure).
  ~OtlpClient();
  OtlpClient(const OtlpClient&) = delete;
  OtlpClient& operator=(const OtlpClient&) = delete;

  // Starts one export: sends request (which the call copies out; the caller may drop it on
  // return) on method ("/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"),
  // parses the answer into response (owned by the caller's done, which receives it back), and
  // calls done(status) on the client's I/O thread once the call ended. Returns false, and calls
  // nothing, when max_in_flight exports are in flight already. Any thread.
  bool start_export(std::string_view method, std::shared_ptr<google::protobuf::MessageLite> request,
                    std::shared_ptr<google::protobuf::MessageLite> response,
                    std::function<void(const absl::Status&)> done);

  // Exports in flight now.
  std::size_t in_flight() const;
  // The channel (its executor runs the client's timers and callbacks).
  Channel& channel() { return *channel_; }
  const OtlpExporterOptions& options() const { return options_; }

 private:
  OtlpClient(OtlpExporterOptions options, std::string target, std::size_t max_in_flight);

  struct Flights;
  OtlpExporterOptions options_;
  std::shared_ptr<Flights> flights_;
  std::unique_ptr<Channel> channel_;
};

}  // namespace ferry
