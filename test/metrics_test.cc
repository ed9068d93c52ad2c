// ferry::metrics (ferry/metrics.h): after known calls, the Prometheus endpoint (prometheus-cpp's
// Exposer, scraped over HTTP) reports the started counters, the completed calls by status and
// the message counts, on the server and the client.
#include "ferry/metrics.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

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
#include "support/loopback.h"

namespace ferry {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
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
  EXPECT_TRUE(has_line(text, "grpc_client_attempt_started_total{" + echo + "} 4")) << text;
  EXPECT_TRUE(
      has_line(text, "grpc_client_call_duration_seconds_count{" + echo + ",grpc_status=\"OK\"} 3"))
      << text;
  EXPECT_TRUE(has_line(
      text, "grpc_client_attempt_duration_seconds_count{" + echo + ",grpc_status=\"NOT_FOUND\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_client_call_rcvd_messages_total{" + expand + "} 4")) << text;
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
  for (const std::string method : {"Echo", "Expand"}) {
    const std::string m = "grpc_method=\"ferry.testing.Echo/" + method + "\"";
    const std::string not_found = m + ",grpc_status=\"NOT_FOUND\"";
    EXPECT_TRUE(has_line(text, "grpc_server_call_started_total{" + m + "} 3")) << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_attempt_started_total{" + m + "} 3")) << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_attempt_duration_seconds_count{" + not_found + "} 3"))
        << method << text;
    EXPECT_TRUE(has_line(
        text,
        "grpc_client_attempt_sent_total_compressed_message_size_bytes_count{" + not_found + "} 3"))
        << method << text;
    EXPECT_TRUE(has_line(text, "grpc_client_call_duration_seconds_count{" + not_found + "} 1"))
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
  auto expect_histogram = [&](const std::string& name, const std::string& method, std::size_t count,
                              std::size_t sum) {
    const std::string labels =
        "{grpc_method=\"ferry.testing.Echo/" + method + "\",grpc_status=\"OK\"} ";
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

}  // namespace
}  // namespace ferry
