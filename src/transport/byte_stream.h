// The byte stream an HTTP/2 connection runs over (transport layer, private): a TCP or Unix socket,
// a TLS session over one, or memory (tests and fuzzing). The connection needs only these few
// operations, so every transport shares one connection engine.
//
// Threading: a byte stream belongs to the connection's executor, which must be single-threaded;
// its operations are called there and its completions run there.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "asio/any_io_executor.hpp"
#include "asio/buffer.hpp"
#include "asio/error.hpp"
#include "asio/error_code.hpp"
#include "asio/post.hpp"

namespace ferry::http2 {

// What a byte stream reports to: the connection. Held by shared_ptr while an operation is
// pending, so the connection outlives its operations.
class ByteStreamClient {
 public:
  virtual ~ByteStreamClient() = default;
  // A read completed: n bytes arrived, or ec (eof when the peer closed; over TLS, only when it
  // closed with a close_notify, else asio::ssl::error::stream_truncated).
  virtual void on_read(const asio::error_code& ec, std::size_t n) = 0;
  // A write started with async_write has finished: all of it was written, or ec.
  virtual void on_written(const asio::error_code& ec) = 0;
  // async_wait_readable: bytes can be read now, or ec.
  virtual void on_readable(const asio::error_code& ec) { (void)ec; }
};

class ByteStream {
 public:
  virtual ~ByteStream() = default;

  virtual const asio::any_io_executor& executor() const = 0;

  // Starts reading up to into.size() bytes; client->on_read when some arrived. One at a time.
  virtual void async_read_some(asio::mutable_buffer into,
                               std::shared_ptr<ByteStreamClient> client) = 0;

  // Writes as much of the gathered slices as the stream takes now, without blocking: returns
  // the bytes written. ec is would_block when it took none, or the stream's error.
  virtual std::size_t write_some_now(std::span<const iovec> slices, asio::error_code& ec) = 0;

  // Reads what has already arrived, up to into.size() bytes, without blocking: the bytes read;
  // ec is would_block when none had, eof when the peer closed. Only for a stream that
  // waits_without_buffer() (the default reads nothing: operation_not_supported). A TLS session
  // reads so, straight into OpenSSL's record buffer, after async_wait_readable.
  virtual std::size_t read_some_now(asio::mutable_buffer into, asio::error_code& ec) {
    (void)into;
    ec = asio::error::operation_not_supported;
    return 0;
  }

  // Writes all of buffers (which must stay valid until then), then client->on_written.
  // One at a time, and not while write_some_now could be called.
  virtual void async_write(std::span<const asio::const_buffer> buffers,
                           std::shared_ptr<ByteStreamClient> client) = 0;

  // For an idle connection to read without holding a buffer (optional: waits_without_buffer()
  // says whether this stream can: a socket, and TLS over one while no part of a record is
  // buffered). cancel_read() ends the pending async_read_some (with operation_aborted, unless its
  // bytes had already arrived); it is not called while an async_write is pending. Then
  // async_wait_readable() calls client->on_readable once bytes are there to read.
  virtual bool waits_without_buffer() const { return false; }
  virtual bool cancel_read() { return false; }
  virtual void async_wait_readable(std::shared_ptr<ByteStreamClient> client) {
    asio::post(executor(), [client = std::move(client)] { client->on_readable({}); });
  }

  // Closes both directions; pending operations complete with operation_aborted.
  virtual void close() = 0;
  // The same, once the connection has said all it had to (its GOAWAY is written) and the peer
  // should read all of it: a socket sends its FIN and drains what the peer still sends for a
  // moment before it is really closed (transport/lingering_close.h), so that the peer does not get
  // a reset, which can cost it those last bytes.
  virtual void close_gracefully() { close(); }

  // The peer as gRPC names it: "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:/path".
  virtual std::string peer_address() const = 0;
};

}  // namespace ferry::http2
