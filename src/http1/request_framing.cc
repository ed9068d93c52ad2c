// Implementation of src/http1/request_framing.h.
#include "http1/request_framing.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace ferry::http1 {
namespace {

// A chunk's size line (size and extensions): longer is an attack on the parser's patience, not
// a chunk any client sends.
constexpr std::size_t kMaxChunkLine = 4096;

// RFC 9110 §5.6.2: tchar, as a table (every byte of every field name goes through it).
constexpr std::array<bool, 256> kTchar = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = t[c - 'a' + 'A'] = true;
  for (const char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

bool is_tchar(unsigned char c) { return kTchar[c]; }

// RFC 9110 §5.5: field-vchar, SP or HTAB (obs-text allowed, as every server does).
constexpr std::array<bool, 256> kFieldByte = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 256; ++c) t[c] = c != 0x7f;
  t['\t'] = true;
  return t;
}();

bool is_field_byte(unsigned char c) { return kFieldByte[c]; }

bool is_ows(char c) { return c == ' ' || c == '\t'; }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

bool equals_lower(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
    if (c != lower[i]) return false;
  }
  return true;
}

int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return -1;
}

}  // namespace

RequestFraming::Scan RequestFraming::scan(const std::uint8_t* data, std::size_t n) {
  Scan r;
  std::size_t i = 0;
  const auto failed = [&](std::size_t at) {
    r.accepted = at;
    r.status = status_;
    r.reason = reason_;
    return r;
  };
  const auto ended = [&](std::size_t at) {
    next_request();
    r.accepted = at;
    r.message_end = true;
    return r;
  };
  if (state_ == State::kFailed) return failed(0);
  while (i < n) {
    switch (state_) {
      case State::kBody:
      case State::kChunkData: {
        const std::size_t take =
            static_cast<std::size_t>(std::min<std::uint64_t>(body_left_, n - i));
        i += take;
        body_left_ -= take;
        if (body_left_ != 0) break;
        if (state_ == State::kChunkData) {
          state_ = State::kChunkCr;
          break;
        }
        return ended(i);
      }
      case State::kChunkCr:
      case State::kChunkLf: {
        // RFC 9112 §7.1: chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF.
        const char want = state_ == State::kChunkCr ? '\r' : '\n';
        if (data[i] != want) {
          fail(400, "a chunk's data is not followed by CRLF");
          return failed(i);
        }
        ++i;
        state_ = state_ == State::kChunkCr ? State::kChunkLf : State::kChunkLine;
        break;
      }
      case State::kHead:
      case State::kChunkLine:
      case State::kTrailers: {
        if (cr_) {
          // RFC 9112 §2.2: a bare CR is an error (no recipient may read it as a line end).
          if (data[i] != '\n') {
            fail(400, "a bare CR in the request");
            return failed(i);
          }
          cr_ = false;
          const int done = line_done(line_);
          line_.clear();
          if (done < 0) return failed(i);
          ++i;
          if (done > 0) return ended(i);
          break;
        }
        // The line's bytes in this piece, up to its CR. A bare LF stays inside the line, where
        // every check of a line's bytes refuses it as a control character (RFC 9112 §2.2).
        const void* cr = std::memchr(data + i, '\r', n - i);
        const std::size_t e =
            cr == nullptr ? n
                          : static_cast<std::size_t>(static_cast<const std::uint8_t*>(cr) - data);
        const std::size_t len = e - i;
        const char* bytes = reinterpret_cast<const char*>(data + i);
        line_bytes_ += len;
        if (state_ == State::kChunkLine ? line_.size() + len > kMaxChunkLine
                                        : line_bytes_ > max_head_) {
          if (state_ == State::kChunkLine) {
            fail(400, "chunk size line too long");
          } else {
            fail(431, state_ == State::kTrailers ? "request trailers too large"
                                                 : "request head too large");
          }
          return failed(i);
        }
        if (e + 1 >= n) {
          // The line goes on in the next piece (or only its LF does).
          line_.append(bytes, len);
          cr_ = e + 1 == n;
          i = n;
          break;
        }
        if (data[e + 1] != '\n') {
          fail(400, "a bare CR in the request");
          return failed(e + 1);
        }
        int done;
        if (line_.empty()) {
          done = line_done(std::string_view(bytes, len));  // the whole line in this piece
        } else {
          line_.append(bytes, len);
          done = line_done(line_);
          line_.clear();
        }
        if (done < 0) return failed(e);
        i = e + 2;
        if (done > 0) return ended(i);
        break;
      }
      case State::kFailed:
        return failed(i);
    }
  }
  r.accepted = n;
  return r;
}

int RequestFraming::line_done(std::string_view line) {
  line_bytes_ += 2;
  if (state_ == State::kChunkLine) return chunk_line(line) ? 0 : -1;
  if (line.empty()) {
    if (state_ == State::kTrailers) return 1;
    if (request_line_seen_) {
      if (!head_end()) return -1;
      return state_ == State::kHead ? 1 : 0;  // no body: the request ends with its head
    }
    // RFC 9112 §2.2: empty lines before the request line are ignored, within the bound.
    return line_bytes_ <= max_head_ || fail(431, "request head too large") ? 0 : -1;
  }
  const bool ok = state_ == State::kTrailers ? field_line(line, true) : head_line(line);
  return ok ? 0 : -1;
}

bool RequestFraming::head_line(std::string_view line) {
  if (!request_line_seen_) {
    // RFC 9112 §3: request-line = method SP request-target SP HTTP-version.
    request_line_seen_ = true;
    const std::size_t sp1 = line.find(' ');
    if (sp1 == 0 || sp1 == std::string_view::npos) return fail(400, "malformed request line");
    const std::string_view method = line.substr(0, sp1);
    const std::string_view rest = line.substr(sp1 + 1);
    const std::size_t sp2 = rest.find(' ');
    if (sp2 == 0 || sp2 == std::string_view::npos) return fail(400, "malformed request line");
    const std::string_view target = rest.substr(0, sp2);
    const std::string_view version = rest.substr(sp2 + 1);
    for (const char c : method) {
      if (!is_tchar(static_cast<unsigned char>(c))) return fail(400, "malformed method");
    }
    for (const char c : target) {
      const auto u = static_cast<unsigned char>(c);
      if (u <= 0x20 || u == 0x7f) return fail(400, "malformed request target");
    }
    if (version == "HTTP/1.1") {
      http10_ = false;
    } else if (version == "HTTP/1.0") {
      http10_ = true;
    } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && version[5] >= '0' &&
               version[5] <= '9' && version[6] == '.' && version[7] >= '0' && version[7] <= '9') {
      return fail(505, "only HTTP/1.0 and HTTP/1.1 are spoken here");
    } else {
      return fail(400, "malformed HTTP version");
    }
    // RFC 9110 §9.3.6: what follows a CONNECT's head is a tunnel's bytes, never a request.
    if (method == "CONNECT") return fail(405, "CONNECT is not supported");
    return true;
  }
  // RFC 9112 §5.2: obs-fold; a server MUST reject it or replace it, and ferry rejects.
  if (is_ows(line.front())) return fail(400, "obsolete line folding (obs-fold)");
  return field_line(line, false);
}

bool RequestFraming::field_line(std::string_view line, bool trailer) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return fail(400, "a field line without a colon");
  const std::string_view name = line.substr(0, colon);
  if (name.empty()) return fail(400, "an empty field name");
  for (const char c : name) {
    if (is_tchar(static_cast<unsigned char>(c))) continue;
    // RFC 9112 §5.1: whitespace between a field name and its colon MUST be answered with 400.
    if (is_ows(c)) return fail(400, "whitespace in a field name or before its colon");
    return fail(400, "invalid character in a field name");
  }
  const std::string_view value = trim_ows(line.substr(colon + 1));
  for (const char c : value) {
    if (!is_field_byte(static_cast<unsigned char>(c))) {
      return fail(400, "control character in a field value");
    }
  }
  if (trailer) {
    // RFC 9110 §6.5.1: framing is decided by the head; in trailers these would be a lie.
    if (equals_lower(name, "content-length") || equals_lower(name, "transfer-encoding") ||
        equals_lower(name, "host")) {
      return fail(400, "a framing field in the trailers");
    }
    return true;
  }
  if (equals_lower(name, "host")) {
    ++hosts_;
  } else if (equals_lower(name, "content-length")) {
    // RFC 9112 §6.3: a list or repeated Content-Length is unrecoverable framing; so is a sign.
    if (content_length_seen_) return fail(400, "more than one Content-Length");
    content_length_seen_ = true;
    if (value.empty() || value.size() > 18) return fail(400, "invalid Content-Length");
    std::uint64_t v = 0;
    for (const char c : value) {
      if (c < '0' || c > '9') return fail(400, "invalid Content-Length");
      v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    content_length_ = v;
  } else if (equals_lower(name, "transfer-encoding")) {
    if (transfer_encoding_seen_) return fail(400, "more than one Transfer-Encoding");
    transfer_encoding_seen_ = true;
    if (equals_lower(value, "chunked")) {
      chunked_ = true;
      return true;
    }
    // RFC 9112 §6.3: chunked not last leaves the length unknown: 400 and close. Chunked last
    // after another coding is framed, but ferry decodes no other coding: 501 (RFC 9112 §6.1).
    const std::size_t comma = value.rfind(',');
    const std::string_view last =
        trim_ows(comma == std::string_view::npos ? value : value.substr(comma + 1));
    if (equals_lower(last, "chunked")) {
      return fail(501, "transfer codings other than chunked are not supported");
    }
    return fail(400, "chunked is not the final transfer coding");
  } else if (equals_lower(name, "upgrade")) {
    // RFC 9110 §7.8: no protocol is switched to here; refused rather than ignored, so that no
    // intermediary can believe the connection switched while ferry reads requests from it.
    return fail(400, "upgrade is not supported");
  }
  return true;
}

bool RequestFraming::head_end() {
  // RFC 9112 §3.2: an HTTP/1.1 request without Host, or with more than one, gets 400.
  if (hosts_ > 1 || (!http10_ && hosts_ == 0)) {
    return fail(400, hosts_ == 0 ? "no Host" : "more than one Host");
  }
  if (transfer_encoding_seen_) {
    // RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 is faulty framing; with Content-Length it
    // is the smuggler's signature (the Content-Length MUST NOT be trusted): refused, not fixed.
    if (http10_) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (content_length_seen_) return fail(400, "both Content-Length and Transfer-Encoding");
  }
  line_bytes_ = 0;
  if (chunked_) {
    state_ = State::kChunkLine;
  } else if (content_length_ > 0) {
    state_ = State::kBody;
    body_left_ = content_length_;
  }
  return true;
}

bool RequestFraming::chunk_line(std::string_view line) {
  // RFC 9112 §7.1: chunk-size = 1*HEXDIG; chunk-ext = *( BWS ";" BWS name [ "=" value ] ),
  // taken here without whitespace before the first ';' (as Node's parser does).
  std::uint64_t size = 0;
  std::size_t i = 0;
  for (; i < line.size(); ++i) {
    const int v = hex_value(static_cast<unsigned char>(line[i]));
    if (v < 0) break;
    if ((size >> 60) != 0) return fail(400, "chunk size overflows");
    size = size * 16 + static_cast<std::uint64_t>(v);
  }
  if (i == 0) return fail(400, "invalid chunk size");
  if (i < line.size()) {
    if (line[i] != ';') return fail(400, "invalid chunk size");
    for (; i < line.size(); ++i) {
      if (!is_field_byte(static_cast<unsigned char>(line[i]))) {
        return fail(400, "control character in a chunk extension");
      }
    }
  }
  if (size == 0) {
    state_ = State::kTrailers;
    line_bytes_ = 0;
  } else {
    state_ = State::kChunkData;
    body_left_ = size;
  }
  return true;
}

bool RequestFraming::fail(int status, const char* reason) {
  state_ = State::kFailed;
  status_ = status;
  reason_ = reason;
  return false;
}

void RequestFraming::next_request() {
  state_ = State::kHead;
  cr_ = false;
  line_bytes_ = 0;
  body_left_ = 0;
  request_line_seen_ = false;
  hosts_ = 0;
  content_length_seen_ = false;
  content_length_ = 0;
  chunked_ = false;
  transfer_encoding_seen_ = false;
}

}  // namespace ferry::http1
