// HTTP/2 frame writer: see writer.h.
#include "http2/frame/writer.h"

#include <algorithm>
#include <cstring>

namespace ferry::http2::frame {

std::size_t headers_size(std::size_t block_size, std::uint32_t max_frame_size) {
  const std::size_t frames =
      block_size == 0 ? 1 : (block_size + max_frame_size - 1) / max_frame_size;
  return frames * kFrameHeaderSize + block_size;
}

std::size_t write_headers(std::span<std::uint8_t> out, std::uint32_t stream_id,
                          std::span<const std::uint8_t> block, bool end_stream,
                          std::uint32_t max_frame_size) {
  const std::size_t total = headers_size(block.size(), max_frame_size);
  if (out.size() < total) return 0;
  std::uint8_t* p = out.data();
  FrameType type = FrameType::kHeaders;
  std::uint8_t frame_flags = end_stream ? flags::kEndStream : 0;
  do {
    const std::size_t n = std::min<std::size_t>(block.size(), max_frame_size);
    const bool last = n == block.size();
    write_frame_header(p, static_cast<std::uint32_t>(n), type,
                       static_cast<std::uint8_t>(frame_flags | (last ? flags::kEndHeaders : 0)),
                       stream_id);
    if (n > 0) std::memcpy(p + kFrameHeaderSize, block.data(), n);
    p += kFrameHeaderSize + n;
    block = block.subspan(n);
    type = FrameType::kContinuation;
    frame_flags = 0;
  } while (!block.empty());
  return total;
}

std::size_t write_data_header(std::span<std::uint8_t> out, std::uint32_t stream_id,
                              std::uint32_t payload_size, bool end_stream) {
  if (out.size() < kFrameHeaderSize || payload_size > kMaxAllowedFrameSize) return 0;
  write_frame_header(out.data(), payload_size, FrameType::kData, end_stream ? flags::kEndStream : 0,
                     stream_id);
  return kFrameHeaderSize;
}

std::size_t write_settings(std::span<std::uint8_t> out, std::span<const Setting> settings) {
  const std::size_t total = settings_size(settings.size());
  if (out.size() < total) return 0;
  write_frame_header(out.data(), static_cast<std::uint32_t>(6 * settings.size()),
                     FrameType::kSettings, 0, 0);
  std::uint8_t* p = out.data() + kFrameHeaderSize;
  for (const Setting& s : settings) {
    const auto id = static_cast<std::uint16_t>(s.id);
    p[0] = static_cast<std::uint8_t>(id >> 8);
    p[1] = static_cast<std::uint8_t>(id);
    write_u32(p + 2, s.value);
    p += 6;
  }
  return total;
}

std::size_t write_settings_ack(std::span<std::uint8_t> out) {
  if (out.size() < kFrameHeaderSize) return 0;
  write_frame_header(out.data(), 0, FrameType::kSettings, flags::kAck, 0);
  return kFrameHeaderSize;
}

std::size_t write_ping(std::span<std::uint8_t> out, const std::uint8_t (&opaque)[8], bool ack) {
  if (out.size() < kPingFrameSize) return 0;
  write_frame_header(out.data(), 8, FrameType::kPing, ack ? flags::kAck : 0, 0);
  std::memcpy(out.data() + kFrameHeaderSize, opaque, 8);
  return kPingFrameSize;
}

std::size_t write_window_update(std::span<std::uint8_t> out, std::uint32_t stream_id,
                                std::uint32_t increment) {
  if (out.size() < kWindowUpdateFrameSize) return 0;
  write_frame_header(out.data(), 4, FrameType::kWindowUpdate, 0, stream_id);
  write_u32(out.data() + kFrameHeaderSize, increment & kMaxWindowSize);
  return kWindowUpdateFrameSize;
}

std::size_t write_rst_stream(std::span<std::uint8_t> out, std::uint32_t stream_id, ErrorCode code) {
  if (out.size() < kRstStreamFrameSize) return 0;
  write_frame_header(out.data(), 4, FrameType::kRstStream, 0, stream_id);
  write_u32(out.data() + kFrameHeaderSize, static_cast<std::uint32_t>(code));
  return kRstStreamFrameSize;
}

std::size_t write_goaway(std::span<std::uint8_t> out, std::uint32_t last_stream_id, ErrorCode code,
                         std::span<const std::uint8_t> debug, std::uint32_t max_frame_size) {
  if (debug.size() + 8 > max_frame_size) debug = debug.first(max_frame_size - 8);
  const std::size_t total = goaway_size(debug.size());
  if (out.size() < total) return 0;
  write_frame_header(out.data(), static_cast<std::uint32_t>(8 + debug.size()), FrameType::kGoaway,
                     0, 0);
  write_u32(out.data() + kFrameHeaderSize, last_stream_id & kStreamIdMask);
  write_u32(out.data() + kFrameHeaderSize + 4, static_cast<std::uint32_t>(code));
  if (!debug.empty()) std::memcpy(out.data() + kFrameHeaderSize + 8, debug.data(), debug.size());
  return total;
}

}  // namespace ferry::http2::frame
