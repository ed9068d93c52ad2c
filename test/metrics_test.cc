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
#include "ferry/channel.h"
#include "ferry/interceptor.h"
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

TEST(Metrics, CountersAfterKnownCallsOnServerAndClient) {
  auto registry = std::make_shared<prometheus::Registry>();
  ServerOptions server_options;
  server_options.interceptors.push_back(make_server_metrics(*registry));
  ChannelOptions channel_options;
  channel_options.interceptors.push_back(make_client_metrics(*registry));
  prometheus::Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(registry);
  ASSERT_FALSE(exposer.GetListeningPorts().empty());
  const int metrics_port = exposer.GetListeningPorts().front();

  Loopback loop(server_options, channel_options);
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

  const std::string text = scrape(metrics_port);
  const std::string echo = "grpc_method=\"ferry.testing.Echo/Echo\"";
  const std::string expand = "grpc_method=\"ferry.testing.Echo/Expand\"";
  EXPECT_TRUE(has_line(text, "grpc_server_call_started_total{" + echo + "} 4")) << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_started_total{" + expand + "} 1")) << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_duration_seconds_count{" + echo +
                                 ",grpc_status=\"OK\"} 3"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_duration_seconds_count{" + echo +
                                 ",grpc_status=\"NOT_FOUND\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_sent_messages_total{" + expand + "} 4")) << text;
  EXPECT_TRUE(has_line(text, "grpc_server_call_rcvd_messages_total{" + expand + "} 1")) << text;
  EXPECT_TRUE(has_line(text, "grpc_client_attempt_started_total{" + echo + "} 4")) << text;
  EXPECT_TRUE(has_line(text, "grpc_client_call_duration_seconds_count{" + echo +
                                 ",grpc_status=\"OK\"} 3"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_client_attempt_duration_seconds_count{" + echo +
                                 ",grpc_status=\"NOT_FOUND\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "grpc_client_call_rcvd_messages_total{" + expand + "} 4")) << text;
}

}  // namespace
}  // namespace ferry
