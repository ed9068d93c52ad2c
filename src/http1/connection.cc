// Implementation of src/http1/connection.h.
#include "http1/connection.h"

#include <llhttp.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "asio/post.hpp"
#include "common/strings.h"
#include "ferry/buffer_pool.h"
#include "http2/read_block.h"

namespace ferry::http1 {
namespace {

// A response's reason phrase: for the statuses ferry's calls send; others get a generic one
// (clients read the code, not the phrase).
std::string_view reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 499:
      return "Client Closed Request";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : "Error";
  }
}

// Request headers that describe this hop, not the request: never shown to the stream.
bool request_hop_by_hop(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "transfer-encoding" ||
         name == "upgrade" || name == "expect" || name == "host" || name == "proxy-connection";
}

// RFC 9110's Date ("Thu, 26 Nov 2026 09:30:00 GMT"), which an origin server with a clock sends:
// formatted once a second per thread, not per response.
std::string_view http_date() {
  thread_local std::time_t formatted_at = 0;
  thread_local char text[32] = {};
  const std::time_t now = std::time(nullptr);
  if (now != formatted_at) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    formatted_at = now;
  }
  return text;
}

}  // namespace

struct Connection::Callbacks {
  static Connection& self(llhttp_t* p) { return *static_cast<Connection*>(p->data); }

  static int on_message_begin(llhttp_t* p) {
    Connection& c = self(p);
    c.url_.clear();
    c.headers_.clear();
    c.continue_expected_ = false;
    return 0;
  }
  static int on_url(llhttp_t* p, const char* at, std::size_t n) {
    Connection& c = self(p);
    if (c.headers_.count(n) != 0) return -1;
    c.url_.append(at, n);
    return 0;
  }
  static int on_header_field(llhttp_t* p, const char* at, std::size_t n) {
    return self(p).headers_.add_name(at, n);
  }
  static int on_header_value(llhttp_t* p, const char* at, std::size_t n) {
    return self(p).headers_.add_value(at, n);
  }
  static int on_headers_complete(llhttp_t* p) {
    Connection& c = self(p);
    c.timer_.cancel();
    if (p->upgrade != 0) {
      // CONNECT, or Upgrade with Connection: upgrade. What follows its head would be another
      // protocol: refused before a byte of it is read (it would be read as a request).
      c.fail_request(400, "CONNECT and upgrade are not supported");
      return -1;
    }
    return c.deliver_headers() ? 0 : -1;
  }
  static int on_body(llhttp_t* p, const char* at, std::size_t n) {
    Connection& c = self(p);
    if (c.discarding_ || c.current_ == nullptr) return 0;
    c.unconsumed_ += n;
    deliver_body(*c.current_, c.parsing_block_, at, n);
    return 0;
  }
  static int on_message_complete(llhttp_t* p) {
    Connection& c = self(p);
    c.timer_.cancel();  // the body's idle timer: the exchange may take as long as it takes
    c.request_done_ = true;
    c.keep_alive_ = c.keep_alive_ && llhttp_should_keep_alive(p) != 0;
    if (c.current_ != nullptr && !c.discarding_) c.current_->on_remote_end();
    // The next request (pipelined) waits until this exchange is over: llhttp stops right after
    // this one's last byte.
    c.paused_ = true;
    c.settle_later();
    return HPE_PAUSED;
  }

  static const llhttp_settings_t& settings() {
    static const llhttp_settings_t s = [] {
      llhttp_settings_t out;
      llhttp_settings_init(&out);
      out.on_message_begin = &on_message_begin;
      out.on_url = &on_url;
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

Connection::Connection(std::unique_ptr<http2::ByteStream> stream, const ConnectionLimits& limits,
                       const http2::LifecyclePolicy& lifecycle, bool tls,
                       http2::ConnectionObserver* observer)
    : executor_(stream->executor()),
      stream_(std::move(stream)),
      limits_(limits),
      lifecycle_(lifecycle),
      tls_(tls),
      observer_(observer),
      timer_(executor_),
      framing_(limits.max_header_list_size),
      headers_(limits.max_header_list_size) {
  // Strict: no llhttp_set_lenient_* is ever called.
  parser_ = std::make_unique<llhttp_t>();
  llhttp_init(parser_.get(), HTTP_REQUEST, &Callbacks::settings());
  parser_->data = this;
}

Connection::~Connection() {
  if (read_block_ != nullptr) detail::block_unref(read_block_);
}

void Connection::start() {
  arm_timer(lifecycle_.handshake_timeout);
  start_read();
}

void Connection::arm_timer(std::chrono::milliseconds after) {
  if (after == kNever) return;
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (!ec) self->close();  // no request in time (a silent or slow client), or idle too long
  });
}

void Connection::start_read() {
  if (closed_ || read_pending_ || paused_) return;
  if (unconsumed_ > limits_.stream_window) {
    // The stream reads on first (consume()); until then the wait is ours, not the client's.
    if (framing_.in_body()) timer_.cancel();
    return;
  }
  // A request whose body stops coming holds the connection no longer than a silent head would:
  // each read of the body waits at most the handshake timeout.
  if (framing_.in_body()) arm_timer(lifecycle_.handshake_timeout);
  read_block_ = http2::next_read_block(read_block_);
  read_pending_ = true;
  stream_->async_read_some(asio::buffer(read_block_->data(), BufferPool::kBlockSize),
                           shared_from_this());
}

void Connection::on_read(const asio::error_code& ec, std::size_t n) {
  read_pending_ = false;
  if (closed_) return;
  if (ec) {
    close();
    return;
  }
  read_block_->used = static_cast<std::uint32_t>(n);
  parse(read_block_->data(), n, read_block_);
  start_read();
}

void Connection::parse(const std::uint8_t* data, std::size_t n, detail::Block* block) {
  // The framing check sees the bytes first and says where the request ends; llhttp parses only
  // what it accepted, so a request's head reaches a stream only once its framing is known good,
  // and llhttp never reads past the request's end.
  const RequestFraming::Scan scan = framing_.scan(data, n);
  const char* begin = reinterpret_cast<const char*>(data);
  if (scan.accepted > 0) {
    parsing_block_ = block;
    const llhttp_errno_t error = llhttp_execute(parser_.get(), begin, scan.accepted);
    parsing_block_ = nullptr;
    if (closed_) return;
    const bool ended_there = error == HPE_PAUSED && paused_ &&
                             llhttp_get_error_pos(parser_.get()) == begin + scan.accepted;
    if (scan.message_end && ended_there) {
      leftover_.append(begin + scan.accepted, n - scan.accepted);
      return;
    }
    if (error != HPE_OK || scan.message_end) {
      // llhttp refused what the check let through, or the two disagree on where the request
      // ends: either way its framing is in doubt.
      const bool too_large = headers_.over_limit();
      fail_request(too_large ? 431 : 400, too_large         ? "request headers too large"
                                          : error != HPE_OK ? llhttp_get_error_reason(parser_.get())
                                                            : "request framing in doubt");
      return;
    }
  }
  if (scan.status != 0) fail_request(scan.status, scan.reason);
}

bool Connection::deliver_headers() {
  if (closing_) {
    fail_request(503, "the server is shutting down");
    return false;
  }
  http2::Stream* stream = observer_->on_stream_open(next_id_);
  if (stream == nullptr) {
    fail_request(503, "no stream could be opened");
    return false;
  }
  stream->id_ = next_id_;
  next_id_ = next_stream_id(next_id_);
  current_ = stream;
  request_done_ = false;
  discarding_ = false;
  response_started_ = false;
  response_chunked_ = false;
  response_done_ = false;
  unconsumed_ = 0;
  keep_alive_ = llhttp_should_keep_alive(parser_.get()) != 0;
  http10_ = parser_->http_major == 1 && parser_->http_minor == 0;

  std::string authority;
  for (auto& [name, value] : headers_.fields()) {
    name = absl::AsciiStrToLower(name);
    if (name == "host") authority = value;
    // RFC 9110 §10.1.1: an HTTP/1.0 client gets no 100 (Continue), whatever it asked.
    if (name == "expect" && !http10_ &&
        absl::EqualsIgnoreCase(detail::to_absl(value), "100-continue")) {
      continue_expected_ = true;
    }
  }
  const char* method = llhttp_method_name(static_cast<llhttp_method_t>(parser_->method));
  bool ok = stream->on_header(":method", method) &&
            stream->on_header(":scheme", tls_ ? "https" : "http") &&
            stream->on_header(":path", url_) && stream->on_header(":authority", authority);
  for (const auto& [name, value] : headers_.fields()) {
    if (!ok) break;
    if (request_hop_by_hop(name)) continue;
    ok = stream->on_header(name, value);
  }
  if (!ok) {
    // A header the call refused (a -bin value that is not base64, the call's header limit):
    // answered, and the stream closed before its handler starts.
    fail_request(400, "request headers rejected");
    return false;
  }
  if (continue_expected_) {
    // curl waits for this before a body over 1 KiB; a response sent first makes it moot.
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    out_.append(kContinue);
    flush();
  }
  stream->on_headers_done();
  return !closed_;
}

bool Connection::submit_response(http2::Stream* stream, std::span<const http2::HeaderField> headers,
                                 bool with_data) {
  if (closed_ || stream != current_ || response_started_) return false;
  response_started_ = true;
  int status = 200;
  std::string head;
  for (const http2::HeaderField& h : headers) {
    if (h.name == ":status") {
      status = std::atoi(std::string(h.value).c_str());
      continue;
    }
    if (!h.name.empty() && h.name[0] == ':') continue;
    absl::StrAppend(&head, detail::to_absl(h.name), ": ", detail::to_absl(h.value), "\r\n");
  }
  // A body whose end is queued already has a length; any other is chunked, or for an HTTP/1.0
  // client (which knows no chunked coding, RFC 9112 §6.1) ends with the connection.
  if (!with_data) {
    // RFC 9110 §8.6: a 204 (or 304) carries no content-length.
    if (status != 204 && status != 304) head += "content-length: 0\r\n";
    response_done_ = true;
  } else if (stream->outbound_end && stream->outbound.size() <= WriteQueue::kWriteAhead) {
    absl::StrAppend(&head, "content-length: ", stream->outbound.size(), "\r\n");
  } else if (http10_) {
    keep_alive_ = false;
  } else {
    head += "transfer-encoding: chunked\r\n";
    response_chunked_ = true;
  }
  if (closing_ || !keep_alive_) head += "connection: close\r\n";
  const std::string line =
      absl::StrCat("HTTP/1.1 ", status, " ", detail::to_absl(reason_phrase(status)),
                   "\r\ndate: ", detail::to_absl(http_date()), "\r\n");
  out_.append(line);
  head += "\r\n";
  out_.append(head);
  if (with_data) pump();
  flush();
  if (response_done_) settle_later();
  return true;
}

void Connection::resume(http2::Stream* stream) {
  if (closed_ || stream != current_ || !response_started_ || response_done_) return;
  pump();
  flush();
  if (response_done_) settle_later();
}

void Connection::pump() {
  if (failed_) return;  // the request was refused: the stream's response never goes
  http2::Stream* s = current_;
  out_.take_body(s->outbound, response_chunked_);
  if (s->outbound_end && s->outbound.empty()) {
    // The end. HTTP/1.1 has no place for trailers a browser reads: gRPC-Web and Connect put
    // theirs in the body, and a gRPC call is refused over HTTP/1.1 before it gets here.
    if (response_chunked_) out_.end_chunked();
    response_done_ = true;
  }
}

void Connection::flush() {
  if (!closed_) out_.flush(*stream_, shared_from_this());
}

void Connection::on_written(const asio::error_code& ec) {
  out_.written();
  if (closed_) return;
  if (ec) {
    close();
    return;
  }
  if (current_ != nullptr && response_started_ && !response_done_) {
    pump();
    if (response_done_) settle_later();
    if (send_waiters_ && !send_queue_full()) {
      send_waiters_ = false;
    }
    current_->on_outbound_taken();
  }
  flush();
  if (!out_.writing() && closing_ && current_ == nullptr) close();
}

bool Connection::send_queue_full() const {
  return out_.unwritten() >= limits_.max_queued_send_bytes;
}

void Connection::reset(http2::Stream* stream, http2::ErrorCode error) {
  if (closed_ || stream != current_) return;
  // Not from inside the stream's own call: it is told on_closed from the loop.
  closing_ = true;
  keep_alive_ = false;
  asio::post(executor_, [self = shared_from_this(), stream, error] {
    if (self->current_ == stream) self->close_stream(error);
    self->close();
  });
}

void Connection::consume(http2::Stream* stream, std::size_t n) {
  if (stream != current_) return;
  consume_connection(n);
}

void Connection::consume_connection(std::size_t n) {
  unconsumed_ -= std::min(n, unconsumed_);
  if (!read_pending_ && !closed_) {
    asio::post(executor_, [self = shared_from_this()] { self->start_read(); });
  }
}

void Connection::settle_later() {
  if (settle_posted_) return;
  settle_posted_ = true;
  asio::post(executor_, [self = shared_from_this()] {
    self->settle_posted_ = false;
    self->settle();
  });
}

void Connection::close_stream(http2::ErrorCode error) {
  http2::Stream* stream = std::exchange(current_, nullptr);
  if (stream != nullptr) stream->on_closed(error);
}

void Connection::settle() {
  if (closed_) return;
  if (current_ != nullptr) {
    if (!response_done_) return;
    // The response is out: the stream is done with, whether or not its request has ended (the
    // rest of a body it did not wait for is read and dropped, as HTTP/2 resets such a stream).
    close_stream(http2::ErrorCode::kNoError);
    discarding_ = !request_done_;
    if (!keep_alive_) closing_ = true;
  }
  if (closing_) {
    if (out_.idle()) close();
    return;
  }
  if (!request_done_) return;  // the body's end comes (and is dropped), then the next request
  // The next request: what was read past this one first, then the socket. Its headers must
  // come in time, as a new connection's must.
  request_done_ = false;
  discarding_ = false;
  llhttp_resume(parser_.get());
  paused_ = false;
  arm_timer(std::min(lifecycle_.max_idle, lifecycle_.handshake_timeout));
  std::string held = std::move(leftover_);
  leftover_.clear();
  if (!held.empty())
    parse(reinterpret_cast<const std::uint8_t*>(held.data()), held.size(), nullptr);
  start_read();
}

void Connection::fail_request(int http_status, std::string_view reason) {
  if (failed_) return;  // a callback's failure, then the parser's report of it
  failed_ = true;
  closing_ = true;
  keep_alive_ = false;
  if (current_ != nullptr) {
    // The stream is closed from the loop (not from inside its own callbacks). A response it
    // began cannot be answered twice, only cut short; one it did not begin never goes, and the
    // request gets the error response instead.
    const bool answered = response_started_;
    response_started_ = true;
    asio::post(executor_, [self = shared_from_this(), answered] {
      self->close_stream(http2::ErrorCode::kProtocolError);
      if (answered || self->out_.idle()) self->close();
    });
    if (answered) return;
  }
  const std::string response = absl::StrCat(
      "HTTP/1.1 ", http_status, " ", detail::to_absl(reason_phrase(http_status)),
      "\r\ncontent-type: text/plain\r\nconnection: close\r\ncontent-length: ", reason.size(),
      "\r\n\r\n", detail::to_absl(reason));
  out_.append(response);
  flush();
}

void Connection::shutdown() {
  closing_ = true;
  if (current_ == nullptr && !out_.writing()) close();
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  close_stream(http2::ErrorCode::kConnectionLost);
  // Once all is written the peer should read all of it: no reset (transport/lingering_close.h).
  if (out_.writing()) {
    stream_->close();
  } else {
    stream_->close_gracefully();
  }
  observer_->on_connection_closed();
}

}  // namespace ferry::http1
