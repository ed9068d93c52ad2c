// OTLP metrics export (ferry/otlp_metrics.h) end to end: a ferry server and client record
// ferry::metrics, the exporter pushes them over ferry's own Channel to a Collector, and the test
// reads what the Collector got. First an in-process Collector (a MetricsService of the test's:
// answering, stalled, down, hostile), then the real OpenTelemetry Collector (otelcol_ferry, from
// scripts/install_peers.sh, whose file exporter writes what it received; interop).
#include "ferry/otlp.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "asio/steady_timer.hpp"
#include "faults/toxiproxy.h"
#include "ferry/interceptor.h"
#include "ferry/metrics.h"
#include "ferry/otlp_metrics.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "ferry/tls.h"
#include "google/protobuf/util/json_util.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.ferry.h"
#include "prometheus/registry.h"
#include "support/loopback.h"

namespace ferry::otlp_test {
namespace {

namespace pb = opentelemetry::proto;
using pb::collector::metrics::v1::ExportMetricsServiceRequest;
using pb::collector::metrics::v1::ExportMetricsServiceResponse;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using Clock = std::chrono::steady_clock;

// An in-process Collector: keeps the requests it got (the last kKept) and the headers of the
// last, and answers as `mode` says.
class FakeCollector final : public pb::collector::metrics::v1::MetricsService::Service {
 public:
  enum class Mode { kAnswer, kStall, kPartialSuccess, kHugeAnswer };
  explicit FakeCollector(Mode mode) : mode_(mode) {}

  asio::awaitable<absl::Status> Export(ServerContext& ctx,
                                       const ExportMetricsServiceRequest& request,
                                       ExportMetricsServiceResponse& response) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++received_;
      last_ = request;
      api_key_ = std::string(ctx.client_metadata().get("api-key").value_or(""));
    }
    switch (mode_) {
      case Mode::kAnswer:
        break;
      case Mode::kStall: {  // never answers: waits until the exporter gives up
        asio::steady_timer timer(co_await asio::this_coro::executor);
        while (!ctx.is_cancelled()) {
          timer.expires_after(std::chrono::milliseconds(5));
          co_await timer.async_wait(asio::use_awaitable);
        }
        co_return absl::CancelledError("stalled");
      }
      case Mode::kPartialSuccess:
        response.mutable_partial_success()->set_rejected_data_points(7);
        response.mutable_partial_success()->set_error_message(std::string(5000, 'e'));
        break;
      case Mode::kHugeAnswer:  // over the exporter's 64 KiB answer limit
        response.mutable_partial_success()->set_error_message(std::string(1 << 20, 'h'));
        break;
    }
    co_return absl::OkStatus();
  }

  int received() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return received_;
  }
  ExportMetricsServiceRequest last() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_;
  }
  std::string api_key() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return api_key_;
  }

 private:
  const Mode mode_;
  mutable std::mutex mutex_;
  int received_ = 0;
  ExportMetricsServiceRequest last_;
  std::string api_key_;
};

// A Collector serving `service` on 127.0.0.1.
class CollectorServer {
 public:
  explicit CollectorServer(const Service& service, ServerOptions options = {})
      : server_(std::move(options)) {
    server_.add_service(service);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    if (!port.ok()) throw std::runtime_error(std::string(port.status().message()));
    port_ = *port;
  }
  ~CollectorServer() { server_.shutdown(std::chrono::milliseconds(100)); }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  Server server_;
  int port_ = 0;
};

// A server and client recording ferry::metrics into one registry.
struct MeteredLoopback {
  static ServerOptions server_options(prometheus::Registry& registry) {
    ServerOptions options;
    options.interceptors.push_back(make_server_metrics(registry));
    return options;
  }
  static ChannelOptions channel_options(prometheus::Registry& registry) {
    ChannelOptions options;
    options.interceptors.push_back(make_client_metrics(registry));
    return options;
  }
  explicit MeteredLoopback(prometheus::Registry& registry)
      : loop(server_options(registry), channel_options(registry)) {}

  // n Echo calls (the last `failing` with NOT_FOUND); returns the slowest call's time.
  Clock::duration calls(int n, int failing = 0) {
    return loop.run([&]() -> asio::awaitable<Clock::duration> {
      Clock::duration slowest{};
      for (int i = 0; i < n; ++i) {
        ClientContext ctx;
        EchoRequest request;
        request.set_payload(std::string(100, 'x'));
        if (i >= n - failing) {
          request.set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
        }
        EchoResponse response;
        const auto start = Clock::now();
        const absl::Status status = co_await loop.stub().Echo(ctx, request, response);
        slowest = std::max(slowest, Clock::now() - start);
        EXPECT_EQ(status.ok(), i < n - failing) << status;
      }
      co_return slowest;
    });
  }

  Loopback loop;
};

OtlpMetricsOptions options_for(const std::string& endpoint) {
  OtlpMetricsOptions options;
  options.exporter.endpoint = endpoint;
  options.exporter.headers = {{"api-key", "k1"}};
  options.exporter.resource = {{"service.name", "otlp-test"}};
  options.interval = std::chrono::seconds(60);  // the tests flush
  options.shutdown_timeout = std::chrono::milliseconds(500);
  return options;
}

template <class Point>
std::map<std::string, std::string> attributes(const Point& point) {
  std::map<std::string, std::string> out;
  for (const auto& kv : point.attributes()) out[kv.key()] = kv.value().string_value();
  return out;
}

const pb::metrics::v1::Metric* find(const ExportMetricsServiceRequest& request,
                                    const std::string& name) {
  for (const auto& resource : request.resource_metrics()) {
    for (const auto& scope : resource.scope_metrics()) {
      for (const auto& metric : scope.metrics()) {
        if (metric.name() == name) return &metric;
      }
    }
  }
  return nullptr;
}

// What a push of `calls` Echo calls (`failing` of them NOT_FOUND) to `target` must hold, as
// gRFC A66 gives it: names, units, attributes, bucket bounds, cumulative temporality.
void expect_a66_metrics(const ExportMetricsServiceRequest& request, const std::string& target,
                        int calls, int failing) {
  ASSERT_GE(request.resource_metrics_size(), 1);
  std::map<std::string, std::string> resource;
  for (const auto& kv : request.resource_metrics(0).resource().attributes()) {
    resource[kv.key()] = kv.value().string_value();
  }
  EXPECT_EQ(resource["service.name"], "otlp-test");
  EXPECT_EQ(resource["telemetry.sdk.name"], "ferry");

  // Every instrument is a gRPC one, with a unit (ferry's families all have their A66 name).
  std::set<std::string> names;
  for (const auto& scope : request.resource_metrics(0).scope_metrics()) {
    for (const auto& metric : scope.metrics()) {
      names.insert(metric.name());
      EXPECT_EQ(metric.name().rfind("grpc.", 0), 0u) << metric.name();
      EXPECT_FALSE(metric.unit().empty()) << metric.name();
    }
  }
  for (const char* name :
       {"grpc.client.attempt.started", "grpc.client.attempt.duration",
        "grpc.client.attempt.sent_total_compressed_message_size",
        "grpc.client.attempt.rcvd_total_compressed_message_size", "grpc.client.call.duration",
        "grpc.server.call.started", "grpc.server.call.duration",
        "grpc.server.call.sent_total_compressed_message_size",
        "grpc.server.call.rcvd_total_compressed_message_size", "grpc.subchannel.open_connections",
        "grpc.subchannel.connection_attempts_succeeded"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }

  const std::string method = "ferry.testing.Echo/Echo";
  const auto* started = find(request, "grpc.client.attempt.started");
  ASSERT_NE(started, nullptr);
  EXPECT_EQ(started->unit(), "{attempt}");
  ASSERT_TRUE(started->has_sum());
  EXPECT_TRUE(started->sum().is_monotonic());
  EXPECT_EQ(started->sum().aggregation_temporality(),
            pb::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  ASSERT_EQ(started->sum().data_points_size(), 1);
  EXPECT_DOUBLE_EQ(started->sum().data_points(0).as_double(), calls);
  EXPECT_EQ(attributes(started->sum().data_points(0)),
            (std::map<std::string, std::string>{{"grpc.method", method},
                                                {"grpc.target", "dns:///" + target}}));

  const auto* server_duration = find(request, "grpc.server.call.duration");
  ASSERT_NE(server_duration, nullptr);
  EXPECT_EQ(server_duration->unit(), "s");
  ASSERT_TRUE(server_duration->has_histogram());
  EXPECT_EQ(server_duration->histogram().aggregation_temporality(),
            pb::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  std::map<std::string, std::uint64_t> by_status;
  for (const auto& point : server_duration->histogram().data_points()) {
    const auto labels = attributes(point);
    EXPECT_EQ(labels.at("grpc.method"), method);
    by_status[labels.at("grpc.status")] += point.count();
    // A66's latency buckets: 41 bounds, 0 to 100 s, per-bucket counts adding up to count.
    ASSERT_EQ(point.explicit_bounds_size(), 41);
    EXPECT_EQ(point.explicit_bounds(0), 0);
    EXPECT_EQ(point.explicit_bounds(1), 0.00001);
    EXPECT_EQ(point.explicit_bounds(40), 100);
    ASSERT_EQ(point.bucket_counts_size(), 42);
    std::uint64_t total = 0;
    for (std::uint64_t n : point.bucket_counts()) total += n;
    EXPECT_EQ(total, point.count());
    EXPECT_GT(point.start_time_unix_nano(), 0u);
    EXPECT_GE(point.time_unix_nano(), point.start_time_unix_nano());
  }
  EXPECT_EQ(by_status, (std::map<std::string, std::uint64_t>{
                           {"OK", static_cast<std::uint64_t>(calls - failing)},
                           {"NOT_FOUND", static_cast<std::uint64_t>(failing)}}));

  const auto* sent = find(request, "grpc.client.attempt.sent_total_compressed_message_size");
  ASSERT_NE(sent, nullptr);
  EXPECT_EQ(sent->unit(), "By");
  for (const auto& point : sent->histogram().data_points()) {
    ASSERT_EQ(point.explicit_bounds_size(), 14);  // A66's size buckets, 0 to 4 GiB
    EXPECT_EQ(point.explicit_bounds(13), 4294967296.0);
    EXPECT_EQ(attributes(point).at("grpc.target"), "dns:///" + target);
    EXPECT_EQ(point.bucket_counts(1), point.count());  // ~100 bytes each: (0, 1024]
  }
}

TEST(OtlpExport, PushesA66MetricsOfServerAndClientToTheCollector) {
  FakeCollector collector(FakeCollector::Mode::kAnswer);
  CollectorServer server(collector);
  prometheus::Registry registry;
  auto exporter = OtlpMetricsExporter::create(registry, options_for(server.endpoint()));
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  MeteredLoopback loopback(registry);
  loopback.calls(12, 2);
  ASSERT_TRUE((*exporter)->flush(std::chrono::seconds(10)).ok());
  EXPECT_EQ(collector.api_key(), "k1");  // the options' headers
  expect_a66_metrics(collector.last(), loopback.loop.target(), 12, 2);
  const OtlpExportStats stats = (*exporter)->stats();
  EXPECT_EQ(stats.exports_ok, 1u);
  EXPECT_EQ(stats.exports_failed, 0u);
}

TEST(OtlpExport, PushesEveryIntervalAndOnShutdown) {
  FakeCollector collector(FakeCollector::Mode::kAnswer);
  CollectorServer server(collector);
  prometheus::Registry registry;
  OtlpMetricsOptions options = options_for(server.endpoint());
  options.interval = std::chrono::milliseconds(50);
  auto exporter = OtlpMetricsExporter::create(registry, options);
  ASSERT_TRUE(exporter.ok());
  MeteredLoopback loopback(registry);
  loopback.calls(3);
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (collector.received() < 3 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(collector.received(), 3);
  loopback.calls(2);
  const int before = collector.received();
  exporter->reset();  // the final push carries the last calls
  EXPECT_GT(collector.received(), before);
  const ExportMetricsServiceRequest last = collector.last();
  const auto* started = find(last, "grpc.client.attempt.started");
  ASSERT_NE(started, nullptr);
  EXPECT_DOUBLE_EQ(started->sum().data_points(0).as_double(), 5);
}

// The Collector over TLS, found through the OTEL_* variables: an https:// endpoint and the CA
// file (OTEL_EXPORTER_OTLP_CERTIFICATE) the Collector's certificate chains to.
TEST(OtlpExport, TlsCollectorFromTheEnvironment) {
  FakeCollector collector(FakeCollector::Mode::kAnswer);
  const std::string certs = FERRY_TEST_CERTS;
  ServerOptions tls;
  auto credentials =
      ServerCredentials::create({.certificate_chain = {.path = certs + "/server.pem"},
                                 .private_key = {.path = certs + "/server.key"}});
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  tls.credentials = *credentials;
  CollectorServer server(collector, tls);
  const std::string endpoint = "https://localhost:" + std::to_string(server.port());
  setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", endpoint.c_str(), 1);
  setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", (certs + "/ca.pem").c_str(), 1);
  setenv("OTEL_SERVICE_NAME", "otlp-tls-test", 1);
  OtlpMetricsOptions options = otlp_metrics_options_from_environment();
  unsetenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
  unsetenv("OTEL_EXPORTER_OTLP_CERTIFICATE");
  unsetenv("OTEL_SERVICE_NAME");
  ASSERT_NE(options.exporter.credentials, nullptr);
  prometheus::Registry registry;
  auto exporter = OtlpMetricsExporter::create(registry, options);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const absl::Status flushed = (*exporter)->flush(std::chrono::seconds(10));
  ASSERT_TRUE(flushed.ok()) << flushed;
  EXPECT_EQ(collector.received(), 1);
  EXPECT_EQ(collector.last().resource_metrics(0).resource().attributes(0).value().string_value(),
            "otlp-tls-test");

  // The same Collector in cleartext, or with another CA: the handshake fails, the push too.
  OtlpMetricsOptions wrong_ca = options;
  auto other = ChannelCredentials::create({.root_certificates = {.path = certs + "/other_ca.pem"}});
  ASSERT_TRUE(other.ok());
  wrong_ca.exporter.credentials = *other;
  auto refused = OtlpMetricsExporter::create(registry, wrong_ca);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE((*refused)->flush(std::chrono::seconds(10)).ok());
  EXPECT_EQ(collector.received(), 1);
}

// A Collector that takes the call and never answers: pushes every 20 ms find the one in flight
// and are skipped (one request held, whatever the time), the calls go on at their own pace, and
// shutdown gives up on it at its deadline.
TEST(OtlpExport, StalledCollectorCostsCallsNothingAndHoldsOneRequest) {
  FakeCollector collector(FakeCollector::Mode::kStall);
  CollectorServer server(collector);
  prometheus::Registry registry;
  OtlpMetricsOptions options = options_for(server.endpoint());
  options.interval = std::chrono::milliseconds(20);
  options.exporter.timeout = std::chrono::seconds(30);
  options.shutdown_timeout = std::chrono::milliseconds(200);
  auto exporter = OtlpMetricsExporter::create(registry, options);
  ASSERT_TRUE(exporter.ok());
  MeteredLoopback loopback(registry);
  const auto start = Clock::now();
  const Clock::duration slowest = loopback.calls(300);
  const auto until = Clock::now() + std::chrono::seconds(10);
  while ((*exporter)->stats().exports_skipped < 5 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LT(slowest, std::chrono::seconds(1));  // no call waits for the export
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  const OtlpExportStats stats = (*exporter)->stats();
  EXPECT_GE(stats.exports_skipped, 5u);
  EXPECT_EQ(collector.received(), 1);  // one request in flight, never a queue of them
  EXPECT_EQ(stats.exports_ok + stats.exports_failed, 0u);
  const auto shutdown_start = Clock::now();
  exporter->reset();
  EXPECT_LT(Clock::now() - shutdown_start, std::chrono::seconds(3));
}

// Nothing listens: each push fails fast and is counted; the calls do not notice.
TEST(OtlpExport, CollectorDownFailsPushesNotCalls) {
  int port = 0;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = acceptor.local_endpoint().port();
  }  // closed: connections are refused
  prometheus::Registry registry;
  OtlpMetricsOptions options = options_for("http://127.0.0.1:" + std::to_string(port));
  options.interval = std::chrono::milliseconds(20);
  options.exporter.timeout = std::chrono::seconds(2);
  auto exporter = OtlpMetricsExporter::create(registry, options);
  ASSERT_TRUE(exporter.ok());
  MeteredLoopback loopback(registry);
  EXPECT_LT(loopback.calls(100), std::chrono::seconds(1));
  const absl::Status flushed = (*exporter)->flush(std::chrono::seconds(5));
  EXPECT_FALSE(flushed.ok());
  const OtlpExportStats stats = (*exporter)->stats();
  EXPECT_GE(stats.exports_failed, 1u);
  EXPECT_EQ(stats.exports_ok, 0u);
  EXPECT_FALSE(stats.last_error.empty());
  EXPECT_LE(stats.last_error.size(), 256u);
}

// partial_success: counted, its message kept clipped; a megabyte answer: refused unread.
TEST(OtlpExport, HostileCollectorAnswers) {
  {
    FakeCollector collector(FakeCollector::Mode::kPartialSuccess);
    CollectorServer server(collector);
    prometheus::Registry registry;
    auto exporter = OtlpMetricsExporter::create(registry, options_for(server.endpoint()));
    ASSERT_TRUE(exporter.ok());
    ASSERT_TRUE((*exporter)->flush(std::chrono::seconds(10)).ok());
    ASSERT_TRUE((*exporter)->flush(std::chrono::seconds(10)).ok());
    const OtlpExportStats stats = (*exporter)->stats();
    EXPECT_EQ(stats.exports_ok, 2u);
    EXPECT_EQ(stats.points_rejected, 14u);
    EXPECT_EQ(stats.last_error, std::string(256, 'e'));
  }
  {
    FakeCollector collector(FakeCollector::Mode::kHugeAnswer);
    CollectorServer server(collector);
    prometheus::Registry registry;
    auto exporter = OtlpMetricsExporter::create(registry, options_for(server.endpoint()));
    ASSERT_TRUE(exporter.ok());
    EXPECT_EQ((*exporter)->flush(std::chrono::seconds(10)).code(),
              absl::StatusCode::kResourceExhausted);
    EXPECT_EQ((*exporter)->stats().exports_failed, 1u);
    EXPECT_LE((*exporter)->stats().last_error.size(), 256u);
  }
}

// An answer that is not an ExportMetricsServiceResponse (field 1, partial_success, holding bytes
// that do not parse as one): the export fails, nothing else happens; and the next push works.
TEST(OtlpExport, GarbageAnswerFailsTheExportOnly) {
  Service hostile("opentelemetry.proto.collector.metrics.v1.MetricsService");
  std::atomic<int> calls{0};
  hostile.add_unary<ExportMetricsServiceRequest, EchoResponse>(
      "Export",
      [&](ServerContext&, const ExportMetricsServiceRequest&,
          EchoResponse& response) -> asio::awaitable<absl::Status> {
        if (calls.fetch_add(1) == 0) response.set_payload(std::string("\xff\xff\xff\xff\x0f", 5));
        co_return absl::OkStatus();
      });
  CollectorServer server(hostile);
  prometheus::Registry registry;
  auto exporter = OtlpMetricsExporter::create(registry, options_for(server.endpoint()));
  ASSERT_TRUE(exporter.ok());
  EXPECT_FALSE((*exporter)->flush(std::chrono::seconds(10)).ok());
  EXPECT_TRUE((*exporter)->flush(std::chrono::seconds(10)).ok());
  EXPECT_EQ((*exporter)->stats().exports_failed, 1u);
  EXPECT_EQ((*exporter)->stats().exports_ok, 1u);
}

// Random answers, as a hostile or broken Collector might send: random bytes (up to 96 KiB, past
// the 64 KiB answer limit) as field 1, which the exporter parses as partial_success, on one
// connection. Each push ends (parsed, refused or over the limit), is counted, and the exporter
// still works; nothing crashes.
TEST(OtlpExport, RandomAnswersOnOneConnection) {
  Service hostile("opentelemetry.proto.collector.metrics.v1.MetricsService");
  std::mt19937 random(39);
  std::mutex random_mutex;
  hostile.add_unary<ExportMetricsServiceRequest, EchoResponse>(
      "Export",
      [&](ServerContext&, const ExportMetricsServiceRequest&,
          EchoResponse& response) -> asio::awaitable<absl::Status> {
        std::lock_guard<std::mutex> lock(random_mutex);
        std::string bytes(random() % (96 * 1024) + 1, '\0');
        for (char& c : bytes) c = static_cast<char>(random());
        response.set_payload(std::move(bytes));  // field 1: partial_success's bytes
        co_return absl::OkStatus();
      });
  CollectorServer server(hostile);
  prometheus::Registry registry;
  auto exporter = OtlpMetricsExporter::create(registry, options_for(server.endpoint()));
  ASSERT_TRUE(exporter.ok());
  constexpr int kPushes = 40;
  for (int i = 0; i < kPushes; ++i) (void)(*exporter)->flush(std::chrono::seconds(10));
  const OtlpExportStats stats = (*exporter)->stats();
  EXPECT_EQ(stats.exports_ok + stats.exports_failed, static_cast<std::uint64_t>(kPushes));
  EXPECT_GT(stats.exports_failed, 0u);  // some were over the limit, or did not parse
  EXPECT_LE(stats.last_error.size(), 256u);
}

// ---- The real OpenTelemetry Collector (interop) -------------------------------------------

#ifndef FERRY_PEERS_DIR
#define FERRY_PEERS_DIR ""
#endif

class RealCollector {
 public:
  // Starts otelcol_ferry with an OTLP/gRPC receiver on a free port and the file exporter
  // writing to a file of its own; false when the peer is not installed.
  bool start() {
    const std::string binary = std::string(FERRY_PEERS_DIR) + "/bin/otelcol_ferry";
    if (std::string(FERRY_PEERS_DIR).empty() || access(binary.c_str(), X_OK) != 0) return false;
    dir_ = std::filesystem::temp_directory_path() /
           ("ferry_otlp_" + std::to_string(getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    {
      asio::io_context io;
      asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
      port_ = acceptor.local_endpoint().port();
    }
    output_ = (dir_ / "metrics.json").string();
    const std::string config = (dir_ / "config.yaml").string();
    std::ofstream(config) << "receivers:\n  otlp:\n    protocols:\n      grpc:\n"
                          << "        endpoint: 127.0.0.1:" << port_ << "\n"
                          << "exporters:\n  file:\n    path: " << output_ << "\n"
                          << "    flush_interval: 50ms\n"
                          << "service:\n  telemetry:\n    metrics:\n      level: none\n"
                          << "    logs:\n      level: warn\n"
                          << "  pipelines:\n    metrics:\n      receivers: [otlp]\n"
                          << "      exporters: [file]\n";
    pid_ = fork();
    if (pid_ == 0) {
      execl(binary.c_str(), binary.c_str(), "--config", config.c_str(), nullptr);
      _exit(127);
    }
    // Ready once its receiver takes connections.
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < until) {
      asio::io_context io;
      asio::ip::tcp::socket socket(io);
      asio::error_code ec;
      socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)}, ec);
      if (!ec) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;  // the test's pushes will fail and say so
  }
  ~RealCollector() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // The last request the Collector wrote (OTLP JSON, a line per batch) that holds `name`,
  // waiting up to 10 s for it.
  ExportMetricsServiceRequest written(const std::string& name) {
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < until) {
      std::ifstream in(output_);
      std::string line;
      ExportMetricsServiceRequest found;
      bool any = false;
      while (std::getline(in, line)) {
        ExportMetricsServiceRequest request;
        google::protobuf::util::JsonParseOptions options;
        options.ignore_unknown_fields = true;
        if (!google::protobuf::util::JsonStringToMessage(line, &request, options).ok()) continue;
        if (find(request, name) != nullptr) {
          found = request;
          any = true;
        }
      }
      if (any) return found;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the Collector wrote no " << name << " to " << output_;
    return {};
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::string output_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST(OtlpCollector, WritesWhatFerryPushed) {
  RealCollector collector;
  if (!collector.start()) {
    GTEST_SKIP() << "otelcol_ferry not installed (scripts/install_peers.sh)";
  }
  prometheus::Registry registry;
  auto exporter = OtlpMetricsExporter::create(registry, options_for(collector.endpoint()));
  ASSERT_TRUE(exporter.ok());
  MeteredLoopback loopback(registry);
  loopback.calls(9, 3);
  const absl::Status flushed = (*exporter)->flush(std::chrono::seconds(10));
  ASSERT_TRUE(flushed.ok()) << flushed;
  expect_a66_metrics(collector.written("grpc.server.call.duration"), loopback.loop.target(), 9, 3);
}

// A Collector behind toxiproxy: black-holed (bytes dropped, the connection held open, as a
// crashed host does) the pushes end by their deadline and later ones are skipped meanwhile, the
// calls go on unslowed, one request is held; once the link is back, the next push gets through.
TEST(OtlpToxiproxy, BlackHoledCollectorCostsCallsNothingAndRecovers) {
  if (!testing::Toxiproxy::installed()) {
    GTEST_SKIP() << testing::Toxiproxy::binary() << " not installed (scripts/install_peers.sh)";
  }
  testing::Toxiproxy toxiproxy;
  FakeCollector collector(FakeCollector::Mode::kAnswer);
  CollectorServer server(collector);
  const int proxy_port = toxiproxy.create_proxy("otlp", server.port());
  prometheus::Registry registry;
  OtlpMetricsOptions options = options_for("http://127.0.0.1:" + std::to_string(proxy_port));
  options.interval = std::chrono::milliseconds(20);
  options.exporter.timeout = std::chrono::milliseconds(300);
  auto exporter = OtlpMetricsExporter::create(registry, options);
  ASSERT_TRUE(exporter.ok());
  MeteredLoopback loopback(registry);
  ASSERT_TRUE((*exporter)->flush(std::chrono::seconds(10)).ok());  // connected through the proxy

  toxiproxy.add_toxic("otlp", "hole-up", "timeout", "upstream", {{"timeout", 0}});
  toxiproxy.add_toxic("otlp", "hole-down", "timeout", "downstream", {{"timeout", 0}});
  const Clock::duration slowest = loopback.calls(200);
  const auto until = Clock::now() + std::chrono::seconds(10);
  while ((*exporter)->stats().exports_failed < 2 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LT(slowest, std::chrono::seconds(1));
  const OtlpExportStats stats = (*exporter)->stats();
  EXPECT_GE(stats.exports_failed, 2u);   // each by its 300 ms deadline
  EXPECT_GE(stats.exports_skipped, 5u);  // the 20 ms intervals in between
  // (A push sent just before the hole opened may have arrived; none arrives while it is open.)
  const int before = collector.received();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(collector.received(), before);

  toxiproxy.remove_toxic("otlp", "hole-up");
  toxiproxy.remove_toxic("otlp", "hole-down");
  const auto back = Clock::now() + std::chrono::seconds(20);
  while (collector.received() == before && Clock::now() < back) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(collector.received(), before);
  const ExportMetricsServiceRequest last = collector.last();
  const auto* started = find(last, "grpc.client.attempt.started");
  ASSERT_NE(started, nullptr);
  EXPECT_DOUBLE_EQ(started->sum().data_points(0).as_double(), 200);  // no count lost
}

}  // namespace
}  // namespace ferry::otlp_test
