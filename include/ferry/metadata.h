// ferry/metadata.h: gRPC custom metadata (request headers, response headers and trailers) as
// key/value pairs in arrival order. Keys ending in "-bin" carry raw bytes: ferry base64-encodes
// them on the wire and decodes them (padded or unpadded) on receipt, so values here are always
// the raw bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
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
  // A view of one entry; valid until the Metadata changes or goes.
  using Entry = std::pair<std::string_view, std::string_view>;

  class const_iterator {
   public:
    using value_type = Entry;
    using difference_type = std::ptrdiff_t;
    using reference = Entry;
    using iterator_category = std::forward_iterator_tag;

    const_iterator() = default;
    Entry operator*() const { return owner_->entry(i_); }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const const_iterator& other) const { return i_ == other.i_; }

   private:
    friend class Metadata;
    const_iterator(const Metadata* owner, std::size_t i) : owner_(owner), i_(i) {}
    const Metadata* owner_ = nullptr;
    std::size_t i_ = 0;
  };

  // Appends an entry (a key may repeat), copying key and value. Keys are validated when the
  // metadata is sent: lowercase [0-9a-z_.-], not starting with "grpc-", and for keys not ending
  // in "-bin" a value of printable ASCII (0x20-0x7E).
  void add(std::string_view key, std::string_view value);

  // The first value of key, if any.
  std::optional<std::string_view> get(std::string_view key) const;
  // Every value of key, in order.
  std::vector<std::string_view> get_all(std::string_view key) const;

  bool empty() const { return spans_.empty(); }
  std::size_t size() const { return spans_.size(); }
  Entry entry(std::size_t i) const {
    const Span& s = spans_[i];
    return {std::string_view(bytes_.data() + s.key_at, s.key_size),
            std::string_view(bytes_.data() + s.key_at + s.key_size, s.value_size)};
  }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, spans_.size()}; }
  void clear() {
    spans_.clear();
    bytes_.clear();
  }

 private:
  struct Span {
    std::uint32_t key_at;  // the value follows the key in bytes_
    std::uint32_t key_size;
    std::uint32_t value_size;
  };
  // Keys and values back to back, in place up to a size that holds what a call usually carries
  // (a user-agent such as grpcio's, ~50 bytes, a W3C traceparent, 66 with its key, and a few
  // short entries): every request carries metadata, and a server that copied it into
  // std::strings allocated per call.
  absl::InlinedVector<char, 240> bytes_;
  absl::InlinedVector<Span, 4> spans_;
};

inline bool is_binary_metadata_key(std::string_view key) {
  return key.size() >= 4 && key.substr(key.size() - 4) == "-bin";
}

// INVALID_ARGUMENT unless key (and, for ASCII keys, value) may be sent as custom metadata.
[[nodiscard]] absl::Status validate_metadata(std::string_view key, std::string_view value);

}  // namespace ferry
