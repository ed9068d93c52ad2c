// One HTTP/1.1 connection of a client (http2 layer, beside the HTTP/2 engine; private): one
// exchange at a time, kept alive between them. The request goes with a content-length when its
// body is complete before its head is written (a unary call), chunked otherwise; the response,
// parsed with llhttp (strict), reaches the call as an HTTP/2 stream's would (":status",
// headers, DATA, the end). http1::ClientPool holds these, one per call in flight.
//
// An exchange is over once both the response and the request's body are; if the response ends
// first (the server answered early), the connection cannot be reused and closes.
// At most once: a call whose kept connection (one that served an exchange before) fails before
// any response byte ends REFUSED_STREAM (the channel retries it transparently) only when running
// it twice is harmless: no byte of it was written, or it is idempotent (a Connect GET; the server
// most likely closed the idle connection as the request went out). Otherwise it ends with the
// connection lost (UNAVAILABLE), and the application's retry policy decides. Reading stops
// while the call holds more unread body than ConnectionLimits::stream_window. Everything happens
// on the byte stream's executor.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ferry/limits.h"
#include "ferry/slice_chain.h"
#include "http1/message_parts.h"
#include "http2/stream.h"
#include "transport/byte_stream.h"

// llhttp's parser (llhttp_t), declared here so that llhttp.h stays in src/http1's .cc files.
struct llhttp__internal_s;

namespace ferry::http1 {

class ClientConnection final : public std::enable_shared_from_this<ClientConnection>,
                               public http2::ByteStreamClient {
 public:
  // Told when the connection can take the next exchange, and when it closed. On its executor,
  // never from inside begin(), resume() or reset().
  class Owner {
   public:
    virtual void on_idle(ClientConnection* connection) = 0;
    virtual void on_connection_closed(ClientConnection* connection) = 0;

   protected:
    ~Owner() = default;
  };

  ClientConnection(std::unique_ptr<http2::ByteStream> stream, const ConnectionLimits& limits,
                   Owner* owner);
  ~ClientConnection() override;
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Starts reading: an idle connection notices the server closing it.
  void start();
  // Begins an exchange: head is the request line and header lines (without the body's framing
  // header or the blank line); the body is the stream's outbound queue. idempotent: the server
  // may run the request twice (a GET), so it may be sent again after a failure.
  void begin(http2::Stream* stream, std::string head, bool idempotent);
  // The stream queued more of its body, or its end.
  void resume();
  // Ends the exchange early (the call was cancelled, or it ended while its request was still
  // going): the stream gets on_closed(error) from the loop, and the connection closes.
  void reset(http2::ErrorCode error);
  // The call took n bytes of the response's body: reading may go on.
  void consume(std::size_t n);
  bool send_queue_full() const;
  void wait_for_send_room() { send_waiters_ = true; }
  // Closes now; an exchange in progress ends with on_closed(kConnectionLost).
  void close();
  // The owner goes: it hears nothing more.
  void release_owner() { owner_ = nullptr; }

  bool busy() const { return current_ != nullptr; }
  bool closed() const { return closed_; }
  // Whether an exchange ran on this connection before (a reused connection the server may
  // have closed as the request went out: see on_read).
  bool reused() const { return exchanges_ > 0; }
  http2::Stream* stream() const { return current_; }

  // http2::ByteStreamClient
  void on_read(const asio::error_code& ec, std::size_t n) override;
  void on_written(const asio::error_code& ec) override;

 private:
  struct Callbacks;  // llhttp's callbacks, with access to the members
  friend struct Callbacks;

  void start_read();
  void parse(const std::uint8_t* data, std::size_t n, detail::Block* block);
  // Moves what the stream queued into the write queue (the head first, then the body, chunked
  // when so), within the write-ahead bound.
  void pump();
  void flush();
  // The exchange is over when both sides are: the stream is closed, the connection idles (or
  // closes when it cannot be kept).
  void settle();
  void settle_later();
  // Ends the exchange with error and closes (the stream told first).
  void fail(http2::ErrorCode error);
  // The connection broke before the response: REFUSED_STREAM when the call may go again (see the
  // class comment), else the connection lost.
  http2::ErrorCode broken_error() const;

  asio::any_io_executor executor_;
  std::unique_ptr<http2::ByteStream> stream_;
  ConnectionLimits limits_;
  Owner* owner_;

  std::unique_ptr<llhttp__internal_s> parser_;  // llhttp_t, whose header stays in src/http1
  detail::Block* read_block_ = nullptr;
  detail::Block* parsing_block_ = nullptr;  // the block parse() reads from, for zero-copy bodies
  bool read_pending_ = false;

  // The response being parsed.
  HeaderFields headers_;
  bool response_began_ = false;  // a byte of the response arrived
  bool headers_delivered_ = false;

  // The exchange.
  http2::Stream* current_ = nullptr;
  std::string head_;  // until pump() writes it
  bool head_written_ = false;
  bool sent_ = false;  // a byte of the request was handed to the byte stream
  bool idempotent_ = false;
  bool chunked_ = false;
  bool request_done_ = false;   // the body's last byte is queued
  bool response_done_ = false;  // on_message_complete
  bool keep_alive_ = true;
  std::size_t unconsumed_ = 0;  // body bytes the stream has not consumed yet
  std::size_t exchanges_ = 0;

  WriteQueue out_;
  bool send_waiters_ = false;
  bool settle_posted_ = false;
  bool closed_ = false;
};

}  // namespace ferry::http1
