// ferry/metadata.h: gRPC custom metadata (request headers, response headers and trailers) as
// key/value pairs in arrival order. Keys ending in "-bin" carry raw bytes: ferry base64-encodes
// them on the wire and decodes them (padded or unpadded) on receipt, so values here are always
// the raw bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"

namespace ferry {

class Metadata {
 public:
  using Entry = std::pair<std::string, std::string>;

  // Appends an entry (a key may repeat). Keys are validated when the metadata is sent: lowercase
  // [0-9a-z_.-], not starting with "grpc-", and for keys not ending in "-bin" a value of printable
  // ASCII (0x20-0x7E).
  void add(std::string_view key, std::string_view value) { entries_.emplace_back(key, value); }

  // The first value of key, if any.
  std::optional<std::string_view> get(std::string_view key) const;
  // Every value of key, in order.
  std::vector<std::string_view> get_all(std::string_view key) const;

  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  void clear() { entries_.clear(); }

 private:
  // Calls carry few entries (often just user-agent): two live in place, more on the heap.
  absl::InlinedVector<Entry, 2> entries_;
};

// Whether key names binary metadata (ends in "-bin").
inline bool is_binary_metadata_key(std::string_view key) {
  return key.size() >= 4 && key.substr(key.size() - 4) == "-bin";
}

// INVALID_ARGUMENT unless key (and, for ASCII keys, value) may be sent as custom metadata.
[[nodiscard]] absl::Status validate_metadata(std::string_view key, std::string_view value);

}  // namespace ferry
