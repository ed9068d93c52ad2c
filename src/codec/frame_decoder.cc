// Implementation of ferry/frame_decoder.h.
#include "ferry/frame_decoder.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "codec/chain_streams.h"
#include "codec/gzip.h"
#include "google/protobuf/message_lite.h"

namespace ferry {

void FrameDecoder::push_copy(const void* data, std::size_t size) {
  if (size == 0) return;
  // Bytes by reference before them are copied first: the loose bytes stay the last ones.
  loose_.compact_all(pending_);
  pending_.append_copy(data, size);
}

absl::StatusOr<bool> FrameDecoder::next_slow(DecodedMessage& out) {
  if (!error_.ok()) return error_;
  if (pending_.size() < kFramePrefixSize) {
    loose_.compact(pending_);
    return false;
  }

  std::uint8_t copied[kFramePrefixSize];
  const std::uint8_t* prefix = pending_.slice(0).data();
  if (pending_.slice(0).size() < kFramePrefixSize) {  // the prefix straddles chunks
    pending_.copy_to(0, kFramePrefixSize, copied);
    prefix = copied;
  }
  const std::uint8_t end_flag = options_.end_frame_flag;
  const bool end_frame = end_flag != 0 && (prefix[0] & end_flag) != 0;
  const std::uint8_t flag =
      end_frame ? static_cast<std::uint8_t>(prefix[0] & ~end_flag) : prefix[0];
  const std::size_t length = read_frame_length(prefix);

  if (flag > 1) {
    error_ = absl::InternalError(
        absl::StrCat("invalid gRPC message: compressed flag is ", flag, " (must be 0 or 1)"));
  } else if (flag == 1 && !options_.compression_negotiated) {
    error_ = absl::InternalError(
        "invalid gRPC message: compressed flag set but no grpc-encoding was negotiated");
  } else if (length > options_.max_message_size) {
    error_ =
        absl::ResourceExhaustedError(absl::StrCat("received message larger than max (", length,
                                                  " vs. ", options_.max_message_size, " bytes)"));
  }
  if (!error_.ok()) {
    pending_.clear();
    return error_;
  }

  if (pending_.size() - kFramePrefixSize < length) {
    // The message is incomplete: its bytes wait here, copied out of the reads' blocks when
    // those hold far more than them (a trickle), by reference otherwise.
    loose_.compact(pending_);
    return false;
  }
  pending_.consume(kFramePrefixSize);
  out.compressed = flag == 1;
  out.end_frame = end_frame;
  pending_.move_front_to(length, out.payload);
  return true;
}

absl::Status FrameDecoder::finish() const {
  if (!error_.ok()) return error_;
  if (!pending_.empty()) {
    return absl::InternalError(absl::StrCat("stream ended inside a gRPC message (", pending_.size(),
                                            " bytes of it received)"));
  }
  return absl::OkStatus();
}

absl::Status decompress_payload(const SliceChain& payload, Compression compression,
                                std::size_t max_size, SliceChain& out) {
  switch (compression) {
    case Compression::kGzip:
      return detail::gzip_decompress(payload, max_size, out);
    case Compression::kIdentity:
      break;
  }
  return absl::InternalError(
      "invalid gRPC message: compressed flag set but no grpc-encoding was negotiated");
}

namespace detail {

bool parse_array(const std::uint8_t* data, std::size_t size, google::protobuf::MessageLite& msg) {
  // The caller checked size against protobuf's 2 GiB limit.
  return msg.ParseFromArray(data, static_cast<int>(size));
}

absl::Status parse_failed(const SliceChain& payload, const google::protobuf::MessageLite& msg) {
  return absl::InternalError(absl::StrCat("failed to parse message of type ", msg.GetTypeName(),
                                          " (", payload.size(), " bytes)"));
}

absl::Status parse_chain(const SliceChain& payload, google::protobuf::MessageLite& msg) {
  if (payload.size() > static_cast<std::size_t>(INT_MAX)) {
    return absl::ResourceExhaustedError("message too large for protobuf to parse (over 2 GiB)");
  }
  bool ok;
  if (payload.empty()) {
    ok = msg.ParseFromArray(nullptr, 0);
  } else {
    ChainInputStream stream(payload);
    ok = msg.ParseFromZeroCopyStream(&stream);
  }
  if (!ok) return parse_failed(payload, msg);
  return absl::OkStatus();
}

}  // namespace detail

}  // namespace ferry
