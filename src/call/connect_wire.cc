// Implementation of src/call/connect_wire.h.
#include "call/connect_wire.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "call/wire_format.h"
#include "common/strings.h"
#include "ferry/status_details.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
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

namespace {

std::optional<absl::StatusCode> code_from_name(std::string_view name) {
  for (const CodeEntry& e : kCodes) {
    if (e.name == name) return e.code;
  }
  return std::nullopt;
}

// Standard or URL-safe base64, padded or not (connect-go writes unpadded standard base64 and
// reads either).
std::optional<std::string> decode_any_base64(std::string_view text) {
  std::string out;
  const absl::string_view in = to_absl(text);
  if (absl::Base64Unescape(in, &out) || absl::WebSafeBase64Unescape(in, &out)) return out;
  return std::nullopt;
}

// google.rpc.Status { int32 code = 1; string message = 2; repeated Any details = 3; }: the code
// and message, serialized; the details' field is appended to them as it is.
std::string serialize_rpc_status_head(absl::StatusCode code, std::string_view message) {
  using google::protobuf::internal::WireFormatLite;
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    WireFormatLite::WriteInt32(1, static_cast<int>(code), &coded);
    if (!message.empty()) WireFormatLite::WriteString(2, std::string(message), &coded);
  }
  return out;
}

std::optional<ConnectError> error_of(const google::protobuf::Struct& object) {
  ConnectError error;
  const auto& fields = object.fields();
  if (auto code = fields.find("code"); code != fields.end() && code->second.has_string_value()) {
    error.code_named = code_from_name(code->second.string_value());
  }
  if (auto message = fields.find("message");
      message != fields.end() && message->second.has_string_value()) {
    error.message = message->second.string_value();
  }
  if (auto list = fields.find("details"); list != fields.end() && list->second.has_list_value()) {
    for (const google::protobuf::Value& item : list->second.list_value().values()) {
      if (!item.has_struct_value()) continue;
      const auto& detail = item.struct_value().fields();
      auto type = detail.find("type");
      auto value = detail.find("value");
      if (type == detail.end() || !type->second.has_string_value()) continue;
      google::protobuf::Any any;
      any.set_type_url("type.googleapis.com/" + type->second.string_value());
      if (value != detail.end() && value->second.has_string_value()) {
        std::optional<std::string> bytes = decode_any_base64(value->second.string_value());
        if (!bytes) continue;  // connect-go drops what it cannot decode too
        any.set_value(*std::move(bytes));
      }
      google::protobuf::io::StringOutputStream stream(&error.details);
      google::protobuf::io::CodedOutputStream coded(&stream);
      google::protobuf::internal::WireFormatLite::WriteBytes(3, any.SerializeAsString(), &coded);
    }
  }
  return error;
}

std::optional<google::protobuf::Struct> parse_object(std::string_view json) {
  google::protobuf::Struct object;
  if (!google::protobuf::util::JsonStringToMessage(std::string(json), &object).ok()) {
    return std::nullopt;
  }
  return object;
}

}  // namespace

absl::Status ConnectError::to_status(absl::StatusCode fallback) const {
  const absl::StatusCode code = code_named.value_or(fallback);
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  absl::Status status(code, message);
  if (!details.empty()) {
    set_status_details(status, serialize_rpc_status_head(code, message) + details);
  }
  return status;
}

std::optional<ConnectError> parse_connect_error_json(std::string_view json) {
  std::optional<google::protobuf::Struct> object = parse_object(json);
  if (!object) return std::nullopt;
  return error_of(*object);
}

std::optional<ConnectEndStream> parse_connect_end_stream_json(std::string_view json) {
  std::optional<google::protobuf::Struct> object = parse_object(json);
  if (!object) return std::nullopt;
  ConnectEndStream end;
  const auto& fields = object->fields();
  if (auto error = fields.find("error"); error != fields.end()) {
    if (!error->second.has_struct_value()) {
      if (error->second.has_null_value()) return end;
      return std::nullopt;
    }
    end.error = error_of(error->second.struct_value());
  }
  if (auto metadata = fields.find("metadata"); metadata != fields.end()) {
    if (!metadata->second.has_struct_value()) return std::nullopt;
    for (const auto& [key, values] : metadata->second.struct_value().fields()) {
      if (!values.has_list_value()) return std::nullopt;
      const std::string name = absl::AsciiStrToLower(key);
      for (const google::protobuf::Value& value : values.list_value().values()) {
        if (!value.has_string_value()) return std::nullopt;
        if (is_binary_metadata_key(name)) {
          std::optional<std::string> raw = decode_binary_header(value.string_value());
          if (!raw) return std::nullopt;
          end.metadata.add(name, *raw);
        } else {
          end.metadata.add(name, value.string_value());
        }
      }
    }
  }
  return end;
}

std::string connect_get_query(const std::string& message, std::string_view codec,
                              std::string_view compression) {
  std::string encoded;
  absl::WebSafeBase64Escape(message, &encoded);  // unpadded
  // The parameters in the order the protocol recommends (the conformance suite checks it).
  std::string query = absl::StrCat("?connect=v1&base64=1&encoding=", to_absl(codec));
  if (!compression.empty()) absl::StrAppend(&query, "&compression=", to_absl(compression));
  absl::StrAppend(&query, "&message=", encoded);
  return query;
}

std::string format_connect_timeout(std::chrono::nanoseconds timeout) {
  constexpr std::int64_t kMax = 9'999'999'999;
  const std::int64_t ms =
      std::chrono::ceil<std::chrono::milliseconds>(std::max(timeout, std::chrono::nanoseconds(1)))
          .count();
  return std::to_string(std::min(ms, kMax));
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
