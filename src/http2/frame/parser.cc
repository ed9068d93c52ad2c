// HTTP/2 frame parser (RFC 9113 §4-§6): see parser.h.
#include "http2/frame/parser.h"

#include <algorithm>
#include <cstring>

namespace ferry::http2::frame {

Parser::Parser(Role role, ParserLimits limits)
    : role_(role), limits_(limits), preface_left_(role == Role::kServer ? kClientPrefaceSize : 0) {}

void Parser::trim() {
  if (block_stream_ != 0) return;
  block_.reset();
  block_capacity_ = 0;
  block_size_ = 0;
}

Parser::Result Parser::fail(std::size_t consumed, ErrorCode code, std::string_view reason) {
  failed_ = true;
  error_code_ = code;
  reason_ = reason;
  block_stream_ = 0;
  return {Status::kConnectionError, consumed};
}

Parser::Result Parser::next(std::span<const std::uint8_t> buffer, FrameEvent& event) {
  if (failed_) return {Status::kConnectionError, 0};
  std::size_t pos = 0;
  if (preface_left_ > 0) {
    // RFC 9113 §3.4: the client's preface, checked byte by byte as it arrives.
    const std::size_t offset = kClientPrefaceSize - preface_left_;
    const std::size_t n = std::min<std::size_t>(preface_left_, buffer.size());
    if (n > 0 && std::memcmp(buffer.data(), kClientPreface + offset, n) != 0) {
      return fail(0, ErrorCode::kProtocolError, "invalid client connection preface");
    }
    preface_left_ -= static_cast<std::uint32_t>(n);
    pos = n;
    if (preface_left_ > 0) {
      bytes_needed_ = preface_left_;
      return {Status::kNeedMore, pos};
    }
  }
  for (;;) {
    const std::size_t available = buffer.size() - pos;
    if (available < kFrameHeaderSize) {
      bytes_needed_ = kFrameHeaderSize - available;
      return {Status::kNeedMore, pos};
    }
    const std::uint8_t* header = buffer.data() + pos;
    const std::uint32_t length =
        (std::uint32_t{header[0]} << 16) | (std::uint32_t{header[1]} << 8) | header[2];
    const std::uint8_t type = header[3];
    const std::uint8_t frame_flags = header[4];
    // RFC 9113 §4.1: the reserved bit is ignored on receipt.
    const std::uint32_t stream_id = read_u32(header + 5) & kStreamIdMask;

    // Checks that need the header only: a bad frame is refused before its payload is waited
    // for (a declared 16 MiB frame costs 9 bytes, not 16 MiB of buffering).
    if (length > limits_.max_frame_size) {
      // RFC 9113 §4.2: larger than SETTINGS_MAX_FRAME_SIZE; ferry ends the connection for any
      // frame (it may, and must for those that change connection state or carry a block).
      return fail(pos, ErrorCode::kFrameSizeError, "frame larger than SETTINGS_MAX_FRAME_SIZE");
    }
    if (!settings_seen_ &&
        (type != static_cast<std::uint8_t>(FrameType::kSettings) || (frame_flags & flags::kAck))) {
      // RFC 9113 §3.4: each end's preface ends with a SETTINGS frame, its first frame.
      return fail(pos, ErrorCode::kProtocolError, "first frame is not SETTINGS");
    }
    if (block_stream_ != 0) {
      // RFC 9113 §6.10: a header block's frames are contiguous: any other frame, or one on
      // another stream, is a PROTOCOL_ERROR.
      if (type != static_cast<std::uint8_t>(FrameType::kContinuation) ||
          stream_id != block_stream_) {
        return fail(pos, ErrorCode::kProtocolError, "header block interrupted");
      }
      if (block_continuations_ + 1 > limits_.max_continuation_frames) {
        return fail(pos, ErrorCode::kEnhanceYourCalm, "too many CONTINUATION frames");
      }
      if (block_size_ + length > limits_.max_header_block_size) {
        return fail(pos, ErrorCode::kEnhanceYourCalm, "header block too large");
      }
    } else if (type == static_cast<std::uint8_t>(FrameType::kContinuation)) {
      return fail(pos, ErrorCode::kProtocolError, "CONTINUATION without a header block");
    } else if (type == static_cast<std::uint8_t>(FrameType::kHeaders) &&
               length > limits_.max_header_block_size) {
      return fail(pos, ErrorCode::kEnhanceYourCalm, "header block too large");
    }

    if (available - kFrameHeaderSize < length) {
      bytes_needed_ = kFrameHeaderSize + length - available;
      return {Status::kNeedMore, pos};
    }
    const std::span<const std::uint8_t> payload(header + kFrameHeaderSize, length);
    pos += kFrameHeaderSize + length;
    if (on_frame(type, frame_flags, stream_id, payload, event)) return {Status::kEvent, pos};
    if (frame_error_ != ErrorCode::kNoError) return fail(pos, frame_error_, frame_reason_);
  }
}

namespace {

// RFC 9113 §6.1, §6.2: removes the Pad Length octet and the padding (and for HEADERS the
// priority fields, when `priority`). Returns false with `code` set when the frame is too short
// for its fields (FRAME_SIZE_ERROR) or its padding (PROTOCOL_ERROR).
bool strip(std::span<const std::uint8_t>& payload, bool padded, std::uint32_t priority_size,
           ErrorCode& code, std::string_view& reason, std::uint32_t* dependency) {
  std::uint32_t pad = 0;
  if (padded) {
    if (payload.empty()) {
      code = ErrorCode::kFrameSizeError;
      reason = "padded frame without Pad Length";
      return false;
    }
    pad = payload[0];
    payload = payload.subspan(1);
  }
  if (priority_size > 0) {
    if (payload.size() < priority_size) {
      code = ErrorCode::kFrameSizeError;
      reason = "HEADERS too short for its priority";
      return false;
    }
    *dependency = read_u32(payload.data()) & kStreamIdMask;
    payload = payload.subspan(priority_size);
  }
  if (pad > payload.size()) {
    // "If the length of the padding is the length of the frame payload or greater, the
    // recipient MUST treat this as a connection error of type PROTOCOL_ERROR."
    code = ErrorCode::kProtocolError;
    reason = "padding longer than the payload";
    return false;
  }
  payload = payload.first(payload.size() - pad);
  return true;
}

}  // namespace

bool Parser::append_block(std::span<const std::uint8_t> fragment) {
  const std::size_t needed = block_size_ + fragment.size();
  if (needed > block_capacity_) {
    // Bounded by max_header_block_size (checked from the frame header).
    std::size_t capacity = std::max<std::size_t>({needed, block_capacity_ * 2, 1024});
    capacity = std::min<std::size_t>(capacity, limits_.max_header_block_size);
    capacity = std::max(capacity, needed);
    auto grown = std::make_unique<std::uint8_t[]>(capacity);
    if (block_size_ > 0) std::memcpy(grown.get(), block_.get(), block_size_);
    block_ = std::move(grown);
    block_capacity_ = capacity;
  }
  if (!fragment.empty()) std::memcpy(block_.get() + block_size_, fragment.data(), fragment.size());
  block_size_ = needed;
  return true;
}

bool Parser::on_frame(std::uint8_t type, std::uint8_t frame_flags, std::uint32_t stream_id,
                      std::span<const std::uint8_t> payload, FrameEvent& event) {
  auto error = [&](ErrorCode code, std::string_view reason) {
    frame_error_ = code;
    frame_reason_ = reason;
    return false;
  };
  auto stream_error = [&](ErrorCode code) {
    event.type = EventType::kStreamError;
    event.stream_id = stream_id;
    event.error_code = code;
    return true;
  };
  event = FrameEvent{};
  switch (static_cast<FrameType>(type)) {
    case FrameType::kData: {
      // RFC 9113 §6.1: DATA on stream 0 is a PROTOCOL_ERROR.
      if (stream_id == 0) return error(ErrorCode::kProtocolError, "DATA on stream 0");
      const auto size = static_cast<std::uint32_t>(payload.size());
      if (!strip(payload, frame_flags & flags::kPadded, 0, frame_error_, frame_reason_, nullptr)) {
        return false;
      }
      event.type = EventType::kData;
      event.stream_id = stream_id;
      event.end_stream = frame_flags & flags::kEndStream;
      event.payload = payload;
      event.flow_controlled_size = size;
      return true;
    }
    case FrameType::kHeaders: {
      // RFC 9113 §6.2: HEADERS on stream 0 is a PROTOCOL_ERROR.
      if (stream_id == 0) return error(ErrorCode::kProtocolError, "HEADERS on stream 0");
      std::uint32_t dependency = 0;
      const bool priority = frame_flags & flags::kPriority;
      if (!strip(payload, frame_flags & flags::kPadded, priority ? 5 : 0, frame_error_,
                 frame_reason_, &dependency)) {
        return false;
      }
      // RFC 9113 §5.3.1: a stream cannot depend on itself (a stream error; the block is still
      // decoded by the caller, for the HPACK table's sake).
      const ErrorCode self =
          priority && dependency == stream_id ? ErrorCode::kProtocolError : ErrorCode::kNoError;
      if (frame_flags & flags::kEndHeaders) {
        event.type = EventType::kHeaders;
        event.stream_id = stream_id;
        event.end_stream = frame_flags & flags::kEndStream;
        event.payload = payload;
        event.stream_error = self;
        return true;
      }
      block_stream_ = stream_id;
      block_end_stream_ = frame_flags & flags::kEndStream;
      block_stream_error_ = self;
      block_continuations_ = 0;
      block_empty_frames_ = payload.empty() ? 1 : 0;
      block_size_ = 0;
      append_block(payload);
      return false;
    }
    case FrameType::kPriority:
      // RFC 9113 §6.3: parsed and ignored (RFC 9113 deprecates the priority scheme).
      if (stream_id == 0) return error(ErrorCode::kProtocolError, "PRIORITY on stream 0");
      if (payload.size() != 5) return stream_error(ErrorCode::kFrameSizeError);
      if ((read_u32(payload.data()) & kStreamIdMask) == stream_id) {
        return stream_error(ErrorCode::kProtocolError);  // §5.3.1
      }
      return false;
    case FrameType::kRstStream:
      // RFC 9113 §6.4.
      // The size first, then the stream, for every frame of a fixed size (nghttp2's order;
      // h2spec 6.7 #4 sends a 6-octet PING on stream 1 and expects FRAME_SIZE_ERROR).
      if (payload.size() != 4) return error(ErrorCode::kFrameSizeError, "RST_STREAM not 4 octets");
      if (stream_id == 0) return error(ErrorCode::kProtocolError, "RST_STREAM on stream 0");
      event.type = EventType::kRstStream;
      event.stream_id = stream_id;
      event.error_code = static_cast<ErrorCode>(read_u32(payload.data()));
      return true;
    case FrameType::kSettings: {
      // RFC 9113 §6.5.
      if (frame_flags & flags::kAck) {
        if (!payload.empty()) return error(ErrorCode::kFrameSizeError, "SETTINGS ACK with payload");
        if (stream_id != 0) return error(ErrorCode::kProtocolError, "SETTINGS ACK not on stream 0");
        event.type = EventType::kSettingsAck;
        event.stream_id = 0;
        return true;
      }
      if (payload.size() % 6 != 0) {
        return error(ErrorCode::kFrameSizeError, "SETTINGS not a multiple of 6 octets");
      }
      if (stream_id != 0) return error(ErrorCode::kProtocolError, "SETTINGS not on stream 0");
      if (payload.size() / 6 > limits_.max_settings_entries) {
        return error(ErrorCode::kEnhanceYourCalm, "too many SETTINGS entries");
      }
      SettingsValues values;
      for (std::size_t i = 0; i < payload.size(); i += 6) {
        const std::uint16_t id =
            static_cast<std::uint16_t>((std::uint16_t{payload[i]} << 8) | payload[i + 1]);
        const std::uint32_t value = read_u32(payload.data() + i + 2);
        switch (static_cast<SettingId>(id)) {
          case SettingId::kHeaderTableSize:
            values.min_header_table_size = values.has(SettingId::kHeaderTableSize)
                                               ? std::min(values.min_header_table_size, value)
                                               : value;
            break;
          case SettingId::kEnablePush:
            // §6.5.2: 0 or 1, and a server never sends 1.
            if (value > 1)
              return error(ErrorCode::kProtocolError, "SETTINGS_ENABLE_PUSH not 0 or 1");
            if (role_ == Role::kClient && value != 0) {
              return error(ErrorCode::kProtocolError, "SETTINGS_ENABLE_PUSH from a server");
            }
            break;
          case SettingId::kInitialWindowSize:
            if (value > kMaxWindowSize) {
              return error(ErrorCode::kFlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE too large");
            }
            break;
          case SettingId::kMaxFrameSize:
            if (value < kDefaultMaxFrameSize || value > kMaxAllowedFrameSize) {
              return error(ErrorCode::kProtocolError, "SETTINGS_MAX_FRAME_SIZE out of range");
            }
            break;
          case SettingId::kEnableConnectProtocol:  // RFC 8441 §3
          case SettingId::kNoRfc7540Priorities:    // RFC 9218 §2.1
            if (value > 1) return error(ErrorCode::kProtocolError, "boolean SETTINGS not 0 or 1");
            break;
          case SettingId::kMaxConcurrentStreams:
          case SettingId::kMaxHeaderListSize:
            break;
          default:
            continue;  // §6.5.2: unknown settings are ignored
        }
        values.values[id] = value;
        values.present = static_cast<std::uint16_t>(values.present | (1u << id));
      }
      settings_seen_ = true;
      event.type = EventType::kSettings;
      event.stream_id = 0;
      event.settings = values;
      return true;
    }
    case FrameType::kPushPromise:
      // RFC 9113 §8.4: a client cannot push; ferry's client disables push (SETTINGS_ENABLE_PUSH
      // 0), and §6.6 makes a PUSH_PROMISE then a PROTOCOL_ERROR.
      return error(ErrorCode::kProtocolError, role_ == Role::kServer
                                                  ? "PUSH_PROMISE from a client"
                                                  : "PUSH_PROMISE with push disabled");
    case FrameType::kPing:
      // RFC 9113 §6.7.
      if (payload.size() != 8) return error(ErrorCode::kFrameSizeError, "PING not 8 octets");
      if (stream_id != 0) return error(ErrorCode::kProtocolError, "PING not on stream 0");
      event.type = (frame_flags & flags::kAck) ? EventType::kPingAck : EventType::kPing;
      event.stream_id = 0;
      std::memcpy(event.ping, payload.data(), 8);
      return true;
    case FrameType::kGoaway:
      // RFC 9113 §6.8.
      if (payload.size() < 8)
        return error(ErrorCode::kFrameSizeError, "GOAWAY shorter than 8 octets");
      if (stream_id != 0) return error(ErrorCode::kProtocolError, "GOAWAY not on stream 0");
      event.type = EventType::kGoaway;
      event.stream_id = 0;
      event.last_stream_id = read_u32(payload.data()) & kStreamIdMask;
      event.error_code = static_cast<ErrorCode>(read_u32(payload.data() + 4));
      event.payload = payload.subspan(8);
      return true;
    case FrameType::kWindowUpdate: {
      // RFC 9113 §6.9.
      if (payload.size() != 4)
        return error(ErrorCode::kFrameSizeError, "WINDOW_UPDATE not 4 octets");
      const std::uint32_t increment = read_u32(payload.data()) & kMaxWindowSize;
      if (increment == 0) {
        // §6.9: a 0 increment is a stream error, or a connection error on the connection's
        // window.
        if (stream_id == 0) return error(ErrorCode::kProtocolError, "WINDOW_UPDATE of 0");
        return stream_error(ErrorCode::kProtocolError);
      }
      event.type = EventType::kWindowUpdate;
      event.stream_id = stream_id;
      event.increment = increment;
      return true;
    }
    case FrameType::kContinuation: {
      // Order, stream, count and size were checked from the header.
      append_block(payload);
      ++block_continuations_;
      if (!(frame_flags & flags::kEndHeaders)) {
        if (payload.empty()) ++block_empty_frames_;
        return false;
      }
      event.type = EventType::kHeaders;
      event.stream_id = block_stream_;
      event.end_stream = block_end_stream_;
      event.payload = std::span<const std::uint8_t>(block_.get(), block_size_);
      event.stream_error = block_stream_error_;
      event.empty_frames = block_empty_frames_;
      block_stream_ = 0;
      return true;
    }
  }
  return false;  // RFC 9113 §4.1, §5.5: unknown frame types are ignored
}

}  // namespace ferry::http2::frame
