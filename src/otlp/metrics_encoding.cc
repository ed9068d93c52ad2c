// Implementation of src/otlp/metrics_encoding.h.
#include "otlp/metrics_encoding.h"

#include <algorithm>
#include <array>

namespace ferry::otlp_detail {
namespace {

namespace pb = opentelemetry::proto;

// ferry::metrics' families (src/metrics/metrics.cc), with the instrument each stands for:
// gRFC A66 (per call), A96 (retries), A94 (subchannels). The units are the gRFCs': s for
// latencies, By for sizes, {attempt}, {call}... for counts. The message counters and the
// authorization counters are ferry's own, named in the same style.
constexpr std::array kInstruments = {
    Instrument{"grpc_client_attempt_started_total", "grpc.client.attempt.started", "{attempt}"},
    Instrument{"grpc_client_attempt_duration_seconds", "grpc.client.attempt.duration", "s"},
    Instrument{"grpc_client_attempt_sent_total_compressed_message_size_bytes",
               "grpc.client.attempt.sent_total_compressed_message_size", "By"},
    Instrument{"grpc_client_attempt_rcvd_total_compressed_message_size_bytes",
               "grpc.client.attempt.rcvd_total_compressed_message_size", "By"},
    Instrument{"grpc_client_call_duration_seconds", "grpc.client.call.duration", "s"},
    Instrument{"grpc_client_call_retries", "grpc.client.call.retries", "{retry}"},
    Instrument{"grpc_client_call_transparent_retries", "grpc.client.call.transparent_retries",
               "{transparent_retry}"},
    Instrument{"grpc_client_call_retry_delay_seconds", "grpc.client.call.retry_delay", "s"},
    Instrument{"grpc_client_call_sent_messages_total", "grpc.client.call.sent_messages",
               "{message}"},
    Instrument{"grpc_client_call_rcvd_messages_total", "grpc.client.call.rcvd_messages",
               "{message}"},
    Instrument{"grpc_server_call_started_total", "grpc.server.call.started", "{call}"},
    Instrument{"grpc_server_call_duration_seconds", "grpc.server.call.duration", "s"},
    Instrument{"grpc_server_call_sent_total_compressed_message_size_bytes",
               "grpc.server.call.sent_total_compressed_message_size", "By"},
    Instrument{"grpc_server_call_rcvd_total_compressed_message_size_bytes",
               "grpc.server.call.rcvd_total_compressed_message_size", "By"},
    Instrument{"grpc_server_call_sent_messages_total", "grpc.server.call.sent_messages",
               "{message}"},
    Instrument{"grpc_server_call_rcvd_messages_total", "grpc.server.call.rcvd_messages",
               "{message}"},
    Instrument{"grpc_server_authz_decisions_total", "grpc.server.authz.decisions", "{call}"},
    Instrument{"grpc_server_authz_policy_reloads_total", "grpc.server.authz.policy_reloads",
               "{reload}"},
    Instrument{"grpc_subchannel_open_connections", "grpc.subchannel.open_connections",
               "{connection}"},
    Instrument{"grpc_subchannel_connection_attempts_succeeded_total",
               "grpc.subchannel.connection_attempts_succeeded", "{attempt}"},
    Instrument{"grpc_subchannel_connection_attempts_failed_total",
               "grpc.subchannel.connection_attempts_failed", "{attempt}"},
    Instrument{"grpc_subchannel_disconnections_total", "grpc.subchannel.disconnections",
               "{disconnection}"},
};

constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kAttributes = {{
    {"grpc_method", "grpc.method"},
    {"grpc_status", "grpc.status"},
    {"grpc_target", "grpc.target"},
    {"grpc_lb_locality", "grpc.lb.locality"},
    {"grpc_disconnect_error", "grpc.disconnect_error"},
    {"grpc_security_level", "grpc.security_level"},
}};

void set_string(pb::common::v1::KeyValue& kv, std::string_view key, std::string_view value) {
  kv.set_key(std::string(key));
  kv.mutable_value()->set_string_value(std::string(value));
}

template <class Point>
void set_point(Point& point, const prometheus::ClientMetric& metric, std::uint64_t start,
               std::uint64_t now) {
  point.set_start_time_unix_nano(start);
  point.set_time_unix_nano(now);
  for (const auto& label : metric.label) {
    set_string(*point.add_attributes(), attribute_name(label.name), label.value);
  }
}

void add_sum(pb::metrics::v1::Metric& out, const prometheus::MetricFamily& family, bool monotonic,
             std::uint64_t start, std::uint64_t now) {
  pb::metrics::v1::Sum& sum = *out.mutable_sum();
  sum.set_aggregation_temporality(pb::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  sum.set_is_monotonic(monotonic);
  for (const auto& metric : family.metric) {
    pb::metrics::v1::NumberDataPoint& point = *sum.add_data_points();
    set_point(point, metric, start, now);
    point.set_as_double(monotonic ? metric.counter.value : metric.gauge.value);
  }
}

void add_gauge(pb::metrics::v1::Metric& out, const prometheus::MetricFamily& family,
               std::uint64_t start, std::uint64_t now) {
  pb::metrics::v1::Gauge& gauge = *out.mutable_gauge();
  for (const auto& metric : family.metric) {
    pb::metrics::v1::NumberDataPoint& point = *gauge.add_data_points();
    set_point(point, metric, start, now);
    point.set_as_double(metric.gauge.value);
  }
}

void add_histogram(pb::metrics::v1::Metric& out, const prometheus::MetricFamily& family,
                   std::uint64_t start, std::uint64_t now) {
  pb::metrics::v1::Histogram& histogram = *out.mutable_histogram();
  histogram.set_aggregation_temporality(pb::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  for (const auto& metric : family.metric) {
    pb::metrics::v1::HistogramDataPoint& point = *histogram.add_data_points();
    set_point(point, metric, start, now);
    point.set_count(metric.histogram.sample_count);
    point.set_sum(metric.histogram.sample_sum);
    // Prometheus' buckets are cumulative and end with +Inf; OTLP's count each bucket alone, and
    // its bounds leave the last (+Inf) out: bucket_counts has one more entry than
    // explicit_bounds. Both take a value equal to a bound into the bucket it closes.
    std::uint64_t below = 0;
    const auto& buckets = metric.histogram.bucket;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      const std::uint64_t cumulative = buckets[i].cumulative_count;
      point.add_bucket_counts(cumulative >= below ? cumulative - below : 0);
      below = std::max(below, cumulative);
      if (i + 1 < buckets.size()) point.add_explicit_bounds(buckets[i].upper_bound);
    }
  }
}

}  // namespace

const Instrument* find_instrument(std::string_view prometheus_name) {
  for (const Instrument& instrument : kInstruments) {
    if (instrument.prometheus_name == prometheus_name) return &instrument;
  }
  return nullptr;
}

std::string_view attribute_name(std::string_view label) {
  for (const auto& [prometheus, otlp] : kAttributes) {
    if (prometheus == label) return otlp;
  }
  return label;
}

void encode_metrics(const std::vector<prometheus::MetricFamily>& families,
                    const std::vector<std::pair<std::string, std::string>>& resource,
                    std::uint64_t start_unix_nano, std::uint64_t now_unix_nano,
                    pb::collector::metrics::v1::ExportMetricsServiceRequest& request) {
  request.Clear();
  pb::metrics::v1::ResourceMetrics& resource_metrics = *request.add_resource_metrics();
  for (const auto& [key, value] : resource) {
    set_string(*resource_metrics.mutable_resource()->add_attributes(), key, value);
  }
  pb::metrics::v1::ScopeMetrics& scope = *resource_metrics.add_scope_metrics();
  scope.mutable_scope()->set_name("ferry");
  scope.mutable_scope()->set_version("0.1");
  for (const prometheus::MetricFamily& family : families) {
    if (family.metric.empty()) continue;
    const bool known_type = family.type == prometheus::MetricType::Counter ||
                            family.type == prometheus::MetricType::Gauge ||
                            family.type == prometheus::MetricType::Histogram;
    if (!known_type) continue;
    pb::metrics::v1::Metric& metric = *scope.add_metrics();
    const Instrument* instrument = find_instrument(family.name);
    if (instrument != nullptr) {
      metric.set_name(std::string(instrument->name));
      metric.set_unit(std::string(instrument->unit));
    } else {
      metric.set_name(family.name);
    }
    metric.set_description(family.help);
    switch (family.type) {
      case prometheus::MetricType::Counter:
        add_sum(metric, family, true, start_unix_nano, now_unix_nano);
        break;
      case prometheus::MetricType::Gauge:  // ferry's are up-down counters (A94's)
        if (instrument != nullptr) {
          add_sum(metric, family, false, start_unix_nano, now_unix_nano);
        } else {
          add_gauge(metric, family, start_unix_nano, now_unix_nano);
        }
        break;
      default:
        add_histogram(metric, family, start_unix_nano, now_unix_nano);
        break;
    }
  }
}

}  // namespace ferry::otlp_detail
