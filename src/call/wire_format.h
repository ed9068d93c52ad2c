// gRPC-over-HTTP/2 header encodings (calls layer, private): grpc-timeout, grpc-message
// percent-encoding, -bin base64, and the mapping of HTTP/2 and HTTP failures to gRPC status.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "ferry/compression.h"
#include "http2/error_code.h"

namespace ferry::detail {

// grpc-timeout: at most 8 digits and a unit (H M S m u n). Rounds up so the peer never sees a
// deadline earlier than ours.
std::string format_grpc_timeout(std::chrono::nanoseconds timeout);
// nullopt unless value is exactly 1 to 8 ASCII digits then one unit letter (no sign, no spaces):
// the server then fails the call with INTERNAL, as grpc-go does. A value past what nanoseconds
// hold (above ~2.5 million hours) saturates at nanoseconds::max(); "0n" is a zero timeout.
std::optional<std::chrono::nanoseconds> parse_grpc_timeout(std::string_view value);

// grpc-message: percent-encode bytes outside 0x20-0x7E and '%' itself (UTF-8 passes as bytes).
std::string percent_encode(std::string_view message);
// Lenient, as the spec asks: a malformed escape is kept as it is.
std::string percent_decode(std::string_view encoded);

// -bin metadata values: base64 without padding when sending; padded or unpadded when receiving.
std::string encode_binary_header(std::string_view raw);
std::optional<std::string> decode_binary_header(std::string_view encoded);
// One base64 value (padded or not, no comma-joined list) decoded into out without allocating:
// its size, or nullopt when it is not base64 or decodes to more than capacity bytes.
std::optional<std::size_t> decode_binary_header_into(std::string_view encoded, char* out,
                                                     std::size_t capacity);
// The status of a call whose peer sent a -bin value that is not base64: INTERNAL, naming the key
// (grpc-go's "malformed binary metadata").
absl::Status malformed_binary_header(std::string_view name);

// name == literal, the literal's length known at compile time so that the comparison is inlined:
// std::string_view's == called an out-of-line compare for every header (seen in the profile).
template <std::size_t N>
inline bool header_is(std::string_view name, const char (&literal)[N]) {
  return name.size() == N - 1 && std::memcmp(name.data(), literal, N - 1) == 0;
}
template <std::size_t N>
inline bool header_starts_with(std::string_view name, const char (&prefix)[N]) {
  return name.size() >= N - 1 && std::memcmp(name.data(), prefix, N - 1) == 0;
}

inline constexpr std::string_view kGrpcContentTypePrefix = "application/grpc";

// Whether a content-type names gRPC: "application/grpc", optionally followed by "+codec" or
// ";params".
inline bool is_grpc_content_type(std::string_view ct) {
  constexpr std::string_view kPrefix = kGrpcContentTypePrefix;
  if (ct.substr(0, kPrefix.size()) != kPrefix) return false;
  return ct.size() == kPrefix.size() || ct[kPrefix.size()] == '+' || ct[kPrefix.size()] == ';';
}

// The flag of gRPC-Web's trailers frame.
inline constexpr std::uint8_t kGrpcWebTrailersFlag = 0x80;

// Whether a gRPC content-type names the proto codec: none ("application/grpc", which means
// proto) or "+proto", before any ";params".
inline bool is_grpc_proto_content_type(std::string_view ct) {
  std::string_view codec = ct.substr(std::min(ct.size(), kGrpcContentTypePrefix.size()));
  codec = codec.substr(0, codec.find(';'));
  return codec.empty() || codec == "+proto";
}

// grpc-accept-encoding as ferry sends it, both ways: every encoding it can decompress (the
// spelling of grpc++; grpc-go and grpc-java list only "gzip", which means the same).
inline constexpr std::string_view kAcceptEncoding = "identity,gzip";

// Whether a grpc-accept-encoding value (comma-separated tokens, spaces allowed) lists encoding.
bool accepts_encoding(std::string_view accept_encoding, Compression encoding);

// The gRPC status for a response whose HTTP status is not 200 (gRPC's http-grpc-status-mapping).
absl::StatusCode status_code_from_http(int http_status);
// The gRPC status for a stream reset with an HTTP/2 error code: by the peer, which peer names
// ("the server", "the client"), or by ferry itself when by_us (ferry found the
// peer's frames broke a rule, which the code names). The words say who reset it.
absl::Status status_from_rst_stream(http2::ErrorCode h2_error, std::string_view peer = "the peer",
                                    bool by_us = false);

// The status from a received grpc-status value: UNKNOWN when it is not a number in 0..16.
absl::StatusCode parse_grpc_status(std::string_view value);

}  // namespace ferry::detail
