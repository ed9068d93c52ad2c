// What both HTTP/1.1 engines, the server's connection and the client's, keep of the message
// llhttp is reading (http2 layer, beside them; private): its header fields as they arrive in
// pieces, counted against the header list limit as HTTP/2 counts HPACK's (32 bytes a field), and
// its body, handed to the stream by reference to the read block it lies in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/slice_chain.h"
#include "http2/stream.h"
#include "transport/byte_stream.h"

namespace ferry::http1 {

class HeaderFields {
 public:
  using Field = std::pair<std::string, std::string>;

  explicit HeaderFields(std::size_t limit) : limit_(limit) {}

  void clear() {
    fields_.clear();
    in_value_ = false;
    bytes_ = 0;
  }
  // llhttp's on_header_field and on_header_value: a piece of a name or a value. 0, or 1
  // (which stops the parser) once the fields are over the limit.
  int add_name(const char* at, std::size_t n) {
    if (count(n + 32) != 0) return 1;
    if (in_value_ || fields_.empty()) fields_.emplace_back();
    in_value_ = false;
    fields_.back().first.append(at, n);
    return 0;
  }
  int add_value(const char* at, std::size_t n) {
    if (count(n) != 0) return 1;
    in_value_ = true;
    if (!fields_.empty()) fields_.back().second.append(at, n);
    return 0;
  }
  // Counts n more bytes of the head (the server's request target counts too).
  int count(std::size_t n) {
    bytes_ += n;
    return over_limit() ? 1 : 0;
  }
  bool over_limit() const { return bytes_ > limit_; }
  std::vector<Field>& fields() { return fields_; }

 private:
  std::size_t limit_;
  std::vector<Field> fields_;
  bool in_value_ = false;
  std::size_t bytes_ = 0;
};

// llhttp's on_body: n bytes of the body at `at` to stream, as slices of block when they lie
// in it (zero copy), copied into pooled blocks when block is null (bytes held back from an earlier
// read).
inline void deliver_body(http2::Stream& stream, detail::Block* block, const char* at,
                         std::size_t n) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(at);
  if (block != nullptr) {
    stream.on_data(Slice(block, bytes, n));
    return;
  }
  SliceChain copy;
  copy.append_copy(bytes, n);
  for (const Slice& s : copy) stream.on_data(s);
}

// The id after id for the next exchange's stream: odd like a client's HTTP/2 streams, and back to
// 1 before it would pass INT32_MAX (one exchange at a time: an id is never in use twice).
constexpr std::int32_t next_stream_id(std::int32_t id) {
  return id > std::numeric_limits<std::int32_t>::max() - 2 ? 1 : id + 2;
}

// What an engine has to write: queued bytes, then one gathered write to the byte stream at a
// time; a body moves in from its stream's queue a piece at a time, chunk-framed when so.
class WriteQueue {
 public:
  // How much of a body goes in ahead of the socket; the rest stays in the stream's queue, whose
  // writer waits at its own high-water mark.
  static constexpr std::size_t kWriteAhead = 256 * 1024;

  // Bytes queued or being written.
  std::size_t unwritten() const { return out_.size() + writing_.size(); }
  bool writing() const { return writing_now_; }
  bool idle() const { return !writing_now_ && out_.empty(); }
  void append(std::string_view bytes) { out_.append_copy(bytes.data(), bytes.size()); }
  // Moves what fits under kWriteAhead of body into the queue (a chunk when chunked); whether it
  // moved any.
  bool take_body(SliceChain& body, bool chunked);
  // The last chunk of a chunked body.
  void end_chunked() { append("0\r\n\r\n"); }
  // Starts writing what is queued (client hears on_written), unless a write is under way or
  // nothing is queued.
  void flush(http2::ByteStream& stream, std::shared_ptr<http2::ByteStreamClient> client);
  // The write finished: its bytes are let go.
  void written() {
    writing_now_ = false;
    writing_.clear();
  }

 private:
  SliceChain out_;      // queued
  SliceChain writing_;  // handed to the byte stream
  std::vector<asio::const_buffer> iov_;
  bool writing_now_ = false;
};

}  // namespace ferry::http1
