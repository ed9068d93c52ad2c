// Implementation of test/conformance/compat_io.h.
#include "conformance/compat_io.h"

#include <cstdint>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "ferry/rich_status.h"
#include "google/rpc/status.pb.h"

namespace ferry::conformance {

absl::Status read_delimited(std::FILE* in, google::protobuf::MessageLite& msg, bool* eof) {
  *eof = false;
  unsigned char prefix[4];
  const std::size_t got = std::fread(prefix, 1, sizeof prefix, in);
  if (got == 0 && std::feof(in)) {
    *eof = true;
    return absl::OkStatus();
  }
  if (got != sizeof prefix) return absl::DataLossError("input ended inside a length prefix");
  const std::uint32_t size = std::uint32_t{prefix[0]} << 24 | std::uint32_t{prefix[1]} << 16 |
                             std::uint32_t{prefix[2]} << 8 | prefix[3];
  std::string bytes(size, '\0');
  if (size > 0 && std::fread(bytes.data(), 1, size, in) != size) {
    return absl::DataLossError("input ended inside a message");
  }
  if (!msg.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("input message does not parse as " + msg.GetTypeName());
  }
  return absl::OkStatus();
}

absl::Status write_delimited(std::FILE* out, const google::protobuf::MessageLite& msg) {
  const std::string bytes = msg.SerializeAsString();
  const auto size = static_cast<std::uint32_t>(bytes.size());
  const unsigned char prefix[4] = {
      static_cast<unsigned char>(size >> 24), static_cast<unsigned char>(size >> 16),
      static_cast<unsigned char>(size >> 8), static_cast<unsigned char>(size)};
  if (std::fwrite(prefix, 1, sizeof prefix, out) != sizeof prefix ||
      std::fwrite(bytes.data(), 1, bytes.size(), out) != bytes.size() || std::fflush(out) != 0) {
    return absl::UnavailableError("writing to the runner failed");
  }
  return absl::OkStatus();
}

void append_headers(const Metadata& metadata, Headers& headers) {
  // One Header per key, in the order keys first appear.
  std::map<std::string_view, v1::Header*> by_key;
  for (const auto& [key, value] : metadata) {
    v1::Header*& header = by_key[key];
    if (header == nullptr) {
      header = headers.Add();
      header->set_name(std::string(key));
    }
    if (is_binary_metadata_key(key)) {
      header->add_value(absl::Base64Escape(absl::string_view(value.data(), value.size())));
      // Unpadded, as connect-go's EncodeBinaryHeader writes it.
      std::string& encoded = *header->mutable_value(header->value_size() - 1);
      while (!encoded.empty() && encoded.back() == '=') encoded.pop_back();
    } else {
      header->add_value(std::string(value));
    }
  }
}

std::string lowercase(std::string_view s) {
  return absl::AsciiStrToLower(absl::string_view(s.data(), s.size()));
}

std::string decode_binary_header(std::string_view value) {
  std::string decoded;
  if (absl::Base64Unescape(absl::string_view(value.data(), value.size()), &decoded)) {
    return decoded;
  }
  return std::string(value);
}

absl::Status to_status(const v1::Error& error) {
  google::rpc::Status details;
  details.set_code(static_cast<int>(error.code()));
  details.set_message(error.message());
  for (const google::protobuf::Any& detail : error.details()) *details.add_details() = detail;
  if (error.details_size() == 0) {
    return absl::Status(static_cast<absl::StatusCode>(error.code()), error.message());
  }
  return ferry::to_status(details);
}

v1::Error to_error(const absl::Status& status) {
  v1::Error error;
  error.set_code(static_cast<v1::Code>(status.code()));
  error.set_message(std::string(status.message()));
  google::rpc::Status details;
  if (rich_status(status, &details)) {
    for (const google::protobuf::Any& detail : details.details()) *error.add_details() = detail;
  }
  return error;
}

}  // namespace ferry::conformance
