// ferry/frame.h: gRPC's Length-Prefixed-Message (codec layer): a 1-byte compressed flag, a
// 4-byte big-endian length, then the payload. Constants and the prefix itself; frame_encoder.h
// and frame_decoder.h build on it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry {

inline constexpr std::size_t kFramePrefixSize = 5;

// gRPC's default limit on a received message (4 MiB); the send side is unlimited by default.
inline constexpr std::size_t kDefaultMaxReceiveMessageSize = 4 * 1024 * 1024;
// The largest payload a 4-byte length can describe.
inline constexpr std::size_t kMaxFramePayloadSize = 0xFFFFFFFFu;

// Writes the 5-byte prefix at dst.
inline void write_frame_prefix(std::uint8_t* dst, bool compressed, std::uint32_t length) {
  dst[0] = compressed ? 1 : 0;
  dst[1] = static_cast<std::uint8_t>(length >> 24);
  dst[2] = static_cast<std::uint8_t>(length >> 16);
  dst[3] = static_cast<std::uint8_t>(length >> 8);
  dst[4] = static_cast<std::uint8_t>(length);
}

// Reads the length from a 5-byte prefix at src.
inline std::uint32_t read_frame_length(const std::uint8_t* src) {
  return (std::uint32_t{src[1]} << 24) | (std::uint32_t{src[2]} << 16) |
         (std::uint32_t{src[3]} << 8) | std::uint32_t{src[4]};
}

}  // namespace ferry
