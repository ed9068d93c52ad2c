// HTTP/2 frame writer (RFC 9113 §4, §6), the parser's counterpart (http2 layer, private): each
// function writes one frame (or a HEADERS frame and its CONTINUATIONs) into the caller's
// buffer and returns the bytes written. The caller sizes the buffer with the *_size()
// functions; a buffer too small gets nothing written and 0 returned. No allocation, no state.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "http2/error_code.h"
#include "http2/frame/frame.h"

namespace ferry::http2::frame {

// The 9-byte frame header (RFC 9113 §4.1). Inline, as two 32-bit stores and a byte: every
// frame a call sends starts with one.
inline void write_frame_header(std::uint8_t* out, std::uint32_t length, FrameType type,
                               std::uint8_t frame_flags, std::uint32_t stream_id) {
  auto big_endian = [](std::uint32_t v) {
    if constexpr (std::endian::native == std::endian::little) return __builtin_bswap32(v);
    return v;
  };
  // Length (24 bits) and type, then the flags, then the stream id without its reserved bit.
  const std::uint32_t length_and_type = big_endian((length << 8) | static_cast<std::uint8_t>(type));
  const std::uint32_t stream = big_endian(stream_id & kStreamIdMask);
  std::memcpy(out, &length_and_type, 4);
  out[4] = frame_flags;
  std::memcpy(out + 5, &stream, 4);
}

// A header block as HEADERS and as many CONTINUATIONs as `max_frame_size` (the peer's
// SETTINGS_MAX_FRAME_SIZE) needs, END_HEADERS on the last, END_STREAM on the HEADERS.
std::size_t headers_size(std::size_t block_size, std::uint32_t max_frame_size);
std::size_t write_headers(std::span<std::uint8_t> out, std::uint32_t stream_id,
                          std::span<const std::uint8_t> block, bool end_stream,
                          std::uint32_t max_frame_size);

// A DATA frame's header alone: the payload (at most the peer's max frame size, the caller's to
// check; 0 is returned above the largest any peer may allow, 2^24-1) is sent after it by
// reference.
std::size_t write_data_header(std::span<std::uint8_t> out, std::uint32_t stream_id,
                              std::uint32_t payload_size, bool end_stream);

inline std::size_t settings_size(std::size_t count) { return kFrameHeaderSize + 6 * count; }
std::size_t write_settings(std::span<std::uint8_t> out, std::span<const Setting> settings);
std::size_t write_settings_ack(std::span<std::uint8_t> out);

inline constexpr std::size_t kPingFrameSize = kFrameHeaderSize + 8;
std::size_t write_ping(std::span<std::uint8_t> out, const std::uint8_t (&opaque)[8], bool ack);

inline constexpr std::size_t kWindowUpdateFrameSize = kFrameHeaderSize + 4;
// `increment` in 1..2^31-1 (RFC 9113 §6.9).
std::size_t write_window_update(std::span<std::uint8_t> out, std::uint32_t stream_id,
                                std::uint32_t increment);

inline constexpr std::size_t kRstStreamFrameSize = kFrameHeaderSize + 4;
std::size_t write_rst_stream(std::span<std::uint8_t> out, std::uint32_t stream_id, ErrorCode code);

inline std::size_t goaway_size(std::size_t debug_size) { return kFrameHeaderSize + 8 + debug_size; }
// `debug` is truncated to what fits the peer's max frame size, `max_frame_size`.
std::size_t write_goaway(std::span<std::uint8_t> out, std::uint32_t last_stream_id, ErrorCode code,
                         std::span<const std::uint8_t> debug,
                         std::uint32_t max_frame_size = kDefaultMaxFrameSize);

}  // namespace ferry::http2::frame
