// The Connect protocol's own encodings (calls layer, private; connectrpc.com/docs/protocol):
// its error codes by name and their HTTP statuses, the JSON error object with its details, the
// end-of-stream message of streaming calls, and connect-timeout-ms. The JSON is written and read
// through protobuf's google.protobuf.Struct and util/json_util, never by hand.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "ferry/metadata.h"

namespace ferry::detail {

// The flag of a streaming call's end-of-stream message (beside 0x01, compressed).
inline constexpr std::uint8_t kConnectEndStreamFlag = 0x02;

// "not_found" for kNotFound: the code as the Connect protocol names it ("canceled" with one l).
std::string_view connect_code_name(absl::StatusCode code);
// The HTTP status a unary call's error goes out with (the protocol's table: 404 for not_found,
// 499 for canceled, 429 for resource_exhausted...).
int connect_http_status(absl::StatusCode code);

// The error object: {"code": ..., "message": ..., "details": [{"type", "value"}]}, the details
// from the status's google.rpc.Status (ferry/status_details.h), each value in base64.
std::string connect_error_json(const absl::Status& status);
// A streaming call's last message: {"error": {...}} unless status is OK, and {"metadata":
// {key: [values]}} with the trailers ("-bin" values in base64).
std::string connect_end_stream_json(const absl::Status& status, const Metadata& trailers);

// The client's side: what a Connect server's error object or end-of-stream message says.
// code_named: the code the JSON names, nullopt when it names none the protocol knows (a unary
// call then takes the code its HTTP status implies, a stream's end UNKNOWN).
struct ConnectError {
  std::optional<absl::StatusCode> code_named;
  std::string message;
  // The details (each {"type", "value"} an Any) as a serialized google.rpc.Status's field 3;
  // empty without details.
  std::string details;

  // The status it stands for; fallback when the JSON named no known code.
  absl::Status to_status(absl::StatusCode fallback) const;
};
// A unary call's error body (an object with "code", "message", "details"); nullopt when it is not
// a JSON object.
std::optional<ConnectError> parse_connect_error_json(std::string_view json);
// A streaming call's end-of-stream message: its error, when it has one, and its metadata (the
// trailers, "-bin" values decoded); nullopt when it is not a JSON object of that shape.
struct ConnectEndStream {
  std::optional<ConnectError> error;
  Metadata metadata;
};
std::optional<ConnectEndStream> parse_connect_end_stream_json(std::string_view json);

// A Connect GET's query for a request message (its bytes as the request body would carry them:
// encoded with codec, "proto" or "json", and compressed when compression is not empty):
// "?connect=v1&base64=1&encoding=...[&compression=...]&message=<unpadded base64url>".
std::string connect_get_query(const std::string& message, std::string_view codec,
                              std::string_view compression);

// connect-timeout-ms for a timeout: milliseconds, rounded up, at most 10 digits.
std::string format_connect_timeout(std::chrono::nanoseconds timeout);
// connect-timeout-ms: up to 10 ASCII digits; nullopt otherwise.
std::optional<std::chrono::milliseconds> parse_connect_timeout(std::string_view value);

}  // namespace ferry::detail
