// ferry's client speaking the Connect protocol and the JSON codec (ChannelOptions::protocol,
// ::codec) to ferry's own server: every call kind, metadata both ways, errors with their codes,
// messages and trailers, gzip, and GET for a method without side effects. (connectrpc's
// conformance suite judges the same client against connect-go's server: conformance_client.)
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/server.h"
#include "ferry/status_details.h"
#include "ferry/testing/echo.pb.h"
#include "google/protobuf/any.pb.h"
#include "support/loopback.h"

namespace ferry::connect_client_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
namespace echo_methods = testing::echo_methods;

ChannelOptions channel(ChannelProtocol protocol, ChannelCodec codec) {
  ChannelOptions options;
  options.protocol = protocol;
  options.codec = codec;
  return options;
}

// A service whose one method has no idempotency option (so no GET), and fails with rich details
// when asked.
Service probe_service() {
  Service probe("ferry.testing.Probe");
  probe.add_unary<EchoRequest, EchoResponse>(
      "Describe",
      [](ServerContext&, const EchoRequest& request,
         EchoResponse& response) -> asio::awaitable<absl::Status> {
        if (request.status_code() == 0) {
          response.set_payload("described");
          co_return absl::OkStatus();
        }
        absl::Status failed(static_cast<absl::StatusCode>(request.status_code()), "with details");
        // google.rpc.Status{code, message, details: [Any{"type.googleapis.com/x.Y", "\x01\x02"}]}.
        google::protobuf::Any any;
        any.set_type_url("type.googleapis.com/x.Y");
        any.set_value(std::string("\x01\x02", 2));
        const std::string detail = any.SerializeAsString();
        std::string status = {'\x08', static_cast<char>(request.status_code())};
        status += "\x12\x0cwith details";
        status += '\x1a';
        status += static_cast<char>(detail.size());
        status += detail;
        set_status_details(failed, status);
        co_return failed;
      });
  return probe;
}

class ConnectClient : public ::testing::TestWithParam<ChannelCodec> {
 protected:
  ChannelOptions options() const { return channel(ChannelProtocol::kConnect, GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(Codecs, ConnectClient,
                         ::testing::Values(ChannelCodec::kProto, ChannelCodec::kJson),
                         [](const auto& info) {
                           return info.param == ChannelCodec::kJson ? "json" : "proto";
                         });

// Promise: a unary call is a Connect unary request (application/proto or application/json),
// its metadata arrives as headers and comes back as headers and "trailer-" trailers.
TEST_P(ConnectClient, UnaryCarriesMetadataBothWays) {
  const Service probe = probe_service();
  Loopback loop({}, options(), &probe);
  EchoResponse described;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    co_return co_await loop.channel().call("/ferry.testing.Probe/Describe", ctx, EchoRequest(),
                                           described);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(described.payload(), "described");

  ClientContext ctx;
  ctx.add_metadata("initial-a", "1");
  ctx.add_metadata("trailing-b-bin", std::string("\x00\xff", 2));
  EchoRequest request;
  request.set_payload("over Connect");
  EchoResponse response;
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), "over Connect");
  EXPECT_EQ(ctx.initial_metadata().get("initial-a"), "1");
  EXPECT_EQ(ctx.trailing_metadata().get("trailing-b-bin"), std::string("\x00\xff", 2));
}

// Promise: a unary error arrives with its code and message from the JSON error body, its
// trailers, and its details as the status's google.rpc.Status.
TEST_P(ConnectClient, UnaryErrorsKeepCodeMessageTrailersAndDetails) {
  const Service probe = probe_service();
  Loopback loop({}, options(), &probe);
  ClientContext ctx;
  ctx.add_metadata("trailing-x", "y");
  EchoRequest failing;
  failing.set_status_code(static_cast<int>(absl::StatusCode::kPermissionDenied));
  failing.set_status_message("no, über");
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, failing, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "no, über");
  EXPECT_EQ(ctx.trailing_metadata().get("trailing-x"), "y");

  EchoRequest detailed;
  detailed.set_status_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext c;
    co_return co_await loop.channel().call("/ferry.testing.Probe/Describe", c, detailed, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "with details");
  std::optional<std::string> details = status_details(s);
  ASSERT_TRUE(details.has_value());
  EXPECT_NE(details->find("type.googleapis.com/x.Y"), std::string::npos);
  EXPECT_NE(details->find(std::string("\x12\x02\x01\x02", 4)), std::string::npos);
}

// Promise: server-, client- and bidi-streaming calls are Connect streams, each message enveloped,
// the status and trailers from the end-of-stream message; an error ends the stream with its code.
TEST_P(ConnectClient, StreamsOfEveryKind) {
  Loopback loop({}, options());
  ClientContext expand_ctx;
  expand_ctx.add_metadata("trailing-t", "after");
  EchoRequest request;
  request.set_response_count(3);
  request.set_response_size(10);
  int expanded = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(echo_methods::kExpand, expand_ctx, request);
    EchoResponse r;
    while (co_await stream.read(r)) ++expanded;
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(expanded, 3);
  EXPECT_EQ(expand_ctx.trailing_metadata().get("trailing-t"), "after");

  EchoResponse collected;
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ClientStream stream =
        co_await loop.channel().open(echo_methods::kCollect, RpcKind::kClientStreaming, ctx);
    stream.expect_single_response();
    EchoRequest part;
    part.set_payload("abcd");
    for (int i = 0; i < 4; ++i) {
      if (absl::Status w = co_await stream.write(part); !w.ok()) co_return w;
    }
    co_return co_await stream.finish_with_response(collected);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(collected.received_messages(), 4);
  EXPECT_EQ(collected.received_bytes(), 16);

  int chatted = 0;
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ClientStream stream =
        co_await loop.channel().open(echo_methods::kChat, RpcKind::kBidiStreaming, ctx);
    for (int i = 0; i < 3; ++i) {
      EchoRequest said;
      said.set_payload("turn " + std::to_string(i));
      if (absl::Status w = co_await stream.write(said); !w.ok()) co_return w;
      EchoResponse heard;
      if (!co_await stream.read(heard)) break;
      if (heard.payload() == said.payload()) ++chatted;
    }
    co_await stream.writes_done();
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(chatted, 3);

  EchoRequest failing;
  failing.set_response_count(1);
  failing.set_status_code(static_cast<int>(absl::StatusCode::kResourceExhausted));
  failing.set_status_message("stream error");
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ClientStream stream = co_await loop.channel().open(echo_methods::kExpand, ctx, failing);
    EchoResponse r;
    while (co_await stream.read(r)) {
    }
    co_return co_await stream.finish();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "stream error");
}

// Promise: gzip compresses the request (content-encoding for unary, per envelope for streams)
// and the server's answer comes back readable.
TEST_P(ConnectClient, GzipBothWays) {
  Loopback loop({}, options());
  EchoRequest request;
  request.set_payload(std::string(4096, 'z'));
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ctx.set_compression(Compression::kGzip);
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), request.payload());

  int received = 0;
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ctx.set_compression(Compression::kGzip);
    ClientStream stream =
        co_await loop.channel().open(echo_methods::kChat, RpcKind::kBidiStreaming, ctx);
    if (absl::Status w = co_await stream.write(request); !w.ok()) co_return w;
    co_await stream.writes_done();
    EchoResponse r;
    while (co_await stream.read(r)) received += r.payload() == request.payload();
    co_return co_await stream.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(received, 1);
}

// Promise: with set_http_get, a unary call goes as a GET: Echo (NO_SIDE_EFFECTS) answers it,
// a method without that option answers 405, which the client reports as UNKNOWN.
TEST_P(ConnectClient, GetOnlyForMethodsWithoutSideEffects) {
  const Service probe = probe_service();
  Loopback loop({}, options(), &probe);
  EchoRequest request;
  request.set_payload("by GET");
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ctx.set_http_get(true);
    ctx.set_compression(Compression::kGzip);
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), "by GET");

  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientContext ctx;
    ctx.set_http_get(true);
    co_return co_await loop.channel().call("/ferry.testing.Probe/Describe", ctx, request, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown) << s;
  EXPECT_NE(s.message().find("405"), std::string::npos) << s;
}

// Promise: gRPC and gRPC-Web speak JSON too (application/grpc+json, application/grpc-web+json).
TEST(JsonClient, GrpcAndGrpcWebSpeakJson) {
  const Service probe = probe_service();
  for (ChannelProtocol protocol : {ChannelProtocol::kGrpc, ChannelProtocol::kGrpcWeb}) {
    Loopback loop({}, channel(protocol, ChannelCodec::kJson), &probe);
    EchoResponse described;
    absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
      ClientContext ctx;
      co_return co_await loop.channel().call("/ferry.testing.Probe/Describe", ctx, EchoRequest(),
                                             described);
    });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(described.payload(), "described");
    EchoRequest request;
    request.set_payload("json");
    EchoResponse response;
    s = loop.run([&]() -> asio::awaitable<absl::Status> {
      ClientContext ctx;
      co_return co_await loop.stub().Echo(ctx, request, response);
    });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(response.payload(), "json");
  }
}

}  // namespace
}  // namespace ferry::connect_client_test
