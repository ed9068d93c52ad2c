// ferry/frame_encoder.h: protobuf message -> gRPC Length-Prefixed-Message, written in place into
// pooled blocks (codec layer). The message is sized once (ByteSizeLong), the prefix written, and
// the message serialized straight after it: no intermediate string, no copy, and no heap
// allocation once the pool is warm.
#pragma once

#include <cstddef>
#include <limits>
#include <string_view>

#include "absl/status/status.h"
#include "ferry/compression.h"
#include "ferry/frame.h"
#include "ferry/slice_chain.h"
#include "google/protobuf/message_lite.h"

namespace ferry {

namespace detail {
// encode_message beyond its inline path: a message larger than a block or than max_size.
[[nodiscard]] absl::Status encode_large_message(const google::protobuf::MessageLite& msg,
                                                std::size_t size, SliceChain& out,
                                                std::size_t max_size);
// The INTERNAL error of a message that serialized to written bytes after ByteSizeLong said size.
[[nodiscard]] absl::Status message_size_changed(std::size_t size, std::size_t written);
}  // namespace detail

// Appends msg to out as one uncompressed Length-Prefixed-Message.
//
// A message that fits a block with its prefix (<= 64 KiB - 5) is serialized contiguously into the
// tail of out (packed after earlier messages when there is room); a larger one streams across as
// many blocks as it needs. Errors (out is left as it was):
//   RESOURCE_EXHAUSTED  the serialized size exceeds max_size (or what 4 length bytes can hold);
//   INTERNAL            the message changed size while being serialized (a data race).
// Cost: one ByteSizeLong and one serialization pass over msg. The small-message path is inline:
// a small message's framing costs about as much as the calls around it.
[[nodiscard]] inline absl::Status encode_message(const google::protobuf::MessageLite& msg,
                                                 SliceChain& out,
                                                 std::size_t max_size = kMaxFramePayloadSize) {
  const std::size_t size = msg.ByteSizeLong();
  if (size > BufferPool::kBlockSize - kFramePrefixSize || size > max_size) [[unlikely]] {
    return detail::encode_large_message(msg, size, out, max_size);
  }
  std::uint8_t* p = out.reserve(kFramePrefixSize + size);
  write_frame_prefix(p, false, static_cast<std::uint32_t>(size));
  std::uint8_t* end = msg.SerializeWithCachedSizesToArray(p + kFramePrefixSize);
  const auto written = static_cast<std::size_t>(end - p) - kFramePrefixSize;
  if (written != size) [[unlikely]]
    return detail::message_size_changed(size, written);
  out.commit(kFramePrefixSize + size);
  return absl::OkStatus();
}

// Appends msg to out as one Length-Prefixed-Message compressed with `compression` (compressed
// flag 1); kIdentity is encode_message. The message is serialized into pooled blocks of a
// per-thread scratch chain, then deflated from them straight into out after a 5-byte prefix whose
// length is written last. max_size limits the serialized (uncompressed) size; errors as for
// encode_message, plus INTERNAL if zlib fails. Cost (docs/performance.md, gzip): the deflate pass
// dominates; no heap allocation once the thread's zlib stream and the pool are warm.
[[nodiscard]] absl::Status encode_compressed_message(const google::protobuf::MessageLite& msg,
                                                     Compression compression, SliceChain& out,
                                                     std::size_t max_size = kMaxFramePayloadSize);

// Appends payload (already serialized, possibly compressed) with its prefix: the prefix goes into
// the tail block, the payload is copied after it.
[[nodiscard]] absl::Status encode_bytes(std::string_view payload, bool compressed, SliceChain& out,
                                        std::size_t max_size = kMaxFramePayloadSize);

// Appends a prefix, then payload by reference (no copy): for payloads already in pooled blocks.
[[nodiscard]] absl::Status encode_chain(SliceChain&& payload, bool compressed, SliceChain& out,
                                        std::size_t max_size = kMaxFramePayloadSize);
// The same, sharing payload's slices (one reference each) rather than taking them: a message
// sent by reference, whose bytes the caller keeps (ServerContext::write_raw). The cost is the
// prefix and one reference per slice, whatever the size: a body of one external slice
// (Slice::external) frames in constant time.
[[nodiscard]] absl::Status encode_chain(const SliceChain& payload, bool compressed, SliceChain& out,
                                        std::size_t max_size = kMaxFramePayloadSize);

}  // namespace ferry
