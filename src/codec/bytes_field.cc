// Implementation of ferry/bytes_field.h: a field header writer, and a walk over a message's
// top-level fields across the slices of a chain.
#include "ferry/bytes_field.h"

#include <cstddef>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "codec/chain_streams.h"
#include "ferry/frame.h"
#include "google/protobuf/message_lite.h"

namespace ferry {

namespace {

constexpr std::uint32_t kMaxFieldNumber = (1u << 29) - 1;
constexpr std::uint32_t kLengthDelimited = 2;

std::uint8_t* write_varint(std::uint64_t v, std::uint8_t* p) {
  while (v >= 0x80) {
    *p++ = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::uint8_t>(v);
  return p;
}

// Reads a chain front to back, one byte or a skipped run at a time, across its slices.
class ChainCursor {
 public:
  explicit ChainCursor(const SliceChain& chain) : chain_(chain) {}

  std::size_t position() const { return position_; }
  bool at_end() const { return position_ == chain_.size(); }

  bool read_byte(std::uint8_t& out) {
    while (slice_ < chain_.slice_count() && offset_ == chain_.slice(slice_).size()) next_slice();
    if (slice_ == chain_.slice_count()) return false;
    out = chain_.slice(slice_).data()[offset_++];
    ++position_;
    return true;
  }

  // A varint of at most max_bytes bytes (protobuf reads values in up to 10, but tags and
  // lengths in up to 5, however small the value: a longer, zero-padded one is refused).
  bool read_varint(std::uint64_t& out, int max_bytes = 10) {
    out = 0;
    for (int i = 0, shift = 0; i < max_bytes; ++i, shift += 7) {
      std::uint8_t b;
      if (!read_byte(b)) return false;
      out |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;  // too long
  }

  bool skip(std::uint64_t n) {
    if (n > chain_.size() - position_) return false;
    position_ += n;
    while (n > 0) {
      const std::size_t left = chain_.slice(slice_).size() - offset_;
      if (n < left) {
        offset_ += n;
        return true;
      }
      n -= left;
      next_slice();
    }
    return true;
  }

 private:
  void next_slice() {
    ++slice_;
    offset_ = 0;
  }

  const SliceChain& chain_;
  std::size_t slice_ = 0;
  std::size_t offset_ = 0;
  std::size_t position_ = 0;
};

constexpr int kMaxTagOrLengthBytes = 5;

// One occurrence of the wanted field: where its header starts, where its bytes start and end.
struct Occurrence {
  std::size_t start;
  std::size_t body_start;
  std::size_t end;
};

absl::Status malformed(const char* what) {
  return absl::InternalError(absl::StrCat("message with a bytes field by reference: ", what));
}

}  // namespace

absl::Status append_with_bytes_field(const google::protobuf::MessageLite& rest,
                                     std::uint32_t field_number, const SliceChain& body,
                                     SliceChain& out) {
  if (field_number == 0 || field_number > kMaxFieldNumber) {
    return absl::InvalidArgumentError(absl::StrCat("field number ", field_number, " is invalid"));
  }
  const std::size_t rest_size = rest.ByteSizeLong();
  if (rest_size + body.size() + 16 > kMaxFramePayloadSize) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a message of ", rest_size + body.size(), " bytes is over 4 GiB"));
  }
  // The field header goes right after the rest, in the same reservation when the rest is small
  // (the usual case: a few scalar fields beside the body).
  const std::uint64_t tag = (std::uint64_t{field_number} << 3) | kLengthDelimited;
  constexpr std::size_t kHeaderRoom = 20;  // two varints
  if (rest_size <= BufferPool::kBlockSize - kHeaderRoom) {
    std::uint8_t* p = out.reserve(rest_size + kHeaderRoom);
    std::uint8_t* end = rest.SerializeWithCachedSizesToArray(p);
    if (static_cast<std::size_t>(end - p) != rest_size) {
      return absl::InternalError("the message changed size while being serialized");
    }
    end = write_varint(body.size(), write_varint(tag, end));
    out.commit(static_cast<std::size_t>(end - p));
  } else {
    {
      detail::ChainOutputStream stream(out);
      if (!rest.SerializeToZeroCopyStream(&stream)) {
        return absl::InternalError("the message failed to serialize");
      }
    }
    std::uint8_t* p = out.reserve(kHeaderRoom);
    std::uint8_t* end = write_varint(body.size(), write_varint(tag, p));
    out.commit(static_cast<std::size_t>(end - p));
  }
  for (const Slice& s : body) out.append(s);
  return absl::OkStatus();
}

absl::Status take_bytes_field(SliceChain& message, std::uint32_t field_number, SliceChain& body) {
  absl::InlinedVector<Occurrence, 2> found;
  ChainCursor cursor(message);
  while (!cursor.at_end()) {
    const std::size_t start = cursor.position();
    std::uint64_t tag;
    if (!cursor.read_varint(tag, kMaxTagOrLengthBytes) || (tag >> 3) == 0 ||
        (tag >> 3) > kMaxFieldNumber) {
      return malformed("bad field tag");
    }
    const std::uint32_t wire_type = tag & 7;
    const std::uint64_t number = tag >> 3;
    std::uint64_t length = 0;
    switch (wire_type) {
      case 0:
        if (!cursor.read_varint(length)) return malformed("truncated varint");
        length = 0;
        break;
      case 1:
        length = 8;
        break;
      case 2:
        // protobuf refuses lengths of 2 GiB and more.
        if (!cursor.read_varint(length, kMaxTagOrLengthBytes) || length > INT32_MAX) {
          return malformed("bad length");
        }
        break;
      case 5:
        length = 4;
        break;
      default:
        return malformed("groups are not supported");
    }
    const std::size_t body_start = cursor.position();
    if (!cursor.skip(length)) return malformed("truncated field");
    if (number == field_number) {
      if (wire_type != kLengthDelimited) return malformed("the field is not length-delimited");
      found.push_back({start, body_start, cursor.position()});
    }
  }
  body.clear();
  if (found.empty()) return absl::OkStatus();
  // Rebuild the message from the pieces between occurrences; the last occurrence is the body.
  SliceChain rest;
  std::size_t position = 0;
  for (std::size_t i = 0; i < found.size(); ++i) {
    const Occurrence& o = found[i];
    rest.append(message.split_front(o.start - position));
    message.consume(o.body_start - o.start);
    SliceChain bytes = message.split_front(o.end - o.body_start);
    if (i + 1 == found.size()) body = std::move(bytes);
    position = o.end;
  }
  rest.append(std::move(message));
  message = std::move(rest);
  return absl::OkStatus();
}

}  // namespace ferry
