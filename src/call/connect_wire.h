// The Connect protocol's own encodings (calls layer, private; connectrpc.com/docs/protocol):
// its error codes by name and their HTTP statuses, the JSON error object with its details, the
// end-of-stream message of streaming calls, and connect-timeout-ms. The JSON is written and read
// through protobuf's google.protobuf.Struct and util/json_util, never by hand.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "ferry/metadata.h"

namespace ferry::detail {

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

// connect-timeout-ms: up to 10 ASCII digits; nullopt otherwise.
std::optional<std::chrono::milliseconds> parse_connect_timeout(std::string_view value);

}  // namespace ferry::detail
