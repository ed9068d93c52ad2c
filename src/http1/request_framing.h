// RFC 9112's framing rules for a request, checked on the server's bytes before llhttp parses them
// (http2 layer, beside the HTTP/1.1 engines; private). Request smuggling lives in the places where
// two parsers may disagree on where a request ends; this check decides it from the strict grammar
// alone and llhttp only ever sees the bytes it accepted, one request at a time, so a request
// whose framing is in doubt is refused (400 and a close) before any handler starts, and a byte
// after a request's end is never read as part of it:
//   - every line ends in CRLF: no bare CR, no bare LF (§2.2), no obs-fold (§5.2);
//   - field names are tokens, with nothing between the name and the colon (§5.1), values hold
//     no control character but HTAB (RFC 9110 §5.5);
//   - one Host in HTTP/1.1 (§3.2); HTTP/1.0 and HTTP/1.1 only (505 for others);
//   - Content-Length: one field, digits only (no list, no sign); Transfer-Encoding: one field,
//     "chunked" last (else 400, §6.3) and alone (else 501: ferry decodes no other coding); never
//     both (§6.1), never in HTTP/1.0 (§6.1);
//   - chunks: a hexadecimal size that fits 64 bits, extensions without control characters,
//     CRLF after each chunk's data, trailers bounded like the head (431) and checked like it;
//   - CONNECT (405) and Upgrade (400) are refused at their head: what follows would not be
//     HTTP/1.1, and must not be read as a request.
// One instance per connection; scan() is fed the connection's bytes in order, in pieces of any
// size (a byte at a time works), and stops at each request's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::http1 {

class RequestFraming {
 public:
  // max_head: bytes of a request's head (request line, fields, line ends), and, apart, of its
  // trailers; over it the request gets 431.
  explicit RequestFraming(std::size_t max_head) : max_head_(max_head) {}

  struct Scan {
    std::size_t accepted = 0;  // bytes from the start that conform (and may be parsed)
    bool message_end = false;  // a request ends after the accepted bytes; scan stopped there
    int status = 0;            // an error (the response's status) at byte `accepted`; 0: none
    const char* reason = "";   // why, for the response's body
  };
  // Checks n more bytes of the connection. After a request's end the next call starts the next
  // request; after an error, every call returns the error again.
  Scan scan(const std::uint8_t* data, std::size_t n);

  // The request's body is still arriving (its head is complete and it is not over).
  bool in_body() const { return state_ == State::kBody || in_chunks(); }

 private:
  enum class State {
    kHead,       // request line and fields, line by line
    kBody,       // content-length bytes left in body_left_
    kChunkLine,  // a chunk's size line
    kChunkData,  // body_left_ bytes of a chunk's data
    kChunkCr,    // the CR after a chunk's data
    kChunkLf,    // the LF after it
    kTrailers,   // trailer fields after the last chunk, line by line
    kFailed,
  };
  bool in_chunks() const { return state_ >= State::kChunkLine && state_ <= State::kTrailers; }
  // One complete line (without its CRLF) of the head, a chunk's size line or a trailer line:
  // -1 refused (after fail()), 1 the request ends with it, 0 go on.
  int line_done(std::string_view line);
  // The head's lines, and the trailers': false after fail().
  bool head_line(std::string_view line);
  bool field_line(std::string_view line, bool trailer);
  bool chunk_line(std::string_view line);
  // The head's empty line: the body's framing is decided.
  bool head_end();
  bool fail(int status, const char* reason);
  void next_request();

  std::size_t max_head_;
  State state_ = State::kHead;
  std::string line_;            // the line being read (capacity kept across requests)
  bool cr_ = false;             // the line's last byte was CR: LF must follow
  std::size_t line_bytes_ = 0;  // bytes of this head (or these trailers) so far
  std::uint64_t body_left_ = 0;

  // The request's head.
  bool request_line_seen_ = false;
  bool http10_ = false;
  int hosts_ = 0;
  bool content_length_seen_ = false;
  std::uint64_t content_length_ = 0;
  bool chunked_ = false;
  bool transfer_encoding_seen_ = false;

  int status_ = 0;
  const char* reason_ = "";
};

}  // namespace ferry::http1
