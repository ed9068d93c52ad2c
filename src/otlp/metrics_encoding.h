// The OTLP encoding of ferry::metrics' instruments (ferry::otlp_metrics, private): prometheus-cpp's
// collected families turned into an ExportMetricsServiceRequest, under gRFC A66's names, units
// and attributes, as cumulative sums and explicit-bucket histograms.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"
#include "prometheus/metric_family.h"

namespace ferry::otlp_detail {

// A family of ferry::metrics and its OpenTelemetry instrument: the A66/A94/A96 name and unit.
struct Instrument {
  std::string_view prometheus_name;  // "grpc_server_call_duration_seconds"
  std::string_view name;             // "grpc.server.call.duration"
  std::string_view unit;             // "s"
};

// The instrument of a family ferry::metrics registers, or null for another family (a user's
// own on the same registry), which is exported under its Prometheus name without a unit.
const Instrument* find_instrument(std::string_view prometheus_name);

// The attribute a Prometheus label stands for: "grpc_method" -> "grpc.method" (A66, A94's
// grpc.lb.locality and grpc.disconnect_error); other labels keep their name.
std::string_view attribute_name(std::string_view label);

// Fills request with one ResourceMetrics (resource: the attributes, in order), one ScopeMetrics
// (scope "ferry") and a Metric per non-empty family: a counter as a monotonic cumulative Sum,
// ferry's gauge as a non-monotonic cumulative Sum (A94's open_connections is an up-down
// counter) and another family's as a Gauge, a
// histogram as a cumulative explicit-bucket Histogram (the le bounds but +Inf, per-bucket counts);
// summaries and untyped families are left out. Every point has start_unix_nano (when the
// exporter began: the instruments count from then) and now_unix_nano.
void encode_metrics(
    const std::vector<prometheus::MetricFamily>& families,
    const std::vector<std::pair<std::string, std::string>>& resource, std::uint64_t start_unix_nano,
    std::uint64_t now_unix_nano,
    opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest& request);

}  // namespace ferry::otlp_detail
