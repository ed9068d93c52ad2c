// Implementation of src/call/connect_wire.h.
#include "call/connect_wire.h"

#include <cstdint>
#include <vector>

#include "absl/strings/escaping.h"
#include "call/wire_format.h"
#include "common/strings.h"
#include "ferry/status_details.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/wire_format_lite.h"

namespace ferry::detail {
namespace {

struct CodeEntry {
  absl::StatusCode code;
  std::string_view name;
  int http_status;
};

constexpr CodeEntry kCodes[] = {
    {absl::StatusCode::kCancelled, "canceled", 499},
    {absl::StatusCode::kUnknown, "unknown", 500},
    {absl::StatusCode::kInvalidArgument, "invalid_argument", 400},
    {absl::StatusCode::kDeadlineExceeded, "deadline_exceeded", 504},
    {absl::StatusCode::kNotFound, "not_found", 404},
    {absl::StatusCode::kAlreadyExists, "already_exists", 409},
    {absl::StatusCode::kPermissionDenied, "permission_denied", 403},
    {absl::StatusCode::kResourceExhausted, "resource_exhausted", 429},
    {absl::StatusCode::kFailedPrecondition, "failed_precondition", 400},
    {absl::StatusCode::kAborted, "aborted", 409},
    {absl::StatusCode::kOutOfRange, "out_of_range", 400},
    {absl::StatusCode::kUnimplemented, "unimplemented", 501},
    {absl::StatusCode::kInternal, "internal", 500},
    {absl::StatusCode::kUnavailable, "unavailable", 503},
    {absl::StatusCode::kDataLoss, "data_loss", 500},
    {absl::StatusCode::kUnauthenticated, "unauthenticated", 401},
};

const CodeEntry* entry_of(absl::StatusCode code) {
  for (const CodeEntry& e : kCodes) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

// The google.rpc.Status details (field 3, repeated google.protobuf.Any) of serialized bytes.
std::vector<google::protobuf::Any> details_of(std::string_view serialized) {
  std::vector<google::protobuf::Any> out;
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const std::uint8_t*>(serialized.data()),
      static_cast<int>(serialized.size()));
  while (std::uint32_t tag = in.ReadTag()) {
    if (tag == (3u << 3 | 2u)) {
      std::string bytes;
      std::uint32_t n = 0;
      if (!in.ReadVarint32(&n) || !in.ReadString(&bytes, static_cast<int>(n))) break;
      google::protobuf::Any any;
      if (any.ParseFromString(bytes)) out.push_back(std::move(any));
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
      break;
    }
  }
  return out;
}

google::protobuf::Struct error_struct(const absl::Status& status) {
  google::protobuf::Struct error;
  auto& fields = *error.mutable_fields();
  fields["code"].set_string_value(std::string(connect_code_name(status.code())));
  if (!status.message().empty()) fields["message"].set_string_value(std::string(status.message()));
  if (std::optional<std::string> serialized = status_details(status)) {
    std::vector<google::protobuf::Any> details = details_of(*serialized);
    if (!details.empty()) {
      auto* list = fields["details"].mutable_list_value();
      for (const google::protobuf::Any& any : details) {
        auto& detail = *list->add_values()->mutable_struct_value()->mutable_fields();
        std::string_view type = any.type_url();
        type = type.substr(type.rfind('/') + 1);  // the message's full name, without the host
        detail["type"].set_string_value(std::string(type));
        std::string value = absl::Base64Escape(any.value());
        while (!value.empty() && value.back() == '=') value.pop_back();  // unpadded, as connect-go
        detail["value"].set_string_value(std::move(value));
      }
    }
  }
  return error;
}

std::string to_json(const google::protobuf::Struct& object) {
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(object, &out);  // a Struct always prints
  return out;
}

}  // namespace

std::string_view connect_code_name(absl::StatusCode code) {
  const CodeEntry* e = entry_of(code);
  return e != nullptr ? e->name : "unknown";
}

int connect_http_status(absl::StatusCode code) {
  const CodeEntry* e = entry_of(code);
  return e != nullptr ? e->http_status : 500;
}

std::string connect_error_json(const absl::Status& status) { return to_json(error_struct(status)); }

std::string connect_end_stream_json(const absl::Status& status, const Metadata& trailers) {
  google::protobuf::Struct end;
  auto& fields = *end.mutable_fields();
  if (!status.ok()) *fields["error"].mutable_struct_value() = error_struct(status);
  if (!trailers.empty()) {
    auto& metadata = *fields["metadata"].mutable_struct_value()->mutable_fields();
    for (const auto& [key, value] : trailers) {
      if (!validate_metadata(key, value).ok()) continue;  // dropped, as in gRPC's trailers
      const std::string v =
          is_binary_metadata_key(key) ? encode_binary_header(value) : std::string(value);
      metadata[std::string(key)].mutable_list_value()->add_values()->set_string_value(v);
    }
  }
  return to_json(end);
}

std::optional<std::chrono::milliseconds> parse_connect_timeout(std::string_view value) {
  if (value.empty() || value.size() > 10) return std::nullopt;
  std::int64_t ms = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    ms = ms * 10 + (c - '0');
  }
  return std::chrono::milliseconds(ms);
}

}  // namespace ferry::detail
