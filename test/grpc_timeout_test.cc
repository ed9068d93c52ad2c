// Loopback tests of the server's grpc-timeout checks, with raw request headers: a value outside
// the spec's grammar ends the call with INTERNAL and an already-passed deadline ("0n") with
// DEADLINE_EXCEEDED, both before any handler runs; a valid timeout lets the call run. And the
// other request header a client can get wrong the same way: a -bin value that is not base64.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ferry/testing/echo.pb.h"
#include "support/loopback.h"
#include "support/raw_call.h"

namespace ferry::grpc_timeout_test {
namespace {

using testing::EchoRequest;
using testing::Loopback;
using testing::RawCall;
using testing::RawResponse;

// One uncompressed gRPC message holding request.
std::string framed(const EchoRequest& request) {
  const std::string body = request.SerializeAsString();
  std::string out(5, '\0');
  for (int i = 0; i < 4; ++i) out[1 + i] = static_cast<char>(body.size() >> (24 - 8 * i));
  return out + body;
}

// The call's outcome as (grpc-status, grpc-message) with one grpc-timeout header.
RawResponse call_with_timeout(Loopback& loop, std::string_view path, const std::string& timeout) {
  EchoRequest request;
  request.set_payload("abc");
  RawCall call(loop, path, {{"grpc-timeout", timeout}}, framed(request));
  return call.wait();
}

TEST(GrpcTimeout, MalformedIsInternalAndTheHandlerNeverRuns) {
  Loopback loop;
  const std::vector<std::string> malformed = {
      "abc", "99999999999H", "123456789S", "-1S", "+1S",  "",     "1",   "S",   "10",
      "1x",  "1 S",          "1s",         "1h",  "0x1S", "1.5S", "１S", " 1S", "1S "};
  for (const std::string& value : malformed) {
    SCOPED_TRACE("grpc-timeout: '" + value + "'");
    for (std::string_view path : {testing::echo_methods::kEcho, testing::echo_methods::kChat}) {
      const RawResponse r = call_with_timeout(loop, path, value);
      EXPECT_EQ(r.header(":status"), "200");
      EXPECT_EQ(r.header("grpc-status"), "13");
      EXPECT_EQ(r.header("grpc-message"), "malformed grpc-timeout");
      EXPECT_EQ(r.header_blocks, 1) << "Trailers-Only";
    }
  }
  EXPECT_EQ(loop.probe().started.load(), 0);
}

// A -bin value that is not base64 used to reset the stream (INTERNAL_ERROR), which tells the
// client nothing; it is answered grpc-status 13 with a message naming the key, as grpc-go answers
// "malformed binary metadata", for gRPC, gRPC-Web and Connect alike.
TEST(MalformedMetadata, ABinValueThatIsNotBase64IsInternalWithAMessage) {
  Loopback loop;
  EchoRequest request;
  request.set_payload("abc");
  for (std::string_view path : {testing::echo_methods::kEcho, testing::echo_methods::kChat}) {
    RawCall call(loop, path, {{"x-good-bin", "AQID"}, {"x-trace-bin", "!!not base64!!"}},
                 framed(request));
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.h2_error, http2::ErrorCode::kNoError) << "not reset";
    EXPECT_EQ(r.header(":status"), "200");
    EXPECT_EQ(r.header("grpc-status"), "13");
    const std::string message = r.header("grpc-message").value_or("");
    EXPECT_NE(message.find("malformed binary metadata"), std::string::npos) << message;
    EXPECT_NE(message.find("x-trace-bin"), std::string::npos) << message;
  }
  {
    RawCall call(loop, testing::echo_methods::kEcho,
                 {{"content-type", "application/grpc-web+proto"}, {"x-trace-bin", "%%"}},
                 framed(request));
    EXPECT_EQ(call.wait().header("grpc-status"), "13");
  }
  {
    RawCall call(loop, testing::echo_methods::kEcho,
                 {{"content-type", "application/proto"}, {"x-trace-bin", "%%"}},
                 request.SerializeAsString());
    const RawResponse& r = call.wait();
    EXPECT_EQ(r.header(":status"), "500");  // Connect's internal
    EXPECT_NE(r.data.find("malformed binary metadata"), std::string::npos) << r.data;
  }
  EXPECT_EQ(loop.probe().started.load(), 0);
}

TEST(GrpcTimeout, ZeroIsDeadlineExceededAndTheHandlerNeverRuns) {
  Loopback loop;
  for (const std::string value : {"0n", "0H", "00000000S", "1n"}) {
    SCOPED_TRACE("grpc-timeout: '" + value + "'");
    for (std::string_view path : {testing::echo_methods::kEcho, testing::echo_methods::kChat}) {
      const RawResponse r = call_with_timeout(loop, path, value);
      EXPECT_EQ(r.header("grpc-status"), "4");
    }
  }
  EXPECT_EQ(loop.probe().started.load(), 0);
}

TEST(GrpcTimeout, ValidTimeoutsRunTheCall) {
  Loopback loop;
  // The largest values of each unit: 99999999H saturates (it is past what nanoseconds hold).
  for (const std::string value : {"5S", "99999999H", "99999999M", "99999999n", "30000m"}) {
    SCOPED_TRACE("grpc-timeout: '" + value + "'");
    const RawResponse r = call_with_timeout(loop, testing::echo_methods::kEcho, value);
    EXPECT_EQ(r.header("grpc-status"), "0");
  }
  EXPECT_EQ(loop.probe().started.load(), 5);
}

}  // namespace
}  // namespace ferry::grpc_timeout_test
