// Stream identifiers (RFC 9113 §5.1.1) for ferry's HTTP/2 engine (http2 layer, private): the
// highest id each end has opened, which is all that is needed to tell an idle stream from one
// that was opened at some point, so that a closed stream is recognised without a record of it
// (the connection's stream slab holds the open ones only). One per connection, its thread only.
#pragma once

#include <cstdint>

#include "http2/frame/frame.h"
#include "http2/frame/parser.h"

namespace ferry::http2::streams {

class StreamIds {
 public:
  explicit StreamIds(frame::Role role) : role_(role) {}

  // True when `stream_id` (> 0) has the parity of the streams the peer opens: odd from a
  // client, even from a server (RFC 9113 §5.1.1).
  bool peer_parity(std::uint32_t stream_id) const {
    return (stream_id & 1u) == (role_ == frame::Role::kServer ? 1u : 0u);
  }

  enum class State : std::uint8_t {
    kIdle,    // never opened: above the highest id its end has used
    kOpened,  // opened at some point: open if the connection has it, closed otherwise
  };
  State state(std::uint32_t stream_id) const {
    const std::uint32_t highest = peer_parity(stream_id) ? highest_peer_ : highest_local_;
    return stream_id > highest ? State::kIdle : State::kOpened;
  }

  enum class HeadersVerdict : std::uint8_t {
    kNewStream,      // the peer opens this stream (every lower idle id of its is now closed)
    kKnownStream,    // an opened stream: open (trailers, a response) or closed (STREAM_CLOSED)
    kProtocolError,  // a connection error: a stream the peer may not open
  };
  // A HEADERS frame (its block complete) from the peer on `stream_id`. RFC 9113 §5.1.1: a new
  // stream's id is above every id its end opened before and has its end's parity; a server
  // opens none (ferry disables push, so a HEADERS on an even idle id from a server is an
  // error too), nor may the peer send HEADERS on an idle stream of ours.
  HeadersVerdict on_peer_headers(std::uint32_t stream_id) {
    if (state(stream_id) == State::kOpened) return HeadersVerdict::kKnownStream;
    if (!peer_parity(stream_id) || role_ == frame::Role::kClient) {
      return HeadersVerdict::kProtocolError;
    }
    highest_peer_ = stream_id;
    return HeadersVerdict::kNewStream;
  }

  // The id of the next stream this end opens (1, 3, 5... for a client), or 0 when the ids are
  // used up (RFC 9113 §5.1.1: a new connection is then needed). Only a client opens streams.
  std::uint32_t open_local() {
    const std::uint32_t next =
        highest_local_ == 0 ? (role_ == frame::Role::kClient ? 1u : 2u) : highest_local_ + 2;
    if (next > frame::kStreamIdMask) return 0;
    highest_local_ = next;
    return next;
  }

  // What to do with a frame (not HEADERS) for a stream the connection does not hold.
  enum class Verdict : std::uint8_t {
    kIgnore,         // a closed stream: drop it (RST_STREAM, WINDOW_UPDATE, PRIORITY)
    kStreamClosed,   // a closed stream: RST_STREAM with STREAM_CLOSED (DATA, §5.1 "closed")
    kProtocolError,  // an idle stream: a connection error (§5.1 "idle")
  };
  Verdict on_frame_without_stream(frame::EventType type, std::uint32_t stream_id) const {
    if (state(stream_id) == State::kIdle) {
      // §5.1: "Receiving any frame other than HEADERS or PRIORITY on a stream in this state
      // MUST be treated as a connection error of type PROTOCOL_ERROR" (PRIORITY never reaches
      // the connection).
      return Verdict::kProtocolError;
    }
    // §5.1 "closed": DATA after the stream closed is a STREAM_CLOSED stream error; frames that
    // may be in flight when it closed (RST_STREAM, WINDOW_UPDATE) are ignored.
    return type == frame::EventType::kData ? Verdict::kStreamClosed : Verdict::kIgnore;
  }

  // GOAWAY's Last-Stream-ID: the highest stream the peer opened (§6.8).
  std::uint32_t highest_peer() const { return highest_peer_; }
  std::uint32_t highest_local() const { return highest_local_; }

 private:
  frame::Role role_;
  std::uint32_t highest_peer_ = 0;
  std::uint32_t highest_local_ = 0;
};

}  // namespace ferry::http2::streams
