// An HTTP/2 stream as the connection engine sees it (http2 layer, private). The layer above
// (calls) derives from Stream: the connection reports inbound events through the virtual
// functions and drains the outbound queue the call fills. Nothing here knows about gRPC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "asio/any_io_executor.hpp"
#include "ferry/slice_chain.h"
#include "http2/error_code.h"
#include "http2/header_block.h"

namespace ferry::http1 {
class Connection;
class ClientConnection;
class ClientPool;
}  // namespace ferry::http1

namespace ferry::http2 {

class Connection;
class Stream;
namespace session {
class Session;
}  // namespace session

// What carries a call's stream: an HTTP/2 connection (http2/connection.h), or an HTTP/1.1
// connection, one request at a time (http1/connection.h). The calls layer speaks only this;
// the functions are http2::Connection's, documented there.
class StreamCarrier {
 public:
  virtual bool submit_response(Stream* stream, std::span<const HeaderField> headers,
                               bool with_data) = 0;
  virtual void resume(Stream* stream) = 0;
  virtual bool send_queue_full() const = 0;
  virtual bool peer_window_closed() const = 0;
  virtual void wait_for_send_room() = 0;
  virtual void reset(Stream* stream, ErrorCode error) = 0;
  virtual void consume(Stream* stream, std::size_t n) = 0;
  virtual void consume_connection(std::size_t n) = 0;
  virtual const asio::any_io_executor& executor() const = 0;
  // The memory a stream's unfinished inbound message keeps alive changed by delta bytes
  // (ConnectionLimits::max_held_bytes). Default: not counted (HTTP/1.1, one call at a time).
  virtual void change_held(Stream* stream, std::ptrdiff_t delta) {
    (void)stream;
    (void)delta;
  }
  // HTTP/1.1: no trailers and no full duplex, so gRPC itself cannot run over it (gRPC-Web and
  // Connect can).
  virtual bool is_http1() const { return false; }

 protected:
  ~StreamCarrier() = default;
};

class Stream {
 public:
  virtual ~Stream() = default;

  // One header field of a HEADERS block. Return false to reset the stream (bad or too large).
  virtual bool on_header(std::string_view name, std::string_view value) = 0;
  // A HEADERS block (initial or trailing) is complete.
  virtual void on_headers_done() = 0;
  // DATA payload bytes, a view into the read block that the Slice keeps alive. The bytes count
  // against the flow-control window until Connection::consume() is called for them.
  virtual void on_data(Slice chunk) = 0;
  // The peer half-closed its side (END_STREAM).
  virtual void on_remote_end() = 0;
  // The connection took bytes from the outbound queue: a writer waiting for room may go on.
  virtual void on_outbound_taken() = 0;
  // The stream is closed (completed, reset by either side, or the connection died): the
  // RST_STREAM or GOAWAY code, kNoError on a clean close, kConnectionLost with the connection.
  // The connection never touches the stream again after this call.
  virtual void on_closed(ErrorCode error) = 0;

  std::int32_t stream_id() const { return id_; }

 protected:
  // Whether this side reset the stream (ferry's RST_STREAM went out: its own cancel, or a rule
  // the peer's frames broke), rather than the peer: for the words of the call's status.
  bool reset_sent() const { return reset_sent_; }
  // Why this side closed the connection under the stream, when it did for a fault of the peer's
  // (a protocol error or a flood the session detected, too many pings): a static string; empty when
  // the connection was lost or closed for another reason. Set before on_closed(kConnectionLost).
  std::string_view local_close_reason() const { return local_close_reason_; }

  // --- outbound state: filled by the call, drained by the connection after resume() ---------
  // DATA payload to send.
  SliceChain outbound;
  // End the stream once `outbound` is drained: with `trailers` as a trailing HEADERS block when
  // there are any (server), else END_STREAM on the last DATA frame (client).
  bool outbound_end = false;
  TrailerBlock trailers;
  // A client's request that the server may run twice without harm (ClientContext::set_idempotent):
  // over HTTP/1.1 it may go again after a kept connection broke under it (http1::ClientPool).
  bool idempotent_request = false;

 private:
  friend class Connection;
  friend class session::Session;
  friend class http1::Connection;
  friend class http1::ClientConnection;
  friend class http1::ClientPool;
  std::int32_t id_ = 0;
  bool reset_sent_ = false;
  std::string_view local_close_reason_;
  bool deferred_ = false;      // the data provider returned DEFERRED: resume when there is more
  bool has_provider_ = false;  // a data provider is attached (response or request submitted)
  std::size_t queued_counted_ = 0;  // bytes of `outbound` counted in the connection's queued_
  Stream* prev_ = nullptr;          // the connection's list of open streams
  Stream* next_ = nullptr;

  // ferry's own HTTP/2 engine (http2/session/session.h): the stream's protocol state, kept in
  // the call's object so that the engine needs no stream allocation of its own.
  struct SessionState {
    std::int64_t send_window = 0;      // what the peer lets this end send (may go negative)
    std::int64_t recv_window = 0;      // what this end lets the peer send, not yet used
    std::uint32_t recv_unacked = 0;    // consumed by the application, not yet WINDOW_UPDATEd
    std::int64_t content_length = -1;  // the peer's content-length, -1 without one
    std::uint64_t data_received = 0;   // DATA payload bytes received
    Stream* send_next = nullptr;       // the session's queue of streams with output
    bool in_send_queue = false;
    // In the session's table (open). The session's entry points that take a Stream* the
    // caller keeps alive (submit_response, resume, reset, consume) ask this instead of looking
    // the id up; after calling into a stream, which may have closed and released it, the
    // session looks the id up (Session::find) rather than touch the object.
    bool in_table = false;
    bool sending = false;           // HEADERS sent: the outbound queue is the body
    bool local_closed = false;      // END_STREAM (or RST_STREAM) written
    bool remote_closed = false;     // the peer's END_STREAM received
    bool closing = false;           // to be closed at the next output pass
    bool headers_received = false;  // the first HEADERS block (request or response) arrived
    ErrorCode close_code = ErrorCode::kNoError;
  };
  SessionState session_;
};

}  // namespace ferry::http2
