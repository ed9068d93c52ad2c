// Implementation of ferry/frame_encoder.h.
#include "ferry/frame_encoder.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "codec/chain_streams.h"
#include "codec/gzip.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/message_lite.h"

namespace ferry {

[[gnu::cold]] absl::Status detail::message_size_changed(std::size_t size, std::size_t written) {
  return absl::InternalError(absl::StrCat("message changed size while being serialized (", size,
                                          " bytes expected, ", written, " written)"));
}

namespace {

[[gnu::noinline, gnu::cold]] absl::Status too_large(std::size_t size, std::size_t max_size) {
  return absl::ResourceExhaustedError(
      absl::StrCat("message to send is larger than the limit (", size, " vs. ",
                   std::min(max_size, kMaxFramePayloadSize), " bytes)"));
}

inline absl::Status check_size(std::size_t size, std::size_t max_size) {
  if (size > max_size || size > kMaxFramePayloadSize) [[unlikely]]
    return too_large(size, max_size);
  return absl::OkStatus();
}

// Messages larger than a block: the prefix and then the body stream into out's tail block and
// as many fresh blocks as they take; a failure truncates out back to where it was.
absl::Status encode_across_blocks(const google::protobuf::MessageLite& msg, std::size_t size,
                                  SliceChain& out) {
  const std::size_t mark = out.size();
  write_frame_prefix(out.reserve(kFramePrefixSize), false, static_cast<std::uint32_t>(size));
  out.commit(kFramePrefixSize);
  {
    detail::ChainOutputStream stream(out);
    {
      google::protobuf::io::CodedOutputStream coded(&stream);
      msg.SerializeWithCachedSizes(&coded);
    }
    stream.finish();
  }
  const std::size_t written = out.size() - mark - kFramePrefixSize;
  if (written != size) {
    out.truncate(mark);
    return detail::message_size_changed(size, written);
  }
  return absl::OkStatus();
}

// Serializes msg (of ByteSizeLong() == size) into out without a prefix: contiguously when it
// fits the tail or a block, else streamed across blocks.
absl::Status serialize_into(const google::protobuf::MessageLite& msg, std::size_t size,
                            SliceChain& out) {
  if (size == 0) return absl::OkStatus();
  const std::size_t mark = out.size();
  if (size <= BufferPool::kBlockSize) {
    std::uint8_t* p = out.reserve(size);
    const auto written = static_cast<std::size_t>(msg.SerializeWithCachedSizesToArray(p) - p);
    if (written != size) return detail::message_size_changed(size, written);
    out.commit(size);
    return absl::OkStatus();
  }
  {
    detail::ChainOutputStream stream(out);
    {
      google::protobuf::io::CodedOutputStream coded(&stream);
      msg.SerializeWithCachedSizes(&coded);
    }
    stream.finish();
  }
  const std::size_t written = out.size() - mark;
  if (written != size) {
    out.truncate(mark);
    return detail::message_size_changed(size, written);
  }
  return absl::OkStatus();
}

// Where messages to compress are serialized first. Consumed (not cleared) after each message, so
// the block it writes into stays and successive small messages share it.
SliceChain& plain_scratch() {
  thread_local SliceChain scratch;
  return scratch;
}

}  // namespace

absl::Status encode_compressed_message(const google::protobuf::MessageLite& msg,
                                       Compression compression, SliceChain& out,
                                       std::size_t max_size) {
  if (compression == Compression::kIdentity) return encode_message(msg, out, max_size);
  const std::size_t size = msg.ByteSizeLong();
  if (absl::Status s = check_size(size, max_size); !s.ok()) return s;

  SliceChain& plain = plain_scratch();
  if (absl::Status s = serialize_into(msg, size, plain); !s.ok()) return s;

  const std::size_t mark = out.size();
  std::uint8_t* prefix = out.reserve(kFramePrefixSize);
  out.commit(kFramePrefixSize);
  absl::Status s = detail::gzip_compress(plain, out);
  plain.consume(plain.size());
  if (s.ok()) s = check_size(out.size() - mark - kFramePrefixSize, kMaxFramePayloadSize);
  if (!s.ok()) {
    out.truncate(mark);
    return s;
  }
  // The prefix is still private to out (nothing has read it yet): its length goes in now.
  write_frame_prefix(prefix, true,
                     static_cast<std::uint32_t>(out.size() - mark - kFramePrefixSize));
  return absl::OkStatus();
}

namespace detail {

absl::Status encode_large_message(const google::protobuf::MessageLite& msg, std::size_t size,
                                  SliceChain& out, std::size_t max_size) {
  if (absl::Status s = check_size(size, max_size); !s.ok()) return s;
  return encode_across_blocks(msg, size, out);
}

}  // namespace detail

absl::Status encode_bytes(std::string_view payload, bool compressed, SliceChain& out,
                          std::size_t max_size) {
  if (absl::Status s = check_size(payload.size(), max_size); !s.ok()) return s;
  const auto length = static_cast<std::uint32_t>(payload.size());
  if (payload.size() <= BufferPool::kBlockSize - kFramePrefixSize) {
    std::uint8_t* p = out.reserve(kFramePrefixSize + payload.size());
    write_frame_prefix(p, compressed, length);
    if (!payload.empty()) std::memcpy(p + kFramePrefixSize, payload.data(), payload.size());
    out.commit(kFramePrefixSize + payload.size());
    return absl::OkStatus();
  }
  write_frame_prefix(out.reserve(kFramePrefixSize), compressed, length);
  out.commit(kFramePrefixSize);
  out.append_copy(payload.data(), payload.size());
  return absl::OkStatus();
}

absl::Status encode_chain(SliceChain&& payload, bool compressed, SliceChain& out,
                          std::size_t max_size) {
  if (absl::Status s = check_size(payload.size(), max_size); !s.ok()) return s;
  write_frame_prefix(out.reserve(kFramePrefixSize), compressed,
                     static_cast<std::uint32_t>(payload.size()));
  out.commit(kFramePrefixSize);
  out.append(std::move(payload));
  return absl::OkStatus();
}

absl::Status encode_chain(const SliceChain& payload, bool compressed, SliceChain& out,
                          std::size_t max_size) {
  if (absl::Status s = check_size(payload.size(), max_size); !s.ok()) return s;
  write_frame_prefix(out.reserve(kFramePrefixSize), compressed,
                     static_cast<std::uint32_t>(payload.size()));
  out.commit(kFramePrefixSize);
  for (const Slice& s : payload) out.append(s);
  return absl::OkStatus();
}

}  // namespace ferry
