// HTTP/2 frames (RFC 9113 §4, §6): the frame header, the types and flags, the settings ids
// (http2 layer, private). Shared by the frame parser (parser.h) and writer (writer.h).
#pragma once

#include <cstdint>

namespace ferry::http2::frame {

inline constexpr std::uint32_t kFrameHeaderSize = 9;
// RFC 9113 §6.5.2: SETTINGS_MAX_FRAME_SIZE's initial value and its upper bound.
inline constexpr std::uint32_t kDefaultMaxFrameSize = 16384;
inline constexpr std::uint32_t kMaxAllowedFrameSize = (1u << 24) - 1;
// RFC 9113 §6.9.1: the largest flow-control window.
inline constexpr std::uint32_t kMaxWindowSize = 0x7fffffffu;
inline constexpr std::uint32_t kStreamIdMask = 0x7fffffffu;

// RFC 9113 §3.4: the client connection preface.
inline constexpr char kClientPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
inline constexpr std::uint32_t kClientPrefaceSize = sizeof(kClientPreface) - 1;

enum class FrameType : std::uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kPriority = 0x2,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoaway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};

namespace flags {
inline constexpr std::uint8_t kEndStream = 0x1;   // DATA, HEADERS
inline constexpr std::uint8_t kAck = 0x1;         // SETTINGS, PING
inline constexpr std::uint8_t kEndHeaders = 0x4;  // HEADERS, PUSH_PROMISE, CONTINUATION
inline constexpr std::uint8_t kPadded = 0x8;      // DATA, HEADERS, PUSH_PROMISE
inline constexpr std::uint8_t kPriority = 0x20;   // HEADERS
}  // namespace flags

// RFC 9113 §6.5.2, RFC 8441 §3, RFC 9218 §2.1.
enum class SettingId : std::uint16_t {
  kHeaderTableSize = 0x1,
  kEnablePush = 0x2,
  kMaxConcurrentStreams = 0x3,
  kInitialWindowSize = 0x4,
  kMaxFrameSize = 0x5,
  kMaxHeaderListSize = 0x6,
  kEnableConnectProtocol = 0x8,
  kNoRfc7540Priorities = 0x9,
};
inline constexpr std::uint16_t kMaxKnownSettingId = 0x9;

struct Setting {
  SettingId id;
  std::uint32_t value;
};

// Which end of the connection this is: it decides the parity of the streams each end opens
// (RFC 9113 §5.1.1) and which frames it may receive (PUSH_PROMISE, the preface).
enum class Role : std::uint8_t { kServer, kClient };

inline std::uint32_t read_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}
inline void write_u32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

}  // namespace ferry::http2::frame
