// OTLP span export (ferry/otlp_tracing.h) end to end: a ferry server and client record gRFC A72's
// spans, the BatchSpanProcessor hands them to the OtlpSpanExporter, which sends them over ferry's
// own Channel; the test reads what the Collector got. First an in-process Collector (answering,
// stalled, down, hostile), then toxiproxy in front of it and the real OpenTelemetry Collector
// (otelcol_ferry from scripts/install_peers.sh, whose file exporter writes what it received).
#include "ferry/otlp_tracing.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/strings/escaping.h"
#include "asio/steady_timer.hpp"
#include "faults/toxiproxy.h"
#include "ferry/interceptor.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "google/protobuf/util/json_util.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.ferry.h"
#include "support/loopback.h"
#include "support/wait.h"

namespace ferry::otlp_tracing_test {
namespace {

namespace pb = opentelemetry::proto;
using pb::collector::trace::v1::ExportTraceServiceRequest;
using pb::collector::trace::v1::ExportTraceServiceResponse;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using Clock = std::chrono::steady_clock;

// An in-process trace Collector: keeps every span it got, the headers of the last request, and
// answers as `mode` says.
class FakeCollector final : public pb::collector::trace::v1::TraceService::Service {
 public:
  enum class Mode { kAnswer, kStall, kPartialSuccess, kHugeAnswer };
  explicit FakeCollector(Mode mode) : mode_(mode) {}

  asio::awaitable<absl::Status> Export(ServerContext& ctx, const ExportTraceServiceRequest& request,
                                       ExportTraceServiceResponse& response) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++received_;
      requests_.push_back(request);
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
      case Mode::kPartialSuccess:  // claims more rejected spans than were sent
        response.mutable_partial_success()->set_rejected_spans(std::int64_t{1} << 40);
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
  std::vector<ExportTraceServiceRequest> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  std::string api_key() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return api_key_;
  }

 private:
  const Mode mode_;
  mutable std::mutex mutex_;
  int received_ = 0;
  std::vector<ExportTraceServiceRequest> requests_;
  std::string api_key_;
};

class CollectorServer {
 public:
  explicit CollectorServer(const Service& service) {
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

OtlpSpanExporterOptions options_for(const std::string& endpoint) {
  OtlpSpanExporterOptions options;
  options.exporter.endpoint = endpoint;
  options.exporter.headers = {{"api-key", "k1"}};
  options.exporter.resource = {{"service.name", "otlp-tracing-test"}};
  options.shutdown_timeout = std::chrono::milliseconds(500);
  return options;
}

// A server and a client traced into one processor that exports over OTLP.
struct TracedLoopback {
  static TracingOptions tracing(std::shared_ptr<BatchSpanProcessor> processor) {
    TracingOptions options;
    options.processor = std::move(processor);
    return options;
  }
  static ServerOptions server_options(const TracingOptions& tracing) {
    ServerOptions options;
    options.interceptors.push_back(make_server_tracing(tracing));
    return options;
  }
  static ChannelOptions channel_options(const TracingOptions& tracing) {
    ChannelOptions options;
    options.interceptors.push_back(make_client_tracing(tracing));
    return options;
  }
  explicit TracedLoopback(std::shared_ptr<BatchSpanProcessor> processor)
      : loop(server_options(tracing(processor)), channel_options(tracing(processor))) {}

  // n Echo calls (the last `failing` with NOT_FOUND "no such thing"); returns the slowest.
  Clock::duration calls(int n, int failing = 0) {
    return loop.run([&]() -> asio::awaitable<Clock::duration> {
      Clock::duration slowest{};
      for (int i = 0; i < n; ++i) {
        ClientContext ctx;
        EchoRequest request;
        request.set_payload(std::string(100, 'x'));
        if (i >= n - failing) {
          request.set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
          request.set_status_message("no such thing");
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

std::vector<pb::trace::v1::Span> all_spans(const std::vector<ExportTraceServiceRequest>& requests) {
  std::vector<pb::trace::v1::Span> out;
  for (const auto& request : requests) {
    for (const auto& resource : request.resource_spans()) {
      for (const auto& scope : resource.scope_spans()) {
        for (const auto& span : scope.spans()) out.push_back(span);
      }
    }
  }
  return out;
}

const pb::common::v1::AnyValue* attribute(
    const google::protobuf::RepeatedPtrField<pb::common::v1::KeyValue>& attributes,
    const std::string& key) {
  for (const auto& kv : attributes) {
    if (kv.key() == key) return &kv.value();
  }
  return nullptr;
}

// What the spans of one Echo call (OK, or NOT_FOUND "no such thing") must be, as gRFC A72 gives
// them and OTLP encodes them: Sent (client) > Attempt (internal) > Recv (server, remote parent),
// one trace, the attempt's attributes, a message event each way, the status.
void expect_a72_call(const std::vector<pb::trace::v1::Span>& spans, bool ok) {
  ASSERT_EQ(spans.size(), 3u);
  std::map<std::string, const pb::trace::v1::Span*> by_name;
  for (const auto& span : spans) by_name[span.name()] = &span;
  const auto* sent = by_name["Sent.ferry.testing.Echo.Echo"];
  const auto* attempt = by_name["Attempt.ferry.testing.Echo.Echo"];
  const auto* recv = by_name["Recv.ferry.testing.Echo.Echo"];
  ASSERT_TRUE(sent != nullptr && attempt != nullptr && recv != nullptr);
  EXPECT_EQ(sent->trace_id().size(), 16u);
  EXPECT_EQ(sent->span_id().size(), 8u);
  EXPECT_EQ(attempt->trace_id(), sent->trace_id());
  EXPECT_EQ(recv->trace_id(), sent->trace_id());
  EXPECT_TRUE(sent->parent_span_id().empty());  // a root
  EXPECT_EQ(attempt->parent_span_id(), sent->span_id());
  EXPECT_EQ(recv->parent_span_id(), attempt->span_id());
  EXPECT_EQ(sent->kind(), pb::trace::v1::Span::SPAN_KIND_CLIENT);
  EXPECT_EQ(attempt->kind(), pb::trace::v1::Span::SPAN_KIND_INTERNAL);
  EXPECT_EQ(recv->kind(), pb::trace::v1::Span::SPAN_KIND_SERVER);
  // Sampled, the parent's remoteness known: remote for Recv only.
  EXPECT_EQ(sent->flags(), 0x101u);
  EXPECT_EQ(attempt->flags(), 0x101u);
  EXPECT_EQ(recv->flags(), 0x301u);
  for (const auto* span : {sent, attempt, recv}) {
    EXPECT_GT(span->start_time_unix_nano(), 0u);
    EXPECT_GE(span->end_time_unix_nano(), span->start_time_unix_nano());
    if (ok) {
      EXPECT_EQ(span->status().code(), pb::trace::v1::Status::STATUS_CODE_OK) << span->name();
      EXPECT_TRUE(span->status().message().empty());
    } else {
      EXPECT_EQ(span->status().code(), pb::trace::v1::Status::STATUS_CODE_ERROR) << span->name();
      EXPECT_EQ(span->status().message(), "NOT_FOUND, no such thing");
    }
  }
  // The server's span holds the client's times.
  EXPECT_LE(sent->start_time_unix_nano(), recv->start_time_unix_nano());
  const auto* previous = attribute(attempt->attributes(), "previous-rpc-attempts");
  ASSERT_NE(previous, nullptr);
  EXPECT_EQ(previous->int_value(), 0);
  const auto* transparent = attribute(attempt->attributes(), "transparent-retry");
  ASSERT_NE(transparent, nullptr);
  EXPECT_TRUE(transparent->has_bool_value());
  EXPECT_FALSE(transparent->bool_value());
  // A72's message events: the request out and the response in on the attempt, the other way
  // round on the server (a failing call answers no message).
  std::vector<std::string> attempt_events;
  for (const auto& event : attempt->events()) {
    attempt_events.push_back(event.name());
    EXPECT_GT(event.time_unix_nano(), 0u);
    const auto* sequence = attribute(event.attributes(), "sequence-number");
    ASSERT_NE(sequence, nullptr);
    EXPECT_EQ(sequence->int_value(), 0);
    const auto* size = attribute(event.attributes(), "message-size");
    ASSERT_NE(size, nullptr);
    EXPECT_GT(size->int_value(), 100);  // the 100-byte payload and its tag
  }
  std::vector<std::string> want = {"Outbound message"};
  if (ok) want.push_back("Inbound message");
  EXPECT_EQ(attempt_events, want);
  ASSERT_GE(recv->events_size(), 1);
  EXPECT_EQ(recv->events(0).name(), "Inbound message");
}

TEST(OtlpTraceExport, SendsA72SpansWithResourceAndScope) {
  FakeCollector collector(FakeCollector::Mode::kAnswer);
  CollectorServer server(collector);
  auto exporter = OtlpSpanExporter::create(options_for(server.endpoint()));
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  auto processor = std::make_shared<BatchSpanProcessor>(*exporter);
  {
    TracedLoopback loopback(processor);
    loopback.calls(2, 1);
  }
  processor->force_flush();
  const std::vector<ExportTraceServiceRequest> requests = collector.requests();
  ASSERT_GE(requests.size(), 1u);
  const auto& resource = requests[0].resource_spans(0).resource();
  std::map<std::string, std::string> attributes;
  for (const auto& kv : resource.attributes()) attributes[kv.key()] = kv.value().string_value();
  EXPECT_EQ(attributes["service.name"], "otlp-tracing-test");
  EXPECT_EQ(attributes["telemetry.sdk.name"], "ferry");
  EXPECT_EQ(attributes["telemetry.sdk.language"], "cpp");
  EXPECT_EQ(requests[0].resource_spans(0).scope_spans(0).scope().name(), "ferry");
  EXPECT_EQ(collector.api_key(), "k1");

  // Two calls, two traces of three spans.
  std::map<std::string, std::vector<pb::trace::v1::Span>> traces;
  for (auto& span : all_spans(requests)) traces[span.trace_id()].push_back(span);
  ASSERT_EQ(traces.size(), 2u);
  int failed = 0;
  for (const auto& [id, spans] : traces) {
    bool ok = true;
    for (const auto& span : spans) {
      if (span.status().code() == pb::trace::v1::Status::STATUS_CODE_ERROR) ok = false;
    }
    failed += ok ? 0 : 1;
    expect_a72_call(spans, ok);
  }
  EXPECT_EQ(failed, 1);
  const OtlpSpanExportStats stats = (*exporter)->stats();
  EXPECT_EQ(stats.spans_exported, 6u);
  EXPECT_EQ(stats.exports_failed, 0u);
  EXPECT_EQ(processor->dropped(), 0u);
}

// The exporter copies what it sends and leaves the batch as it was: the processor keeps the
// records' storage for the calls' next spans (ferry/tracing.h), which a record whose strings had
// been moved from would make allocate again.
TEST(OtlpTraceExport, ExportLeavesTheBatchAsItWas) {
  FakeCollector collector(FakeCollector::Mode::kAnswer);
  CollectorServer server(collector);
  auto exporter = OtlpSpanExporter::create(options_for(server.endpoint()));
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  SpanData span;
  span.trace_id[0] = 1;
  span.span_id[0] = 2;
  span.name = "Recv.ferry.testing.Echo.Echo";
  span.kind = SpanKind::kServer;
  span.tracestate = "vendorname=opaque-value-longer-than-sso";
  span.attributes.push_back({"an-attribute-with-a-long-key", std::string(40, 'v')});
  span.events.push_back({"Outbound message", 5, {{"message-size-compressed", std::int64_t{9}}}});
  span.status = SpanStatusCode::kError;
  span.status_message = "NOT_FOUND, no such thing at all";
  std::vector<SpanData> batch = {span};
  (*exporter)->export_spans(batch);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].name, span.name);
  EXPECT_EQ(batch[0].tracestate, span.tracestate);
  EXPECT_EQ(batch[0].status_message, span.status_message);
  ASSERT_EQ(batch[0].attributes.size(), 1u);
  EXPECT_EQ(batch[0].attributes[0].key, span.attributes[0].key);
  EXPECT_EQ(std::get<std::string>(batch[0].attributes[0].value), std::string(40, 'v'));
  ASSERT_EQ(batch[0].events.size(), 1u);
  EXPECT_EQ(batch[0].events[0].name, "Outbound message");
  EXPECT_EQ(batch[0].events[0].attributes[0].key, "message-size-compressed");
  const std::vector<pb::trace::v1::Span> sent = all_spans(collector.requests());
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].name(), span.name);
  EXPECT_EQ(sent[0].trace_state(), span.tracestate);
  EXPECT_EQ(sent[0].status().message(), span.status_message);
  EXPECT_EQ(sent[0].attributes(0).value().string_value(), std::string(40, 'v'));
  EXPECT_EQ(sent[0].events(0).name(), "Outbound message");
  EXPECT_EQ((*exporter)->stats().spans_exported, 1u);
}

// The processor's shutdown exports what is still queued before it returns.
TEST(OtlpTraceExport, ShutdownFlushesTheQueue) {
  FakeCollector collector(FakeCollector::Mode::kAnswer);
  CollectorServer server(collector);
  auto exporter = OtlpSpanExporter::create(options_for(server.endpoint()));
  ASSERT_TRUE(exporter.ok());
  auto processor = std::make_shared<BatchSpanProcessor>(
      *exporter, BatchSpanProcessorOptions{.schedule_delay = std::chrono::seconds(60)});
  {
    TracedLoopback loopback(processor);
    loopback.calls(5);
  }
  EXPECT_EQ(collector.received(), 0);  // nothing is due for a minute
  processor->shutdown();
  EXPECT_EQ(all_spans(collector.requests()).size(), 15u);
  EXPECT_EQ((*exporter)->stats().spans_exported, 15u);
}

// A Collector that takes the call and never answers: the processor's thread waits on the one
// export, the calls go on at their own pace, the spans beyond the queue are dropped and
// counted (memory: the queue and one batch), and shutdown gives up at its timeout.
TEST(OtlpTraceExport, StalledCollectorCostsCallsNothingAndMemoryStaysInTheQueue) {
  FakeCollector collector(FakeCollector::Mode::kStall);
  CollectorServer server(collector);
  OtlpSpanExporterOptions options = options_for(server.endpoint());
  options.exporter.timeout = std::chrono::seconds(30);
  options.shutdown_timeout = std::chrono::milliseconds(200);
  auto exporter = OtlpSpanExporter::create(options);
  ASSERT_TRUE(exporter.ok());
  constexpr std::size_t kQueue = 64;
  constexpr std::size_t kBatch = 16;
  auto processor = std::make_shared<BatchSpanProcessor>(
      *exporter, BatchSpanProcessorOptions{.max_queue_size = kQueue,
                                           .max_export_batch_size = kBatch,
                                           .schedule_delay = std::chrono::milliseconds(10)});
  constexpr int kCalls = 300;
  Clock::duration slowest{};
  {
    TracedLoopback loopback(processor);
    slowest = loopback.calls(kCalls);
  }
  EXPECT_LT(slowest, std::chrono::seconds(1));  // no call waits for the export
  // 3 spans a call: all but the queue's and the batch in flight were dropped, never held.
  EXPECT_GE(processor->dropped(), 3u * kCalls - kQueue - kBatch);
  // One request in flight, never a queue of them. It may still be on its way when the calls are
  // done (a loaded machine): wait for it to arrive, then for nothing more.
  EXPECT_TRUE(ferry::testing::eventually([&] { return collector.received() >= 1; }));
  EXPECT_EQ(collector.received(), 1);
  const auto shutdown_start = Clock::now();
  processor->shutdown();
  EXPECT_LT(Clock::now() - shutdown_start, std::chrono::seconds(3));
  const OtlpSpanExportStats stats = (*exporter)->stats();
  EXPECT_EQ(stats.exports_ok, 0u);
  EXPECT_EQ(stats.spans_exported, 0u);
  EXPECT_GE(stats.spans_failed, kBatch);  // the stalled batch, cancelled, and the rest unsent
}

// Nothing listens: each export fails fast and is counted; the calls do not notice.
TEST(OtlpTraceExport, CollectorDownFailsExportsNotCalls) {
  int port = 0;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = acceptor.local_endpoint().port();
  }  // closed: connections are refused
  OtlpSpanExporterOptions options = options_for("http://127.0.0.1:" + std::to_string(port));
  options.exporter.timeout = std::chrono::seconds(2);
  auto exporter = OtlpSpanExporter::create(options);
  ASSERT_TRUE(exporter.ok());
  auto processor = std::make_shared<BatchSpanProcessor>(*exporter);
  {
    TracedLoopback loopback(processor);
    EXPECT_LT(loopback.calls(100), std::chrono::seconds(1));
  }
  processor->force_flush();
  const OtlpSpanExportStats stats = (*exporter)->stats();
  EXPECT_GE(stats.exports_failed, 1u);
  EXPECT_EQ(stats.exports_ok, 0u);
  EXPECT_EQ(stats.spans_failed, 300u);
  EXPECT_FALSE(stats.last_error.empty());
  EXPECT_LE(stats.last_error.size(), 256u);
}

// partial_success: counted, believed only up to the batch's size, its message kept clipped; a
// megabyte answer: refused unread, the batch counted as failed.
TEST(OtlpTraceExport, HostileCollectorAnswers) {
  {
    FakeCollector collector(FakeCollector::Mode::kPartialSuccess);
    CollectorServer server(collector);
    auto exporter = OtlpSpanExporter::create(options_for(server.endpoint()));
    ASSERT_TRUE(exporter.ok());
    auto processor = std::make_shared<BatchSpanProcessor>(*exporter);
    {
      TracedLoopback loopback(processor);
      loopback.calls(2);
    }
    processor->shutdown();
    const OtlpSpanExportStats stats = (*exporter)->stats();
    EXPECT_GE(stats.exports_ok, 1u);
    EXPECT_EQ(stats.spans_rejected, 6u);
    EXPECT_EQ(stats.spans_exported, 0u);
    EXPECT_EQ(stats.last_error, std::string(256, 'e'));
  }
  {
    FakeCollector collector(FakeCollector::Mode::kHugeAnswer);
    CollectorServer server(collector);
    auto exporter = OtlpSpanExporter::create(options_for(server.endpoint()));
    ASSERT_TRUE(exporter.ok());
    auto processor = std::make_shared<BatchSpanProcessor>(*exporter);
    {
      TracedLoopback loopback(processor);
      loopback.calls(1);
    }
    processor->shutdown();
    const OtlpSpanExportStats stats = (*exporter)->stats();
    EXPECT_EQ(stats.exports_failed, 1u);
    EXPECT_EQ(stats.spans_failed, 3u);
    EXPECT_NE(stats.last_error.find("RESOURCE_EXHAUSTED"), std::string::npos) << stats.last_error;
    EXPECT_LE(stats.last_error.size(), 256u);
  }
}

// Random answers on one connection, as a broken or hostile Collector might send: random bytes
// (up to 96 KiB, past the 64 KiB answer limit) as field 1, which the exporter parses as
// partial_success. Each export ends (parsed, refused or over the limit) and is counted; the
// exporter keeps working; nothing crashes.
TEST(OtlpTraceExport, RandomAnswersOnOneConnection) {
  Service hostile("opentelemetry.proto.collector.trace.v1.TraceService");
  std::mt19937 random(39);
  std::mutex random_mutex;
  hostile.add_unary<ExportTraceServiceRequest, EchoResponse>(
      "Export",
      [&](ServerContext&, const ExportTraceServiceRequest&,
          EchoResponse& response) -> asio::awaitable<absl::Status> {
        std::lock_guard<std::mutex> lock(random_mutex);
        std::string bytes(random() % (96 * 1024) + 1, '\0');
        for (char& c : bytes) c = static_cast<char>(random());
        response.set_payload(std::move(bytes));  // field 1: partial_success's bytes
        co_return absl::OkStatus();
      });
  CollectorServer server(hostile);
  auto exporter = OtlpSpanExporter::create(options_for(server.endpoint()));
  ASSERT_TRUE(exporter.ok());
  auto processor = std::make_shared<BatchSpanProcessor>(*exporter);
  constexpr int kExports = 30;
  {
    TracedLoopback loopback(processor);
    for (int i = 0; i < kExports; ++i) {
      loopback.calls(1);
      processor->force_flush();
    }
  }
  const OtlpSpanExportStats stats = (*exporter)->stats();
  EXPECT_EQ(stats.exports_ok + stats.exports_failed, static_cast<std::uint64_t>(kExports));
  EXPECT_GT(stats.exports_failed, 0u);
  EXPECT_EQ(stats.spans_exported + stats.spans_rejected + stats.spans_failed, 3u * kExports);
  EXPECT_LE(stats.last_error.size(), 256u);
}

TEST(OtlpTraceExport, OptionsFromTheEnvironment) {
  setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4317", 1);
  setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4317", 1);
  setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://metrics:4317", 1);
  setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "API-Key=a%20b", 1);
  setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1234", 1);
  setenv("OTEL_SERVICE_NAME", "svc", 1);
  const OtlpSpanExporterOptions options = otlp_span_exporter_options_from_environment();
  unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
  unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  unsetenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
  unsetenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS");
  unsetenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT");
  unsetenv("OTEL_SERVICE_NAME");
  EXPECT_EQ(options.exporter.endpoint, "http://traces:4317");
  ASSERT_EQ(options.exporter.headers.size(), 1u);
  EXPECT_EQ(options.exporter.headers[0].first, "api-key");
  EXPECT_EQ(options.exporter.headers[0].second, "a b");
  EXPECT_EQ(options.exporter.timeout, std::chrono::milliseconds(1234));
  ASSERT_EQ(options.exporter.resource.size(), 1u);
  EXPECT_EQ(options.exporter.resource[0].second, "svc");
}

// ---- toxiproxy and the real OpenTelemetry Collector (interop) --------------------------------

// A Collector behind toxiproxy, black-holed (bytes dropped, the connection held open, as a
// crashed host does): each export ends by its deadline, the calls go on unslowed, spans past the
// queue are dropped; once the link is back, the next batches get through.
TEST(OtlpTraceToxiproxy, BlackHoledCollectorCostsCallsNothingAndRecovers) {
  if (!testing::Toxiproxy::installed()) {
    GTEST_SKIP() << testing::Toxiproxy::binary() << " not installed (scripts/install_peers.sh)";
  }
  testing::Toxiproxy toxiproxy;
  FakeCollector collector(FakeCollector::Mode::kAnswer);
  CollectorServer server(collector);
  const int proxy_port = toxiproxy.create_proxy("otlp", server.port());
  OtlpSpanExporterOptions options = options_for("http://127.0.0.1:" + std::to_string(proxy_port));
  options.exporter.timeout = std::chrono::milliseconds(300);
  auto exporter = OtlpSpanExporter::create(options);
  ASSERT_TRUE(exporter.ok());
  auto processor = std::make_shared<BatchSpanProcessor>(
      *exporter, BatchSpanProcessorOptions{.max_queue_size = 64,
                                           .max_export_batch_size = 16,
                                           .schedule_delay = std::chrono::milliseconds(10)});
  TracedLoopback loopback(processor);
  loopback.calls(1);
  processor->force_flush();
  // Connected through the proxy. The call's two spans may leave in one batch or two (the server's
  // span can end a batch's 10 ms before the client's).
  const std::uint64_t ok_before = (*exporter)->stats().exports_ok;
  ASSERT_GE(ok_before, 1u);

  toxiproxy.add_toxic("otlp", "hole-up", "timeout", "upstream", {{"timeout", 0}});
  toxiproxy.add_toxic("otlp", "hole-down", "timeout", "downstream", {{"timeout", 0}});
  const Clock::duration slowest = loopback.calls(200);
  const auto until = Clock::now() + std::chrono::seconds(10);
  while ((*exporter)->stats().exports_failed < 2 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LT(slowest, std::chrono::seconds(1));
  const std::uint64_t failed = (*exporter)->stats().exports_failed;
  EXPECT_GE(failed, 2u);  // each by its 300 ms deadline
  // The 600 spans past the queue (64) are dropped but for the batches (16 at most each) that
  // the failed exports took while the calls ran: one on a fast machine, a few more when 200 calls
  // take seconds (a fresh root's AddressSanitizer run dropped 508).
  const auto dropped = static_cast<std::int64_t>(processor->dropped());
  EXPECT_GE(dropped, 600 - 64 - 16 * static_cast<std::int64_t>(failed)) << failed << " failed";
  const int before = collector.received();

  toxiproxy.remove_toxic("otlp", "hole-up");
  toxiproxy.remove_toxic("otlp", "hole-down");
  const auto back = Clock::now() + std::chrono::seconds(20);
  while (collector.received() == before && Clock::now() < back) {
    loopback.calls(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(collector.received(), before);
  EXPECT_GT((*exporter)->stats().exports_ok, ok_before);
}

// OTLP JSON writes ids as hex, where protobuf's JSON reads bytes as base64: the parse took the
// hex digits (all base64 digits) as base64, which gives them back exactly, to be read as hex.
std::string id_from_json(const std::string& misread) {
  if (misread.empty()) return misread;
  std::string hex = absl::Base64Escape(misread);
  while (!hex.empty() && hex.back() == '=') hex.pop_back();
  return absl::HexStringToBytes(hex);
}

// otelcol_ferry with an OTLP/gRPC receiver on a free port and the file exporter writing the
// traces it receives to a file of its own.
class RealCollector {
 public:
  bool start() {
    const std::string binary = std::string(FERRY_PEERS_DIR) + "/bin/otelcol_ferry";
    if (std::string(FERRY_PEERS_DIR).empty() || access(binary.c_str(), X_OK) != 0) return false;
    dir_ =
        std::filesystem::temp_directory_path() / ("ferry_otlp_traces_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    port_ = testing::free_port();
    output_ = (dir_ / "traces.json").string();
    const std::string config = (dir_ / "config.yaml").string();
    std::ofstream(config) << "receivers:\n  otlp:\n    protocols:\n      grpc:\n"
                          << "        endpoint: 127.0.0.1:" << port_ << "\n"
                          << "exporters:\n  file:\n    path: " << output_ << "\n"
                          << "    flush_interval: 50ms\n"
                          << "service:\n  telemetry:\n    metrics:\n      level: none\n"
                          << "    logs:\n      level: warn\n"
                          << "  pipelines:\n    traces:\n      receivers: [otlp]\n"
                          << "      exporters: [file]\n";
    process_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{binary, "--config", config}, false);
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < until) {  // ready once its receiver takes connections
      asio::io_context io;
      asio::ip::tcp::socket socket(io);
      asio::error_code ec;
      socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)}, ec);
      if (!ec) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;  // the export will fail and say so
  }
  ~RealCollector() {
    process_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Every span the Collector wrote (OTLP JSON, a line per request), once it wrote `count`,
  // waiting up to 10 s.
  std::vector<pb::trace::v1::Span> written(std::size_t count) {
    std::vector<pb::trace::v1::Span> spans;
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < until) {
      std::ifstream in(output_);
      std::string line;
      std::vector<ExportTraceServiceRequest> requests;
      while (std::getline(in, line)) {
        ExportTraceServiceRequest request;
        google::protobuf::util::JsonParseOptions options;
        options.ignore_unknown_fields = true;
        if (google::protobuf::util::JsonStringToMessage(line, &request, options).ok()) {
          requests.push_back(std::move(request));
        }
      }
      spans = all_spans(requests);
      for (auto& span : spans) {
        span.set_trace_id(id_from_json(span.trace_id()));
        span.set_span_id(id_from_json(span.span_id()));
        span.set_parent_span_id(id_from_json(span.parent_span_id()));
      }
      if (spans.size() >= count) return spans;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the Collector wrote " << spans.size() << " spans to " << output_;
    return spans;
  }

 private:
  std::filesystem::path dir_;
  std::string output_;
  int port_ = 0;
  std::unique_ptr<testing::ChildProcess> process_;
};

TEST(OtlpTraceCollector, WritesTheSpansFerryExported) {
  RealCollector collector;
  if (!collector.start()) {
    GTEST_SKIP() << "otelcol_ferry not installed (scripts/install_peers.sh)";
  }
  auto exporter = OtlpSpanExporter::create(options_for(collector.endpoint()));
  ASSERT_TRUE(exporter.ok());
  auto processor = std::make_shared<BatchSpanProcessor>(*exporter);
  {
    TracedLoopback loopback(processor);
    loopback.calls(1, 1);
  }
  processor->force_flush();
  ASSERT_EQ((*exporter)->stats().spans_exported, 3u) << (*exporter)->stats().last_error;
  expect_a72_call(collector.written(3), /*ok=*/false);
}

}  // namespace
}  // namespace ferry::otlp_tracing_test
