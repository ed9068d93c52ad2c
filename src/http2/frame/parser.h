// HTTP/2 frame parser (RFC 9113 §4-§6), one per connection (http2 layer, private): one loop
// over the connection's read buffer that yields typed events, no callback per frame. It checks
// every rule a frame's header and payload must follow on their own (sizes, stream 0 or not,
// padding, settings' ranges, CONTINUATION order) and maps each break to its RFC 9113 error
// code; what depends on stream state is the connection's (stream_ids.h helps). The peer's
// bytes are untrusted: the frame size is checked from the 9-byte header before the payload is
// waited for, and a header block is bounded while it is assembled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "http2/error_code.h"
#include "http2/frame/frame.h"

namespace ferry::http2::frame {

// What the peer's frames may make the parser hold or do, each an answer to an attack.
struct ParserLimits {
  // SETTINGS_MAX_FRAME_SIZE this endpoint advertises (RFC 9113 §4.2): a larger frame is a
  // FRAME_SIZE_ERROR, known from its header alone.
  std::uint32_t max_frame_size = kDefaultMaxFrameSize;
  // The largest header block (HEADERS + CONTINUATIONs, encoded) assembled: past it the
  // connection ends (ENHANCE_YOUR_CALM) at the frame that crosses it, from that frame's header,
  // without buffering its payload (CONTINUATION flood, CVE-2024-27316 and its kin). Above the
  // 16 KiB header list ferry accepts (encoded blocks are not larger than the list they decode
  // to, save for size updates).
  std::uint32_t max_header_block_size = 32u << 10;
  // The most CONTINUATION frames in one header block (CONTINUATION flood, 2024: many empty or
  // tiny frames). nghttp2's cap is 8.
  std::uint32_t max_continuation_frames = 8;
  // The most entries in one SETTINGS frame (nghttp2's max_settings is 32; ferry knows 8 ids).
  std::uint32_t max_settings_entries = 32;
};

enum class EventType : std::uint8_t {
  kData,          // stream_id, end_stream, payload (padding removed), flow_controlled_size
  kHeaders,       // stream_id, end_stream, payload = the whole header block; stream_error
  kRstStream,     // stream_id, error_code
  kSettings,      // settings (validated)
  kSettingsAck,   //
  kPing,          // ping (8 opaque bytes, as sent)
  kPingAck,       // ping
  kGoaway,        // last_stream_id, error_code, payload = debug data
  kWindowUpdate,  // stream_id (0: the connection's), increment (> 0)
  kStreamError,   // stream_id, error_code: reset this stream, the connection goes on
};

// The known settings of one SETTINGS frame, each checked against its range (RFC 9113 §6.5.2).
// Unknown ids are ignored (§6.5.2: "MUST ignore").
struct SettingsValues {
  std::uint32_t values[kMaxKnownSettingId + 1] = {};
  std::uint16_t present = 0;  // bit id: the frame carried setting id
  // SETTINGS_HEADER_TABLE_SIZE's smallest value in the frame: an encoder that follows it must
  // signal this one before the last (RFC 7541 §4.2).
  std::uint32_t min_header_table_size = 0;

  bool has(SettingId id) const { return (present >> static_cast<unsigned>(id)) & 1u; }
  std::uint32_t get(SettingId id) const { return values[static_cast<unsigned>(id)]; }
};

// One parsed frame's meaning. The views (payload) point into the buffer given to next() or
// into the parser's header-block buffer, and stay valid until the next call to next().
struct FrameEvent {
  EventType type = EventType::kData;
  bool end_stream = false;
  std::uint32_t stream_id = 0;
  std::span<const std::uint8_t> payload;
  // DATA: the frame's whole payload length, padding included, as flow control counts it
  // (RFC 9113 §6.1).
  std::uint32_t flow_controlled_size = 0;
  ErrorCode error_code = ErrorCode::kNoError;  // RST_STREAM, GOAWAY, kStreamError
  // HEADERS: not kNoError when the stream must be reset with this code (a priority on itself,
  // §5.3.1) after the block is decoded for the HPACK table's sake.
  ErrorCode stream_error = ErrorCode::kNoError;
  // HEADERS: the frames of its block that carried nothing and did not end it (an empty HEADERS
  // fragment or CONTINUATION; CVE-2019-9518), for the glitch budget (limits/defences.h).
  std::uint32_t empty_frames = 0;
  std::uint32_t last_stream_id = 0;  // GOAWAY
  std::uint32_t increment = 0;       // WINDOW_UPDATE
  std::uint8_t ping[8] = {};         // PING, PING ACK
  SettingsValues settings;           // SETTINGS
};

class Parser {
 public:
  enum class Status : std::uint8_t {
    kEvent,            // `event` holds a frame's meaning
    kNeedMore,         // the buffer's unconsumed rest is part of a frame (or empty)
    kConnectionError,  // error_code() and reason(): send GOAWAY and close; sticky
  };
  struct Result {
    Status status;
    // Bytes of the buffer used (whole frames, preface bytes); the caller drops them and keeps
    // the rest to parse again with more bytes after it.
    std::size_t consumed;
  };

  explicit Parser(Role role, ParserLimits limits = {});

  // Parses frames from the front of `buffer` until one yields an event, the rest is an
  // incomplete frame, or the peer broke the protocol. Frames with no event for the caller
  // (PRIORITY, unknown types, a HEADERS or CONTINUATION that does not end its block) are
  // consumed on the way. A frame is consumed only whole, so the caller keeps at most one
  // incomplete frame (bytes_needed() says how much of it is still missing); only a header block
  // split over several frames is copied (bounded by max_header_block_size). Cost: O(frame
  // header) per frame plus the copy of split header blocks; no allocation once the block buffer
  // has grown.
  [[nodiscard]] Result next(std::span<const std::uint8_t> buffer, FrameEvent& event);

  // After kNeedMore: the least number of bytes the unconsumed rest must grow to before a call
  // to next() can make progress (the frame's whole size once its header is there).
  std::size_t bytes_needed() const { return bytes_needed_; }

  ErrorCode error_code() const { return error_code_; }
  std::string_view reason() const { return reason_; }

  // The SETTINGS_MAX_FRAME_SIZE this endpoint advertises, once the peer has acknowledged it.
  void set_max_frame_size(std::uint32_t size) { limits_.max_frame_size = size; }
  const ParserLimits& limits() const { return limits_; }
  // True between a HEADERS without END_HEADERS and its last CONTINUATION.
  bool in_header_block() const { return block_stream_ != 0; }
  // Bytes the header-block buffer holds (it grows to the largest split block seen).
  std::size_t memory() const { return block_capacity_; }
  // Releases the header-block buffer when no block is being assembled (an idle connection).
  void trim();

 private:
  Result fail(std::size_t consumed, ErrorCode code, std::string_view reason);
  // The frame's payload checked and turned into `event`; returns true when it yields one.
  bool on_frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream_id,
                std::span<const std::uint8_t> payload, FrameEvent& event);
  bool append_block(std::span<const std::uint8_t> fragment);

  Role role_;
  ParserLimits limits_;
  std::uint32_t preface_left_;
  bool settings_seen_ = false;  // RFC 9113 §3.4: the peer's first frame is SETTINGS
  std::size_t bytes_needed_ = 0;
  ErrorCode error_code_ = ErrorCode::kNoError;
  std::string_view reason_;
  bool failed_ = false;
  // Set by on_frame() when a frame breaks the protocol.
  ErrorCode frame_error_ = ErrorCode::kNoError;
  std::string_view frame_reason_;

  // The header block being assembled: its stream (0: none), its frames so far.
  std::uint32_t block_stream_ = 0;
  bool block_end_stream_ = false;
  ErrorCode block_stream_error_ = ErrorCode::kNoError;
  std::uint32_t block_continuations_ = 0;
  std::uint32_t block_empty_frames_ = 0;
  std::unique_ptr<std::uint8_t[]> block_;
  std::size_t block_size_ = 0;
  std::size_t block_capacity_ = 0;
};

}  // namespace ferry::http2::frame
