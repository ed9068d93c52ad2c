// ferry's own HTTP/2 session (RFC 9113), made for gRPC (http2 layer, private): the engine's
// third block, on top of the frame parser and writer (http2/frame), HPACK (http2/hpack), the
// stream-id rules (http2/streams) and the flood defences (http2/limits). One parse loop over the
// connection's read block turns frames into calls on the streams (http2/stream.h) with no
// callback per frame or per header; every frame it answers is written straight into the
// connection's output chain (pooled blocks, no allocation per frame). It owns no socket: the
// connection (http2/connection.h) feeds it what it reads and writes what it produced. One per
// connection, its thread only.
//
// Stream states (RFC 9113 §5.1), as this session keeps them (closed streams are not kept: an id
// at or below the highest its end opened and not in the table is closed, streams/stream_ids.h):
//
//   state               | in table | remote_closed | local_closed
//   idle                | no (id above the highest) |
//   open                | yes      | no            | no
//   half-closed(remote) | yes      | yes           | no
//   half-closed(local)  | yes      | no            | yes
//   closed              | no (id at or below the highest), or `closing` until the next pass
//
//   frame received     idle              open, h-c(local)  h-c(remote)       closed
//   HEADERS            opens (server)    trailers (ES)     STREAM_CLOSED(s)  ledger's verdict
//   DATA               PROTOCOL_ERROR(c) delivered         STREAM_CLOSED(s)  STREAM_CLOSED(s)
//   RST_STREAM         PROTOCOL_ERROR(c) closes            closes            ignored
//   WINDOW_UPDATE      PROTOCOL_ERROR(c) send window       send window       ignored
//   PRIORITY           ignored (parsed and dropped by the frame parser)
//   (s): a stream error (RST_STREAM); (c): a connection error (GOAWAY); ES: with END_STREAM.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/limits.h"
#include "ferry/slice_chain.h"
#include "http2/error_code.h"
#include "http2/frame/parser.h"
#include "http2/header_block.h"
#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"
#include "http2/limits/defences.h"
#include "http2/peer_stream_ledger.h"
#include "http2/read_parts.h"
#include "http2/stream.h"
#include "http2/streams/stream_ids.h"
#include "http2/streams/stream_table.h"

namespace ferry::http2::session {

// What the session needs of the connection above it: the rare events (a stream opened or
// closed, SETTINGS, PING, GOAWAY, a window opening). Per-stream events go to the Stream itself.
class SessionHost {
 public:
  // Server: the peer opened stream `id` with a valid request. The Stream that will own it, or
  // null to refuse it (RST_STREAM(REFUSED_STREAM)).
  virtual Stream* on_stream_open(std::uint32_t id) = 0;
  // `stream` leaves the session (closed either way); the session calls stream->on_closed(code)
  // right after. The host drops it from its own books here.
  virtual void on_stream_closing(Stream* stream) = 0;
  // n bytes of `stream`'s outbound queue were framed (the stream's on_outbound_taken follows).
  virtual void on_outbound_framed(Stream* stream, std::size_t n) = 0;
  virtual void on_goaway(std::uint32_t last_stream_id, ErrorCode error) = 0;
  // The peer's SETTINGS (every one, the first being its preface).
  virtual void on_peer_settings() = 0;
  // A PING from the peer (ack false) or the ACK of ours (ack true).
  virtual void on_ping(bool ack) = 0;
  // The peer's connection window grew (writers held by a closed window may go on).
  virtual void on_connection_window_opened() = 0;

 protected:
  ~SessionHost() = default;
};

using frame::Role;

class Session {
 public:
  using Clock = limits::Clock;

  // limits: what this end advertises (SETTINGS) and enforces. The connection preface (the
  // client's magic, then SETTINGS and the connection window's WINDOW_UPDATE) is written into
  // `out` at once.
  Session(Role role, const ConnectionLimits& limits, SessionHost& host, SliceChain& out,
          limits::DefenceLimits defences = {});
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // --- input -------------------------------------------------------------------------------
  struct ReceiveResult {
    std::size_t consumed = 0;  // bytes parsed; the rest (part of a frame) comes again, grown
    bool paused = false;       // `parts` is full: answer, then call again with the rest
  };
  // Parses `bytes` (which lie in `block` when it is not null: DATA reaches streams as slices of
  // it) frame by frame until they run out, `parts` (may be null) says the part is full, or the
  // connection fails (failed() is then true and the GOAWAY is in the output).
  ReceiveResult receive(std::span<const std::uint8_t> bytes, detail::Block* block,
                        ReadParts* parts);
  // The bytes still needed before receive() can make progress (0 when none are buffered).
  std::size_t bytes_needed() const { return parser_.bytes_needed(); }

  // --- output ------------------------------------------------------------------------------
  // Client: opens a stream: HEADERS now, its body from the stream's outbound queue. The id, or
  // -1 when none can be opened (GOAWAY either way, ids used up, failed).
  std::int32_t submit_request(Stream* stream, std::span<const HeaderField> headers);
  // Server: the response's HEADERS, now; with_data attaches the outbound queue as the body
  // (ended by outbound_end and the trailers), without it they end the stream.
  bool submit_response(Stream* stream, std::span<const HeaderField> headers, bool with_data);
  // The stream's outbound queue or its end changed.
  void resume(Stream* stream);
  // RST_STREAM(error) now; the stream is closed at the next produce().
  void reset(Stream* stream, ErrorCode error);
  // The application took n bytes of the stream's DATA (stream and connection windows), or of a
  // closing stream's (the connection window only).
  void consume(Stream* stream, std::size_t n);
  void consume_connection(std::size_t n);
  // Graceful shutdown. Server: GOAWAY(NO_ERROR, 2^31-1) and a PING at once; when the PING's
  // ACK arrives (or after a bound, 1 s) GOAWAY(NO_ERROR, the last stream processed): streams the
  // client opened before it read the first are still served (RFC 9113 §6.8). Client: the
  // second GOAWAY at once. No new stream from the final GOAWAY on.
  void shutdown();
  // GOAWAY(error, debug) and no more input: the connection closes once it is written.
  void terminate(ErrorCode error, std::string_view debug);
  // A PING (opaque zeros), for keepalive.
  void ping();
  // The earliest time on_timer() has something to do (time_point::max() when nothing): our
  // SETTINGS' ACK due (ConnectionLimits::settings_ack_timeout), a shutdown's second GOAWAY due.
  Clock::time_point next_deadline() const;
  // Acts on what is due at `now`: GOAWAY(SETTINGS_TIMEOUT) when our SETTINGS is still not
  // acknowledged (failed() is then true), the second GOAWAY of a graceful shutdown.
  void on_timer(Clock::time_point now);
  // Frames the streams' queued output (DATA within the windows, trailers) until `out` holds
  // `budget` bytes or nothing more can go; closes the streams whose last frame went out.
  void produce(std::size_t budget);
  // What produce() wrote went to the peer: the ACKs owed are paid (limits/defences.h).
  void on_output_written() { defences_.on_acks_written(); }
  // Forgets every stream without a word to them (the connection closes and tells them).
  void forget_streams();

  // --- state -------------------------------------------------------------------------------
  bool failed() const { return terminated_; }
  ErrorCode error_code() const { return error_code_; }
  // A static string: why this end ended the connection.
  std::string_view error_reason() const { return error_reason_; }
  bool goaway_sent() const { return goaway_sent_; }
  bool goaway_received() const { return goaway_received_; }
  // nghttp2's want_read(): false once the connection is done (terminated, or GOAWAY either way
  // with no stream left).
  bool want_read() const;
  // Whether produce() has something to frame now.
  bool want_write() const {
    return (send_head_ != nullptr && conn_send_window_ > 0) ||
           (!pending_opens_.empty() && local_open_ < peer_max_concurrent_);
  }
  bool accepts_new_streams() const;
  std::size_t open_streams() const { return streams_.size(); }
  std::int64_t peer_connection_window() const { return conn_send_window_; }
  std::uint32_t last_processed_stream() const { return last_processed_; }
  // Stream with this id (null when the session holds none).
  Stream* find(std::uint32_t id);
  // Whether HEADERS or DATA left since the last call (the lifecycle's ping policing).
  bool take_data_sent() { return std::exchange(data_sent_, false); }
  // Bytes held for the peer's header blocks and the HPACK tables.
  std::size_t memory() const;
  // Releases what an idle connection does not need (the header-block buffer).
  void trim() { parser_.trim(); }
  const limits::Defences& defences() const { return defences_; }

 private:
  using StreamState = Stream::SessionState;
  static StreamState& state(Stream* s) { return s->session_; }

  // A connection error: GOAWAY(code, reason), no more input.
  void fail(ErrorCode code, std::string_view reason);
  // A stream error this end sends because of the peer's frames (MadeYouReset's budget).
  void stream_error(std::uint32_t id, ErrorCode code);
  void write_rst(std::uint32_t id, ErrorCode code);
  void write_window_update(std::uint32_t id, std::uint32_t increment);
  void write_goaway(ErrorCode code, std::string_view debug);
  // The shutdown's second GOAWAY.
  void finish_shutdown();
  // Whether a header list of `fields` is within the peer's SETTINGS_MAX_HEADER_LIST_SIZE.
  bool fits_peer_header_list(std::span<const hpack::Field> fields) const;
  // A block of ours over the peer's limit: never sent; the stream is reset (RST_STREAM INTERNAL
  // when it is on the wire) and closes with kInternalError, the limit named in its
  // local_close_reason.
  void refuse_oversized_block(Stream* stream);
  // HPACK-encodes `fields` and writes them as HEADERS (+ CONTINUATION).
  void write_headers(std::uint32_t id, std::span<const hpack::Field> fields, bool end_stream);

  void on_settings(const frame::FrameEvent& event);
  void on_settings_ack();
  void on_data(const frame::FrameEvent& event, detail::Block* block, ReadParts* parts);
  void on_headers(const frame::FrameEvent& event, ReadParts* parts);
  void on_rst_stream(const frame::FrameEvent& event);
  void on_window_update(const frame::FrameEvent& event);
  void on_goaway(const frame::FrameEvent& event);
  // A complete, valid header block for `stream`: its fields, then on_headers_done and the end.
  void deliver(Stream* stream, bool end_stream, ReadParts* parts);
  void on_remote_end(Stream* stream, ReadParts* parts);
  // Checks a decoded block (RFC 9113 §8.1-§8.3); sets content_length. kind: request, response
  // or trailers.
  enum class BlockKind : std::uint8_t { kRequest, kResponse, kTrailers };
  bool valid_block(BlockKind kind, std::int64_t& content_length);

  void insert(Stream* stream);
  void erase(Stream* stream);
  void enqueue(Stream* stream);
  // Closes the stream now: out of the table, the host told, then the stream.
  void close(Stream* stream, ErrorCode code);
  // Marks the stream to close at the next produce().
  void close_later(Stream* stream, ErrorCode code);
  // Frames what the stream may send; returns false when the connection window stopped it.
  bool produce_stream(Stream* stream, std::size_t budget);
  void add_connection_unacked(std::size_t n);
  // Client: sends the HEADERS of the streams held by the server's SETTINGS_MAX_CONCURRENT_STREAMS
  // while it allows more.
  void open_pending();
  void open_now(Stream* stream, std::span<const hpack::Field> fields);

  Role role_;
  SessionHost& host_;
  SliceChain& out_;
  frame::Parser parser_;
  hpack::Decoder decoder_;
  hpack::Encoder encoder_;
  hpack::DecodedHeaders decoded_;
  streams::StreamIds ids_;
  PeerStreamLedger ledger_;  // server: what became of the client's recent streams
  limits::Defences defences_;

  // Open streams by id.
  streams::StreamTable<Stream> streams_;
  // Streams with output to frame, first to last.
  Stream* send_head_ = nullptr;
  Stream* send_tail_ = nullptr;

  // This end's settings, as advertised.
  std::uint32_t local_initial_window_;
  std::uint32_t local_connection_window_;
  std::uint32_t local_max_concurrent_;
  bool settings_acked_ = false;
  // The peer's.
  std::uint32_t peer_initial_window_ = 65535;
  std::uint32_t peer_max_frame_size_ = frame::kDefaultMaxFrameSize;
  std::uint32_t peer_max_concurrent_ = 0xffffffffu;
  std::uint32_t peer_max_header_list_ = 0xffffffffu;  // unlimited until it says (§6.5.2)
  // Our SETTINGS still unacknowledged at this time: GOAWAY(SETTINGS_TIMEOUT).
  Clock::time_point settings_deadline_;

  std::int64_t conn_send_window_ = 65535;
  std::int64_t conn_recv_window_;
  std::uint32_t conn_unacked_ = 0;

  std::uint32_t last_processed_ = 0;  // GOAWAY's last stream id: the highest stream accepted
  std::uint32_t goaway_last_ = 0x7fffffffu;
  bool goaway_sent_ = false;
  bool goaway_received_ = false;
  // A graceful shutdown's first GOAWAY (2^31-1) and PING are out; the second is due at
  // notice_deadline_ at the latest.
  bool shutdown_notice_ = false;
  Clock::time_point notice_deadline_;
  bool terminated_ = false;
  bool data_sent_ = false;
  ErrorCode error_code_ = ErrorCode::kNoError;
  std::string_view error_reason_;
  // Client: streams whose HEADERS wait for the server's stream limit, first to last, with a
  // copy of their fields (the rare path: only past the limit).
  struct PendingField {
    std::string name;
    std::string value;
    bool no_index = false;
  };
  struct PendingOpen {
    Stream* stream;
    std::vector<PendingField> fields;
  };
  std::vector<PendingOpen> pending_opens_;
  std::uint32_t local_open_ = 0;  // streams this end opened whose HEADERS went out, still open
  // A header block that does not fit the output's contiguous room is encoded here first.
  std::vector<std::uint8_t> scratch_;
};

}  // namespace ferry::http2::session
