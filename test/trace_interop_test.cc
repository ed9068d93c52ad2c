// One trace across implementations (interop): ferry's A72 spans (ferry::tracing, exported by
// ferry::otlp_tracing) and grpc-go's (google.golang.org/grpc/stats/opentelemetry with the
// OpenTelemetry Go SDK: test/peers/trace_go, scripts/install_peers.sh's trace_peer_go) both go
// to one OpenTelemetry Collector (otelcol_ferry), whose file output the test reads: for
// ferry client -> grpc-go server -> ferry server, and grpc-go client -> ferry server, every span
// of the chain carries one trace id and the right parent, once with W3C traceparent and once
// with grpc-trace-bin.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "asio/ip/tcp.hpp"
#include "faults/toxiproxy.h"
#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/otlp_tracing.h"
#include "ferry/server.h"
#include "ferry/tracing.h"
#include "google/protobuf/util/json_util.h"
#include "interop/test_service.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace ferry::trace_interop_test {
namespace {

namespace pb = opentelemetry::proto;
using Clock = std::chrono::steady_clock;

constexpr char kMethod[] = "grpc.testing.TestService.UnaryCall";

std::string peer_binary() { return std::string(FERRY_PEERS_DIR) + "/bin/trace_peer_go"; }
std::string collector_binary() { return std::string(FERRY_PEERS_DIR) + "/bin/otelcol_ferry"; }
bool installed(const std::string& path) {
  return !std::string(FERRY_PEERS_DIR).empty() && access(path.c_str(), X_OK) == 0;
}

// A span as the Collector wrote it, with the service that sent it and its ids in hex.
struct WrittenSpan {
  std::string service;
  std::string name;
  std::string trace_id;
  std::string span_id;
  std::string parent_span_id;
  int kind = 0;
};

// OTLP JSON writes ids as hex, protobuf's JSON reads bytes as base64: the parse took the hex
// digits (all base64 digits) as base64, which gives them back exactly.
std::string hex_id(const std::string& misread) {
  std::string hex = absl::Base64Escape(misread);
  while (!hex.empty() && hex.back() == '=') hex.pop_back();
  return hex;
}

std::string hex_of(const std::array<std::uint8_t, 16>& id) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(id.data()), id.size()));
}

// otelcol_ferry with an OTLP/gRPC receiver and the file exporter for traces.
class Collector {
 public:
  void start() {
    dir_ = std::filesystem::temp_directory_path() /
           ("ferry_trace_interop_" + std::to_string(getpid()) + "_" + std::to_string(counter_++));
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
        std::vector<std::string>{collector_binary(), "--config", config}, false);
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < until) {
      asio::io_context io;
      asio::ip::tcp::socket socket(io);
      asio::error_code ec;
      socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)}, ec);
      if (!ec) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Collector() {
    process_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // The spans of trace_id (hex) the Collector wrote, once there are `count`, waiting up to 30 s.
  std::vector<WrittenSpan> trace(const std::string& trace_id, std::size_t count) {
    std::vector<WrittenSpan> spans;
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < until) {
      spans.clear();
      std::ifstream in(output_);
      std::string line;
      while (std::getline(in, line)) {
        pb::collector::trace::v1::ExportTraceServiceRequest request;
        google::protobuf::util::JsonParseOptions options;
        options.ignore_unknown_fields = true;
        if (!google::protobuf::util::JsonStringToMessage(line, &request, options).ok()) continue;
        for (const auto& resource : request.resource_spans()) {
          std::string service;
          for (const auto& kv : resource.resource().attributes()) {
            if (kv.key() == "service.name") service = kv.value().string_value();
          }
          for (const auto& scope : resource.scope_spans()) {
            for (const auto& span : scope.spans()) {
              if (hex_id(span.trace_id()) != trace_id) continue;
              spans.push_back({service, span.name(), hex_id(span.trace_id()),
                               hex_id(span.span_id()),
                               span.parent_span_id().empty() ? "" : hex_id(span.parent_span_id()),
                               static_cast<int>(span.kind())});
            }
          }
        }
      }
      if (spans.size() >= count) return spans;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return spans;
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::string output_;
  int port_ = 0;
  std::unique_ptr<testing::ChildProcess> process_;
};

// The one span of `service` named `name`, or a failure.
const WrittenSpan* find(const std::vector<WrittenSpan>& spans, const std::string& service,
                        const std::string& name) {
  const WrittenSpan* found = nullptr;
  for (const WrittenSpan& span : spans) {
    if (span.service == service && span.name == name) {
      EXPECT_EQ(found, nullptr) << "two " << name << " spans from " << service;
      found = &span;
    }
  }
  EXPECT_NE(found, nullptr) << "no " << name << " span from " << service;
  return found;
}

std::string dump(const std::vector<WrittenSpan>& spans) {
  std::string out;
  for (const WrittenSpan& s : spans) {
    out += s.service + " " + s.name + " " + s.span_id + " <- " + s.parent_span_id + "\n";
  }
  return out;
}

struct Format {
  TracePropagation ferry;
  const char* go;
};

class TraceInterop : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    if (!installed(collector_binary()) || !installed(peer_binary())) {
      GTEST_SKIP() << "otelcol_ferry or trace_peer_go not installed (scripts/install_peers.sh)";
    }
    collector_.start();
    OtlpSpanExporterOptions otlp;
    otlp.exporter.endpoint = "http://" + collector_.address();
    otlp.exporter.resource = {{"service.name", "ferry"}};
    auto exporter = OtlpSpanExporter::create(otlp);
    ASSERT_TRUE(exporter.ok()) << exporter.status();
    processor_ = std::make_shared<BatchSpanProcessor>(
        *exporter, BatchSpanProcessorOptions{.schedule_delay = std::chrono::milliseconds(50)});
    tracing_.processor = processor_;
    tracing_.propagation = GetParam().ferry;
    ServerOptions options;
    options.interceptors.push_back(make_server_tracing(tracing_));
    server_ = std::make_unique<Server>(options);
    server_->add_service(service_);
    absl::StatusOr<int> port = server_->start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    server_port_ = *port;
  }
  void TearDown() override {
    if (server_ != nullptr) server_->shutdown(std::chrono::milliseconds(100));
    if (processor_ != nullptr) processor_->shutdown();
  }

  std::vector<std::string> peer(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {peer_binary(), "-otlp=" + collector_.address(),
                                     std::string("-propagation=") + GetParam().go};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  Collector collector_;
  std::shared_ptr<BatchSpanProcessor> processor_;
  TracingOptions tracing_;
  interop::TestServiceImpl service_;
  std::unique_ptr<Server> server_;
  int server_port_ = 0;
};

// ferry client -> grpc-go server -> ferry server: six spans, one trace, each the child of the
// one before: ferry's Sent > ferry's Attempt > grpc-go's Recv > grpc-go's Sent > grpc-go's
// Attempt > ferry's Recv.
TEST_P(TraceInterop, FerryClientThroughGrpcGoToFerryServer) {
  testing::ChildProcess go(peer({"serve", "-backend=127.0.0.1:" + std::to_string(server_port_)}),
                           /*capture_stdout=*/true);
  std::optional<std::string> line = go.read_line(std::chrono::seconds(30));
  ASSERT_TRUE(line && line->rfind("PORT ", 0) == 0) << line.value_or("(nothing)");
  ChannelOptions options;
  options.interceptors.push_back(make_client_tracing(tracing_));
  Channel channel("127.0.0.1:" + line->substr(5), options);
  grpc::testing::TestService::BlockingStub stub(channel);
  ClientContext ctx;
  ctx.set_timeout(std::chrono::seconds(20));
  grpc::testing::SimpleRequest request;
  request.set_response_size(3);
  grpc::testing::SimpleResponse response;
  const absl::Status status = stub.UnaryCall(ctx, request, response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.payload().body().size(), 3u);  // from the ferry server, through grpc-go
  const std::string trace_id = hex_of(ctx.trace_context().trace_id);
  // grpc-go's spans are flushed as it stops (within 20 s): exit status 0 says they were.
  const int exit_status = go.stop(SIGTERM, std::chrono::seconds(30));
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0)
      << "trace_peer_go serve ended with wait status " << exit_status;
  processor_->force_flush();

  const std::vector<WrittenSpan> spans = collector_.trace(trace_id, 6);
  ASSERT_EQ(spans.size(), 6u) << dump(spans);
  const std::string method = kMethod;
  const auto* ferry_sent = find(spans, "ferry", "Sent." + method);
  const auto* ferry_attempt = find(spans, "ferry", "Attempt." + method);
  const auto* go_recv = find(spans, "trace_peer_go_server", "Recv." + method);
  const auto* go_sent = find(spans, "trace_peer_go_server", "Sent." + method);
  const auto* go_attempt = find(spans, "trace_peer_go_server", "Attempt." + method);
  const auto* ferry_recv = find(spans, "ferry", "Recv." + method);
  ASSERT_FALSE(::testing::Test::HasFailure()) << dump(spans);
  EXPECT_EQ(ferry_sent->parent_span_id, "");
  EXPECT_EQ(ferry_attempt->parent_span_id, ferry_sent->span_id);
  EXPECT_EQ(go_recv->parent_span_id, ferry_attempt->span_id) << dump(spans);
  EXPECT_EQ(go_sent->parent_span_id, go_recv->span_id) << dump(spans);
  EXPECT_EQ(go_attempt->parent_span_id, go_sent->span_id) << dump(spans);
  EXPECT_EQ(ferry_recv->parent_span_id, go_attempt->span_id) << dump(spans);
  EXPECT_EQ(go_recv->kind, pb::trace::v1::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(ferry_recv->kind, pb::trace::v1::Span::SPAN_KIND_SERVER);
}

// grpc-go client -> ferry server: grpc-go's root > its Sent > its Attempt > ferry's Recv.
TEST_P(TraceInterop, GrpcGoClientToFerryServer) {
  testing::ChildProcess go(peer({"call", "-target=127.0.0.1:" + std::to_string(server_port_)}),
                           /*capture_stdout=*/true);
  std::optional<std::string> trace_line = go.read_line(std::chrono::seconds(30));
  ASSERT_TRUE(trace_line && trace_line->rfind("TRACE ", 0) == 0)
      << trace_line.value_or("(nothing)");
  std::optional<std::string> status_line = go.read_line(std::chrono::seconds(30));
  EXPECT_EQ(status_line.value_or("(nothing)"), "STATUS OK");
  const std::string trace_id = trace_line->substr(6);
  processor_->force_flush();

  const std::vector<WrittenSpan> spans = collector_.trace(trace_id, 4);
  ASSERT_EQ(spans.size(), 4u) << dump(spans);
  const std::string method = kMethod;
  const auto* root = find(spans, "trace_peer_go_client", "root");
  const auto* go_sent = find(spans, "trace_peer_go_client", "Sent." + method);
  const auto* go_attempt = find(spans, "trace_peer_go_client", "Attempt." + method);
  const auto* ferry_recv = find(spans, "ferry", "Recv." + method);
  ASSERT_FALSE(::testing::Test::HasFailure()) << dump(spans);
  EXPECT_EQ(go_sent->parent_span_id, root->span_id);
  EXPECT_EQ(go_attempt->parent_span_id, go_sent->span_id);
  EXPECT_EQ(ferry_recv->parent_span_id, go_attempt->span_id) << dump(spans);
}

INSTANTIATE_TEST_SUITE_P(Formats, TraceInterop,
                         ::testing::Values(Format{TracePropagation::kW3C, "w3c"},
                                           Format{TracePropagation::kGrpcTraceBin, "bin"}),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(info.param.go == std::string("w3c") ? "Traceparent"
                                                                                  : "GrpcTraceBin");
                         });

}  // namespace
}  // namespace ferry::trace_interop_test
