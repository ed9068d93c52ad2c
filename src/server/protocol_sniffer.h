// Which HTTP a cleartext connection speaks (server layer, private): its first bytes are read, and
// an HTTP/1.1 request line ("POST ", "GET ", "OPTIONS "...) sends it to the HTTP/1.1 engine,
// anything else (HTTP/2's client preface, or garbage, which HTTP/2 refuses) to the HTTP/2 one. The
// bytes read are replayed to the engine (transport/prefixed_stream.h). A connection that sends
// nothing within the timeout is closed, as a silent HTTP/2 connection is by its handshake timeout.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "asio/steady_timer.hpp"
#include "transport/byte_stream.h"

namespace ferry::detail {

class ProtocolSniffer final : public http2::ByteStreamClient,
                              public std::enable_shared_from_this<ProtocolSniffer> {
 public:
  // done(stream, http2): the stream with its first bytes put back, and whether they began
  // HTTP/2's preface; done(nullptr, false) when the connection failed or timed out (closed).
  using Done = std::function<void(std::unique_ptr<http2::ByteStream>, bool)>;

  static std::shared_ptr<ProtocolSniffer> start(std::unique_ptr<http2::ByteStream> stream,
                                                std::chrono::milliseconds timeout, Done done);
  // Closes the connection before it was told apart (done is called, with nullptr).
  void close();

  ProtocolSniffer(std::unique_ptr<http2::ByteStream> stream, Done done);
  void on_read(const asio::error_code& ec, std::size_t n) override;
  void on_written(const asio::error_code&) override {}

 private:
  void read_more();
  void finish(bool http2);
  void fail();

  std::unique_ptr<http2::ByteStream> stream_;
  Done done_;
  asio::steady_timer timer_;
  char bytes_[24];  // enough to tell; reads never take more than needed
  std::size_t have_ = 0;
};

}  // namespace ferry::detail
