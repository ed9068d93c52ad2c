// Implementation of src/http1/client_connection.h.
#include "http1/client_connection.h"

#include <llhttp.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "asio/post.hpp"
#include "http2/read_block.h"

namespace ferry::http1 {
namespace {

// Hop-by-hop fields, which describe this connection rather than the response.
bool response_hop_by_hop(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "transfer-encoding" ||
         name == "proxy-connection" || name == "upgrade" || name == "trailer" || name == "te";
}

}  // namespace

struct ClientConnection::Callbacks {
  static ClientConnection& self(llhttp_t* p) { return *static_cast<ClientConnection*>(p->data); }

  static int on_message_begin(llhttp_t* p) {
    self(p).headers_.clear();
    return 0;
  }
  static int on_header_field(llhttp_t* p, const char* at, std::size_t n) {
    return self(p).headers_.add_name(at, n);
  }
  static int on_header_value(llhttp_t* p, const char* at, std::size_t n) {
    return self(p).headers_.add_value(at, n);
  }
  static int on_headers_complete(llhttp_t* p) {
    ClientConnection& c = self(p);
    if (p->status_code >= 100 && p->status_code < 200) return 0;  // 100 Continue: the next one
    if (c.current_ == nullptr) return -1;                         // a response nobody asked for
    http2::Stream* s = c.current_;
    bool ok = s->on_header(":status", std::to_string(p->status_code));
    for (auto& [name, value] : c.headers_.fields()) {
      if (!ok) break;
      name = absl::AsciiStrToLower(name);
      if (response_hop_by_hop(name)) continue;
      ok = s->on_header(name, value);
    }
    if (!ok) return -1;
    c.headers_delivered_ = true;
    s->on_headers_done();
    return 0;
  }
  static int on_body(llhttp_t* p, const char* at, std::size_t n) {
    ClientConnection& c = self(p);
    if (c.current_ == nullptr) return 0;
    c.unconsumed_ += n;
    deliver_body(*c.current_, c.parsing_block_, at, n);
    return 0;
  }
  static int on_message_complete(llhttp_t* p) {
    ClientConnection& c = self(p);
    if (p->status_code >= 100 && p->status_code < 200) return 0;
    c.response_done_ = true;
    c.keep_alive_ = c.keep_alive_ && llhttp_should_keep_alive(p) != 0;
    if (c.current_ != nullptr) c.current_->on_remote_end();
    // Nothing may follow a response until the next request: what does ends the connection.
    c.settle_later();
    return HPE_PAUSED;
  }

  static const llhttp_settings_t& settings() {
    static const llhttp_settings_t s = [] {
      llhttp_settings_t out;
      llhttp_settings_init(&out);
      out.on_message_begin = &on_message_begin;
      out.on_header_field = &on_header_field;
      out.on_header_value = &on_header_value;
      out.on_headers_complete = &on_headers_complete;
      out.on_body = &on_body;
      out.on_message_complete = &on_message_complete;
      return out;
    }();
    return s;
  }
};

ClientConnection::ClientConnection(std::unique_ptr<http2::ByteStream> stream,
                                   const ConnectionLimits& limits, Owner* owner)
    : executor_(stream->executor()),
      stream_(std::move(stream)),
      limits_(limits),
      owner_(owner),
      headers_(limits.max_header_list_size) {
  // Strict: no llhttp_set_lenient_* is ever called.
  parser_ = std::make_unique<llhttp_t>();
  llhttp_init(parser_.get(), HTTP_RESPONSE, &Callbacks::settings());
  parser_->data = this;
}

ClientConnection::~ClientConnection() {
  if (read_block_ != nullptr) detail::block_unref(read_block_);
}

void ClientConnection::start() { start_read(); }

void ClientConnection::begin(http2::Stream* stream, std::string head, bool idempotent) {
  current_ = stream;
  head_ = std::move(head);
  head_written_ = false;
  sent_ = false;
  idempotent_ = idempotent;
  chunked_ = false;
  request_done_ = false;
  response_done_ = false;
  response_began_ = false;
  headers_delivered_ = false;
  keep_alive_ = true;
  unconsumed_ = 0;
  llhttp_init(parser_.get(), HTTP_RESPONSE, &Callbacks::settings());
  parser_->data = this;
  // The head waits for the loop: a unary call's body and its end are queued by then, and the
  // request goes with a content-length.
  resume();
}

void ClientConnection::resume() {
  if (closed_ || current_ == nullptr) return;
  asio::post(executor_, [self = shared_from_this(), stream = current_] {
    if (self->current_ != stream || self->closed_) return;
    self->pump();
    self->flush();
  });
}

void ClientConnection::pump() {
  http2::Stream* s = current_;
  if (s == nullptr || request_done_) return;
  bool took = false;
  if (!head_written_) {
    chunked_ = !s->outbound_end;
    absl::StrAppend(&head_,
                    chunked_ ? "transfer-encoding: chunked\r\n"
                             : absl::StrCat("content-length: ", s->outbound.size(), "\r\n"),
                    "\r\n");
    out_.append(head_);
    head_.clear();
    head_.shrink_to_fit();
    head_written_ = true;
  }
  if (out_.take_body(s->outbound, chunked_)) took = true;
  if (s->outbound_end && s->outbound.empty()) {
    if (chunked_) out_.end_chunked();
    request_done_ = true;
    settle_later();
  }
  if (took) s->on_outbound_taken();
}

void ClientConnection::flush() {
  if (closed_) return;
  out_.flush(*stream_, shared_from_this());
  // From here the server may have the request (part of a write is a write).
  if (out_.writing() && current_ != nullptr && head_written_) sent_ = true;
}

http2::ErrorCode ClientConnection::broken_error() const {
  if (response_began_ || !reused()) return http2::ErrorCode::kConnectionLost;
  // Never written: the server cannot have it. Written and idempotent on a kept connection: the
  // server most likely closed it as the request went out (browsers resend such a request too).
  if (!sent_ || (idempotent_ && reused())) return http2::ErrorCode::kRefusedStream;
  return http2::ErrorCode::kConnectionLost;
}

void ClientConnection::on_written(const asio::error_code& ec) {
  out_.written();
  if (closed_) return;
  if (ec) {
    // Bytes of the request may have reached the server: retried only when that is safe.
    fail(broken_error());
    return;
  }
  pump();
  if (send_waiters_ && !send_queue_full()) send_waiters_ = false;
  flush();
}

bool ClientConnection::send_queue_full() const {
  return out_.unwritten() >= limits_.max_queued_send_bytes;
}

void ClientConnection::start_read() {
  if (closed_ || read_pending_) return;
  if (unconsumed_ > limits_.stream_window) return;  // the call reads on first (consume())
  read_block_ = http2::next_read_block(read_block_);
  read_pending_ = true;
  stream_->async_read_some(asio::buffer(read_block_->data(), BufferPool::kBlockSize),
                           shared_from_this());
}

void ClientConnection::on_read(const asio::error_code& ec, std::size_t n) {
  read_pending_ = false;
  if (closed_) return;
  if (ec) {
    if (current_ == nullptr) {
      close();  // the server closed an idle connection (its keep-alive timeout)
      return;
    }
    // A response delimited by the end of the connection ends here: a clean end only (over TLS,
    // one the server's close_notify announced; a truncated stream fails the call below).
    if (ec == asio::error::eof && response_began_ && !response_done_) {
      llhttp_finish(parser_.get());
      if (response_done_) {
        keep_alive_ = false;
        return;  // settle() closes
      }
    }
    if (!response_done_) {
      // The server may or may not have run the request: it goes again only when that is safe.
      fail(broken_error());
    } else {
      keep_alive_ = false;
    }
    return;
  }
  read_block_->used = static_cast<std::uint32_t>(n);
  parse(read_block_->data(), n, read_block_);
  start_read();
}

void ClientConnection::parse(const std::uint8_t* data, std::size_t n, detail::Block* block) {
  if (current_ == nullptr || response_done_) {
    // Bytes nobody asked for: the connection is not HTTP/1.1 as it should be.
    keep_alive_ = false;
    if (current_ == nullptr) close();
    return;
  }
  response_began_ = true;
  parsing_block_ = block;
  const char* begin = reinterpret_cast<const char*>(data);
  const llhttp_errno_t error = llhttp_execute(parser_.get(), begin, n);
  parsing_block_ = nullptr;
  if (closed_) return;
  if (error == HPE_PAUSED) {
    // More than the response: nothing to read it as.
    if (llhttp_get_error_pos(parser_.get()) < begin + n) keep_alive_ = false;
    return;
  }
  if (error != HPE_OK) fail(http2::ErrorCode::kProtocolError);
}

void ClientConnection::consume(std::size_t n) {
  unconsumed_ -= std::min(n, unconsumed_);
  if (!read_pending_ && !closed_) {
    asio::post(executor_, [self = shared_from_this()] { self->start_read(); });
  }
}

void ClientConnection::settle_later() {
  if (settle_posted_) return;
  settle_posted_ = true;
  asio::post(executor_, [self = shared_from_this()] { self->settle(); });
}

void ClientConnection::settle() {
  settle_posted_ = false;
  if (closed_ || current_ == nullptr || !response_done_) return;
  if (!request_done_) {
    // The server answered before the request's body ended: the rest cannot go on this
    // connection (the call resets the stream, which closes it, unless it did already).
    return;
  }
  http2::Stream* s = std::exchange(current_, nullptr);
  ++exchanges_;
  auto keep = shared_from_this();
  s->on_closed(http2::ErrorCode::kNoError);
  if (closed_) return;
  if (!keep_alive_) {
    close();
  } else if (owner_ != nullptr) {
    owner_->on_idle(this);
  }
}

void ClientConnection::reset(http2::ErrorCode error) {
  if (closed_ || current_ == nullptr) return;
  // Not from inside the stream's own call: it is told on_closed from the loop.
  keep_alive_ = false;
  asio::post(executor_, [self = shared_from_this(), stream = current_, error] {
    if (self->current_ == stream) self->fail(error);
  });
}

void ClientConnection::fail(http2::ErrorCode error) {
  auto keep = shared_from_this();
  if (http2::Stream* s = std::exchange(current_, nullptr)) s->on_closed(error);
  close();
}

void ClientConnection::close() {
  if (closed_) return;
  closed_ = true;
  auto keep = shared_from_this();
  stream_->close();
  if (http2::Stream* s = std::exchange(current_, nullptr)) {
    s->on_closed(http2::ErrorCode::kConnectionLost);
  }
  if (owner_ != nullptr) owner_->on_connection_closed(this);
}

}  // namespace ferry::http1
