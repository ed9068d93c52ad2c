// ferry/frame_decoder.h: the incremental gRPC Length-Prefixed-Message decoder (codec layer). It is
// fed the bytes of a stream in chunks split anywhere (even inside the 5-byte prefix) and yields
// each complete message as a SliceChain over the chunks it arrived in: a message that lies inside
// one chunk is one slice of that chunk's block, and nothing is ever copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/compression.h"
#include "ferry/frame.h"
#include "ferry/slice_chain.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

struct FrameDecoderOptions {
  // A message whose declared length exceeds this is refused with RESOURCE_EXHAUSTED as soon as its
  // prefix arrives, before any of its payload is buffered.
  std::size_t max_message_size = kDefaultMaxReceiveMessageSize;
  // Whether a compression encoding was negotiated for the stream (grpc-encoding). Without one, a
  // message with the compressed flag set is an INTERNAL error, as the gRPC spec says.
  bool compression_negotiated = false;
  // A flag bit the protocol gives a last frame of its own (gRPC-Web's trailers, 0x80): such a
  // frame is returned with DecodedMessage::end_frame set rather than refused. 0: none (gRPC).
  std::uint8_t end_frame_flag = 0;
};

// One message as received.
struct DecodedMessage {
  bool compressed = false;
  bool end_frame = false;  // the protocol's end frame (FrameDecoderOptions::end_frame_flag)
  SliceChain payload;
};

// Not thread-safe: one stream, one owner.
class FrameDecoder {
 public:
  explicit FrameDecoder(FrameDecoderOptions options = {}) : options_(options) {}

  // Appends the next bytes of the stream, by reference. While a message is incomplete its bytes
  // stay by reference only as long as the blocks they keep alive do not far outweigh them (see
  // detail::LooseTail): one trickled a few bytes per read is copied into blocks of the
  // decoder's own as it goes, so it holds a few bytes per byte rather than a block per read.
  void push(const Slice& chunk) {
    if (chunk.empty()) return;
    if (pending_.empty()) loose_.reset();
    loose_.note(chunk);
    pending_.append(chunk);
  }
  void push(Slice&& chunk) {
    if (chunk.empty()) return;
    if (pending_.empty()) loose_.reset();
    loose_.note(chunk);
    pending_.append(std::move(chunk));
  }
  // Appends a copy of bytes ferry does not own (or that were decoded from the stream), packed
  // into the decoder's own blocks after the bytes before them.
  void push_copy(const void* data, std::size_t size);

  // Takes the next complete message off the front into out. Returns true when it did, false when
  // more bytes are needed. A malformed stream returns an error, and every later call returns it
  // again (the stream is unusable):
  //   INTERNAL            compressed flag not 0 or 1, or 1 without negotiated compression;
  //   RESOURCE_EXHAUSTED  declared length above max_message_size.
  [[nodiscard]] absl::StatusOr<bool> next(DecodedMessage& out) {
    // Inline: an uncompressed message that lies whole in the first slice (the usual case).
    if (error_.ok() && pending_.slice_count() > 0 && pending_.slice(0).size() >= kFramePrefixSize) {
      const std::uint8_t* prefix = pending_.slice(0).data();
      const std::size_t length = read_frame_length(prefix);
      if (prefix[0] == 0 && length <= options_.max_message_size &&
          pending_.slice(0).size() - kFramePrefixSize >= length) {
        pending_.consume(kFramePrefixSize);
        out.compressed = false;
        out.end_frame = false;
        pending_.move_front_to(length, out.payload);
        return true;
      }
    }
    return next_slow(out);
  }

  // Call at the end of the stream: INTERNAL when it ended inside a message.
  [[nodiscard]] absl::Status finish() const;

  // Bytes pushed and not yet returned by next().
  std::size_t buffered_bytes() const { return pending_.size(); }
  // The memory those bytes keep alive (whole blocks for bytes held by reference, the free rest
  // of the decoder's own block): what the budgets on held bytes count.
  std::size_t held_bytes() const { return pending_.empty() ? 0 : loose_.pinned_bytes(pending_); }

  const FrameDecoderOptions& options() const { return options_; }
  void set_options(const FrameDecoderOptions& options) { options_ = options; }

 private:
  absl::StatusOr<bool> next_slow(DecodedMessage& out);

  FrameDecoderOptions options_;
  SliceChain pending_;
  detail::LooseTail loose_;  // pending_'s bytes by reference since it last copied
  absl::Status error_;
};

// Decompresses the payload of a message received with the compressed flag set, on a stream whose
// grpc-encoding is `compression`, appending the result to out (pooled blocks). The receive limit
// applies to the result: inflation stops as soon as it passes max_size, so memory stays within
// max_size + one block whatever the input claims. Errors (out is left as it was):
//   RESOURCE_EXHAUSTED  the message inflates to more than max_size bytes;
//   INTERNAL            corrupt or truncated data, or compression is kIdentity (a compressed
//                       flag needs an encoding).
[[nodiscard]] absl::Status decompress_payload(const SliceChain& payload, Compression compression,
                                              std::size_t max_size, SliceChain& out);

namespace detail {
absl::Status parse_chain(const SliceChain& payload, google::protobuf::MessageLite& msg);
bool parse_array(const std::uint8_t* data, std::size_t size, google::protobuf::MessageLite& msg);
absl::Status parse_failed(const SliceChain& payload, const google::protobuf::MessageLite& msg);
}  // namespace detail

// Parses a payload into msg (which may live on a protobuf Arena): straight from the block when the
// payload is one slice, through a zero-copy stream over the slices otherwise. A payload that is not
// a valid encoding of msg's type gets INTERNAL.
[[nodiscard]] inline absl::Status parse_message(const SliceChain& payload,
                                                google::protobuf::MessageLite& msg) {
  // Inline: the one-slice payload the decoder yields for a message that arrived in one read.
  if (payload.slice_count() == 1 &&
      payload.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    const Slice& s = payload.slice(0);
    if (detail::parse_array(s.data(), s.size(), msg)) return absl::OkStatus();
    return detail::parse_failed(payload, msg);
  }
  return detail::parse_chain(payload, msg);
}

}  // namespace ferry
