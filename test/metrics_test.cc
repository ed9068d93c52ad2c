// ferry::metrics (ferry/metrics.h): after known calls, the Prometheus endpoint (prometheus-cpp's
// Exposer, scraped over HTTP) reports the started counters, the completed calls by status and
// the message counts, on the server and the client.
#include "ferry/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "asio/connect.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/read.hpp"
#include "asio/write.hpp"
#include "ferry/authz.h"
#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/retry.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "support/echo_service.h"
#include "support/h2_frame.h"
#include "support/loopback.h"

namespace ferry::metrics_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::h2_frame;
using testing::Loopback;

// GET /metrics from 127.0.0.1:port (HTTP/1.0: the server closes when done); the body.
std::string scrape(int port) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  asio::write(socket, asio::buffer(request));
  std::string response;
  asio::error_code ec;
  asio::read(socket, asio::dynamic_buffer(response), ec);  // until EOF
  const std::size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? response : response.substr(body + 4);
}

// Whether the exposition has exactly this sample line.
bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

// The bucket bounds ("le" labels, +Inf left out) of the first series of histogram name whose
// labels include label, in the exposition's order.
std::vector<double> bucket_bounds(const std::string& text, const std::string& name,
                                  const std::string& label) {
  std::vector<double> bounds;
  std::istringstream lines(text);
  std::string line;
  std::string first_series;
  while (std::getline(lines, line)) {
    if (line.rfind(name + "_bucket{", 0) != 0 || line.find(label) == std::string::npos) continue;
    const std::size_t le = line.find("le=\"");
    if (le == std::string::npos) continue;
    const std::string series = line.substr(0, le);
    if (first_series.empty()) first_series = series;
    if (series != first_series) break;
    const std::string value = line.substr(le + 4, line.find('"', le + 4) - le - 4);
    if (value != "+Inf") bounds.push_back(std::stod(value));
  }
  return bounds;
}

// A server that speaks just enough HTTP/2 to refuse every stream (RST_STREAM REFUSED_STREAM):
// the server never processed the call, so gRPC retries it transparently, on every connection
// the client opens.
class RefusingServer {
 public:
  RefusingServer() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] { serve(); });
  }
  ~RefusingServer() {
    stop_ = true;
    asio::error_code ignored;
    {
      asio::io_context io;  // a connection wakes the blocking accept
      asio::ip::tcp::socket wake(io);
      wake.connect(acceptor_.local_endpoint(), ignored);
      thread_.join();
    }
  }
  std::string target() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  int refused() const { return refused_.load(); }

 private:
  // One connection at a time: the client's next connection waits in the backlog meanwhile.
  void serve() {
    while (!stop_) {
      asio::ip::tcp::socket socket(io_);
      asio::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stop_) return;
      std::string preface(24, '\0');
      asio::read(socket, asio::buffer(preface), ec);
      asio::write(socket, asio::buffer(h2_frame(0x4, 0, 0, "")), ec);  // SETTINGS
      while (!ec && !stop_) {
        unsigned char header[9];
        asio::read(socket, asio::buffer(header), ec);
        if (ec) break;
        std::string payload((header[0] << 16) | (header[1] << 8) | header[2], '\0');
        asio::read(socket, asio::buffer(payload), ec);
        if (ec) break;
        const std::uint32_t stream =
            ((header[5] & 0x7fu) << 24) | (header[6] << 16) | (header[7] << 8) | header[8];
        if (header[3] == 0x4 && (header[4] & 0x1) == 0) {  // SETTINGS: ACK it
          asio::write(socket, asio::buffer(h2_frame(0x4, 0x1, 0, "")), ec);
        } else if (header[3] == 0x1) {  // HEADERS: RST_STREAM REFUSED_STREAM (7)
          ++refused_;
          asio::write(socket, asio::buffer(h2_frame(0x3, 0, stream, std::string("\0\0\0\7", 4))),
                      ec);
        }
      }
    }
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::atomic<int> refused_{0};
  std::thread thread_;
};

// A registry recorded by the server and client metrics interceptors (in the options to build
// the Loopback with) and exposed over HTTP on port (0 when the exposer has no listening port).
struct MetricsSetup {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  ServerOptions server_options;
  ChannelOptions channel_options;
  prometheus::Exposer exposer{"127.0.0.1:0"};
  int port = 0;

  MetricsSetup() {
    server_options.interceptors.push_back(make_server_metrics(*registry));
    channel_options.interceptors.push_back(make_client_metrics(*registry));
    exposer.RegisterCollectable(registry);
    if (!exposer.GetListeningPorts().empty()) port = exposer.GetListeningPorts().front();
  }
};

TEST(Metrics, CountersAfterKnownCallsOnServerAndClient) {
  MetricsSetup metrics;
  ASSERT_GT(metrics.port, 0);

  Loopback loop(metrics.server_options, metrics.channel_options);
  loop.run([&]() -> asio::awaitable<void> {
    EchoRequest request;
    EchoResponse response;
    for (int i = 0; i < 3; ++i) {
      ClientContext ctx;
      EXPECT_TRUE((co_await loop.stub().Echo(ctx, request, response)).ok());
    }
    ClientContext failing;
    request.set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
    EXPECT_EQ((co_await loop.stub().Echo(failing, request, response)).code(),
              absl::StatusCode::kNotFound);
    ClientContext stream_ctx;
    EchoRequest expand;
    expand.set_response_count(4);
    ClientReader<EchoResponse> reader = co_await loop.stub().Expand(stream_ctx, expand);
    while (co_await reader.read(response)) {
    }
    EXPECT_TRUE((co_await reader.finish()).ok());
  });

  const std::string text = scrape(metrics.port);
  const std::string echo = "grpc_method=\"ferry.testing.Echo/Echo\"";
  const std::string expand = "grpc_method=\"ferry.testing.Echo/Expand\"";
  // The client's series carry the channel's target as gRFC A66 canonicalizes it (grpc_target,
  // after the labels prometheus-cpp sorts before it).
  const std::string target = "grpc_target=\"dns:///" + loop.target() + "\"";
  EXPECT_TRUE(has_line(text, "grpc_server_call_started_total{" + echo + "} 4")) << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_started_total{" + expand + "} 1")) << text;
  EXPECT_TRUE(
      has_line(text, "grpc_server_call_duration_seconds_count{" + echo + ",grpc_status=\"OK\"} 3"))
      << text;
  EXPECT_TRUE(has_line(
      text, "grpc_server_call_duration_seconds_count{" + echo + ",grpc_status=\"NOT_FOUND\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_sent_messages_total{" + expand + "} 4")) << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_rcvd_messages_total{" + expand + "} 1")) << text;
  EXPECT_TRUE(has_line(text, "grpc_client_attempt_started_total{" + echo + "," + target + "} 4"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_client_call_duration_seconds_count{" + echo +
                                 ",grpc_status=\"OK\"," + target + "} 3"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_client_attempt_duration_seconds_count{" + echo +
                                 ",grpc_status=\"NOT_FOUND\"," + target + "} 1"))
      << text;
  EXPECT_TRUE(
      has_line(text, "grpc_client_call_rcvd_messages_total{" + expand + "," + target + "} 4"))
      << text;
  // Calls that were not retried record no retry histograms (gRFC A96: 0 is not reported).
  EXPECT_EQ(text.find("grpc_client_call_retries_count"), std::string::npos) << text;
  EXPECT_EQ(text.find("grpc_client_call_retry_delay_seconds_count"), std::string::npos) << text;
  EXPECT_EQ(text.find("grpc_client_call_transparent_retries_count"), std::string::npos) << text;
}

// Each thread finds a call's series by the last (interceptor, target, method) it saw before it
// hashes them: calls of two methods interleaved, over two channels (two targets) through one
// interceptor, and through two interceptors (two registries), on the one client thread: each
// lands in its own series.
TEST(Metrics, InterleavedMethodsTargetsAndInterceptorsKeepTheirOwnSeries) {
  MetricsSetup metrics;
  ASSERT_GT(metrics.port, 0);
  auto other_registry = std::make_shared<prometheus::Registry>();
  Loopback loop(metrics.server_options, metrics.channel_options);
  ChannelOptions other_options;  // the first channel's interceptor, and one of its own
  other_options.interceptors = {metrics.channel_options.interceptors.front(),
                                make_client_metrics(*other_registry)};
  Channel other(loop.io(), "ipv4:" + loop.target(), other_options);  // a second target
  testing::Echo::Stub other_stub(other);
  constexpr int kRounds = 5;
  loop.run([&]() -> asio::awaitable<void> {
    EchoRequest request;
    EchoResponse response;
    EchoRequest expand;
    expand.set_response_count(2);
    for (int i = 0; i < kRounds; ++i) {
      ClientContext echo_ctx;
      EXPECT_TRUE((co_await loop.stub().Echo(echo_ctx, request, response)).ok());
      ClientContext expand_ctx;
      ClientReader<EchoResponse> reader = co_await loop.stub().Expand(expand_ctx, expand);
      while (co_await reader.read(response)) {
      }
      EXPECT_TRUE((co_await reader.finish()).ok());
      ClientContext other_ctx;
      EXPECT_TRUE((co_await other_stub.Echo(other_ctx, request, response)).ok());
    }
  });
  const std::string text = scrape(metrics.port);
  const std::string echo = "grpc_method=\"ferry.testing.Echo/Echo\"";
  const std::string expand = "grpc_method=\"ferry.testing.Echo/Expand\"";
  const std::string target = "grpc_target=\"dns:///" + loop.target() + "\"";
  // The server saw both channels' calls; each client interceptor only its own channel's.
  EXPECT_TRUE(has_line(text, "grpc_server_call_started_total{" + echo + "} 10")) << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_started_total{" + expand + "} 5")) << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_sent_messages_total{" + expand + "} 10")) << text;
  EXPECT_TRUE(has_line(text, "grpc_client_attempt_started_total{" + echo + "," + target + "} 5"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_client_attempt_started_total{" + expand + "," + target + "} 5"))
      << text;
  EXPECT_TRUE(
      has_line(text, "grpc_client_call_rcvd_messages_total{" + expand + "," + target + "} 10"))
      << text;
  const std::string other_target = "grpc_target=\"ipv4:" + loop.target() + "\"";
  EXPECT_TRUE(
      has_line(text, "grpc_client_attempt_started_total{" + echo + "," + other_target + "} 5"))
      << text;
  EXPECT_EQ(text.find("grpc_client_attempt_started_total{" + expand + "," + other_target),
            std::string::npos)
      << text;
  prometheus::Exposer other_exposer{"127.0.0.1:0"};
  other_exposer.RegisterCollectable(other_registry);
  ASSERT_FALSE(other_exposer.GetListeningPorts().empty());
  const std::string other_text = scrape(other_exposer.GetListeningPorts().front());
  EXPECT_TRUE(has_line(other_text,
                       "grpc_client_attempt_started_total{" + echo + "," + other_target + "} 5"))
      << other_text;
  EXPECT_TRUE(has_line(other_text, "grpc_client_call_duration_seconds_count{" + echo +
                                       ",grpc_status=\"OK\"," + other_target + "} 5"))
      << other_text;
  EXPECT_EQ(other_text.find("Expand"), std::string::npos) << other_text;
}

// An authorization policy after the metrics interceptor: its decisions are counted by policy,
// rule and decision, the denied calls included; the reload callback counts reloads by result.
TEST(Metrics, AuthorizationDecisionsAndReloads) {
  MetricsSetup metrics;
  ASSERT_GT(metrics.port, 0);
  auto authz = AuthorizationInterceptor::from_policy(R"({"name":"p",
      "deny_rules":[{"name":"no_chat","request":{"paths":["/ferry.testing.Echo/Chat"]}}],
      "allow_rules":[{"name":"echo","request":{"paths":["/ferry.testing.Echo/Echo"]}}]})");
  ASSERT_TRUE(authz.ok()) << authz.status();
  metrics.server_options.interceptors.push_back(*authz);
  Loopback loop(metrics.server_options, metrics.channel_options);
  loop.run([&]() -> asio::awaitable<void> {
    EchoRequest request;
    EchoResponse response;
    for (int i = 0; i < 2; ++i) {
      ClientContext ctx;
      EXPECT_TRUE((co_await loop.stub().Echo(ctx, request, response)).ok());
    }
    ClientContext expand_ctx;
    ClientReader<EchoResponse> reader = co_await loop.stub().Expand(expand_ctx, request);
    while (co_await reader.read(response)) {
    }
    EXPECT_EQ((co_await reader.finish()).code(), absl::StatusCode::kPermissionDenied);
  });
  auto on_reload = make_authorization_reload_metrics(*metrics.registry);
  on_reload(absl::OkStatus());
  on_reload(absl::InvalidArgumentError("\"name\" is not present"));
  on_reload(absl::InvalidArgumentError("\"name\" is not present"));

  const std::string text = scrape(metrics.port);
  EXPECT_TRUE(has_line(text,
                       "grpc_server_authz_decisions_total{authz_decision=\"allow\",authz_policy="
                       "\"p\",authz_rule=\"echo\",grpc_method=\"ferry.testing.Echo/Echo\"} 2"))
      << text;
  EXPECT_TRUE(has_line(text,
                       "grpc_server_authz_decisions_total{authz_decision=\"deny\",authz_policy="
                       "\"p\",authz_rule=\"\",grpc_method=\"ferry.testing.Echo/Expand\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_server_authz_policy_reloads_total{result=\"ok\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "grpc_server_authz_policy_reloads_total{result=\"error\"} 2")) << text;
}

// A call retried by its method's policy: the attempt metrics count its attempts, the call
// metrics the call (before, every attempt metric counted calls). Unary and server-streaming
// calls answered NOT_FOUND, which the policy retries, 3 attempts each.
TEST(Metrics, ClientAttemptsOfRetriedCalls) {
  MetricsSetup metrics;
  ASSERT_GT(metrics.port, 0);
  RetryPolicy& policy =
      metrics.channel_options.method_configs["/ferry.testing.Echo/"].retry_policy.emplace();
  policy.max_attempts = 3;
  policy.initial_backoff = std::chrono::milliseconds(1);
  policy.max_backoff = std::chrono::milliseconds(1);
  policy.retryable_status_codes = {absl::StatusCode::kNotFound};

  Loopback loop(metrics.server_options, metrics.channel_options);
  loop.run([&]() -> asio::awaitable<void> {
    EchoRequest request;
    request.set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
    EchoResponse response;
    ClientContext ctx;
    EXPECT_EQ((co_await loop.stub().Echo(ctx, request, response)).code(),
              absl::StatusCode::kNotFound);
    ClientContext stream_ctx;
    ClientReader<EchoResponse> reader = co_await loop.stub().Expand(stream_ctx, request);
    while (co_await reader.read(response)) {
    }
    EXPECT_EQ((co_await reader.finish()).code(), absl::StatusCode::kNotFound);
  });

  const std::string text = scrape(metrics.port);
  const std::string target = "grpc_target=\"dns:///" + loop.target() + "\"";
  for (const std::string method : {"Echo", "Expand"}) {
    const std::string m = "grpc_method=\"ferry.testing.Echo/" + method + "\"";
    const std::string not_found = m + ",grpc_status=\"NOT_FOUND\"," + target;
    EXPECT_TRUE(has_line(text, "grpc_server_call_started_total{" + m + "} 3")) << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_attempt_started_total{" + m + "," + target + "} 3"))
        << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_attempt_duration_seconds_count{" + not_found + "} 3"))
        << method << text;
    EXPECT_TRUE(has_line(
        text,
        "grpc_client_attempt_sent_total_compressed_message_size_bytes_count{" + not_found + "} 3"))
        << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_call_duration_seconds_count{" + not_found + "} 1"))
        << method << text;
    // gRFC A96: one retried call of 2 retries, in the [1, 2, 3, 4, 5] buckets; the backoff
    // between its attempts in grpc_client_call_retry_delay_seconds; no transparent retries.
    const std::string call = m + "," + target;
    EXPECT_TRUE(has_line(text, "grpc_client_call_retries_count{" + call + "} 1")) << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_call_retries_sum{" + call + "} 2")) << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_call_retries_bucket{" + call + ",le=\"1\"} 0"))
        << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_call_retries_bucket{" + call + ",le=\"2\"} 1"))
        << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_call_retry_delay_seconds_count{" + call + "} 1"))
        << method << text;
    EXPECT_EQ(text.find("grpc_client_call_transparent_retries_count{" + call), std::string::npos)
        << method << text;
  }
}

// The byte histograms (gRPC's *_total_compressed_message_size): one observation per call of its
// messages' payload bytes, so after calls of known sizes the _count and _sum are known: 3 unary
// calls of a 100-byte payload echoed (102 bytes each way, as protobuf encodes them), one
// server-streaming call of 4 responses of 300 bytes, a client-streaming call of 3 x 2000 bytes
// and a bidi call of 2 x 2 messages.
TEST(Metrics, MessageBytesPerCallOnServerAndClient) {
  MetricsSetup metrics;
  ASSERT_GT(metrics.port, 0);

  std::size_t echo_request_bytes = 0, echo_response_bytes = 0;
  std::size_t expand_request_bytes = 0, expand_response_bytes = 0;
  std::size_t chat_request_bytes = 0, chat_response_bytes = 0;
  std::size_t collect_request_bytes = 0, collect_response_bytes = 0;
  Loopback loop(metrics.server_options, metrics.channel_options);
  loop.run([&]() -> asio::awaitable<void> {
    EchoRequest request;
    request.set_payload(std::string(100, 'x'));
    EchoResponse response;
    for (int i = 0; i < 3; ++i) {
      ClientContext ctx;
      EXPECT_TRUE((co_await loop.stub().Echo(ctx, request, response)).ok());
      echo_request_bytes += request.ByteSizeLong();
      echo_response_bytes += response.ByteSizeLong();
    }
    ClientContext stream_ctx;
    EchoRequest expand;
    expand.set_response_count(4);
    expand.set_response_size(300);
    expand_request_bytes = expand.ByteSizeLong();
    ClientReader<EchoResponse> reader = co_await loop.stub().Expand(stream_ctx, expand);
    int got = 0;
    while (co_await reader.read(response)) {
      expand_response_bytes += response.ByteSizeLong();
      ++got;
    }
    EXPECT_EQ(got, 4);
    EXPECT_TRUE((co_await reader.finish()).ok());
    ClientContext collect_ctx;
    auto collect = co_await loop.stub().Collect(collect_ctx);
    for (int i = 0; i < 3; ++i) {
      request.set_payload(std::string(static_cast<std::size_t>(2000), 'k'));
      EXPECT_TRUE((co_await collect.write(request)).ok());
      collect_request_bytes += request.ByteSizeLong();
    }
    EchoResponse collected;
    EXPECT_TRUE((co_await collect.finish(collected)).ok());
    collect_response_bytes = collected.ByteSizeLong();
    ClientContext chat_ctx;
    auto chat = co_await loop.stub().Chat(chat_ctx);
    for (int i = 0; i < 2; ++i) {
      request.set_payload(std::string(static_cast<std::size_t>(10 + i * 1000), 'c'));
      EXPECT_TRUE((co_await chat.write(request)).ok());
      chat_request_bytes += request.ByteSizeLong();
      EXPECT_TRUE(co_await chat.read(response));
      chat_response_bytes += response.ByteSizeLong();
    }
    co_await chat.writes_done();
    EXPECT_FALSE(co_await chat.read(response));
    EXPECT_TRUE((co_await chat.finish()).ok());
  });
  ASSERT_EQ(echo_request_bytes, 3u * 102);  // the sizes the expectations below rest on
  ASSERT_EQ(expand_response_bytes, 4u * 303 + 3 * 2);

  const std::string text = scrape(metrics.port);
  const std::string target = ",grpc_target=\"dns:///" + loop.target() + "\"";
  auto expect_histogram = [&](const std::string& name, const std::string& method, std::size_t count,
                              std::size_t sum) {
    const bool client = name.rfind("grpc_client_", 0) == 0;
    const std::string labels = "{grpc_method=\"ferry.testing.Echo/" + method +
                               "\",grpc_status=\"OK\"" + (client ? target : "") + "} ";
    EXPECT_TRUE(has_line(text, name + "_count" + labels + std::to_string(count)))
        << name << " " << method << "\n"
        << text;
    EXPECT_TRUE(has_line(text, name + "_sum" + labels + std::to_string(sum)))
        << name << " " << method << " sum " << sum << "\n"
        << text;
  };
  const std::string server = "grpc_server_call_";
  const std::string client = "grpc_client_attempt_";
  const std::string sent = "sent_total_compressed_message_size_bytes";
  const std::string rcvd = "rcvd_total_compressed_message_size_bytes";
  expect_histogram(server + rcvd, "Echo", 3, echo_request_bytes);
  expect_histogram(server + sent, "Echo", 3, echo_response_bytes);
  expect_histogram(client + sent, "Echo", 3, echo_request_bytes);
  expect_histogram(client + rcvd, "Echo", 3, echo_response_bytes);
  expect_histogram(server + rcvd, "Expand", 1, expand_request_bytes);
  expect_histogram(server + sent, "Expand", 1, expand_response_bytes);
  expect_histogram(client + sent, "Expand", 1, expand_request_bytes);
  expect_histogram(client + rcvd, "Expand", 1, expand_response_bytes);
  expect_histogram(server + rcvd, "Collect", 1, collect_request_bytes);
  expect_histogram(server + sent, "Collect", 1, collect_response_bytes);
  expect_histogram(client + sent, "Collect", 1, collect_request_bytes);
  expect_histogram(client + rcvd, "Collect", 1, collect_response_bytes);
  expect_histogram(server + rcvd, "Chat", 1, chat_request_bytes);
  expect_histogram(server + sent, "Chat", 1, chat_response_bytes);
  expect_histogram(client + sent, "Chat", 1, chat_request_bytes);
  expect_histogram(client + rcvd, "Chat", 1, chat_response_bytes);
  // 102 bytes fall in the (0, 1024] bucket, 1218 (Expand's responses) in (1024, 2048].
  EXPECT_TRUE(has_line(text, server + sent +
                                 "_bucket{grpc_method=\"ferry.testing.Echo/Expand\","
                                 "grpc_status=\"OK\",le=\"1024\"} 0"))
      << text;
  EXPECT_TRUE(has_line(text, server + sent +
                                 "_bucket{grpc_method=\"ferry.testing.Echo/Expand\","
                                 "grpc_status=\"OK\",le=\"2048\"} 1"))
      << text;
}

// Each histogram's bucket bounds are gRPC's, exactly: A66's latency and size buckets, A96's
// retry counts.
TEST(Metrics, HistogramBucketsAreTheGrfcs) {
  MetricsSetup metrics;
  ASSERT_GT(metrics.port, 0);
  RetryPolicy& policy =
      metrics.channel_options.method_configs["/ferry.testing.Echo/"].retry_policy.emplace();
  policy.max_attempts = 2;
  policy.initial_backoff = std::chrono::milliseconds(1);
  policy.max_backoff = std::chrono::milliseconds(1);
  policy.retryable_status_codes = {absl::StatusCode::kNotFound};
  Loopback loop(metrics.server_options, metrics.channel_options);
  loop.run([&]() -> asio::awaitable<void> {
    EchoRequest request;
    request.set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
    EchoResponse response;
    ClientContext ctx;
    EXPECT_EQ((co_await loop.stub().Echo(ctx, request, response)).code(),
              absl::StatusCode::kNotFound);
  });
  const std::string text = scrape(metrics.port);
  const std::vector<double> latency = {
      0,     0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003, 0.004,
      0.005, 0.006,   0.008,   0.01,   0.013,  0.016,  0.02,   0.025, 0.03,  0.04,  0.05,
      0.065, 0.08,    0.1,     0.13,   0.16,   0.2,    0.25,   0.3,   0.4,   0.5,   0.65,
      0.8,   1,       2,       5,      10,     20,     50,     100};
  const std::vector<double> size = {0,        1024,      2048,       4096,      16384,
                                    65536,    262144,    1048576,    4194304,   16777216,
                                    67108864, 268435456, 1073741824, 4294967296};
  const std::string echo = "grpc_method=\"ferry.testing.Echo/Echo\"";
  for (const std::string name :
       {"grpc_server_call_duration_seconds", "grpc_client_attempt_duration_seconds",
        "grpc_client_call_duration_seconds", "grpc_client_call_retry_delay_seconds"}) {
    EXPECT_EQ(bucket_bounds(text, name, echo), latency) << name << "\n" << text;
  }
  for (const std::string name : {"grpc_server_call_sent_total_compressed_message_size_bytes",
                                 "grpc_server_call_rcvd_total_compressed_message_size_bytes",
                                 "grpc_client_attempt_sent_total_compressed_message_size_bytes",
                                 "grpc_client_attempt_rcvd_total_compressed_message_size_bytes"}) {
    EXPECT_EQ(bucket_bounds(text, name, echo), size) << name << "\n" << text;
  }
  EXPECT_EQ(bucket_bounds(text, "grpc_client_call_retries", echo),
            (std::vector<double>{1, 2, 3, 4, 5}))
      << text;
  // Each family says its type (and its help names the gRFC instrument it is).
  for (const std::string family :
       {"grpc_server_call_started_total counter", "grpc_server_call_duration_seconds histogram",
        "grpc_client_attempt_started_total counter", "grpc_client_call_retries histogram",
        "grpc_client_call_retry_delay_seconds histogram"}) {
    EXPECT_NE(text.find("# TYPE " + family + "\n"), std::string::npos) << family << "\n" << text;
  }
  EXPECT_NE(text.find("(grpc.client.call.retries)"), std::string::npos) << text;
}

// A server that refuses every stream: ferry retries the call transparently, 8 times at most,
// and grpc_client_call_transparent_retries records the 8 (A96's [1, 2, 3, 4, 5, 10] buckets);
// the attempts count 9, and the retry policy's histogram nothing.
TEST(Metrics, TransparentRetriesOfRefusedStreams) {
  RefusingServer server;
  auto registry = std::make_shared<prometheus::Registry>();
  ChannelOptions options;
  options.interceptors.push_back(make_client_metrics(*registry));
  {
    Channel channel(server.target(), options);  // on its own loop
    testing::EchoRequest request;
    testing::EchoResponse response;
    ClientContext ctx;
    ctx.set_deadline(std::chrono::steady_clock::now() + std::chrono::seconds(20));
    const absl::Status status =
        channel.call_blocking("/ferry.testing.Echo/Echo", ctx, request, response);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  }
  EXPECT_EQ(server.refused(), 9);

  prometheus::Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(registry);
  const std::string text = scrape(exposer.GetListeningPorts().front());
  const std::string call =
      "grpc_method=\"ferry.testing.Echo/Echo\",grpc_target=\"dns:///" + server.target() + "\"";
  EXPECT_TRUE(has_line(text, "grpc_client_attempt_started_total{" + call + "} 9")) << text;
  EXPECT_TRUE(has_line(text, "grpc_client_call_transparent_retries_count{" + call + "} 1")) << text;
  EXPECT_TRUE(has_line(text, "grpc_client_call_transparent_retries_sum{" + call + "} 8")) << text;
  EXPECT_TRUE(
      has_line(text, "grpc_client_call_transparent_retries_bucket{" + call + ",le=\"5\"} 0"))
      << text;
  EXPECT_TRUE(
      has_line(text, "grpc_client_call_transparent_retries_bucket{" + call + ",le=\"10\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_client_call_retry_delay_seconds_count{" + call + "} 1")) << text;
  EXPECT_EQ(text.find("grpc_client_call_retries_count"), std::string::npos) << text;
}

// An untrusted client sending calls to 300 random method paths creates no series: only the
// server's registered methods are labelled (gRFC A66 would say "other" for the rest; ferry's
// server interceptors, and so its metrics, see registered methods only, the unknown ones being
// answered UNIMPLEMENTED before any), so the exposition keeps its size, whatever the paths'
// length.
TEST(Metrics, RandomMethodPathsFromAClientAddNoServerSeries) {
  MetricsSetup metrics;
  ASSERT_GT(metrics.port, 0);
  Loopback loop(metrics.server_options, ChannelOptions{});
  auto one_known_call = [&]() -> asio::awaitable<void> {
    EchoRequest request;
    EchoResponse response;
    ClientContext ctx;
    EXPECT_TRUE((co_await loop.stub().Echo(ctx, request, response)).ok());
  };
  loop.run(one_known_call);
  const std::string before = scrape(metrics.port);
  std::mt19937 random(39);
  loop.run([&]() -> asio::awaitable<void> {
    EchoRequest request;
    EchoResponse response;
    for (int i = 0; i < 300; ++i) {
      std::string path = "/attacker.S" + std::to_string(random()) + "/";
      path += std::string(1 + random() % 2000, static_cast<char>('a' + random() % 26));
      if (i % 3 == 0) path = "/ferry.testing.Echo/" + path.substr(1, 40);  // a known service
      ClientContext ctx;
      EXPECT_EQ((co_await loop.channel().call(path, ctx, request, response)).code(),
                absl::StatusCode::kUnimplemented);
    }
  });
  loop.run(one_known_call);
  const std::string after = scrape(metrics.port);
  EXPECT_EQ(after.find("attacker"), std::string::npos);
  auto series = [](const std::string& text) {
    std::size_t n = 0;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) n += !line.empty() && line[0] != '#';
    return n;
  };
  EXPECT_EQ(series(after), series(before)) << after;
  EXPECT_TRUE(
      has_line(after, "grpc_server_call_started_total{grpc_method=\"ferry.testing.Echo/Echo\"} 2"))
      << after;
}

// The value of the sample line that starts with prefix ("name{labels}"), or -1.
double sample(const std::string& text, const std::string& prefix) {
  const std::size_t at = text.find("\n" + prefix + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + prefix.size() + 2));
}

// gRFC A94's subchannel instruments over a connection's life: it opens (an attempt succeeded, 1
// open), the server shuts down gracefully (a disconnection "GOAWAY NO_ERROR", then 0 open), a
// call meanwhile finds nothing listening (failed attempts), the server comes back on the same
// port and a call reconnects (2 succeeded, 1 open), and the channel's end disconnects it
// ("subchannel shutdown", 0 open).
TEST(Metrics, SubchannelConnectDisconnectReconnect) {
  using namespace std::chrono_literals;
  testing::EchoService service;
  auto server = std::make_unique<Server>();
  server->add_service(service);
  absl::StatusOr<int> port = server->start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = "127.0.0.1:" + std::to_string(*port);

  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(registry);
  const int scrape_port = exposer.GetListeningPorts().front();
  ChannelOptions options;
  options.interceptors.push_back(make_client_metrics(*registry));
  options.backoff.initial = 20ms;
  options.backoff.max = 100ms;
  const std::string labels = "{grpc_lb_locality=\"\",grpc_target=\"dns:///" + address + "\"}";
  const std::string open = "grpc_subchannel_open_connections" + labels;
  const std::string succeeded = "grpc_subchannel_connection_attempts_succeeded_total" + labels;
  const std::string failed = "grpc_subchannel_connection_attempts_failed_total" + labels;
  auto disconnections = [&](const std::string& reason) {
    return "grpc_subchannel_disconnections_total{grpc_disconnect_error=\"" + reason +
           "\",grpc_lb_locality=\"\",grpc_target=\"dns:///" + address + "\"}";
  };
  // Polls the exposition until line's value is want (events arrive on the channel's thread).
  auto wait_for = [&](const std::string& line, double want) {
    std::string text;
    for (int i = 0; i < 200; ++i) {
      text = scrape(scrape_port);
      if (sample(text, line) == want) return text;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << line << " never " << want << "\n" << text;
    return text;
  };
  auto call = [](Channel& channel, bool wait_for_ready) {
    EchoRequest request;
    EchoResponse response;
    ClientContext ctx;
    ctx.set_wait_for_ready(wait_for_ready);
    ctx.set_timeout(std::chrono::seconds(5));
    return channel.call_blocking("/ferry.testing.Echo/Echo", ctx, request, response);
  };
  {
    Channel channel(address, options);
    ASSERT_TRUE(call(channel, true).ok());
    wait_for(open, 1);
    EXPECT_EQ(sample(scrape(scrape_port), succeeded), 1);

    server->shutdown(1s);
    server.reset();
    std::string text = wait_for(open, 0);
    EXPECT_EQ(sample(text, disconnections("GOAWAY NO_ERROR")), 1) << text;

    EXPECT_EQ(call(channel, false).code(), absl::StatusCode::kUnavailable);
    text = scrape(scrape_port);
    EXPECT_GE(sample(text, failed), 1) << text;

    server = std::make_unique<Server>();
    server->add_service(service);
    ASSERT_TRUE(server->start("127.0.0.1", *port).ok());
    ASSERT_TRUE(call(channel, true).ok());
    text = wait_for(open, 1);
    EXPECT_EQ(sample(text, succeeded), 2) << text;
  }
  const std::string text = wait_for(open, 0);
  EXPECT_EQ(sample(text, disconnections("subchannel shutdown")), 1) << text;
  EXPECT_EQ(sample(text, disconnections("GOAWAY NO_ERROR")), 1) << text;
  EXPECT_EQ(sample(text, succeeded), 2) << text;
  server->shutdown(0ms);
}

// A client that calls whatever paths it is handed (a proxy forwarding a client's) labels its
// first 1000 methods by name and every other "other": 1100 distinct paths make 1001 series of
// grpc_client_attempt_started_total, "other" counting the last 100 calls, and a path of 8 KiB
// interleaved with the first ones is "other" too, not a label of 8 KiB.
TEST(Metrics, ClientMethodsBeyondTheLimitAreOther) {
  MetricsSetup metrics;
  ASSERT_GT(metrics.port, 0);
  Loopback loop(ServerOptions{}, metrics.channel_options);
  loop.run([&]() -> asio::awaitable<void> {
    EchoRequest request;
    EchoResponse response;
    for (int i = 0; i < 1100; ++i) {
      ClientContext ctx;
      std::string path = "/forwarded.Service/Method" + std::to_string(i);
      if (i == 10) path += std::string(8192, 'x');
      EXPECT_EQ((co_await loop.channel().call(path, ctx, request, response)).code(),
                absl::StatusCode::kUnimplemented);
    }
  });
  const std::string text = scrape(metrics.port);
  std::size_t series = 0;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    series += line.rfind("grpc_client_attempt_started_total{", 0) == 0;
  EXPECT_EQ(series, 1001u);
  EXPECT_EQ(text.find("xxxxxxxx"), std::string::npos);
  const std::string target = "grpc_target=\"dns:///" + loop.target() + "\"";
  EXPECT_TRUE(has_line(
      text, "grpc_client_attempt_started_total{grpc_method=\"other\"," + target + "} 100"));
  EXPECT_TRUE(has_line(text,
                       "grpc_client_attempt_started_total{grpc_method=\"forwarded.Service/"
                       "Method1000\"," +
                           target + "} 1"));
  EXPECT_TRUE(has_line(text,
                       "grpc_client_call_duration_seconds_count{grpc_method=\"other\","
                       "grpc_status=\"UNIMPLEMENTED\"," +
                           target + "} 100"));
  EXPECT_FALSE(has_line(text,
                        "grpc_client_attempt_started_total{grpc_method=\"forwarded.Service/"
                        "Method1001\"," +
                            target + "} 1"));
}

}  // namespace
}  // namespace ferry::metrics_test
