// Tests for src/call/wire_format.h: grpc-timeout, grpc-message percent-encoding, -bin base64,
// HTTP and RST_STREAM status mapping, content-types.
#include "call/wire_format.h"

#include <gtest/gtest.h>

namespace ferry::detail::wire_format_test {
namespace {

using namespace std::chrono_literals;

TEST(GrpcTimeout, FormatsWithTheFinestUnitThatFitsEightDigits) {
  EXPECT_EQ(format_grpc_timeout(1ns), "1n");
  EXPECT_EQ(format_grpc_timeout(99'999'999ns), "99999999n");
  EXPECT_EQ(format_grpc_timeout(100'000'000ns), "100000u");
  EXPECT_EQ(format_grpc_timeout(1500ms), "1500000u");
  EXPECT_EQ(format_grpc_timeout(200s), "200000m");
  EXPECT_EQ(format_grpc_timeout(1000h), "3600000S");
  EXPECT_EQ(format_grpc_timeout(0ns), "1n") << "a zero or past timeout still says 1 ns";
}

TEST(GrpcTimeout, FormatsTheLargestTimeoutWithoutOverflow) {
  // Found by wire_format_fuzzer: rounding up as (ns + unit - 1) / unit overflowed int64.
  EXPECT_EQ(format_grpc_timeout(std::chrono::nanoseconds::max()), "2562048H");
  EXPECT_EQ(format_grpc_timeout(std::chrono::nanoseconds::max() - 1ns), "2562048H");
}

TEST(GrpcTimeout, RoundsUpNeverDown) {
  // 100000000.5 µs-worth of ns does not fit as ns; must round up in µs.
  const auto t = 100'000'001ns;
  EXPECT_EQ(format_grpc_timeout(t), "100001u");
  EXPECT_GE(*parse_grpc_timeout(format_grpc_timeout(t)), t);
}

TEST(GrpcTimeout, ParsesEveryUnitAndRejectsGarbage) {
  EXPECT_EQ(parse_grpc_timeout("1H"), std::chrono::nanoseconds(1h));
  EXPECT_EQ(parse_grpc_timeout("2M"), std::chrono::nanoseconds(2min));
  EXPECT_EQ(parse_grpc_timeout("3S"), std::chrono::nanoseconds(3s));
  EXPECT_EQ(parse_grpc_timeout("4m"), std::chrono::nanoseconds(4ms));
  EXPECT_EQ(parse_grpc_timeout("5u"), std::chrono::nanoseconds(5us));
  EXPECT_EQ(parse_grpc_timeout("6n"), 6ns);
  EXPECT_FALSE(parse_grpc_timeout(""));
  EXPECT_FALSE(parse_grpc_timeout("S"));
  EXPECT_FALSE(parse_grpc_timeout("10"));
  EXPECT_FALSE(parse_grpc_timeout("1x"));
  EXPECT_FALSE(parse_grpc_timeout("-1S"));
  EXPECT_FALSE(parse_grpc_timeout("123456789S")) << "more than 8 digits";
}

TEST(GrpcTimeout, AcceptsExactlyTheSpecGrammar) {
  // TimeoutValue (1 to 8 ASCII digits) TimeoutUnit (H M S m u n), nothing around them.
  EXPECT_EQ(parse_grpc_timeout("0n"), 0ns);
  EXPECT_EQ(parse_grpc_timeout("00000000S"), 0ns);
  EXPECT_EQ(parse_grpc_timeout("00000001S"), std::chrono::nanoseconds(1s));
  EXPECT_EQ(parse_grpc_timeout("99999999n"), 99'999'999ns);
  EXPECT_EQ(parse_grpc_timeout("99999999M"), std::chrono::nanoseconds(99'999'999min));
  for (std::string_view bad : {"abc", "99999999999H", "000000000S", "+1S", " 1S", "1S ", "1 S",
                               "1s", "1h", "1U", "1N", "1.5S", "0x1S", "1SS", "H1", "１S"}) {
    EXPECT_FALSE(parse_grpc_timeout(bad)) << bad;
  }
  EXPECT_FALSE(parse_grpc_timeout(std::string_view("1\0S", 3)));
}

TEST(GrpcTimeout, HoursPastWhatNanosecondsHoldSaturate) {
  // 2562047H is the most int64 nanoseconds hold; more must not overflow (UB) or wrap negative.
  EXPECT_EQ(parse_grpc_timeout("2562047H"), std::chrono::nanoseconds(2'562'047h));
  EXPECT_EQ(parse_grpc_timeout("2562048H"), std::chrono::nanoseconds::max());
  EXPECT_EQ(parse_grpc_timeout("99999999H"), std::chrono::nanoseconds::max());
}

TEST(PercentEncoding, RoundTripsTheInteropSpecialMessage) {
  const std::string message = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n";
  const std::string encoded = percent_encode(message);
  for (char c : encoded) {
    EXPECT_TRUE(c >= 0x20 && c <= 0x7E) << "unencoded byte " << int(c);
  }
  EXPECT_EQ(encoded.substr(0, 9), "%09%0Ates");
  EXPECT_EQ(percent_decode(encoded), message);
}

TEST(PercentEncoding, EncodesPercentAndKeepsMalformedEscapes) {
  EXPECT_EQ(percent_encode("100%"), "100%25");
  EXPECT_EQ(percent_decode("100%25"), "100%");
  EXPECT_EQ(percent_decode("bad %zz and %4"), "bad %zz and %4");
  EXPECT_EQ(percent_decode("%e2%98%BA"), "☺");
}

TEST(BinaryHeaders, EncodeUnpaddedDecodePaddedOrNot) {
  const std::string raw("\xab\xab\xab\x00\x01", 5);
  const std::string encoded = encode_binary_header(raw);
  EXPECT_EQ(encoded.find('='), std::string::npos);
  EXPECT_EQ(decode_binary_header(encoded), raw);
  EXPECT_EQ(decode_binary_header("q6ur"), std::string("\xab\xab\xab"));
  EXPECT_EQ(decode_binary_header("YQ=="), "a");
  EXPECT_EQ(decode_binary_header("YQ"), "a");
  EXPECT_EQ(decode_binary_header("YQ,Yg=="), "a,b");
  EXPECT_FALSE(decode_binary_header("!!!"));
}

TEST(ContentType, GrpcWithTheProtoCodecOnly) {
  for (const char* ct : {"application/grpc", "application/grpc+proto",
                         "application/grpc;charset=utf-8", "application/grpc+proto;x=1"}) {
    EXPECT_TRUE(is_grpc_content_type(ct)) << ct;
    EXPECT_TRUE(is_grpc_proto_content_type(ct)) << ct;
  }
  for (const char* ct : {"application/grpc+json", "application/grpc+foo", "application/grpc+"}) {
    EXPECT_TRUE(is_grpc_content_type(ct)) << ct;
    EXPECT_FALSE(is_grpc_proto_content_type(ct)) << ct;
  }
  EXPECT_FALSE(is_grpc_content_type("application/grpc-web"));
  EXPECT_FALSE(is_grpc_content_type("application/json"));
}

TEST(StatusMapping, HttpStatusesFollowTheGrpcTable) {
  EXPECT_EQ(status_code_from_http(400), absl::StatusCode::kInternal);
  EXPECT_EQ(status_code_from_http(401), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(status_code_from_http(403), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status_code_from_http(404), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status_code_from_http(429), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status_code_from_http(502), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status_code_from_http(503), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status_code_from_http(504), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status_code_from_http(415), absl::StatusCode::kUnknown);
  EXPECT_EQ(status_code_from_http(500), absl::StatusCode::kUnknown);
}

TEST(StatusMapping, RstStreamCodes) {
  EXPECT_EQ(status_from_rst_stream(http2::ErrorCode::kCancel).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status_from_rst_stream(http2::ErrorCode::kRefusedStream).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(status_from_rst_stream(http2::ErrorCode::kEnhanceYourCalm).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status_from_rst_stream(http2::ErrorCode::kProtocolError).code(),
            absl::StatusCode::kInternal);
}

// The words say who reset the stream: the peer, named, or ferry itself.
TEST(StatusMapping, RstStreamWordsSayWhoResetIt) {
  const absl::Status cancel = status_from_rst_stream(http2::ErrorCode::kCancel, "the server");
  EXPECT_EQ(cancel.message(), "the server reset the stream with CANCEL");
  const absl::Status refused =
      status_from_rst_stream(http2::ErrorCode::kRefusedStream, "the server");
  EXPECT_EQ(refused.message(), "the server refused the stream (REFUSED_STREAM)");
  const absl::Status ours =
      status_from_rst_stream(http2::ErrorCode::kProtocolError, "the server", /*by_us=*/true);
  EXPECT_EQ(ours.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ours.message(),
            "ferry reset the stream with PROTOCOL_ERROR: the server's frames broke HTTP/2's rules");
  EXPECT_EQ(status_from_rst_stream(http2::ErrorCode::kFlowControlError, "the client").message(),
            "the client reset the stream with FLOW_CONTROL_ERROR");
}

TEST(StatusMapping, MalformedBinaryHeaderNamesTheKey) {
  const absl::Status s = malformed_binary_header("x-trace-bin");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "malformed binary metadata: the value of 'x-trace-bin' is not base64");
}

TEST(StatusMapping, GrpcStatusValues) {
  EXPECT_EQ(parse_grpc_status("0"), absl::StatusCode::kOk);
  EXPECT_EQ(parse_grpc_status("16"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(parse_grpc_status("17"), absl::StatusCode::kUnknown);
  EXPECT_EQ(parse_grpc_status("x"), absl::StatusCode::kUnknown);
}

TEST(AcceptEncoding, ListsTokensWithOrWithoutSpaces) {
  EXPECT_TRUE(accepts_encoding("gzip", Compression::kGzip));
  EXPECT_TRUE(accepts_encoding("identity,deflate,gzip", Compression::kGzip));
  EXPECT_TRUE(accepts_encoding("identity, gzip", Compression::kGzip));
  EXPECT_TRUE(accepts_encoding(kAcceptEncoding, Compression::kGzip));
  EXPECT_TRUE(accepts_encoding(kAcceptEncoding, Compression::kIdentity));
  EXPECT_FALSE(accepts_encoding("identity,deflate", Compression::kGzip));
  EXPECT_FALSE(accepts_encoding("", Compression::kGzip));
  EXPECT_FALSE(accepts_encoding("gzipx,xgzip", Compression::kGzip));
  EXPECT_FALSE(accepts_encoding(",,", Compression::kGzip));
}

}  // namespace
}  // namespace ferry::detail::wire_format_test
