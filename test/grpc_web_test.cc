// gRPC-Web and the JSON codec on ferry's server, byte for byte over HTTP/2 (connectrpc's
// conformance suite covers both for every call kind with its own client; these cases pin what it
// does not send: gRPC-Web's base64 text bodies, in one piece and in padded pieces, their
// malformed forms, the trailer frame's syntax, and codecs ferry does not speak).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/frame.h"
#include "ferry/testing/echo.pb.h"
#include "support/echo_service.h"
#include "support/loopback.h"
#include "support/raw_call.h"

namespace ferry::grpc_web_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using testing::RawCall;
using testing::RawResponse;
namespace echo_methods = testing::echo_methods;

using Headers = std::vector<std::pair<std::string, std::string>>;

std::string frame(std::uint8_t flags, const std::string& payload) {
  std::string out(kFramePrefixSize, '\0');
  write_frame_prefix(reinterpret_cast<std::uint8_t*>(out.data()), false,
                     static_cast<std::uint32_t>(payload.size()));
  out[0] = static_cast<char>(flags);
  return out + payload;
}

std::string request_frame(const std::string& payload, int status_code = 0) {
  EchoRequest request;
  request.set_payload(payload);
  request.set_status_code(status_code);
  if (status_code != 0) request.set_status_message("as asked");
  return frame(0, request.SerializeAsString());
}

struct Frame {
  std::uint8_t flags;
  std::string payload;
};

// The body's frames; fails the test on a cut frame.
std::vector<Frame> frames_of(const std::string& body) {
  std::vector<Frame> out;
  std::size_t at = 0;
  while (at < body.size()) {
    EXPECT_GE(body.size() - at, kFramePrefixSize);
    if (body.size() - at < kFramePrefixSize) break;
    const std::size_t n =
        read_frame_length(reinterpret_cast<const std::uint8_t*>(body.data() + at));
    EXPECT_LE(n, body.size() - at - kFramePrefixSize);
    out.push_back({static_cast<std::uint8_t>(body[at]), body.substr(at + kFramePrefixSize, n)});
    at += kFramePrefixSize + n;
  }
  return out;
}

const Headers kWeb = {{"content-type", "application/grpc-web+proto"}, {"x-grpc-web", "1"}};

TEST(GrpcWeb, UnaryResponseEndsWithATrailerFrame) {
  Loopback loop;
  Headers headers = kWeb;
  headers.push_back({"initial-a", "1"});
  headers.push_back({"trailing-b", "2"});
  RawCall call(loop, echo_methods::kEcho, headers, request_frame("hello"));
  const RawResponse& r = call.wait();
  EXPECT_EQ(r.header(":status"), "200");
  EXPECT_EQ(r.header("content-type"), "application/grpc-web+proto");
  EXPECT_EQ(r.header("initial-a"), "1");
  EXPECT_EQ(r.header_blocks, 1) << "no HTTP trailers: a browser cannot read them";
  EXPECT_EQ(r.header("grpc-status"), std::nullopt);
  const std::vector<Frame> frames = frames_of(r.data);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].flags, 0);
  EchoResponse response;
  ASSERT_TRUE(response.ParseFromString(frames[0].payload));
  EXPECT_EQ(response.payload(), "hello");
  EXPECT_EQ(frames[1].flags, 0x80);
  EXPECT_EQ(frames[1].payload, "grpc-status: 0\r\ntrailing-b: 2\r\n");
}

TEST(GrpcWeb, ErrorAfterHeadersGoesInTheTrailerFrame) {
  Loopback loop;
  Headers headers = kWeb;
  headers.push_back({"initial-a", "1"});  // initial metadata: no Trailers-Only response
  RawCall call(loop, echo_methods::kEcho, headers,
               request_frame("x", static_cast<int>(absl::StatusCode::kNotFound)));
  const RawResponse& r = call.wait();
  const std::vector<Frame> frames = frames_of(r.data);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].flags, 0x80);
  EXPECT_EQ(frames[0].payload, "grpc-status: 5\r\ngrpc-message: as asked\r\n");
}

TEST(GrpcWeb, ErrorWithNothingElseIsTrailersOnly) {
  // As connect-go's gRPC-Web handler answers it: the status in the one HEADERS block.
  Loopback loop;
  RawCall call(loop, "/ferry.testing.Echo/Nope", kWeb, request_frame("x"));
  const RawResponse& r = call.wait();
  EXPECT_EQ(r.header("content-type"), "application/grpc-web+proto");
  EXPECT_EQ(r.header("grpc-status"), "12");
  EXPECT_TRUE(r.data.empty());
}

TEST(GrpcWeb, TextBodiesAreBase64BothWays) {
  Loopback loop;
  Headers headers = kWeb;
  headers[0].second = "application/grpc-web-text";
  const std::string request = request_frame("text body");
  // In two pieces, each padded, as a sender that encodes each write on its own makes it.
  const std::string body =
      absl::Base64Escape(request.substr(0, 4)) + absl::Base64Escape(request.substr(4));
  ASSERT_NE(body.find('='), body.size() - 1) << "padding inside the body";
  RawCall call(loop, echo_methods::kEcho, headers, body);
  const RawResponse& r = call.wait();
  EXPECT_EQ(r.header("content-type"), "application/grpc-web-text+proto");
  // The response is base64 too, in padded pieces (one per frame): decode them one by one.
  std::string decoded;
  std::size_t at = 0;
  while (at < r.data.size()) {
    std::size_t end = r.data.find('=', at);
    end = end == std::string::npos ? r.data.size() : r.data.find_first_not_of('=', end);
    if (end == std::string::npos) end = r.data.size();
    std::string piece;
    ASSERT_TRUE(absl::Base64Unescape(r.data.substr(at, end - at), &piece)) << r.data;
    decoded += piece;
    at = end;
  }
  const std::vector<Frame> frames = frames_of(decoded);
  ASSERT_EQ(frames.size(), 2u);
  EchoResponse response;
  ASSERT_TRUE(response.ParseFromString(frames[0].payload));
  EXPECT_EQ(response.payload(), "text body");
  EXPECT_EQ(frames[1].flags, 0x80);
  EXPECT_EQ(frames[1].payload, "grpc-status: 0\r\n");
}

TEST(GrpcWeb, MalformedTextBodyIsInternal) {
  Loopback loop;
  Headers headers = kWeb;
  headers[0].second = "application/grpc-web-text+proto";
  for (const std::string body : {std::string("AAAA*AAA"), std::string("AAAAAA")}) {
    RawCall call(loop, echo_methods::kEcho, headers, body);
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header("grpc-status"), "13") << body;  // Trailers-Only: in the headers
    EXPECT_EQ(loop.probe().started.load(), 0) << "no handler ran";
  }
}

TEST(GrpcJson, MessagesAreProtobufJson) {
  Loopback loop;
  for (const char* content_type : {"application/grpc+json", "application/grpc-web+json"}) {
    SCOPED_TRACE(content_type);
    RawCall call(loop, echo_methods::kEcho, {{"content-type", content_type}},
                 frame(0, R"({"payload": "aGk=", "responseCount": 1})"));
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header("content-type"), content_type);
    const std::vector<Frame> frames = frames_of(r.data);
    ASSERT_GE(frames.size(), 1u);
    EXPECT_EQ(frames[0].payload, R"({"payload":"aGk="})");
  }
}

TEST(GrpcJson, JsonThatDoesNotParseIsInternal) {
  Loopback loop;
  RawCall call(loop, echo_methods::kEcho, {{"content-type", "application/grpc+json"}},
               frame(0, R"({"payload": )"));
  const RawResponse& r = call.wait();
  EXPECT_EQ(r.header("grpc-status"), "13");
  EXPECT_NE(r.header("grpc-message").value_or("").find("JSON"), std::string::npos);
}

TEST(GrpcWeb, UnknownCodecIsUnimplementedAndUnknownTypeIs415) {
  Loopback loop;
  {
    RawCall call(loop, echo_methods::kEcho, {{"content-type", "application/grpc-web+thrift"}},
                 request_frame("x"));
    EXPECT_EQ(call.wait().header("grpc-status"), "12");
  }
  {
    RawCall call(loop, echo_methods::kEcho, {{"content-type", "text/plain"}}, request_frame("x"));
    EXPECT_EQ(call.wait().header(":status"), "415");
  }
}

// --- ferry's client speaking gRPC-Web (ChannelOptions::protocol) -----------------------------

ChannelOptions grpc_web_channel() {
  ChannelOptions options;
  options.protocol = ChannelProtocol::kGrpcWeb;
  return options;
}

TEST(GrpcWebClient, RequestsAreGrpcWeb) {
  // A handler that answers with what marks a gRPC-Web request (x-grpc-web, which only a gRPC-Web
  // client sends; the server's gRPC-Web response path is then the one taken).
  Service probe("ferry.testing.Probe");
  probe.add_unary<EchoRequest, EchoResponse>(
      "Marker",
      [](ServerContext& ctx, const EchoRequest&,
         EchoResponse& response) -> asio::awaitable<absl::Status> {
        response.set_payload(std::string(ctx.client_metadata().get("x-grpc-web").value_or("none")));
        co_return absl::OkStatus();
      });
  for (ChannelProtocol protocol : {ChannelProtocol::kGrpcWeb, ChannelProtocol::kGrpc}) {
    ChannelOptions options;
    options.protocol = protocol;
    Loopback loop({}, options, &probe);
    EchoResponse response;
    absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
      ClientContext ctx;
      co_return co_await loop.channel().call("/ferry.testing.Probe/Marker", ctx, EchoRequest(),
                                             response);
    });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(response.payload(), protocol == ChannelProtocol::kGrpcWeb ? "1" : "none");
  }
}

TEST(GrpcWebClient, UnaryWithMetadataBothWays) {
  Loopback loop({}, grpc_web_channel());
  ClientContext ctx;
  ctx.add_metadata("initial-a", "1");
  ctx.add_metadata("trailing-b-bin", std::string("\x00\xff", 2));
  EchoRequest request;
  request.set_payload("over gRPC-Web");
  EchoResponse response;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(ctx, request, response);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.payload(), "over gRPC-Web");
  EXPECT_EQ(ctx.initial_metadata().get("initial-a"), "1");
  EXPECT_EQ(ctx.trailing_metadata().get("trailing-b-bin"), std::string("\x00\xff", 2));
}

TEST(GrpcWebClient, ServerStreamAndErrorsArriveWithTheirStatus) {
  Loopback loop({}, grpc_web_channel());
  ClientContext ctx;
  EchoRequest request;
  request.set_response_count(3);
  request.set_response_size(10);
  int received = 0;
  absl::Status s = loop.run([&]() -> asio::awaitable<absl::Status> {
    ClientStream stream = co_await loop.channel().open(testing::echo_methods::kExpand, ctx);
    if (absl::Status w = co_await stream.write_last(request); !w.ok()) co_return w;
    ClientReader<EchoResponse> reader(std::move(stream));
    EchoResponse response;
    while (co_await reader.read(response)) ++received;
    co_return co_await reader.finish();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(received, 3);

  ClientContext error_ctx;
  EchoRequest failing;
  failing.set_status_code(static_cast<int>(absl::StatusCode::kPermissionDenied));
  failing.set_status_message("no, über");
  EchoResponse response;
  s = loop.run([&]() -> asio::awaitable<absl::Status> {
    co_return co_await loop.stub().Echo(error_ctx, failing, response);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "no, über");
}

}  // namespace
}  // namespace ferry::grpc_web_test
