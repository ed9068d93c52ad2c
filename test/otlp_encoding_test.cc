// The OTLP encoding of ferry::metrics' instruments (src/otlp/metrics_encoding.h) and the OTLP
// options read from the OTEL_* environment (ferry/otlp.h): names, units, attributes and bucket
// bounds exactly as gRFC A66 (and A94, A96) give them, cumulative temporality, start times.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "ferry/otlp.h"
#include "ferry/otlp_metrics.h"
#include "otlp/metrics_encoding.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ferry::otlp_encoding_test {
namespace {

namespace pb = opentelemetry::proto;
using otlp_detail::encode_metrics;

// gRFC A66's default buckets, as the gRFC lists them.
const std::vector<double> kA66Latency = {
    0,     0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003, 0.004,
    0.005, 0.006,   0.008,   0.01,   0.013,  0.016,  0.02,   0.025, 0.03,  0.04,  0.05,
    0.065, 0.08,    0.1,     0.13,   0.16,   0.2,    0.25,   0.3,   0.4,   0.5,   0.65,
    0.8,   1,       2,       5,      10,     20,     50,     100};
const std::vector<double> kA66Size = {0,        1024,      2048,       4096,      16384,
                                      65536,    262144,    1048576,    4194304,   16777216,
                                      67108864, 268435456, 1073741824, 4294967296};

constexpr std::uint64_t kStart = 1'700'000'000'000'000'000;
constexpr std::uint64_t kNow = kStart + 5'000'000'000;

pb::collector::metrics::v1::ExportMetricsServiceRequest encode(
    prometheus::Registry& registry,
    const std::vector<std::pair<std::string, std::string>>& resource = {}) {
  pb::collector::metrics::v1::ExportMetricsServiceRequest request;
  encode_metrics(registry.Collect(), resource, kStart, kNow, request);
  return request;
}

const pb::metrics::v1::Metric* find(
    const pb::collector::metrics::v1::ExportMetricsServiceRequest& request,
    const std::string& name) {
  for (const auto& metric : request.resource_metrics(0).scope_metrics(0).metrics()) {
    if (metric.name() == name) return &metric;
  }
  return nullptr;
}

template <class Point>
std::map<std::string, std::string> attributes(const Point& point) {
  std::map<std::string, std::string> out;
  for (const auto& kv : point.attributes()) out[kv.key()] = kv.value().string_value();
  return out;
}

TEST(OtlpEncoding, HistogramHasA66NameUnitBoundsAndPerBucketCounts) {
  prometheus::Registry registry;
  auto& family = prometheus::BuildHistogram()
                     .Name("grpc_server_call_duration_seconds")
                     .Help("h")
                     .Register(registry);
  auto& series = family.Add({{"grpc_method", "pkg.Svc/M"}, {"grpc_status", "OK"}}, kA66Latency);
  series.Observe(0.0005);  // (0.0003, 0.0006]: bucket 5
  series.Observe(0.001);   // on a bound: the bucket it closes, (0.0008, 0.001]: bucket 7
  series.Observe(0.001);
  series.Observe(250);  // above 100: the last bucket, 41

  const auto request = encode(registry);
  const pb::metrics::v1::Metric* metric = find(request, "grpc.server.call.duration");
  ASSERT_NE(metric, nullptr);
  EXPECT_EQ(metric->unit(), "s");
  ASSERT_TRUE(metric->has_histogram());
  EXPECT_EQ(metric->histogram().aggregation_temporality(),
            pb::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  ASSERT_EQ(metric->histogram().data_points_size(), 1);
  const auto& point = metric->histogram().data_points(0);
  EXPECT_EQ(std::vector<double>(point.explicit_bounds().begin(), point.explicit_bounds().end()),
            kA66Latency);
  ASSERT_EQ(point.bucket_counts_size(), static_cast<int>(kA66Latency.size()) + 1);
  std::vector<std::uint64_t> expected(kA66Latency.size() + 1, 0);
  expected[5] = 1;
  expected[7] = 2;
  expected[41] = 1;
  EXPECT_EQ(std::vector<std::uint64_t>(point.bucket_counts().begin(), point.bucket_counts().end()),
            expected);
  EXPECT_EQ(point.count(), 4u);
  EXPECT_DOUBLE_EQ(point.sum(), 0.0005 + 0.002 + 250);
  EXPECT_EQ(point.start_time_unix_nano(), kStart);
  EXPECT_EQ(point.time_unix_nano(), kNow);
  EXPECT_EQ(attributes(point), (std::map<std::string, std::string>{{"grpc.method", "pkg.Svc/M"},
                                                                   {"grpc.status", "OK"}}));
}

TEST(OtlpEncoding, SizeHistogramsAreBytes) {
  prometheus::Registry registry;
  prometheus::BuildHistogram()
      .Name("grpc_client_attempt_sent_total_compressed_message_size_bytes")
      .Help("h")
      .Register(registry)
      .Add({{"grpc_method", "m"}, {"grpc_target", "dns:///x:1"}, {"grpc_status", "OK"}}, kA66Size)
      .Observe(2000);
  const auto request = encode(registry);
  const auto* metric = find(request, "grpc.client.attempt.sent_total_compressed_message_size");
  ASSERT_NE(metric, nullptr);
  EXPECT_EQ(metric->unit(), "By");
  const auto& point = metric->histogram().data_points(0);
  EXPECT_EQ(std::vector<double>(point.explicit_bounds().begin(), point.explicit_bounds().end()),
            kA66Size);
  EXPECT_EQ(point.bucket_counts(2), 1u);  // (1024, 2048]
  EXPECT_EQ(attributes(point).at("grpc.target"), "dns:///x:1");
}

TEST(OtlpEncoding, CountersAreMonotonicCumulativeSums) {
  prometheus::Registry registry;
  auto& started = prometheus::BuildCounter()
                      .Name("grpc_client_attempt_started_total")
                      .Help("c")
                      .Register(registry)
                      .Add({{"grpc_method", "pkg.Svc/M"}, {"grpc_target", "dns:///h:1"}});
  started.Increment(3);
  prometheus::BuildCounter()
      .Name("grpc_server_call_started_total")
      .Help("c")
      .Register(registry)
      .Add({{"grpc_method", "pkg.Svc/M"}})
      .Increment();
  const auto request = encode(registry);
  const auto* metric = find(request, "grpc.client.attempt.started");
  ASSERT_NE(metric, nullptr);
  EXPECT_EQ(metric->unit(), "{attempt}");
  ASSERT_TRUE(metric->has_sum());
  EXPECT_TRUE(metric->sum().is_monotonic());
  EXPECT_EQ(metric->sum().aggregation_temporality(),
            pb::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  const auto& point = metric->sum().data_points(0);
  EXPECT_DOUBLE_EQ(point.as_double(), 3);
  EXPECT_EQ(point.start_time_unix_nano(), kStart);
  EXPECT_EQ(point.time_unix_nano(), kNow);
  EXPECT_EQ(attributes(point), (std::map<std::string, std::string>{{"grpc.method", "pkg.Svc/M"},
                                                                   {"grpc.target", "dns:///h:1"}}));
  const auto* server = find(request, "grpc.server.call.started");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->unit(), "{call}");
}

TEST(OtlpEncoding, OpenConnectionsIsAnUpDownCounterAndOtherGaugesStayGauges) {
  prometheus::Registry registry;
  prometheus::BuildGauge()
      .Name("grpc_subchannel_open_connections")
      .Help("g")
      .Register(registry)
      .Add({{"grpc_target", "dns:///h:1"}, {"grpc_lb_locality", ""}})
      .Set(2);
  prometheus::BuildGauge().Name("queue_depth").Help("mine").Register(registry).Add({}).Set(7);
  prometheus::BuildCounter()
      .Name("grpc_subchannel_disconnections_total")
      .Help("c")
      .Register(registry)
      .Add({{"grpc_target", "t"}, {"grpc_disconnect_error", "GOAWAY NO_ERROR"}})
      .Increment();
  const auto request = encode(registry);
  const auto* open = find(request, "grpc.subchannel.open_connections");
  ASSERT_NE(open, nullptr);
  EXPECT_EQ(open->unit(), "{connection}");
  ASSERT_TRUE(open->has_sum());
  EXPECT_FALSE(open->sum().is_monotonic());
  EXPECT_EQ(open->sum().aggregation_temporality(),
            pb::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  EXPECT_DOUBLE_EQ(open->sum().data_points(0).as_double(), 2);
  EXPECT_EQ(attributes(open->sum().data_points(0)).count("grpc.lb.locality"), 1u);
  const auto* mine = find(request, "queue_depth");  // a user's family: its own name, a Gauge
  ASSERT_NE(mine, nullptr);
  EXPECT_TRUE(mine->has_gauge());
  EXPECT_EQ(mine->unit(), "");
  const auto* disconnections = find(request, "grpc.subchannel.disconnections");
  ASSERT_NE(disconnections, nullptr);
  EXPECT_EQ(disconnections->unit(), "{disconnection}");
  EXPECT_EQ(attributes(disconnections->sum().data_points(0)).at("grpc.disconnect_error"),
            "GOAWAY NO_ERROR");
}

TEST(OtlpEncoding, ResourceAndScope) {
  prometheus::Registry registry;
  const auto request =
      encode(registry, {{"service.name", "checkout"}, {"deployment.environment", "test"}});
  ASSERT_EQ(request.resource_metrics_size(), 1);
  const auto& resource = request.resource_metrics(0).resource();
  ASSERT_EQ(resource.attributes_size(), 2);
  EXPECT_EQ(resource.attributes(0).key(), "service.name");
  EXPECT_EQ(resource.attributes(0).value().string_value(), "checkout");
  EXPECT_EQ(request.resource_metrics(0).scope_metrics(0).scope().name(), "ferry");
  EXPECT_EQ(request.resource_metrics(0).scope_metrics(0).metrics_size(), 0);  // no families
}

// The A66/A94/A96 names and units of ferry::metrics' families (the integration test checks
// that every family a call creates has one).
TEST(OtlpEncoding, InstrumentTable) {
  const std::vector<std::array<std::string, 3>> expected = {
      {"grpc_client_attempt_started_total", "grpc.client.attempt.started", "{attempt}"},
      {"grpc_client_attempt_duration_seconds", "grpc.client.attempt.duration", "s"},
      {"grpc_client_attempt_sent_total_compressed_message_size_bytes",
       "grpc.client.attempt.sent_total_compressed_message_size", "By"},
      {"grpc_client_attempt_rcvd_total_compressed_message_size_bytes",
       "grpc.client.attempt.rcvd_total_compressed_message_size", "By"},
      {"grpc_client_call_duration_seconds", "grpc.client.call.duration", "s"},
      {"grpc_client_call_retries", "grpc.client.call.retries", "{retry}"},
      {"grpc_client_call_transparent_retries", "grpc.client.call.transparent_retries",
       "{transparent_retry}"},
      {"grpc_client_call_retry_delay_seconds", "grpc.client.call.retry_delay", "s"},
      {"grpc_server_call_started_total", "grpc.server.call.started", "{call}"},
      {"grpc_server_call_duration_seconds", "grpc.server.call.duration", "s"},
      {"grpc_server_call_sent_total_compressed_message_size_bytes",
       "grpc.server.call.sent_total_compressed_message_size", "By"},
      {"grpc_server_call_rcvd_total_compressed_message_size_bytes",
       "grpc.server.call.rcvd_total_compressed_message_size", "By"},
      {"grpc_subchannel_open_connections", "grpc.subchannel.open_connections", "{connection}"},
      {"grpc_subchannel_connection_attempts_succeeded_total",
       "grpc.subchannel.connection_attempts_succeeded", "{attempt}"},
      {"grpc_subchannel_connection_attempts_failed_total",
       "grpc.subchannel.connection_attempts_failed", "{attempt}"},
      {"grpc_subchannel_disconnections_total", "grpc.subchannel.disconnections",
       "{disconnection}"}};
  for (const auto& [prometheus_name, name, unit] : expected) {
    const otlp_detail::Instrument* instrument = otlp_detail::find_instrument(prometheus_name);
    ASSERT_NE(instrument, nullptr) << prometheus_name;
    EXPECT_EQ(instrument->name, name);
    EXPECT_EQ(instrument->unit, unit) << name;
  }
  EXPECT_EQ(otlp_detail::find_instrument("grpc_server_call_duration"), nullptr);
}

TEST(OtlpEncoding, AttributeNames) {
  EXPECT_EQ(otlp_detail::attribute_name("grpc_method"), "grpc.method");
  EXPECT_EQ(otlp_detail::attribute_name("grpc_status"), "grpc.status");
  EXPECT_EQ(otlp_detail::attribute_name("grpc_target"), "grpc.target");
  EXPECT_EQ(otlp_detail::attribute_name("grpc_disconnect_error"), "grpc.disconnect_error");
  EXPECT_EQ(otlp_detail::attribute_name("authz_policy"), "authz_policy");
}

TEST(OtlpOptions, KeyValueListsAsTheOtelVariablesHoldThem) {
  const auto parsed = parse_otlp_key_values(" api-key = a%20b%2Cc ,bad,=novalue,k=v=w,x=%zz,");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"api-key", "a b,c"}, {"k", "v=w"}, {"x", "%zz"}};
  EXPECT_EQ(parsed, expected);
  EXPECT_TRUE(parse_otlp_key_values("").empty());
  EXPECT_TRUE(parse_otlp_key_values("%").empty());
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(OtlpOptions, EnvironmentVariables) {
  {
    const OtlpExporterOptions defaults = otlp_options_from_environment("METRICS");
    EXPECT_EQ(defaults.endpoint, "http://localhost:4317");
    EXPECT_EQ(defaults.timeout, std::chrono::seconds(10));
    EXPECT_TRUE(defaults.headers.empty());
  }
  ScopedEnv general("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4317");
  ScopedEnv metrics("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://metrics:4317");
  ScopedEnv headers("OTEL_EXPORTER_OTLP_HEADERS", "API-Key=secret,tenant=a%3Db");
  ScopedEnv timeout("OTEL_EXPORTER_OTLP_TIMEOUT", "2500");
  ScopedEnv attributes("OTEL_RESOURCE_ATTRIBUTES", "service.name=fromattrs,team=core");
  ScopedEnv service("OTEL_SERVICE_NAME", "checkout");
  ScopedEnv interval("OTEL_METRIC_EXPORT_INTERVAL", "1500");
  const OtlpExporterOptions options = otlp_options_from_environment("METRICS");
  EXPECT_EQ(options.endpoint, "http://metrics:4317");  // the signal's own variable wins
  EXPECT_EQ(otlp_options_from_environment("TRACES").endpoint, "http://general:4317");
  const std::vector<std::pair<std::string, std::string>> expected_headers = {{"api-key", "secret"},
                                                                             {"tenant", "a=b"}};
  EXPECT_EQ(options.headers, expected_headers);
  EXPECT_EQ(options.timeout, std::chrono::milliseconds(2500));
  const std::vector<std::pair<std::string, std::string>> expected_resource = {
      {"service.name", "checkout"}, {"team", "core"}};  // OTEL_SERVICE_NAME wins
  EXPECT_EQ(options.resource, expected_resource);
  EXPECT_EQ(otlp_metrics_options_from_environment().interval, std::chrono::milliseconds(1500));
}

TEST(OtlpOptions, MalformedNumbersKeepTheDefaults) {
  ScopedEnv timeout("OTEL_EXPORTER_OTLP_TIMEOUT", "soon");
  ScopedEnv interval("OTEL_METRIC_EXPORT_INTERVAL", "-5");
  EXPECT_EQ(otlp_options_from_environment("METRICS").timeout, std::chrono::seconds(10));
  EXPECT_EQ(otlp_metrics_options_from_environment().interval, std::chrono::seconds(60));
}

TEST(OtlpClient, EndpointsThatDoNotParseFailCreate) {
  OtlpExporterOptions options;
  options.endpoint = "http://";
  EXPECT_EQ(OtlpClient::create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.endpoint = "";
  EXPECT_EQ(OtlpClient::create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.endpoint = "http://127.0.0.1:1/v1/metrics";  // a path is ignored
  EXPECT_TRUE(OtlpClient::create(options).ok());
}

}  // namespace
}  // namespace ferry::otlp_encoding_test
