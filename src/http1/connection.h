// One HTTP/1.1 connection on the server (http2 layer, beside the HTTP/2 engine; private): the
// requests parsed with llhttp (strict; Debian's node-llhttp sources), one at a time, each handed to
// a Stream as if it were an HTTP/2 stream (pseudo-headers, DATA, END_STREAM), and the stream's
// response written back with a content-length when the body is complete before the headers go
// (a Connect unary response) and chunked otherwise. This is how gRPC-Web and the Connect
// protocol reach browsers, curl and HTTP/1.1-only proxies; gRPC itself needs HTTP/2's trailers.
//
// Framing: RequestFraming checks every byte against RFC 9112's strict grammar before llhttp
// parses it, and decides where each request ends; a request whose framing is in doubt (or that
// CONNECT or Upgrade would turn into another protocol) is answered 400 (431, 501, 505) and the
// connection closed, before a stream opens. Nothing after a request's end is read until its
// exchange is over.
// Keep-alive: after an exchange the next request is parsed (pipelined requests wait for it).
// Flow control: reading stops while the request's unread bytes exceed the stream window, and
// a writer waits while the response queue is over ConnectionLimits::max_queued_send_bytes.
// Timeouts: the request's headers must complete within the lifecycle's handshake timeout, a body
// that stops coming (no byte for a handshake timeout while the connection wants to read) closes
// the connection, and a connection idle between requests closes after its max_idle.
// HTTP/1.0: no 100 (Continue), and a body of unknown length ends with the connection (no chunks).
// Everything happens on the byte stream's executor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "asio/steady_timer.hpp"
#include "ferry/limits.h"
#include "ferry/slice_chain.h"
#include "http1/message_parts.h"
#include "http1/request_framing.h"
#include "http2/connection.h"
#include "http2/lifecycle.h"
#include "http2/stream.h"
#include "transport/byte_stream.h"

// llhttp's parser (llhttp_t), declared here so that llhttp.h stays in src/http1's .cc files.
struct llhttp__internal_s;

namespace ferry::http1 {

class Connection final : public std::enable_shared_from_this<Connection>,
                         public http2::ByteStreamClient,
                         public http2::StreamCarrier {
 public:
  // The observer opens a Stream per request (on_stream_open) and hears the connection close.
  Connection(std::unique_ptr<http2::ByteStream> stream, const ConnectionLimits& limits,
             const http2::LifecyclePolicy& lifecycle, bool tls,
             http2::ConnectionObserver* observer);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start();
  // Closes once the exchange in progress (if any) is done; its response says connection: close.
  void shutdown();
  // Closes now: the request in progress gets on_closed(kConnectionLost).
  void close();

  // http2::StreamCarrier
  bool submit_response(http2::Stream* stream, std::span<const http2::HeaderField> headers,
                       bool with_data) override;
  void resume(http2::Stream* stream) override;
  bool send_queue_full() const override;
  bool peer_window_closed() const override { return false; }
  void wait_for_send_room() override { send_waiters_ = true; }
  // HTTP/1.1 cannot end one exchange early and go on: the connection closes.
  void reset(http2::Stream* stream, http2::ErrorCode error) override;
  void consume(http2::Stream* stream, std::size_t n) override;
  void consume_connection(std::size_t n) override;
  const asio::any_io_executor& executor() const override { return executor_; }
  bool is_http1() const override { return true; }

  // http2::ByteStreamClient
  void on_read(const asio::error_code& ec, std::size_t n) override;
  void on_written(const asio::error_code& ec) override;

 private:
  struct Callbacks;  // llhttp's callbacks, with access to the members
  friend struct Callbacks;

  void start_read();
  // Parses bytes (from the read block when block is set, else copied); stops at a request's end
  // (the parser pauses there until its exchange is over) or on an error.
  void parse(const std::uint8_t* data, std::size_t n, detail::Block* block);
  // A request's headers are complete: opens its stream and hands them over.
  bool deliver_headers();
  // Moves what the stream queued into the write queue (chunked when so), within the bound.
  void pump();
  void flush();
  // What to do next, from the loop: close the finished exchange's stream, go on to the next
  // request, or close the connection.
  void settle();
  void settle_later();
  // Refuses the request: an error response when no stream's response has begun (the stream,
  // if one opened, is closed without one), then the connection closes.
  void fail_request(int http_status, std::string_view reason);
  void arm_timer(std::chrono::milliseconds after);
  void close_stream(http2::ErrorCode error);

  asio::any_io_executor executor_;
  std::unique_ptr<http2::ByteStream> stream_;
  ConnectionLimits limits_;
  http2::LifecyclePolicy lifecycle_;
  bool tls_;
  http2::ConnectionObserver* observer_;
  asio::steady_timer timer_;

  RequestFraming framing_;
  std::unique_ptr<llhttp__internal_s> parser_;  // llhttp_t, whose header stays in src/http1
  detail::Block* read_block_ = nullptr;
  detail::Block* parsing_block_ = nullptr;  // the block parse() reads from, for zero-copy bodies
  std::string leftover_;                    // bytes after a request's end, parsed after it
  bool read_pending_ = false;
  bool paused_ = false;  // the parser stopped at a request's end until its exchange is over

  // The request being parsed.
  std::string url_;
  HeaderFields headers_;
  bool continue_expected_ = false;  // expect: 100-continue
  bool http10_ = false;             // an HTTP/1.0 request

  // The exchange: the request's stream, until its response is out and its request is in.
  http2::Stream* current_ = nullptr;
  std::int32_t next_id_ = 1;
  bool request_done_ = false;  // the request's body ended (on_message_complete)
  bool discarding_ = false;    // its stream is gone before the body ended: the rest is dropped
  bool response_started_ = false;
  bool response_chunked_ = false;
  bool response_done_ = false;  // the response's last byte is queued
  bool keep_alive_ = true;
  std::size_t unconsumed_ = 0;  // body bytes the stream has not consumed yet

  WriteQueue out_;
  bool send_waiters_ = false;
  bool settle_posted_ = false;
  bool closing_ = false;  // shutdown(), an error, or connection: close: close after this exchange
  bool failed_ = false;   // fail_request() answered already
  bool closed_ = false;
};

}  // namespace ferry::http1
