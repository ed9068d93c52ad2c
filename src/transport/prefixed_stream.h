// A byte stream whose first bytes were already read (transport layer, private): the server reads
// a connection's first bytes to tell HTTP/2's preface from an HTTP/1.1 request line, then hands
// the connection to the engine for it over this stream, which replays those bytes before
// reading on from the stream beneath.
#pragma once

#include <memory>
#include <string>

#include "transport/byte_stream.h"

namespace ferry::http2 {

class PrefixedStream final : public ByteStream {
 public:
  PrefixedStream(std::unique_ptr<ByteStream> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}

  const asio::any_io_executor& executor() const override { return inner_->executor(); }
  void async_read_some(asio::mutable_buffer into,
                       std::shared_ptr<ByteStreamClient> client) override;
  std::size_t write_some_now(std::span<const iovec> slices, asio::error_code& ec) override {
    return inner_->write_some_now(slices, ec);
  }
  std::size_t read_some_now(asio::mutable_buffer into, asio::error_code& ec) override;
  void async_write(std::span<const asio::const_buffer> buffers,
                   std::shared_ptr<ByteStreamClient> client) override {
    inner_->async_write(buffers, std::move(client));
  }
  // The stream beneath's capability (asked once, when the connection starts); a wait while
  // the prefix is still unread is never needed, since reads take it first.
  bool waits_without_buffer() const override { return inner_->waits_without_buffer(); }
  bool cancel_read() override { return prefix_.empty() && inner_->cancel_read(); }
  void async_wait_readable(std::shared_ptr<ByteStreamClient> client) override {
    inner_->async_wait_readable(std::move(client));
  }
  void close() override { inner_->close(); }
  void close_gracefully() override { inner_->close_gracefully(); }
  std::string peer_address() const override { return inner_->peer_address(); }

 private:
  // Moves up to into.size() bytes of the prefix into into: how many.
  std::size_t take_prefix(asio::mutable_buffer into);

  std::unique_ptr<ByteStream> inner_;
  std::string prefix_;
};

}  // namespace ferry::http2
