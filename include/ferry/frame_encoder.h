// ferry/frame_encoder.h: protobuf message -> gRPC Length-Prefixed-Message, written in place into
// pooled blocks (codec layer). The message is sized once (ByteSizeLong), the prefix written, and
// the message serialized straight after it: no intermediate string, no copy, and no heap
// allocation once the pool is warm.
#pragma once

#include <cstddef>
#include <limits>
#include <string_view>

#include "absl/status/status.h"
#include "ferry/frame.h"
#include "ferry/slice_chain.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

// Appends msg to out as one uncompressed Length-Prefixed-Message.
//
// A message that fits a block with its prefix (<= 64 KiB - 5) is serialized contiguously into the
// tail of out (packed after earlier messages when there is room); a larger one streams across as
// many blocks as it needs. Errors (out is left as it was):
//   RESOURCE_EXHAUSTED  the serialized size exceeds max_size (or what 4 length bytes can hold);
//   INTERNAL            the message changed size while being serialized (a data race).
// Cost: one ByteSizeLong and one serialization pass over msg.
[[nodiscard]] absl::Status encode_message(const google::protobuf::MessageLite& msg, SliceChain& out,
                                          std::size_t max_size = kMaxFramePayloadSize);

// Appends payload (already serialized, possibly compressed) with its prefix: the prefix goes into
// the tail block, the payload is copied after it.
[[nodiscard]] absl::Status encode_bytes(std::string_view payload, bool compressed, SliceChain& out,
                                        std::size_t max_size = kMaxFramePayloadSize);

// Appends a prefix, then payload by reference (no copy): for payloads already in pooled blocks.
[[nodiscard]] absl::Status encode_chain(SliceChain&& payload, bool compressed, SliceChain& out,
                                        std::size_t max_size = kMaxFramePayloadSize);

}  // namespace ferry
