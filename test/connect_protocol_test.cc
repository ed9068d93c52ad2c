// The Connect protocol on ferry's server, byte for byte over HTTP/2 (connectrpc's conformance
// suite runs every call kind, codec and compression with its own client; these cases pin the
// wire form a reader of the protocol's spec expects: unary bodies without envelopes, trailers as
// "trailer-" headers, errors as JSON with the spec's HTTP status, streams ending with their
// end-of-stream message, GET for methods without side effects only, and the rejections).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "ferry/frame.h"
#include "ferry/testing/echo.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "support/echo_service.h"
#include "support/loopback.h"
#include "support/raw_call.h"

namespace ferry::connect_protocol_test {
namespace {

using testing::EchoRequest;
using testing::EchoResponse;
using testing::Loopback;
using testing::RawCall;
using testing::RawResponse;
namespace echo_methods = testing::echo_methods;

using Headers = std::vector<std::pair<std::string, std::string>>;

std::string request_bytes(const std::string& payload, int status_code = 0, int count = 0) {
  EchoRequest request;
  request.set_payload(payload);
  request.set_status_code(status_code);
  request.set_response_count(count);
  if (status_code != 0) request.set_status_message("as asked");
  return request.SerializeAsString();
}

// A JSON object's fields, read with protobuf's own parser.
google::protobuf::Struct json_object(const std::string& json) {
  google::protobuf::Struct out;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &out).ok()) << json;
  return out;
}

std::string field(const google::protobuf::Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  return it == object.fields().end() ? "<absent>" : it->second.string_value();
}

const Headers kUnaryProto = {{"content-type", "application/proto"},
                             {"connect-protocol-version", "1"}};

TEST(ConnectUnary, BodyIsTheBareMessageAndTrailersAreHeaders) {
  Loopback loop;
  Headers headers = kUnaryProto;
  headers.push_back({"initial-a", "1"});
  headers.push_back({"trailing-b", "2"});
  RawCall call(loop, echo_methods::kEcho, headers, request_bytes("hello"));
  const RawResponse& r = call.wait();
  EXPECT_EQ(r.header(":status"), "200");
  EXPECT_EQ(r.header("content-type"), "application/proto");
  EXPECT_EQ(r.header("initial-a"), "1");
  EXPECT_EQ(r.header("trailer-trailing-b"), "2");
  EXPECT_EQ(r.header_blocks, 1);
  EXPECT_EQ(r.header("grpc-status"), std::nullopt);
  EchoResponse response;
  ASSERT_TRUE(response.ParseFromString(r.data)) << "no envelope: the body is the message";
  EXPECT_EQ(response.payload(), "hello");
}

TEST(ConnectUnary, ErrorIsJsonWithTheSpecsHttpStatus) {
  Loopback loop;
  struct Case {
    absl::StatusCode code;
    std::string status;
    std::string name;
  };
  for (const Case& c :
       {Case{absl::StatusCode::kNotFound, "404", "not_found"},
        Case{absl::StatusCode::kCancelled, "499", "canceled"},
        Case{absl::StatusCode::kResourceExhausted, "429", "resource_exhausted"},
        Case{absl::StatusCode::kFailedPrecondition, "400", "failed_precondition"}}) {
    SCOPED_TRACE(c.name);
    Headers headers = {{"content-type", "application/json"}, {"trailing-t", "x"}};
    RawCall call(loop, echo_methods::kEcho, headers,
                 R"({"payload": "aGk=", "statusCode": )" +
                     std::to_string(static_cast<int>(c.code)) +
                     R"(, "statusMessage": "as asked"})");
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), c.status);
    EXPECT_EQ(r.header("content-type"), "application/json");
    EXPECT_EQ(r.header("trailer-trailing-t"), "x");
    const google::protobuf::Struct error = json_object(r.data);
    EXPECT_EQ(field(error, "code"), c.name);
    EXPECT_EQ(field(error, "message"), "as asked");
  }
}

TEST(ConnectUnary, MalformedTimeoutIsInvalidArgument) {
  Loopback loop;
  for (const char* timeout : {"-1", "12345678901", "1s"}) {
    Headers headers = kUnaryProto;
    headers.push_back({"connect-timeout-ms", timeout});
    RawCall call(loop, echo_methods::kEcho, headers, request_bytes("x"));
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "400") << timeout;
    EXPECT_EQ(field(json_object(r.data), "code"), "invalid_argument") << timeout;
  }
  EXPECT_EQ(loop.probe().started.load(), 0);
}

// A request body that does not parse is the client's fault: invalid_argument (400), as connect-go
// answers it ("unmarshal message"), not internal (500). gRPC keeps INTERNAL, as grpc-go.
TEST(ConnectUnary, ARequestThatDoesNotParseIsInvalidArgument) {
  Loopback loop;
  {
    RawCall call(loop, echo_methods::kEcho, kUnaryProto, std::string("\xff\xff\xff\xff", 4));
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "400");
    EXPECT_EQ(field(json_object(r.data), "code"), "invalid_argument");
  }
  {
    RawCall call(loop, echo_methods::kEcho, {{"content-type", "application/json"}},
                 R"({"payload": 12, "nope": [})");
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "400");
    EXPECT_EQ(field(json_object(r.data), "code"), "invalid_argument");
  }
  {
    const std::string garbage("\xff\xff\xff\xff", 4);
    std::string framed(5, '\0');
    framed[4] = static_cast<char>(garbage.size());
    RawCall call(loop, echo_methods::kEcho, {}, framed + garbage);
    EXPECT_EQ(call.wait().header("grpc-status"), "13");
  }
  EXPECT_EQ(loop.probe().started.load(), 0);
}

// A Connect stream's request message that does not parse: its end-of-stream message says
// invalid_argument.
TEST(ConnectStreaming, ARequestThatDoesNotParseIsInvalidArgument) {
  Loopback loop;
  const std::string garbage("\xff\xff\xff\xff", 4);
  std::string envelope(5, '\0');
  envelope[4] = static_cast<char>(garbage.size());
  RawCall call(loop, echo_methods::kChat, {{"content-type", "application/connect+proto"}},
               envelope + garbage);
  const RawResponse& r = call.wait();
  EXPECT_EQ(r.header(":status"), "200");
  ASSERT_GE(r.data.size(), 5u);
  EXPECT_EQ(static_cast<unsigned char>(r.data[r.data.size() - 1]), '}');
  const std::size_t brace = r.data.find('{');
  ASSERT_NE(brace, std::string::npos);
  const google::protobuf::Struct end = json_object(r.data.substr(brace));
  auto error = end.fields().find("error");
  ASSERT_NE(error, end.fields().end()) << r.data;
  EXPECT_EQ(field(error->second.struct_value(), "code"), "invalid_argument");
}

TEST(ConnectUnary, KindAndPathAreChecked) {
  Loopback loop;
  {  // a unary content-type for a streaming method, and the other way round
    RawCall call(loop, echo_methods::kExpand, kUnaryProto, request_bytes("x"));
    EXPECT_EQ(call.wait().header(":status"), "415");
  }
  {
    RawCall call(loop, echo_methods::kEcho, {{"content-type", "application/connect+proto"}},
                 request_bytes("x"));
    EXPECT_EQ(call.wait().header(":status"), "415");
  }
  {
    RawCall call(loop, "/ferry.testing.Echo/Nope", kUnaryProto, request_bytes("x"));
    EXPECT_EQ(call.wait().header(":status"), "404");
  }
  {
    RawCall call(loop, echo_methods::kEcho, {{"content-type", "application/xml"}}, "<x/>");
    EXPECT_EQ(call.wait().header(":status"), "415");
  }
}

TEST(ConnectStreaming, EndsWithTheEndOfStreamMessage) {
  Loopback loop;
  EchoRequest request;
  request.set_response_count(2);
  request.set_response_size(3);
  const std::string bytes = request.SerializeAsString();
  std::string body(kFramePrefixSize, '\0');
  write_frame_prefix(reinterpret_cast<std::uint8_t*>(body.data()), false,
                     static_cast<std::uint32_t>(bytes.size()));
  body += bytes;
  RawCall call(loop, echo_methods::kExpand,
               {{"content-type", "application/connect+proto"}, {"trailing-z", "9"}}, body);
  const RawResponse& r = call.wait();
  EXPECT_EQ(r.header(":status"), "200");
  EXPECT_EQ(r.header("content-type"), "application/connect+proto");
  EXPECT_EQ(r.header_blocks, 1);
  std::vector<std::pair<int, std::string>> frames;
  for (std::size_t at = 0; at + kFramePrefixSize <= r.data.size();) {
    const std::size_t n =
        read_frame_length(reinterpret_cast<const std::uint8_t*>(r.data.data() + at));
    frames.push_back({r.data[at], r.data.substr(at + kFramePrefixSize, n)});
    at += kFramePrefixSize + n;
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].first, 0);
  EXPECT_EQ(frames[1].first, 0);
  EXPECT_EQ(frames[2].first, 0x02);
  const google::protobuf::Struct end = json_object(frames[2].second);
  EXPECT_FALSE(end.fields().contains("error"));
  const auto& metadata = end.fields().at("metadata").struct_value().fields();
  EXPECT_EQ(metadata.at("trailing-z").list_value().values(0).string_value(), "9");
}

TEST(ConnectGet, OnlyForMethodsWithoutSideEffects) {
  Loopback loop;
  const std::string message = absl::WebSafeBase64Escape(request_bytes("by get"));  // unpadded
  {
    RawCall call(
        loop,
        std::string(echo_methods::kEcho) + "?encoding=proto&base64=1&connect=v1&message=" + message,
        {{":method", "GET"}}, "");
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "200");
    EchoResponse response;
    ASSERT_TRUE(response.ParseFromString(r.data));
    EXPECT_EQ(response.payload(), "by get");
  }
  {  // JSON in the query, percent-encoded
    RawCall call(loop,
                 std::string(echo_methods::kEcho) +
                     "?encoding=json&message=%7B%22payload%22%3A%22aGk%3D%22%7D",
                 {{":method", "GET"}}, "");
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "200");
    EXPECT_EQ(field(json_object(r.data), "payload"), "aGk=");
  }
  {  // Expand streams: never by GET
    RawCall call(loop,
                 std::string(echo_methods::kExpand) + "?encoding=proto&base64=1&message=" + message,
                 {{":method", "GET"}}, "");
    EXPECT_EQ(call.wait().header(":status"), "405");
  }
  {  // no message
    RawCall call(loop, std::string(echo_methods::kEcho) + "?encoding=proto", {{":method", "GET"}},
                 "");
    EXPECT_EQ(call.wait().header(":status"), "400");
  }
}

}  // namespace
}  // namespace ferry::connect_protocol_test

namespace ferry::connect_protocol_test {
namespace {

ServerOptions cors_options() {
  ServerOptions options;
  options.cors_allowed_origins = {"http://app.test"};
  return options;
}

TEST(Cors, PreflightFromAnAllowedOriginIsAnswered) {
  Loopback loop(cors_options());
  RawCall call(loop, echo_methods::kEcho,
               {{":method", "OPTIONS"},
                {"origin", "http://app.test"},
                {"access-control-request-method", "POST"},
                {"access-control-request-headers", "content-type,connect-protocol-version,x-mine"}},
               "");
  const RawResponse& r = call.wait();
  EXPECT_EQ(r.header(":status"), "204");
  EXPECT_EQ(r.header("access-control-allow-origin"), "http://app.test");
  EXPECT_EQ(r.header("access-control-allow-headers"),
            "content-type,connect-protocol-version,x-mine");
  EXPECT_NE(r.header("access-control-allow-methods").value_or("").find("POST"), std::string::npos);
  EXPECT_EQ(loop.probe().started.load(), 0);
}

TEST(Cors, OtherOriginsGetNothing) {
  Loopback loop(cors_options());
  {
    RawCall call(loop, echo_methods::kEcho,
                 {{":method", "OPTIONS"},
                  {"origin", "http://evil.test"},
                  {"access-control-request-method", "POST"}},
                 "");
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "405");
    EXPECT_EQ(r.header("access-control-allow-origin"), std::nullopt);
  }
  {
    RawCall call(loop, echo_methods::kEcho,
                 {{"content-type", "application/proto"}, {"origin", "http://evil.test"}},
                 request_bytes("x"));
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "200");  // served: CORS is the browser's to enforce
    EXPECT_EQ(r.header("access-control-allow-origin"), std::nullopt);
  }
}

TEST(Cors, ResponsesToAnAllowedOriginExposeTheirHeaders) {
  Loopback loop(cors_options());
  RawCall call(loop, echo_methods::kEcho,
               {{"content-type", "application/grpc-web+proto"},
                {"origin", "http://app.test"},
                {"initial-a", "1"}},
               std::string(5, '\0'));
  const RawResponse& r = call.wait();
  EXPECT_EQ(r.header("access-control-allow-origin"), "http://app.test");
  const std::string exposed = r.header("access-control-expose-headers").value_or("");
  EXPECT_NE(exposed.find("initial-a"), std::string::npos) << exposed;
  EXPECT_NE(exposed.find("grpc-accept-encoding"), std::string::npos) << exposed;
}

}  // namespace
}  // namespace ferry::connect_protocol_test
