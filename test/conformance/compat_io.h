// test/conformance/compat_io.h: what ferry's conformance server and client share: the runner's
// size-delimited messages on stdin/stdout (a 4-byte big-endian length, then the message), and
// the suite's Header lists converted to and from ferry's Metadata (-bin values are base64 in a
// Header, raw bytes in Metadata).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "connectrpc/conformance/v1/service.pb.h"
#include "ferry/metadata.h"
#include "google/protobuf/message_lite.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace ferry::conformance {

namespace v1 = ::connectrpc::conformance::v1;
using Headers = google::protobuf::RepeatedPtrField<v1::Header>;

// Reads one size-delimited message. False at a clean end of input; an error when the input
// ends inside a message or the message does not parse.
absl::Status read_delimited(std::FILE* in, google::protobuf::MessageLite& msg, bool* eof);
// Writes one size-delimited message and flushes it. Not synchronised: callers serialise writes.
absl::Status write_delimited(std::FILE* out, const google::protobuf::MessageLite& msg);

// Appends metadata to headers, one Header per key with its values in order (-bin values
// base64-encoded without padding, as the suite's Go code does).
void append_headers(const Metadata& metadata, Headers& headers);
// Calls add(key, value) for every value of every header: keys lowercased, -bin values
// base64-decoded (padded or not; a value that does not decode is passed on as it is).
template <class Add>
void for_each_header_value(const Headers& headers, Add&& add);

// The suite's Error as an absl::Status, its details carried as google.rpc.Status
// (grpc-status-details-bin), and back.
absl::Status to_status(const v1::Error& error);
v1::Error to_error(const absl::Status& status);

// Implementation details of for_each_header_value.
std::string lowercase(std::string_view s);
std::string decode_binary_header(std::string_view value);

template <class Add>
void for_each_header_value(const Headers& headers, Add&& add) {
  for (const v1::Header& header : headers) {
    const std::string key = lowercase(header.name());
    const bool binary = is_binary_metadata_key(key);
    for (const std::string& value : header.value()) {
      add(key, binary ? decode_binary_header(value) : value);
    }
  }
}

}  // namespace ferry::conformance
