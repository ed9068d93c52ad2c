// Loopback tests of unary calls: payloads of every size, metadata, every status code, deadlines,
// unknown methods, limits, connection failures and the blocking API.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "asio/ip/tcp.hpp"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"

namespace ferry::unary_call_test {
namespace {

using namespace std::chrono_literals;
using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using namespace testing::echo_methods;

TEST(UnaryCall, EchoesThePayload) {
  Loopback loop;
  EchoRequest request;
  request.set_payload("hello ferry");
  EchoResponse response;
  ClientContext ctx;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), "hello ferry");
}

TEST(UnaryCall, ManySequentialCallsReuseOneConnection) {
  Loopback loop;
  int ok = loop.run([&]() -> asio::awaitable<int> {
    int n = 0;
    for (int i = 0; i < 200; ++i) {
      EchoRequest request;
      request.set_payload(std::string(static_cast<std::size_t>(i), 'x'));
      EchoResponse response;
      ClientContext ctx;
      absl::Status s = co_await loop.stub().Echo(ctx, request, response);
      if (s.ok() && response.payload() == request.payload()) ++n;
    }
    co_return n;
  });
  EXPECT_EQ(ok, 200);
}

class UnarySizes : public ::testing::TestWithParam<std::size_t> {};

TEST_P(UnarySizes, RoundTripsPayload) {
  ServerOptions server_options;
  server_options.max_receive_message_size = 64 << 20;
  ChannelOptions channel_options;
  channel_options.max_receive_message_size = 64 << 20;
  Loopback loop(server_options, channel_options);
  EchoRequest request;
  std::string payload(GetParam(), '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31 + 7);
  request.set_payload(payload);
  EchoResponse response;
  ClientContext ctx;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(response.payload().size(), payload.size());
  const auto mismatch = std::mismatch(payload.begin(), payload.end(), response.payload().begin());
  EXPECT_TRUE(mismatch.first == payload.end())
      << "payload of " << GetParam() << " bytes differs first at byte "
      << (mismatch.first - payload.begin());
}

INSTANTIATE_TEST_SUITE_P(Sizes, UnarySizes,
                         ::testing::Values(0, 1, 1024, 65535, 65536, 100000, 1 << 20, 16 << 20));

TEST(UnaryCall, MetadataRoundTripsIncludingBinary) {
  Loopback loop;
  EchoRequest request;
  EchoResponse response;
  ClientContext ctx;
  const std::string binary("\x00\xff\xab\x01 bytes", 10);
  ctx.add_metadata("initial-text", "some value");
  ctx.add_metadata("initial-data-bin", binary);
  ctx.add_metadata("trailing-more-bin", std::string("\xab\xab\xab", 3));
  ctx.add_metadata("trailing-text", "v1");
  ctx.add_metadata("trailing-text", "v2");
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ctx.initial_metadata().get("initial-text"), "some value");
  EXPECT_EQ(ctx.initial_metadata().get("initial-data-bin"), binary);
  EXPECT_EQ(ctx.trailing_metadata().get("trailing-more-bin"), std::string("\xab\xab\xab", 3));
  auto values = ctx.trailing_metadata().get_all("trailing-text");
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0], "v1");
  EXPECT_EQ(values[1], "v2");
}

// gRPC's ASCII values may start or end with a space (RFC 9113 §8.2.1 calls such a field
// malformed; grpc-go and gRPC C++ take it, and so does ferry's HTTP/2 both ways): metadata and a
// status message so padded arrive as sent.
TEST(UnaryCall, ValuesThatStartOrEndWithASpaceRoundTrip) {
  Loopback loop;
  EchoRequest request;
  EchoResponse response;
  ClientContext ctx;
  ctx.add_metadata("initial-text", " lead");
  ctx.add_metadata("trailing-text", "trail ");
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ctx.initial_metadata().get("initial-text"), " lead");
  EXPECT_EQ(ctx.trailing_metadata().get("trailing-text"), "trail ");

  request.set_status_code(5);
  request.set_status_message(" padded status ");
  ClientContext failing;
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(failing, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_EQ(s.message(), " padded status ");
}

TEST(UnaryCall, InvalidMetadataFailsTheCallLocally) {
  Loopback loop;
  EchoRequest request;
  EchoResponse response;
  ClientContext ctx;
  ctx.add_metadata("Upper-Case", "x");
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(UnaryCall, EveryStatusCodeAndMessageRoundTrips) {
  Loopback loop;
  loop.run([&]() -> asio::awaitable<void> {
    for (int code = 1; code <= 16; ++code) {
      EchoRequest request;
      request.set_status_code(code);
      request.set_status_message("status " + std::to_string(code) + " ☺ 100% \r\n\t done");
      EchoResponse response;
      ClientContext ctx;
      absl::Status s = co_await loop.stub().Echo(ctx, request, response);
      EXPECT_EQ(static_cast<int>(s.code()), code);
      EXPECT_EQ(s.message(), request.status_message());
    }
  });
}

TEST(UnaryCall, UnknownMethodAndServiceAreUnimplemented) {
  Loopback loop;
  EchoRequest request;
  EchoResponse response;
  loop.run([&]() -> asio::awaitable<void> {
    ClientContext a;
    absl::Status s = co_await loop.channel().call("/ferry.testing.Echo/Nope", a, request, response);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(s.message().find("unknown method Nope"), std::string::npos) << s;
    ClientContext b;
    s = co_await loop.channel().call("/no.Such/Method", b, request, response);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(s.message().find("unknown service no.Such"), std::string::npos) << s;
    // The connection is still fine afterwards.
    ClientContext c;
    s = co_await loop.stub().Echo(c, request, response);
    EXPECT_TRUE(s.ok()) << s;
  });
}

TEST(UnaryCall, ClientDeadlineExpiresWhileTheServerSleeps) {
  Loopback loop;
  EchoRequest request;
  request.set_delay_ms(2000);
  EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(50ms);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
}

TEST(UnaryCall, DeadlineThatAlreadyPassedFailsWithoutSending) {
  Loopback loop;
  EchoRequest request;
  EchoResponse response;
  ClientContext ctx;
  ctx.set_deadline(std::chrono::steady_clock::now() - 1s);
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

TEST(UnaryCall, GenerousDeadlineSucceeds) {
  Loopback loop;
  EchoRequest request;
  request.set_delay_ms(20);
  EchoResponse response;
  ClientContext ctx;
  ctx.set_timeout(10s);
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(UnaryCall, OversizedRequestIsResourceExhaustedOnTheServer) {
  ServerOptions options;
  options.max_receive_message_size = 1000;
  Loopback loop(options);
  EchoRequest request;
  request.set_payload(std::string(5000, 'x'));
  EchoResponse response;
  ClientContext ctx;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

TEST(UnaryCall, OversizedResponseIsResourceExhaustedOnTheClient) {
  ChannelOptions options;
  options.max_receive_message_size = 1000;
  Loopback loop({}, options);
  EchoRequest request;
  request.set_response_size(5000);
  EchoResponse response;
  ClientContext ctx;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

TEST(UnaryCall, RequestOverTheSendLimitFailsBeforeSending) {
  ChannelOptions options;
  options.max_send_message_size = 100;
  Loopback loop({}, options);
  EchoRequest request;
  request.set_payload(std::string(500, 'x'));
  EchoResponse response;
  ClientContext ctx;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

TEST(UnaryCall, NothingListeningIsUnavailable) {
  asio::io_context io;
  // Bind and close a socket to get a port that refuses connections.
  int port;
  {
    asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }
  Channel channel(io, "127.0.0.1:" + std::to_string(port));
  EchoRequest request;
  EchoResponse response;
  ClientContext ctx;
  auto future = asio::co_spawn(io, channel.call(kEcho, ctx, request, response), asio::use_future);
  while (future.wait_for(0s) != std::future_status::ready) io.run_one_for(50ms);
  io.restart();  // the loop stopped itself when the call completed: run what that posted
  io.poll();
  absl::Status s = future.get();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

// gRPC's cardinality rule, both ways: one request and one response on a unary call, else
// UNIMPLEMENTED (gRPC's doc/statuscodes.md).
TEST(UnaryCall, SecondRequestMessageIsUnimplemented) {
  Loopback loop;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ClientStream stream = co_await loop.channel().open(kEcho, ctx);  // Echo is unary
    EchoRequest request;
    request.set_payload("one");
    (void)co_await stream.write(request);
    request.set_payload("two");
    (void)co_await stream.write_last(request);
    EchoResponse response;
    while (co_await stream.read(response)) {
    }
    co_return co_await stream.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("cardinality"), absl::string_view::npos) << s;
}

TEST(UnaryCall, SecondResponseMessageIsUnimplemented) {
  // A server-streaming handler that writes twice, called as if it were unary.
  Service twice("ferry.testing.Twice");
  twice.add_server_streaming<EchoRequest, EchoResponse>(
      "Two",
      [](ServerContext&, const EchoRequest&,
         ServerWriter<EchoResponse>& writer) -> asio::awaitable<absl::Status> {
        EchoResponse response;
        for (int i = 0; i < 2; ++i) {
          if (absl::Status s = co_await writer.write(response); !s.ok()) co_return s;
        }
        co_return absl::OkStatus();
      });
  Loopback loop({}, {}, &twice);
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    EchoRequest request;
    EchoResponse response;
    co_return co_await loop.channel().call("/ferry.testing.Twice/Two", ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("cardinality"), absl::string_view::npos) << s;
}

TEST(UnaryCall, BlockingApiFromAnotherThread) {
  ServerOptions options;
  options.num_threads = 1;
  Server server(options);
  testing::EchoService echo;
  server.add_service(echo);
  absl::StatusOr<int> port = server.start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  Channel channel("127.0.0.1:" + std::to_string(*port));  // runs its own thread
  testing::Echo::BlockingStub echo_stub(channel);
  for (int i = 0; i < 20; ++i) {
    EchoRequest request;
    request.set_payload("blocking " + std::to_string(i));
    EchoResponse response;
    ClientContext ctx;
    absl::Status s = echo_stub.Echo(ctx, request, response);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(response.payload(), request.payload());
  }
  server.shutdown(1s);
}

TEST(UnaryCall, ServerReconnectsAfterTheConnectionIsLost) {
  // First server: serve one call, then shut down. Second server on the same port: the channel
  // must reconnect on the next call.
  ServerOptions options;
  options.num_threads = 1;
  testing::EchoService echo;
  auto first = std::make_unique<Server>(options);
  first->add_service(echo);
  absl::StatusOr<int> port = first->start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  Channel channel("127.0.0.1:" + std::to_string(*port));
  testing::Echo::BlockingStub echo_stub(channel);
  EchoRequest request;
  request.set_payload("one");
  EchoResponse response;
  ClientContext ctx1;
  ASSERT_TRUE(echo_stub.Echo(ctx1, request, response).ok());
  first->shutdown(100ms);
  first.reset();

  ClientContext ctx2;
  absl::Status down = echo_stub.Echo(ctx2, request, response);
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;

  Server second(options);
  second.add_service(echo);
  ASSERT_TRUE(second.start("127.0.0.1", *port).ok());
  // The failed attempt left the channel in TRANSIENT_FAILURE until its back-off passes (gRPC's
  // connection back-off): a call that should ride that out waits for ready.
  ClientContext ctx3;
  ctx3.set_wait_for_ready(true);
  ctx3.set_timeout(10s);
  absl::Status s = echo_stub.Echo(ctx3, request, response);
  EXPECT_TRUE(s.ok()) << s;
  second.shutdown(100ms);
}

}  // namespace
}  // namespace ferry::unary_call_test
