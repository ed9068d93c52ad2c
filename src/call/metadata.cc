// Implementation of ferry/metadata.h.
#include "ferry/metadata.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace ferry {

void Metadata::add(std::string_view key, std::string_view value) {
  const std::size_t at = bytes_.size();
  bytes_.resize(at + key.size() + value.size());
  char* out = bytes_.data() + at;
  if (!key.empty()) std::memcpy(out, key.data(), key.size());
  if (!value.empty()) std::memcpy(out + key.size(), value.data(), value.size());
  spans_.push_back({static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(key.size()),
                    static_cast<std::uint32_t>(value.size())});
}

std::optional<std::string_view> Metadata::get(std::string_view key) const {
  for (const Entry e : *this) {
    if (e.first == key) return e.second;
  }
  return std::nullopt;
}

std::vector<std::string_view> Metadata::get_all(std::string_view key) const {
  std::vector<std::string_view> out;
  for (const Entry e : *this) {
    if (e.first == key) out.push_back(e.second);
  }
  return out;
}

absl::Status validate_metadata(std::string_view key, std::string_view value) {
  if (key.empty()) return absl::InvalidArgumentError("metadata key is empty");
  if (key.substr(0, 5) == "grpc-") {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata key '", detail::to_absl(key), "' is reserved (grpc-)"));
  }
  for (char c : key) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("metadata key '", detail::to_absl(key),
                                                     "' has a character outside [0-9a-z_.-]"));
    }
  }
  if (!is_binary_metadata_key(key)) {
    for (char c : value) {
      if (c < 0x20 || c > 0x7E) {
        return absl::InvalidArgumentError(
            absl::StrCat("value of metadata key '", detail::to_absl(key),
                         "' is not printable ASCII (use a -bin key)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry
